"""TVM's OpenCL runtime plugin (native/plugin) on PoCL: device attributes, tensors in every texture scope with the
launch plan's image geometry, copies, and the precompiled-program blob the module takes and refuses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import adreno
from adreno.targets.layout import TEXTURE_SCOPES, image_dims


@pytest.fixture(scope="module")
def tvm_opencl():
    import tvm

    assert adreno.PLUGIN.loaded, adreno.PLUGIN.problem
    return tvm.opencl(0)


def opencl_module(path):
    import tvm

    def find(module):
        if module.kind == "opencl":
            return module
        return next((m for m in (find(c) for c in module.imports) if m is not None), None)

    return find(tvm.runtime.load_module(str(path)))


def test_device_attributes(tvm_opencl):
    import tvm
    import tvm_ffi

    names = list(tvm_ffi.get_global_func("adreno.opencl.device_names")())
    assert tvm_opencl.exist and not tvm.opencl(len(names)).exist
    assert names[0].split("|")[1] == tvm_opencl.device_name
    assert tvm_opencl.max_threads_per_block > 0 and tvm_opencl.multi_processor_count > 0
    assert tvm_opencl.max_shared_memory_per_block > 0


@pytest.mark.parametrize("scope", TEXTURE_SCOPES)
def test_texture_tensors_are_images_of_the_plan_geometry(tvm_opencl, scope):
    import pyopencl as cl
    import tvm

    shape = (2, 3, 5, 7, 4)
    tensor = tvm.runtime.empty(shape, "float32", tvm_opencl, mem_scope=scope)
    image = cl.MemoryObject.from_int_ptr(tensor.data_ptr(), retain=True)
    assert image.type == cl.mem_object_type.IMAGE2D_ARRAY
    dims = (image.get_image_info(cl.image_info.WIDTH), image.get_image_info(cl.image_info.HEIGHT),
            image.get_image_info(cl.image_info.ARRAY_SIZE))
    assert dims == image_dims(shape, scope)
    values = np.random.default_rng(0).standard_normal(shape).astype("float32")
    tensor.copyfrom(values)
    assert np.array_equal(tensor.numpy(), values)
    copy = tvm.runtime.empty(shape, "float32", tvm_opencl, mem_scope=scope)
    tensor.copyto(copy)  # image to image on the device
    assert np.array_equal(copy.numpy(), values)
    flat = tvm.runtime.empty(shape, "float32", tvm_opencl)  # image to buffer and back, on the device
    tensor.copyto(flat)
    back = tvm.runtime.empty(shape, "float32", tvm_opencl, mem_scope=scope)
    flat.copyto(back)
    assert np.array_equal(flat.numpy(), values) and np.array_equal(back.numpy(), values)


def test_a_tensor_that_is_not_packed_refuses_a_texture_scope(tvm_opencl):
    import tvm

    with pytest.raises(Exception, match="must be packed"):
        tvm.runtime.empty((4, 4), "float32", tvm_opencl, mem_scope="global.texture")
    with pytest.raises(Exception, match="is not global"):
        tvm.runtime.empty((1, 1, 1, 1, 4), "float32", tvm_opencl, mem_scope="global.shared")


@pytest.mark.usefixtures("tvm_opencl")
def test_program_blob_round_trip_and_refusals(native_tiny):
    own = opencl_module(native_tiny["texture"] / "lib.so")
    blob = bytes(own["opencl.GetPreCompiledPrograms"]())
    assert own["adreno.opencl.program_stats"]().startswith("from_source=1 ")

    fresh = opencl_module(native_tiny["texture"] / "lib.so")
    assert fresh["opencl.SetPreCompiledPrograms"](blob) == 1
    assert fresh["adreno.opencl.program_stats"]() == "from_source=0 from_binary=1 rejected=0"

    truncated = opencl_module(native_tiny["texture"] / "lib.so")
    assert truncated["opencl.SetPreCompiledPrograms"](blob[:-7]) == 0
    assert "truncated" in truncated["adreno.opencl.program_stats"]()

    other = opencl_module(native_tiny["buffer"] / "lib.so")  # other kernels: the blob's names are not its own
    assert other["opencl.SetPreCompiledPrograms"](blob) == 0
    stats = other["adreno.opencl.program_stats"]()
    assert "rejected=1" in stats and "not a kernel of this module" in stats


@pytest.mark.usefixtures("tvm_opencl")
def test_a_damaged_binary_is_rejected_and_the_kernels_build_from_source(native_tiny):
    from adreno.cache import read_tvm_precompiled_blob, tvm_precompiled_blob

    own = opencl_module(native_tiny["buffer"] / "lib.so")
    ((name, binary),) = read_tvm_precompiled_blob(bytes(own["opencl.GetPreCompiledPrograms"]())).items()
    garbage = tvm_precompiled_blob({name: b"\x7fELF" + bytes(len(binary) // 4)})
    module = opencl_module(native_tiny["buffer"] / "lib.so")
    assert module["opencl.SetPreCompiledPrograms"](garbage) == 0
    assert "rejected=1" in module["adreno.opencl.program_stats"]()
    module["opencl.GetPreCompiledPrograms"]()  # builds what no binary served
    assert module["adreno.opencl.program_stats"]().startswith("from_source=1 from_binary=0 rejected=1")


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_a_plugin_built_for_other_wheels_is_not_loaded(tmp_path):
    from adreno.native import plugin

    shutil.copy(plugin.PLUGIN_PATH, tmp_path / plugin.PLUGIN_PATH.name)
    (tmp_path / "BUILD_INFO").write_text("apache-tvm=0.26.0 apache-tvm-ffi=0.1.0\n")
    proc = run_python("import adreno; print(adreno.PLUGIN.problem)", ADRENO_PLUGIN_DIR=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "built for apache-tvm=0.26.0" in proc.stdout and "make native" in proc.stdout


def test_a_missing_plugin_says_how_to_build_it(tmp_path):
    proc = run_python("import adreno; print(adreno.PLUGIN.problem)", ADRENO_PLUGIN_DIR=str(tmp_path))
    assert "is not built" in proc.stdout and "make install" in proc.stdout


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_the_blob_of_adreno_cache_export_is_what_tvms_runtime_loads(native_tiny, tmp_path, memory):
    """`adreno cache export` writes TVM's blob from the launch plan's programs; the host library holds the same
    kernels, so its module takes every binary and builds nothing from source."""
    from adreno.cache import read_tvm_precompiled_blob

    artifact = tmp_path / "art"
    shutil.copytree(native_tiny[memory], artifact)
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "cache", "export", str(artifact)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (blob_path,) = artifact.glob("binaries/*/tvm_precompiled.bin")
    blob = blob_path.read_bytes()
    module = opencl_module(artifact / "lib.so")
    assert module["opencl.SetPreCompiledPrograms"](blob) == len(read_tvm_precompiled_blob(blob))
    module["opencl.GetPreCompiledPrograms"]()  # would build any kernel no binary served
    stats = module["adreno.opencl.program_stats"]()
    assert stats.startswith("from_source=0 ") and "rejected=0" in stats, stats


def test_time_evaluator_times_the_kernels_on_the_device(tmp_path, tvm_opencl):
    """`runtime.timer.opencl`: TVM's time_evaluator sums the launches' event times, which are shorter than the
    wall-clock time of the calls around them."""
    import time

    import tvm
    from tvm import te
    from tvm.s_tir import dlight

    a = te.placeholder((1 << 20,), name="a")
    b = te.compute((1 << 20,), lambda i: a[i] * 2.0 + 1.0, name="b")
    module = tvm.IRModule({"scale": te.create_prim_func([a, b]).with_attr("global_symbol", "scale")})
    with tvm.target.Target("opencl"):
        module = dlight.ApplyDefaultSchedule(dlight.gpu.Fallback())(module)
    tvm.compile(module, target=tvm.target.Target("opencl", host="llvm")).export_library(str(tmp_path / "s.so"))
    scale = tvm.runtime.load_module(str(tmp_path / "s.so"))
    x = tvm.runtime.tensor(np.ones(1 << 20, "float32"), tvm_opencl)
    y = tvm.runtime.empty((1 << 20,), "float32", tvm_opencl)
    scale["scale"](x, y)
    assert np.array_equal(y.numpy(), np.full(1 << 20, 3.0, "float32"))
    started = time.perf_counter()
    once = scale.time_evaluator("scale", tvm_opencl, number=1, repeat=5)(x, y).results
    wall = (time.perf_counter() - started) / 5
    assert all(0 < t < wall for t in once), (once, wall)
