"""The host library runs what the launch plan runs: the launch-plan executor, TVM's Relax VM with our plugin
(`adreno run --runtime tvm`) and the app harness give the same outputs on the same artifacts, both memories,
Winograd on where the model has eligible convs, and the plan's match onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.native.vm_executor import VmExecutor
from adreno.opencl.executor import Executor

from ..resign import resign
from .harness_cli import one_line_error, report, run_harness
from .rt_programs import run_check


def adreno_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_run_runtime_tvm_checks_against_onnxruntime(native_tiny, memory):
    proc = adreno_cli("run", native_tiny[memory], "--runtime", "tvm", "--check", "--repeat", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["runtime"] == "tvm" and result["check"]["ok"]
    kernels = {k["name"] for k in result["kernels"]}
    assert len(kernels) == Artifact.load(native_tiny[memory]).plan.kernel_count()


# each model once and both memories: ResNet-18's Winograd in images, MobileNetV2's depthwise in buffers,
# EfficientNet's squeeze-excite in images (the tiny model runs in both memories above)
@pytest.mark.parametrize("memory, model", [("texture", "resnet18"), ("buffer", "mobilenetv2"),
                                           ("texture", "efficientnet_se")])
def test_plan_tvm_runtime_and_harness_agree(model, memory, rt_check, tmp_path):
    """...and the app library's C API from a C program (rt_check.c), started from the blob the harness wrote: it
    builds nothing and gives TVM's runtime's outputs."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    from adreno.frontend import zoo
    from adreno.reference import onnxruntime_outputs

    path = compile_model(model, tmp_path / "art", CompileOptions(memory=memory, host="native", winograd="auto"))
    artifact = Artifact.load(path)
    if memory == "texture":
        summary = artifact.manifest["textures"]
        assert artifact.plan.images and summary["image_tensors"] > 20 and not summary["fallbacks"]
        assert sum(s.op == "pack" for s in artifact.plan.steps) == 1  # packed once at the input, kept in images
    inputs = {spec.name: np.random.default_rng(7).standard_normal(spec.shape).astype(spec.dtype)
              for spec in artifact.input_specs()}
    onnx_names = list(artifact.manifest["inputs"])
    planned = Executor(artifact).run(list(inputs.values()))
    ref = onnxruntime_outputs(zoo.get_model(model), list(inputs.values()))[0]
    np.testing.assert_allclose(planned[0], ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
    through_tvm = VmExecutor(artifact).run(list(inputs.values()))
    blob = tmp_path / "programs.bin"
    harness = report(run_harness(path, dict(zip(onnx_names, inputs.values())), tmp_path / "out", "--blob", blob))
    from_harness = [np.load(harness["outputs"][name]) for name in artifact.manifest["outputs"]]
    for plan_out, tvm_out, app_out in zip(planned, through_tvm, from_harness, strict=True):
        scale = max(float(np.abs(plan_out).max()), 1.0)
        assert np.abs(tvm_out - plan_out).max() <= 1e-5 * scale
        assert np.abs(app_out - plan_out).max() <= 1e-5 * scale
    started, from_c = run_check(rt_check, path, list(inputs.values()), tmp_path / "c", blob)
    assert (started["blob"], started["from_source"]) == ("loaded", 0)
    assert all(np.array_equal(c, tvm) for c, tvm in zip(from_c, through_tvm, strict=True))


def test_the_host_library_holds_no_weights(native_tiny):
    artifact = Artifact.load(native_tiny["buffer"])
    weights = sum(a.nbytes for a in artifact.params().values())
    assert artifact.manifest["host_params"] == [n for n, t in artifact.plan.tensors.items() if t.kind == "param"]
    library = (artifact.path / "lib.so").read_bytes()
    first = next(a for a in artifact.params().values() if a.nbytes >= 64)
    assert first.tobytes() not in library, f"a weight of {weights} bytes is embedded in lib.so"


def one_line(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def test_run_runtime_tvm_refusals(native_tiny, tmp_path):
    import os

    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    android = compile_model("tiny", tmp_path / "android")
    assert "compile with --host native" in one_line(adreno_cli("run", android, "--runtime", "tvm"))
    phone = compile_model("tiny", tmp_path / "phone", CompileOptions(cc="aarch64-linux-gnu-gcc"))
    assert "is built for another host" in one_line(adreno_cli("run", phone, "--runtime", "tvm"))
    env = {**os.environ, "ADRENO_NO_PLUGIN": "1"}
    assert "plugin was not loaded" in one_line(adreno_cli("run", native_tiny["buffer"], "--runtime", "tvm", env=env))
    env = {**os.environ, "ADRENO_PLUGIN_DIR": str(tmp_path)}
    assert "make install" in one_line(adreno_cli("run", native_tiny["buffer"], "--runtime", "tvm", env=env))
    env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path / "none")}
    assert "OpenCL" in one_line(adreno_cli("run", native_tiny["buffer"], "--runtime", "tvm", env=env))


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_empty_outputs_come_back_from_the_host_library(memory, tmp_path):
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    from ..test_empty import conv_and_empty_slice

    path = compile_model(conv_and_empty_slice(), tmp_path / "art", CompileOptions(memory=memory, host="native"))
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)
    planned, through_tvm = Executor(path).run([x]), VmExecutor(path).run([x])
    assert [o.shape for o in through_tvm] == [o.shape for o in planned] == [(1, 8, 6, 6), (1, 8, 0, 6), (0,),
                                                                            (1, 8, 6, 6)]
    assert all(np.array_equal(a, b) for a, b in zip(planned, through_tvm, strict=True))


