"""A long chain of elementwise ops compiles: FuseOps makes it kernels whose one store nests ~256 calls deep, past
the bracket nesting an OpenCL compiler parses, and `adreno.compiler.expression_depth` splits such statements."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper


def _relu_chain(length: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}" if i + 1 < length else "y"])
             for i in range(length)]
    graph = helper.make_graph(nodes, "relus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _deep_store(levels: int, guarded: bool = False):
    """`A[i] = max(max(... A[i] ..., 0), 0)`, `levels` deep; with `guarded`, the chain sits in an if_then_else's
    branch (so no part of it may run before the condition is known)."""
    from tvm import tirx

    buffer, i = tirx.decl_buffer((4,), "float32", "A"), tirx.Var("i", "int32")
    value = tirx.BufferLoad(buffer, [i])
    for _ in range(levels):
        value = tirx.Max(value, tirx.const(0.0, "float32"))
    if guarded:
        value = tirx.if_then_else(i < 4, value, tirx.const(0.0, "float32"))
    return tirx.BufferStore(buffer, value, [i])


def _height(stmt) -> int:
    from adreno.compiler.expression_depth import _measure

    return max(_measure(stmt)[0].values())


def test_a_deep_statement_is_split_into_shallow_ones():
    from adreno.compiler.expression_depth import MAX_HEIGHT, shallow_statements

    out = shallow_statements(_deep_store(300))
    statements = list(out.seq)
    assert len(statements) > 5 and all(_height(s) <= MAX_HEIGHT for s in statements)
    assert type(statements[-1]).__name__ == "BufferStore" and type(statements[0]).__name__ == "Bind"
    assert str(out).count("T.max(") == 300  # the same 300 operations, spelled in steps


def test_shallow_and_guarded_statements_are_left_alone():
    from adreno.compiler.expression_depth import shallow_statements

    shallow = _deep_store(40)
    assert shallow_statements(shallow).same_as(shallow)
    guarded = _deep_store(300, guarded=True)
    assert shallow_statements(guarded).same_as(guarded)  # nothing moves out of a branch


def test_a_chain_of_300_relus_compiles_and_runs(tmp_path, pocl_device):
    """300 Relus (the 3,000 of the issue fail the same way: each fused kernel is capped at ~256 ops) in one
    model: every kernel builds and the output is the input's positive part."""
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    onnx.save(_relu_chain(300), tmp_path / "relus.onnx")
    artifact = compile_model(tmp_path / "relus.onnx", tmp_path / "out", CompileOptions(memory="buffer"))
    x = np.random.default_rng(3).standard_normal((1, 8, 4, 4)).astype(np.float32)
    (y,) = Executor(artifact, pocl_device).run([x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))
