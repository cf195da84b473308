"""Ops of opsets 1..9 (and up to 12) whose parameters are attributes, compiled and checked against onnxruntime:
the forms `adreno.frontend.old_opsets` and `adreno.frontend.canonical` convert, the ones TVM's importer reads right as
they are, and the ones refused in one line naming the node."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

X = [2, 3, 4, 5]
REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def old_model(opset: int, nodes: list, outputs: list[str], shape: list[int] = X, out_shape=None) -> onnx.ModelProto:
    """Graph input `x` of `shape`, `nodes`, float outputs `outputs` of `out_shape` (default: left to the compile;
    a model file needs them for onnx's checker), at `opset`."""
    graph = helper.make_graph(nodes, f"opset{opset}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, out_shape) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def node(op: str, outputs: tuple = ("y",), inputs: tuple = ("x",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), name=f"my_{op.lower()}", **attrs)


def reductions(opset: int) -> onnx.ModelProto:
    """Every reduction of |x| with the `axes` attribute (keepdims 0 and 1) and without (all axes)."""
    nodes, outputs = [helper.make_node("Abs", ["x"], ["ax"])], []
    for i, op in enumerate(REDUCTIONS):
        nodes += [node(op, (f"{op}_axes",), ("ax",), axes=[1, -1], keepdims=i % 2), node(op, (f"{op}_all",), ("ax",))]
        outputs += [f"{op}_axes", f"{op}_all"]
    for n in nodes:
        n.name = n.output[0]
    return old_model(opset, nodes, outputs)


CONVERTED = {
    "slice-opset9": old_model(9, [node("Slice", starts=[1, -3, 0], ends=[2, 2 ** 31 - 1, 3], axes=[0, 3, 2])], ["y"]),
    "slice-opset1-default-axes": old_model(1, [node("Slice", starts=[0, 1], ends=[1, 3])], ["y"]),
    "upsample-opset7-nearest": old_model(7, [node("Upsample", scales=[1.0, 1.0, 2.0, 3.0])], ["y"]),
    "upsample-opset8-nearest-fraction": old_model(8, [node("Upsample", scales=[1.0, 1.0, 1.5, 2.0])], ["y"]),
    "upsample-opset7-linear": old_model(7, [node("Upsample", scales=[1.0, 1.0, 2.0, 2.0], mode="linear")], ["y"]),
}
AS_THEY_ARE = {
    "pad-opset2-value": old_model(2, [node("Pad", pads=[0, 0, 1, 2, 0, 1, 2, 0], value=1.5)], ["y"]),
    "pad-opset9-reflect": old_model(9, [node("Pad", pads=[0, 0, 1, 2, 0, 0, 2, 1], mode="reflect")], ["y"]),
    "pad-opset9-edge": old_model(9, [node("Pad", pads=[0, 0, 1, 2, 0, 0, 2, 1], mode="edge")], ["y"]),
    "pad-opset10-negative": old_model(10, [node("Pad", pads=[0, 0, -1, 2, 0, 0, 1, -2])], ["y"]),
    "split-opset11": old_model(11, [node("Split", ("a", "b", "c"), axis=3, split=[2, 1, 2])], ["a", "b", "c"]),
    "split-opset9-equal": old_model(9, [node("Split", ("a", "b"), axis=0)], ["a", "b"]),
    "squeeze-opset11": old_model(11, [node("Squeeze", axes=[0, -2])], ["y"], [1, 3, 1, 5]),
    "squeeze-opset9-all": old_model(9, [node("Squeeze")], ["y"], [1, 3, 1, 5]),
    "unsqueeze-opset11": old_model(11, [node("Unsqueeze", axes=[0, -1])], ["y"]),
    "unsqueeze-opset9": old_model(9, [node("Unsqueeze", axes=[1, 3])], ["y"]),
    "reductions-opset9": reductions(9),
    "reductions-opset12": reductions(12),
}


def check_against_onnxruntime(model, pocl_device, tmp_path, memory="buffer", reference=None):
    """Compile `model` and compare every output with onnxruntime's run of `reference` (default: the model)."""
    import onnxruntime as ort

    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    session = ort.InferenceSession((reference or model).SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})
    got = Executor(compile_model(model, tmp_path / memory, CompileOptions(memory=memory)), pocl_device).run([x])
    assert len(got) == len(expected)
    for output, value, want in zip(model.graph.output, got, expected):
        assert value.shape == want.shape, output.name
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5, err_msg=output.name)


@pytest.mark.parametrize("memory", ["buffer", "texture"])
@pytest.mark.parametrize("case", list(CONVERTED))
def test_converted_forms_match_onnxruntime(case, memory, pocl_device, tmp_path):
    check_against_onnxruntime(CONVERTED[case], pocl_device, tmp_path, memory)


@pytest.mark.parametrize("case", list(AS_THEY_ARE))
def test_forms_the_importer_reads_stay_and_match_onnxruntime(case, pocl_device, tmp_path):
    from adreno.frontend.old_opsets import current_forms

    assert current_forms(AS_THEY_ARE[case]) is AS_THEY_ARE[case]
    check_against_onnxruntime(AS_THEY_ARE[case], pocl_device, tmp_path)


def test_opset1_pad_paddings_computes_opset2s_pad(pocl_device, tmp_path):
    """onnxruntime has no Pad-1: the reference is the same node at opset 2, where `paddings` is called `pads`."""
    pads = [0, 0, 1, 2, 0, 1, 2, 0]
    check_against_onnxruntime(old_model(1, [node("Pad", paddings=pads, value=1.5)], ["y"]), pocl_device, tmp_path,
                              reference=old_model(2, [node("Pad", pads=pads, value=1.5)], ["y"]))


@pytest.mark.parametrize("model, message", [
    (old_model(1, [node("Upsample", height_scale=2.0, width_scale=2.0)], ["y"], out_shape=[2, 3, 8, 10]),
     "node my_upsample (Upsample) is opset 1's experimental form (height_scale, width_scale)"),
    (old_model(7, [node("Upsample", scales=[1.0, 2.0, 2.0, 2.0])], ["y"], out_shape=[2, 6, 8, 10]),
     "node my_upsample (Resize) resizes the batch or channel axis"),
], ids=["upsample-opset1", "upsample-opset7-channels"])
def test_forms_that_cannot_be_converted_are_one_line(model, message, tmp_path):
    onnx.save(model, tmp_path / "old.onnx")
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", str(tmp_path / "old.onnx"), "-o",
                           str(tmp_path / "art"), "-q"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "art").exists()
