"""com.microsoft's DynamicQuantizeLSTM, as onnxruntime's `quantize_dynamic` writes it for an LSTM, compiled (its
weights dequantized at load into ONNX's LSTM, `adreno.frontend.quantized`) and run on PoCL against onnxruntime:
bit-close to onnxruntime's LSTM of the dequantized weights, and within onnxruntime's own activation rounding of the
quantized model (what `run --check` allows for)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.format import Artifact
from adreno.frontend.quantized import float_lstms
from adreno.reference import onnxruntime_outputs
from tests.native.harness_cli import report, run_harness
from tests.test_cli import adreno

STEPS, FEATURES, HIDDEN = 3, 6, 8


def _quantized_lstm(tmp_path, per_channel: bool):
    """A bidirectional LSTM (Y and Y_h) quantized by onnxruntime's quantize_dynamic."""
    from onnxruntime.quantization import quantize_dynamic

    rng = np.random.default_rng(1)
    weights = {"W": (2, 4 * HIDDEN, FEATURES), "R": (2, 4 * HIDDEN, HIDDEN), "B": (2, 8 * HIDDEN)}
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=HIDDEN, direction="bidirectional")],
        "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [STEPS, 1, FEATURES])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y_h")],
        [numpy_helper.from_array((rng.standard_normal(s) * 0.4).astype(np.float32), n) for n, s in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "float.onnx")
    quantize_dynamic(tmp_path / "float.onnx", tmp_path / "quantized.onnx", per_channel=per_channel)
    quantized = onnx.load(tmp_path / "quantized.onnx")
    assert [n.op_type for n in quantized.graph.node] == ["DynamicQuantizeLSTM"]
    return tmp_path / "quantized.onnx"


def test_dequantized_weights_are_onnxruntimes_per_direction_and_per_column(tmp_path):
    """The LSTM of the dequantized weights is what onnxruntime's quantized LSTM computes up to its activation
    rounding (a weight transposed or scaled along the wrong axis would be off by the weights' own magnitude)."""
    x = np.random.default_rng(3).standard_normal((STEPS, 1, FEATURES)).astype(np.float32)
    for per_channel in (False, True):
        quantized = onnx.load(_quantized_lstm(tmp_path, per_channel))
        for exact, rounded in zip(onnxruntime_outputs(float_lstms(quantized), [x]),
                                  onnxruntime_outputs(quantized, [x])):
            assert np.abs(exact - rounded).max() < 0.03 * np.abs(rounded).max()


def _assert_weights_stored_int8(artifact: Artifact) -> None:
    """W and R of both directions are stored as int8 with a scale per gate column, a quarter of their float32
    bytes; the manifest counts them."""
    params = [t for t in artifact.plan.tensors.values() if t.kind == "param"]
    quantized = [t for t in params if t.stored_weight.quantization is not None]
    assert sorted(t.stored_weight.shape for t in quantized) == [(FEATURES, 4 * HIDDEN)] * 2 + [(HIDDEN, 4 * HIDDEN)] * 2
    assert all(t.stored_weight.dtype == "int8" and t.stored_weight.quantization.axis == 1 for t in quantized)
    assert 4 * sum(t.stored_weight.nbytes for t in quantized) == sum(t.nbytes for t in quantized)
    assert artifact.manifest["weight_storage"]["quantized"] == 4
    assert artifact.manifest["weight_storage"]["quantized_stored_wide"] == 0


def test_quantized_lstm_runs_and_checks_against_onnxruntime(tmp_path):
    path = _quantized_lstm(tmp_path, per_channel=True)
    adreno("compile", path, "-o", tmp_path / "art", "-q", "--memory", "texture", "--host", "native")
    _assert_weights_stored_int8(Artifact.load(tmp_path / "art"))
    x = np.random.default_rng(2).standard_normal((STEPS, 1, FEATURES)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    result = json.loads(adreno("run", tmp_path / "art", "--check", "--repeat", "1", "--json", "--input",
                               tmp_path / "x.npz", "--output", tmp_path / "out.npz").stdout)
    rows = result["check"]["outputs"]
    assert result["check"]["ok"] and all(0 < r["spread"] < 0.05 * r["max_abs_ref"] for r in rows), rows
    ours = np.load(tmp_path / "out.npz")
    quantized = onnx.load(path)
    unrounded = onnxruntime_outputs(float_lstms(quantized), [x])
    rounded = onnxruntime_outputs(quantized, [x])
    for name, exact, approximate in zip(("y", "y_h"), unrounded, rounded):
        assert np.abs(ours[name] - exact).max() < 1e-4 * max(1.0, np.abs(exact).max())
        assert np.abs(ours[name] - approximate).max() > 1e-4, "onnxruntime rounds the activations: not bit-close"
    harness = report(run_harness(tmp_path / "art", {"x": x}, tmp_path / "harness"))["outputs"]
    assert all(np.array_equal(np.load(harness[name]), ours[name]) for name in ("y", "y_h"))


def test_every_loader_dequantizes_the_lstm_weights_alike_in_buffer_memory(tmp_path):
    """Per direction quantized (a scale per direction, not per column): stored int8 in buffer memory too, and the
    launch-plan executor, TVM's runtime and the harness give the same outputs, bit-close to onnxruntime's LSTM of
    the dequantized weights."""
    from adreno.compile import compile_model
    from adreno.native.vm_executor import VmExecutor
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    path = _quantized_lstm(tmp_path, per_channel=False)
    art = compile_model(path, tmp_path / "art", CompileOptions(memory="buffer", host="native"))
    artifact = Artifact.load(art)
    forms = [t.stored_weight for t in artifact.plan.tensors.values() if t.kind == "param"]
    assert [(f.dtype, len(f.quantization.scale)) for f in forms if f.quantization] == [("int8", 1)] * 4
    assert artifact.manifest["weight_storage"]["quantized"] == 4
    assert artifact.manifest["weight_storage"]["quantized_stored_wide"] == 0
    x = np.random.default_rng(4).standard_normal((STEPS, 1, FEATURES)).astype(np.float32)
    planned = Executor(artifact).run([x])
    harness = report(run_harness(art, {"x": x}, tmp_path / "harness"))["outputs"]
    for name, ours, through_tvm, exact in zip(("y", "y_h"), planned, VmExecutor(artifact).run([x]),
                                              onnxruntime_outputs(float_lstms(onnx.load(path)), [x])):
        assert np.array_equal(through_tvm, ours) and np.array_equal(np.load(harness[name]), ours)
        assert np.abs(ours - exact).max() < 1e-4 * max(1.0, np.abs(exact).max())
