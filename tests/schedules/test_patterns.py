"""Patterns of real models (issue 13) that our schedules once got wrong, each compiled in both memories and compared
with onnxruntime; where a family's assumptions do not hold for a function, a test pins that it refuses it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.schedules.sched_helpers import check_against_onnxruntime, primitive_function

MEMORIES = ["texture", "buffer"]


def graph_model(nodes, x_shape, y_shape, weights: dict[str, np.ndarray], opset: int = 17) -> onnx.ModelProto:
    """A one-input one-output ONNX model of `nodes` (x -> ... -> y) with constant `weights`."""
    graph = helper.make_graph(
        nodes, "pattern", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(w.astype(np.float32) if w.dtype.kind == "f" else w, n) for n, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def squeeze_excite(c: int = 16, r: int = 4, hw: int = 14, seed: int = 0) -> onnx.ModelProto:
    """x -> GlobalAveragePool -> 1x1 conv -> ReLU -> 1x1 conv -> Sigmoid -> Mul(x)."""
    rng = np.random.default_rng(seed)
    weights = {"w1": rng.standard_normal((r, c, 1, 1)) * 0.3, "b1": rng.standard_normal(r) * 0.1,
               "w2": rng.standard_normal((c, r, 1, 1)) * 0.3, "b2": rng.standard_normal(c) * 0.1}
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]),
             helper.make_node("Conv", ["p", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Sigmoid", ["c2"], ["s"]),
             helper.make_node("Mul", ["x", "s"], ["y"])]
    return graph_model(nodes, [1, c, hw, hw], [1, c, hw, hw], weights)


@pytest.mark.parametrize("memory", MEMORIES)
def test_squeeze_excite(memory, tmp_path):
    check_against_onnxruntime(squeeze_excite(), tmp_path / memory, memory)


def test_gemv_refuses_an_epilogue_that_broadcasts():
    """dlight's GEMV binds the epilogue's loops as the product's rows: `sigmoid(conv(p)) * x` would keep 16 of
    3136 outputs."""
    from adreno.schedules import dense

    func, target = primitive_function(squeeze_excite(), "fused_conv2d1_add1_tir_sigmoid_multiply")
    assert dense.FAMILY.apply(func, target) is None
    conv, _ = primitive_function(squeeze_excite(), "fused_conv2d_add_relu")
    assert dense.elementwise_epilogue(conv)


def conv_then(op: str, c: int = 8, hw: int = 10, seed: int = 0, **attrs) -> onnx.ModelProto:
    """x -> 3x3 conv (bias) -> `op`."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c"], ["y"], **attrs)]
    return graph_model(nodes, [1, c, hw, hw], [1, c, hw, hw],
                       {"w": rng.standard_normal((c, c, 3, 3)) * 0.2, "b": rng.standard_normal(c)})


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("op, attrs", [("HardSigmoid", {"alpha": 0.2, "beta": 0.5}), ("HardSwish", {})])
def test_conv_then_hard_activation(op, attrs, memory, tmp_path):
    """HardSigmoid arrives as clip(alpha * x + beta, 0, 1) with scalar bounds, which the texture planner once took
    for tensor constants."""
    check_against_onnxruntime(conv_then(op, **attrs), tmp_path / memory, memory)


def grouped_conv(bias: bool, seed: int = 0) -> onnx.ModelProto:
    """PyTorch's Conv2d_groups case: batch 2, 4 -> 6 channels in 2 groups, 3x2 kernel, no padding."""
    rng = np.random.default_rng(seed)
    weights = {"w": rng.standard_normal((6, 2, 3, 2))} | ({"b": rng.standard_normal(6)} if bias else {})
    node = helper.make_node("Conv", ["x", *weights], ["y"], group=2, kernel_shape=[3, 2])
    return graph_model([node], [2, 4, 6, 5], [2, 6, 4, 4], weights)


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("bias", [False, True])
def test_grouped_conv(bias, memory, tmp_path):
    """1 < groups < channels: claimed by conv2d_direct (dlight's cross-thread reduction failed to lower it)."""
    from adreno.schedules import conv2d_direct

    model = grouped_conv(bias)
    func, _ = primitive_function(model, "fused_conv2d" if bias else "conv2d")
    assert conv2d_direct.FAMILY.workload(func).groups == 2
    check_against_onnxruntime(model, tmp_path / memory, memory)


def one_node(op: str, x_shape, y_shape, **attrs) -> onnx.ModelProto:
    return graph_model([helper.make_node(op, ["x"], ["y"], **attrs)], x_shape, y_shape, {})


SINGLE_ROW_POOLS = {  # the pool's fused row axis (n, c and, windowed, oh) has one element
    "global_average_1": one_node("GlobalAveragePool", [1, 1, 3, 3], [1, 1, 1, 1]),
    "global_max_1": one_node("GlobalMaxPool", [1, 1, 3, 3], [1, 1, 1, 1]),
    # ONNX's maxpool_2d_ceil_output_size_reduce_by_one
    "maxpool_k1_s2_ceil": one_node("MaxPool", [1, 1, 2, 2], [1, 1, 1, 1], kernel_shape=[1, 1], strides=[2, 2],
                                   ceil_mode=1),
    "maxpool_one_row": one_node("MaxPool", [1, 1, 1, 9], [1, 1, 1, 8], kernel_shape=[1, 2]),
}


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("name", SINGLE_ROW_POOLS)
def test_single_row_pool(name, memory, tmp_path):
    check_against_onnxruntime(SINGLE_ROW_POOLS[name], tmp_path / memory, memory)


