"""Models that cannot be compiled are refused in one line, exit 2 (issue 22: each of these was a traceback):
external weight data that escapes the model's folder, is missing or names a device. A graph of Constants only,
once refused, compiles to no kernels and returns its value."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def _external(path, location: str) -> None:
    """A one-Add model whose weight `w` is external data at `location` (relative to the model's folder)."""
    weight = numpy_helper.from_array(np.ones(4, np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "ext",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=OPSET), path)


def _constants_only(path) -> None:
    value = numpy_helper.from_array(np.ones((2, 2), np.float32))
    graph = helper.make_graph([helper.make_node("Constant", [], ["y"], value=value)], "c", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    onnx.save(helper.make_model(graph, opset_imports=OPSET), path)


CASES = {
    "escaping": (lambda p: _external(p, "../../etc/hostname"), "external weight data"),
    "missing": (lambda p: _external(p, "nothere.bin"), "external weight data"),
    "device": (lambda p: _external(p, "/dev/zero"), "external weight data"),
    # sizes counted from the data: NonMaxSuppression was a traceback in the texture schedules
    "nms": (lambda p: _value_sized(p, "NonMaxSuppression"), "(NonMaxSuppression): the size of its output is counted"),
    "nonzero": (lambda p: _value_sized(p, "NonZero"), "(NonZero): the size of its output is counted"),
    "unique": (lambda p: _value_sized(p, "Unique"), "(Unique): the size of its output is counted"),
}


def _value_sized(path, op: str) -> None:
    """A conv whose output feeds `op`, an op whose output's size is counted from its input's values."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    weight = numpy_helper.from_array(np.ones((8, 4, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    if op == "NonMaxSuppression":  # boxes (1, 16, 4) and scores (1, 1, 16) from the conv's values
        nodes += [helper.make_node("Reshape", ["c", "box_shape"], ["boxes"]),
                  helper.make_node("ReduceMean", ["boxes"], ["s"], axes=[2], keepdims=0),
                  helper.make_node("Unsqueeze", ["s", "one"], ["scores"]),
                  helper.make_node(op, ["boxes", "scores", "keep"], ["y"])]
        out = helper.make_tensor_value_info("y", TensorProto.INT64, ["n", 3])
    else:
        nodes += [helper.make_node("Flatten", ["c"], ["f"], axis=0), helper.make_node(op, ["f"], ["y"])]
        out = helper.make_tensor_value_info("y", TensorProto.INT64 if op == "NonZero" else TensorProto.FLOAT, ["n"])
    constants = [numpy_helper.from_array(np.array([1, 128, 4], np.int64), "box_shape"),
                 numpy_helper.from_array(np.array([1], np.int64), "one"),
                 numpy_helper.from_array(np.array([4], np.int64), "keep")]
    graph = helper.make_graph(nodes, "sized", [x], [out], [weight, *constants])
    onnx.save(helper.make_model(graph, opset_imports=OPSET), path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_in_one_line(tmp_path, case):
    make, message = CASES[case]
    model = tmp_path / "models" / "m.onnx"
    model.parent.mkdir()
    make(model)
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", model, "-o", tmp_path / "out", "-q"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("error:") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr and not (tmp_path / "out").exists()


def test_a_graph_of_constants_only_returns_its_value(tmp_path):
    model = tmp_path / "constants.onnx"
    _constants_only(model)
    cli = [sys.executable, "-m", "adreno.cli"]
    subprocess.run([*cli, "compile", model, "-o", tmp_path / "out", "-q"], check=True, timeout=120)
    proc = subprocess.run([*cli, "run", tmp_path / "out", "--check", "--repeat", "1", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kernels"] == [] and report["check"]["ok"], report
    assert report["check"]["outputs"][0]["max_abs_ref"] == 1.0  # the constant's value came back, not zeros


def test_check_against_another_model_is_one_line(tmp_path):
    """`run --check --reference` with a model that takes other inputs: onnxruntime's refusal in one line."""
    from adreno.frontend import zoo

    other = tmp_path / "other.onnx"
    onnx.save(zoo.get_model("mobilenetv2"), other)
    cli = [sys.executable, "-m", "adreno.cli"]
    subprocess.run([*cli, "compile", "tiny", "-o", tmp_path / "tiny", "-q"], check=True, timeout=120)
    proc = subprocess.run([*cli, "run", tmp_path / "tiny", "--check", "--reference", other, "--repeat", "1", "-q"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    # onnxruntime's refusal quoted whole, once (its own log line no longer before it), with no guess at a cause
    assert "onnxruntime refuses the reference run" in proc.stderr and "INVALID_ARGUMENT" in proc.stderr
    assert proc.stderr.count("[ONNXRuntimeError]") == 1 and "is it the model" not in proc.stderr


@pytest.mark.parametrize("shape", [[1, 4, 1 << 20, 1 << 20], [1 << 31, 4]])
def test_a_static_input_past_int32_is_one_line(tmp_path, shape):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=OPSET), model)
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", model, "-o", tmp_path / "out", "-q"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "32-bit indexing" in proc.stderr
