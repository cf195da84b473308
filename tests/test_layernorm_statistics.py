"""LayerNormalization's Mean and InvStdDev outputs (TVM's importer returns placeholder zeros for them) are computed
by `adreno.frontend.decompose`: the decomposed model equals the original in onnxruntime for every axis, with and
without B, and compiled on PoCL it matches in both memories. A LayerNorm whose only output is Y is left alone."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.frontend.decompose import decompose
from adreno.frontend.rewrites import InferredShapes
from adreno.options import Memory

SHAPE = [2, 3, 4, 5]


def layernorm(axis: int, bias: bool = True, statistics: bool = True) -> onnx.ModelProto:
    rng = np.random.default_rng(axis + 10)
    normalised = SHAPE[axis:]
    inits = [numpy_helper.from_array(rng.standard_normal(normalised).astype(np.float32), "scale")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(normalised).astype(np.float32), "b"))
    outputs = ["y", "mean", "inv_std"] if statistics else ["y"]
    node = helper.make_node("LayerNormalization", ["x", "scale", *(["b"] if bias else [])], outputs, axis=axis,
                            epsilon=1e-3)
    stats_shape = SHAPE[:axis % len(SHAPE)] + [1] * (len(SHAPE) - axis % len(SHAPE))
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE if n == "y" else stats_shape)
                               for n in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _run(model, x):
    from adreno.reference import onnxruntime_session

    return onnxruntime_session(model.SerializeToString()).run(None, {"x": x})


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("axis", [-1, 1, 0, -3])
def test_decomposition_equals_the_operator(axis, bias):
    model = layernorm(axis, bias)
    decomposed = decompose(model, InferredShapes({"x": SHAPE}))
    assert "LayerNormalization" not in {n.op_type for n in decomposed.graph.node}
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32) * 3 + 1
    for got, want in zip(_run(decomposed, x), _run(model, x), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_y_only_stays_one_node():
    model = layernorm(-1, statistics=False)
    assert decompose(model, InferredShapes({"x": SHAPE})) is model


@pytest.mark.parametrize("memory", [Memory.TEXTURE, Memory.BUFFER], ids=lambda m: m.value)
def test_statistics_compile_and_match(memory, tmp_path):
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    model = layernorm(2)
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    executor = Executor(compile_model(model, tmp_path / "a", CompileOptions(memory=memory)), "pocl")
    outputs = executor.run(executor.artifact.ordered_inputs({"x": x}))
    for got, want in zip(outputs, _run(model, x), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
