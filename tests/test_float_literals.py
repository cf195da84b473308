"""Float32 constants reach the OpenCL source exactly (`adreno/compiler/float_literals.py`): TVM prints them with 7
digits, which name a neighbour of most float32 values; a kernel multiplying by such a constant must match numpy's
float32 product bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.compile import compile_model
from adreno.compiler.float_literals import exact_pair
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions


def _printed(value) -> np.float32:
    return np.float32(float(f"{float(value):e}"))


def test_exact_pairs_sum_to_the_constant_and_print_exactly():
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(20000) * 10.0 ** rng.integers(-8, 8, 20000)).astype(np.float32)
    inexact = 0
    for value in values:
        pair = exact_pair(float(value))
        if _printed(value) == value:
            assert pair is None  # left alone: its source stays byte for byte
            continue
        inexact += 1
        hi, lo = (np.float32(v) for v in pair)
        assert _printed(hi) == hi and _printed(lo) == lo and np.float32(hi + lo) == value
    assert inexact > len(values) // 2  # most float32 values do not survive 7 digits
    assert exact_pair(float("inf")) is None and exact_pair(0.5) is None


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_a_kernel_multiplies_by_the_exact_constant(memory, pocl_device, tmp_path):
    scale = np.float32(0.0020254073)  # a ResNet-18 weight scale; 7 digits name 0.002025407
    assert _printed(scale) != scale
    graph = helper.make_graph([helper.make_node("Mul", ["x", "s"], ["y"])], "mul",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 16, 16))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 8, 16, 16))],
                              [numpy_helper.from_array(scale, "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype(np.float32)
    got = Executor(compile_model(model, tmp_path / "a", CompileOptions(memory=memory)), pocl_device).run([x])[0]
    np.testing.assert_array_equal(got, x * scale)
