"""Shared fixtures: compiled artifacts (compiled once per session), ONNX model builders, the OpenCL device."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

# Tests (and the CLI subprocesses they start) never touch the user's program cache.
os.environ.setdefault("ADRENO_CACHE_DIR", tempfile.mkdtemp(prefix="adreno-test-cache-"))


def single_op_model(op: str, input_shapes: dict[str, list[int]], weights: dict[str, np.ndarray] | None = None,
                    output_shape: list[int] | None = None, inputs: list[str] | None = None, **attrs) -> onnx.ModelProto:
    """An ONNX model of one node: graph inputs `input_shapes`, constant `weights`, node inputs `inputs`
    (default: graph inputs then weights, in order), output shape inferred unless given."""
    weights = weights or {}
    node_inputs = inputs or [*input_shapes, *weights]
    graph = helper.make_graph(
        [helper.make_node(op, node_inputs, ["y"], **attrs)], f"single_{op.lower()}",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in input_shapes.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(w.astype(np.float32) if w.dtype.kind == "f" else w, n) for n, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if output_shape is None:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def tiny_artifact(tmp_path_factory):
    """The bundled `tiny` model compiled once for adreno-740 (buffer memory)."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    return compile_model("tiny", tmp_path_factory.mktemp("artifacts") / "tiny", CompileOptions(memory="buffer"))


@pytest.fixture(scope="session")
def pocl_device():
    from adreno.opencl.device import select_device

    return select_device("pocl")
