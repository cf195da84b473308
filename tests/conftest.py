"""Shared fixtures: compiled artifacts (compiled once per session), ONNX model builders, the OpenCL device."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

# Tests (and the CLI subprocesses they start) never touch the user's program cache. Each pytest-xdist worker
# (`make test` runs two) gets its own: a test that counts builds and cache hits sees only its own worker's entries.
# It is removed when the process that made it exits, so test runs leave nothing in the temporary directory.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER or "ADRENO_CACHE_DIR" not in os.environ:
    os.environ["ADRENO_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"adreno-test-cache-{_WORKER or 'main'}-")
    atexit.register(shutil.rmtree, os.environ["ADRENO_CACHE_DIR"], ignore_errors=True)


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


def save_conv3x3(path, channels_in: int, channels_out: int, size: int) -> Path:
    """An ONNX model of one padded 3x3 conv (`single_op_model`), seeded weights, written to `path`."""
    weight = np.random.default_rng(0).standard_normal((channels_out, channels_in, 3, 3)) * 0.1
    onnx.save(single_op_model("Conv", {"x": [1, channels_in, size, size]}, {"w": weight}, pads=[1, 1, 1, 1]), path)
    return Path(path)


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


@pytest.fixture(scope="session")
def no_tvm_path(tmp_path_factory):
    """A directory to put first on PYTHONPATH of a subprocess so that importing tvm, tvm_ffi, onnx or onnxruntime
    fails there (and in its children), as on a measuring machine that has none of them."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("no_tvm")
    for name in ("tvm", "tvm_ffi", "onnx", "onnxruntime"):
        (root / f"{name}.py").write_text(f"raise ImportError('{name} is not installed on this machine')\n")
    probe = subprocess.run([sys.executable, "-c", "import tvm"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(root)})
    assert "not installed on this machine" in probe.stderr
    return root


def without_tvm(no_tvm_path) -> dict:
    """The environment of a subprocess in which TVM and onnx cannot be imported (see `no_tvm_path`)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(no_tvm_path), os.environ.get("PYTHONPATH", "")])}
