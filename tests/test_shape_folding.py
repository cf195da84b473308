"""Shape folding runs to a fixed point (`adreno.frontend.constfold`): LeViT's `reshape_as`, a chain of
`x = Reshape(Flatten(Relu(x)), Shape(Relu(x)))` links, folds however long it is (17 links were refused after 16
rounds) and compiles without its reshapes fused into exponential index arithmetic; a value that truly depends on
run-time data is named with the graph input it comes from."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.compile import compile_model
from adreno.errors import ModelError
from adreno.frontend.importer import to_relax
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import onnxruntime_outputs

SHAPE = [1, 2, 3, 4]


def reshape_chain(links: int) -> onnx.ModelProto:
    nodes, x = [], "x"
    for i in range(links):
        nodes += [helper.make_node("Relu", [x], [f"relu{i}"]), helper.make_node("Flatten", [f"relu{i}"], [f"flat{i}"]),
                  helper.make_node("Shape", [f"relu{i}"], [f"shape{i}"]),
                  helper.make_node("Reshape", [f"flat{i}", f"shape{i}"], [f"link{i}"], name=f"reshape_as{i}")]
        x = f"link{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, SHAPE)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("links, memory", [(17, "texture"), (64, "buffer")])
def test_reshape_chain_compiles_and_checks(links, memory, tmp_path):
    model = reshape_chain(links)
    artifact = compile_model(model, tmp_path / "chain", CompileOptions(memory=memory))
    x = np.random.default_rng(links).standard_normal(SHAPE).astype(np.float32)
    (out,) = Executor(artifact).run([x])
    np.testing.assert_allclose(out, onnxruntime_outputs(model, [x])[0], rtol=0, atol=0)


def test_run_time_shape_names_its_graph_input():
    """A Reshape whose target shape is computed from an integer input's values: refused naming that input."""
    nodes = [helper.make_node("Add", ["dims", "one"], ["target"]),
             helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("dims", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
                              [numpy_helper.from_array(np.zeros(2, np.int64), "one")])
    with pytest.raises(ModelError) as caught:
        to_relax(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    message = str(caught.value)
    assert message.startswith("node reshape (Reshape): its shape input ('target') is computed from the values of the "
                              "graph input 'dims'; bind it at compile time with --bind"), message