def test_pool_refuses_a_single_row():
    """TVM drops the store's guard when the thread-bound row axis has one element: idle work-items would store
    their uninitialised accumulators over the result."""
    from adreno.schedules import pool

    for name in ("global_average_1", "maxpool_one_row"):
        func, target = primitive_function(SINGLE_ROW_POOLS[name], "")
        assert pool.FAMILY.workload(func) is None and pool.FAMILY.apply(func, target) is None, name
    two_rows, _ = primitive_function(one_node("GlobalAveragePool", [1, 2, 3, 3], [1, 2, 1, 1]), "")
    assert pool.FAMILY.workload(two_rows).c == 2


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("x_hw, strides, output_shape", [
    (3, [3, 2], [10, 8]),  # ONNX's convtranspose_output_shape: one row and column more than the natural 9x7
    (5, [2, 2], [10, 9]),  # natural 11x11, cropped (odd total padding: the extra row at the start)
])
def test_conv_transpose_output_shape(x_hw, strides, output_shape, memory, tmp_path):
    """TVM's importer ignores `output_shape`; adreno.frontend.rewrites turns it into pads / output_padding."""
    w = np.random.default_rng(0).standard_normal((4, 8, 3, 3))
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=strides, output_shape=output_shape)
    model = graph_model([node], [1, 4, x_hw, x_hw], [1, 8, *output_shape], {"w": w})
    check_against_onnxruntime(model, tmp_path / memory, memory)


@pytest.mark.parametrize("memory", MEMORIES)
def test_legacy_prelu_per_channel_slope(memory, tmp_path):
    """Before opset 7 a PRelu slope of shape [C] is per channel (PyTorch's PReLU_2d_multiparam export)."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    slope = np.random.default_rng(0).standard_normal(8).astype(np.float32)
    model = graph_model([helper.make_node("PRelu", ["x", "s"], ["y"])], [1, 8, 5, 6], [1, 8, 5, 6], {"s": slope})
    model.opset_import[0].version = 6
    x = np.random.default_rng(1).standard_normal((1, 8, 5, 6)).astype(np.float32)
    out = Executor(compile_model(model, tmp_path / memory, CompileOptions(memory=memory))).run([x])[0]
    np.testing.assert_allclose(out, np.where(x < 0, x * slope[:, None, None], x), rtol=1e-6)


def resize(x_shape, y_shape, scales=None, sizes=None, opset: int = 17, **attrs) -> onnx.ModelProto:
    weights = {"scales": np.array(scales, np.float32)} if scales else {"sizes": np.array(sizes, np.int64)}
    inputs = ["x", "", *weights] if scales else ["x", "", "", *weights]
    return graph_model([helper.make_node("Resize", inputs, ["y"], **attrs)], x_shape, y_shape, weights, opset)


RESIZES = {  # ONNX's node cases with 8 channels, their runtime parameters as initializers
    "downsample_scales_linear": resize([1, 8, 2, 4], [1, 8, 1, 2], scales=[1, 1, 0.6, 0.6], mode="linear"),
    "downsample_scales_linear_align_corners": resize([1, 8, 2, 4], [1, 8, 1, 2], scales=[1, 1, 0.6, 0.6],
                                                     mode="linear", coordinate_transformation_mode="align_corners"),
    "upsample_sizes_nearest": resize([1, 8, 2, 2], [1, 8, 7, 8], sizes=[1, 8, 7, 8], mode="nearest"),
    "downsample_scales_cubic": resize([1, 8, 4, 4], [1, 8, 3, 3], scales=[1, 1, 0.8, 0.8], mode="cubic"),
    "upsample_sizes_nearest_axes_3_2": resize([1, 8, 2, 2], [1, 8, 7, 8], sizes=[8, 7], mode="nearest",
                                              axes=[3, 2], opset=18),
}


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("name", RESIZES)
def test_resize(name, memory, tmp_path):
    """TVM derives source coordinates from the size ratio, ONNX from the scale: adreno.frontend.rewrites computes the
    sampling (Gather indices, interpolation matrices) as onnxruntime does."""
    if not name.endswith("align_corners"):
        check_against_onnxruntime(RESIZES[name], tmp_path / memory, memory)
        return
    # align_corners with a scale whose output length is rounded: the ONNX reference divides by the unrounded length
    # (the node case expects [1, 3.142857] from [1, 2, 3, 4]), onnxruntime 1.32 by the rounded one ([1, 4])
    from onnx.reference import ReferenceEvaluator

    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    model = RESIZES[name]
    x = np.random.default_rng(1).standard_normal((1, 8, 2, 4)).astype(np.float32)
    out = Executor(compile_model(model, tmp_path / memory, CompileOptions(memory=memory))).run([x])[0]
    np.testing.assert_allclose(out, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("memory", MEMORIES)
def test_packed_schedule_with_fewer_pixels_than_a_workgroup(memory, tmp_path):
    """PyTorch's Conv2d_no_bias with --schedules tvm: on textures the conv gets the one-pixel packed schedule, whose
    32 output pixels once ran in a 64-item workgroup with an unguarded store."""
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 2))
    model = graph_model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 2])], [2, 3, 6, 5],
                        [2, 4, 4, 4], {"w": w})
    check_against_onnxruntime(model, tmp_path / memory, memory, schedules="tvm")
