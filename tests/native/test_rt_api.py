"""The app library's C API (native/rt/adreno_rt.h, libadreno_rt.so) from a C program compiled against the header:
the outputs of TVM's runtime through Python (`adreno run --runtime tvm`'s VmExecutor) on a model of several inputs
and outputs with an integer input and on MobileNetV2 fp16 (ResNet-18 texture: test_runtime_tvm.py), the program
binaries of the first start taken by the second, a damaged or foreign blob rejected with its reason and rebuilt,
and bad use answered by a status, under AddressSanitizer."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.format import Artifact
from adreno.native.vm_executor import VmExecutor

from .rt_programs import HERE, build_c, run_check


def several_inputs_and_outputs() -> onnx.ModelProto:
    """A conv on a float image beside an embedding lookup on int64 ids plus a float bias: three inputs (one
    integer), two outputs."""
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4), helper.make_node("Relu", ["c"], ["features"]),
         helper.make_node("Gather", ["table", "ids"], ["g"], axis=0),
         helper.make_node("Add", ["g", "bias"], ["embedded"])],
        "several_io", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8]),
                       helper.make_tensor_value_info("ids", TensorProto.INT64, [3]),
                       helper.make_tensor_value_info("bias", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 8, 8, 8]),
         helper.make_tensor_value_info("embedded", TensorProto.FLOAT, [3, 5])],
        [numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal((10, 5)).astype(np.float32), "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def several_io(tmp_path_factory):
    """The model compiled with --host native (texture), its inputs and the outputs of TVM's runtime through Python."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    path = compile_model(several_inputs_and_outputs(), tmp_path_factory.mktemp("several") / "art",
                         CompileOptions(memory="texture", host="native"))
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((1, 4, 8, 8)).astype(np.float32), np.array([3, 0, 9], np.int64),
              rng.standard_normal((3, 5)).astype(np.float32)]
    return path, inputs, VmExecutor(Artifact.load(path)).run(inputs)


def test_outputs_names_and_the_blob_of_several_inputs_and_outputs(several_io, rt_check, tmp_path):
    path, inputs, expected = several_io
    blob = tmp_path / "programs.bin"
    first, outputs = run_check(rt_check, path, inputs, tmp_path / "a", blob, threads=3)
    assert [(p["name"], p["dtype"], p["dtype_code"], p["shape"]) for p in first["inputs"]] == [
        ("x", "float32", 0, [1, 4, 8, 8]), ("ids", "int64", 2, [3]), ("bias", "float32", 0, [3, 5])]
    assert [(p["name"], p["shape"], p["bytes"]) for p in first["outputs"]] == [("features", [1, 8, 8, 8], 2048),
                                                                                ("embedded", [3, 5], 60)]
    assert all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))  # and 3 threads' on 2 models
    assert np.abs(outputs[1]).max() > 0
    assert (first["blob"], first["written"], first["from_source"]) == ("absent", 1, 1)
    second, again = run_check(rt_check, path, inputs, tmp_path / "b", blob)
    assert (second["blob"], second["written"], second["from_source"], second["from_binary"]) == ("loaded", 0, 0, 1)
    assert all(np.array_equal(a, b) for a, b in zip(again, expected, strict=True))
    unwritable, _ = run_check(rt_check, path, inputs, tmp_path / "c", tmp_path / "no-such-dir" / "programs.bin")
    assert (unwritable["blob"], unwritable["written"]) == ("absent", 0)  # the run succeeds; the report says why
    assert "cannot write it" in unwritable["write_error"]


def test_an_index_out_of_range_is_a_status_naming_the_node(several_io, rt_check, tmp_path):
    path, inputs, _ = several_io
    (tmp_path / "io").mkdir()
    for i, array in enumerate([inputs[0], np.array([3, 0, 12], np.int64), inputs[2]]):
        array.tofile(tmp_path / "io" / f"in{i}.bin")
    proc = subprocess.run([str(rt_check), str(path), str(tmp_path / "io"), "-"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1 and proc.stderr.startswith("run: status 7: node "), proc.stderr
    assert "is outside -10..9" in proc.stderr and not (tmp_path / "io" / "out0.bin").exists()


def test_a_foreign_truncated_or_flipped_blob_is_rejected_and_rebuilt(several_io, native_tiny, rt_check, tmp_path):
    path, inputs, expected = several_io
    blob, foreign = tmp_path / "programs.bin", tmp_path / "tiny.bin"
    run_check(rt_check, native_tiny["texture"], [np.zeros((1, 3, 32, 32), np.float32)], tmp_path / "tiny", foreign)
    run_check(rt_check, path, inputs, tmp_path / "io", blob)
    data = blob.read_bytes()
    damages = {"for another device or kernels": foreign.read_bytes(), "truncated": data[:-100],
               "SHA-256 mismatch": data[:-50] + bytes([data[-50] ^ 0x10]) + data[-49:]}
    for reason, damaged in damages.items():
        blob.write_bytes(damaged)
        report, outputs = run_check(rt_check, path, inputs, tmp_path / "io", blob)
        assert (report["blob"], report["rejected_because"]) == ("rejected", reason)
        assert (report["written"], report["from_source"], report["from_binary"]) == (1, 1, 0)
        assert all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))
        assert run_check(rt_check, path, inputs, tmp_path / "io", blob)[0]["blob"] == "loaded"
        blob.write_bytes(data)