def test_a_model_without_kernels_builds_its_host_library_and_runs_through_tvm(tmp_path):
    """ONNX's `Clip` without bounds is the identity: no kernel, no LLVM host code, no OpenCL module to compress; the
    host library packs its imports as TVM does (C source) for this machine and for an AArch64 phone."""
    import onnx

    from ..conftest import single_op_model

    model = tmp_path / "clip.onnx"
    onnx.save(single_op_model("Clip", {"x": [3, 4, 5]}), model)
    proc = adreno_cli("compile", model, "--host", "native", "-q", "--json", "-o", tmp_path / "native")
    assert proc.returncode == 0 and json.loads(proc.stdout)["kernels"] == 0, proc.stderr
    proc = adreno_cli("run", tmp_path / "native", "--runtime", "tvm", "--check", "--repeat", "1", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["check"]["ok"], proc.stderr
    proc = adreno_cli("compile", model, "--cc", "aarch64-linux-gnu-gcc", "-q", "-o", tmp_path / "phone")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "phone" / "lib.so").read_bytes()[18:20] == (183).to_bytes(2, "little")  # e_machine AArch64


def test_an_fp16_artifact_runs_in_half_images_through_tvm_and_the_harness(tmp_path):
    """`--precision fp16`: the host library's images hold half floats as the plan's do (activations through the
    VM's allocator, weights through adreno.opencl.empty_image / write_pixels), so all three runs are bit-identical
    (fp32 images would come out closer to fp32 and differ)."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    path = compile_model("tiny", tmp_path / "art", CompileOptions(precision="fp16", host="native"))
    artifact = Artifact.load(path)
    assert {image["channel_type"] for image in artifact.plan.images.values()} == {"float16"}
    x = np.random.default_rng(5).standard_normal(artifact.input_specs()[0].shape).astype("float32")
    planned = Executor(artifact).run([x])[0]
    through_tvm = VmExecutor(artifact).run([x])[0]
    from_harness = np.load(report(run_harness(path, {"input": x}, tmp_path / "out"))["outputs"]["probs"])
    assert np.array_equal(through_tvm, planned) and np.array_equal(from_harness, planned)


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_constant_outputs_beside_a_computed_one(memory, tmp_path):
    """Outputs the model computes from no input (a Constant node; a sum of two initializers, folded) are params:
    stored with the weights and returned as they are, by the launch plan, TVM's runtime and the app harness, next
    to a computed output, all as onnxruntime gives them."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.reference import onnxruntime_outputs

    rng = np.random.default_rng(3)
    anchors, a, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 4), (1, 8, 2, 2), (1, 8, 2, 2)))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4),
         helper.make_node("Constant", [], ["anchors"], value=numpy_helper.from_array(anchors)),
         helper.make_node("Add", ["a", "b"], ["folded"])],
        "constant_outputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
         for n, s in (("y", [1, 8, 6, 6]), ("anchors", [6, 4]), ("folded", [1, 8, 2, 2]))],
        [numpy_helper.from_array(v, n) for n, v in (("w", rng.standard_normal((8, 8, 3, 3)).astype(np.float32)),
                                                     ("a", a), ("b", b))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.save(model, tmp_path / "model.onnx")  # where `run --check` finds the model for its reference
    path = compile_model(str(tmp_path / "model.onnx"), tmp_path / "art", CompileOptions(memory=memory, host="native"))
    artifact = Artifact.load(path)
    assert artifact.output_names() == ["y", "anchors", "folded"]
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    expected = onnxruntime_outputs(model, [x])
    harness = report(run_harness(path, {"x": x}, tmp_path / "out"))
    from_harness = [np.load(harness["outputs"][name]) for name in artifact.manifest["outputs"]]
    for outputs in (Executor(artifact).run([x]), VmExecutor(artifact).run([x]), from_harness):
        assert [o.shape for o in outputs] == [e.shape for e in expected]
        for out, ref in zip(outputs, expected, strict=True):
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    checked = adreno_cli("run", path, "--runtime", "tvm", "--check", "--repeat", "1", "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["check"]["ok"], checked.stderr


def test_a_truncated_host_library_is_one_line_not_a_sigbus(native_tiny, tmp_path):
    """The dynamic loader maps a truncated lib.so without complaint and the process dies of SIGBUS at the first page
    past its end: `adreno run --runtime tvm` (--unchecked, past the manifest's SHA-256) and the harness (past a
    manifest rewritten to match) read the ELF headers first."""
    import shutil

    artifact = shutil.copytree(native_tiny["buffer"], tmp_path / "art")
    library = (artifact / "lib.so").read_bytes()
    (artifact / "lib.so").write_bytes(library[: len(library) // 2])
    expected = f"lib.so is truncated ({len(library) // 2} bytes, its headers need {len(library)})"
    assert expected in one_line(adreno_cli("run", artifact, "--runtime", "tvm", "--unchecked"))
    inputs = {"input": np.zeros((1, 3, 32, 32), "float32")}
    changed = f"lib.so: {len(library) // 2} bytes, the manifest lists {len(library)}: changed since compile"
    assert changed in one_line_error(run_harness(artifact, inputs, tmp_path / "out"))  # the harness has no --unchecked
    resign(artifact)  # a manifest rewritten to match: the ELF check is what is left
    assert expected in one_line_error(run_harness(artifact, inputs, tmp_path / "out"))