def test_mobilenetv2_fp16_gives_tvm_runtime_outputs(rt_check, tmp_path):
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    path = compile_model("mobilenetv2", tmp_path / "art", CompileOptions(precision="fp16", host="native"))
    x = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
    expected = VmExecutor(Artifact.load(path)).run([x])
    report, outputs = run_check(rt_check, path, [x], tmp_path / "io")
    assert [p["name"] for p in report["outputs"]] == list(Artifact.load(path).manifest["outputs"])
    assert np.abs(outputs[0]).max() > 0 and all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))


def test_bad_use_is_a_status_each_under_address_sanitizer(native_tiny, tmp_path):
    program = build_c(HERE / "rt_misuse.c", tmp_path / "rt_misuse", "-g", "-fsanitize=address",
                      "-fno-omit-frame-pointer")
    good = native_tiny["texture"]
    manifest, weights = tmp_path / "manifest", tmp_path / "weights"
    shutil.copytree(good, manifest)
    shutil.copytree(good, weights)
    (manifest / "manifest.json").write_text((good / "manifest.json").read_text()[:100])
    (weights / "params.npz").write_bytes((good / "params.npz").read_bytes()[:3000])
    proc = subprocess.run([str(program), str(good), str(tmp_path / "nowhere"), str(manifest), str(weights)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"})
    assert proc.returncode == 0 and "AddressSanitizer" not in proc.stderr, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    status = {what: (int(rest.split(" ", 1)[0]), rest.partition(" ")[2]) for what, rest in lines.items()}
    ok, invalid, bad_artifact, no_runtime, device, closed = 0, 1, 2, 3, 4, 6
    expected = {"missing_plugin": (no_runtime, "cannot load TVM's OpenCL plugin /nonexistent/"),
                "missing_dir": (bad_artifact, "nowhere: cannot open it"),
                "tampered_manifest": (bad_artifact, "manifest.json: "),
                "tampered_weights": (bad_artifact, "params.npz: "),
                "null_dir": (invalid, "artifact_dir is NULL"), "null_handle_out": (invalid, "is NULL"),
                "no_such_device": (device, "no OpenCL device 99"),
                "no_device_named": (device, "no OpenCL device named no such device"),
                "device_by_name": (ok, ""), "close_by_name": (ok, ""), "open": (ok, ""), "input_info": (ok, ""),
                "input_info_null": (invalid, "info is NULL"), "input_info_range": (invalid, "no input 7"),
                "wrong_input_size": (invalid, "12288 bytes, not 12284"), "null_inputs": (invalid, "inputs is NULL"),
                "null_input_data": (invalid, "has no data"), "wrong_output_size": (invalid, "output probs is"),
                "wrong_input_count": (invalid, "takes 1 inputs, not 2"), "null_owned_outputs": (invalid, "NULL"),
                "select_own_shape": (ok, ""), "select_null_shapes": (invalid, "shapes is NULL"),
                "select_null_dims": (invalid, "shape 0 has ndim 2 and its dimensions NULL"),
                "select_wrong_count": (invalid, "takes 1 inputs, not 0 shapes"),
                "shape_set_info_range": (invalid, "no shape set 1 (the model has 1)"),
                "close": (ok, ""), "run_after_close": (closed, "closed"), "info_after_close": (closed, "closed"),
                "second_close": (closed, "closed already"), "null_close": (closed, "NULL"),
                "null_run": (closed, "NULL")}
    assert set(status) == set(expected)
    for what, (code, words) in expected.items():
        assert status[what][0] == code and words in status[what][1], (what, status[what])


OTHER_OPENCL = """
import ctypes, sys
import tvm_ffi
tvm_ffi.register_global_func("device_api.opencl", lambda: 0)  # what a TVM runtime built with USE_OPENCL ON has
class Status(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char_p)]
lib = ctypes.CDLL(sys.argv[1])
lib.adreno_rt_open.restype = Status
lib.adreno_rt_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
status = lib.adreno_rt_open(sys.argv[2].encode(), None, ctypes.byref(ctypes.c_void_p()))
print(status.code, status.message.decode())
"""


def test_a_tvm_runtime_with_its_own_opencl_is_a_status_not_an_abort(native_tiny):
    """Loading the plugin beside another OpenCL device API registers it twice, which aborts the process inside
    dlopen: the library refuses first (a process that imports tvm_ffi only, not adreno, which loads the plugin)."""
    import sys

    from adreno.native.plugin import LIB_DIR

    proc = subprocess.run([sys.executable, "-c", OTHER_OPENCL, str(LIB_DIR / "libadreno_rt.so"),
                           str(native_tiny["texture"])], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("3 TVM's runtime in this process has another OpenCL runtime"), proc.stdout
