"""ConvTransposes whose kernel equals their stride, rewritten as a 1x1 Conv and a pixel shuffle
(`adreno.frontend.upsampling`), and the ones that must stay: each compiled, run on PoCL and checked against
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def convtranspose(x_shape: list[int], channels_out: int, kernel: list[int], bias: bool = True, group: int = 1,
                  weight_input: bool = False, then_conv: bool = False, **attrs) -> onnx.ModelProto:
    """Input `x` of `x_shape` -> one ConvTranspose with seeded weights (an initializer, or graph input `w`), and with
    `then_conv` a Relu and a 1x1 Conv after it (the texture path keeps the upsampled tensor packed then)."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((x_shape[1], channels_out // group, *kernel)).astype(np.float32)
    inits = [] if weight_input else [numpy_helper.from_array(weight, "w")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    inputs += [helper.make_tensor_value_info("w", TensorProto.FLOAT, weight.shape)] if weight_input else []
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(channels_out).astype(np.float32), "b"))
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], name="up",
                              kernel_shape=kernel, group=group, **attrs)]
    if then_conv:
        inits.append(numpy_helper.from_array(rng.standard_normal((3, channels_out, 1, 1)).astype(np.float32), "w2"))
        nodes += [helper.make_node("Relu", ["y"], ["r"]), helper.make_node("Conv", ["r", "w2"], ["z"])]
    output = helper.make_tensor_value_info("z" if then_conv else "y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "upsampling", inputs, [output], inits)
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


SHUFFLES = {
    "k2-bias": convtranspose([1, 3, 4, 6], 5, [2, 2], strides=[2, 2]),
    "k2-no-bias": convtranspose([1, 4, 5, 5], 4, [2, 2], bias=False, strides=[2, 2]),
    "k4-bias": convtranspose([1, 2, 3, 5], 3, [4, 4], strides=[4, 4]),
    "k4-no-bias": convtranspose([1, 6, 2, 3], 2, [4, 4], bias=False, strides=[4, 4], pads=[0, 0, 0, 0]),
    "batch2": convtranspose([2, 3, 4, 4], 4, [2, 2], strides=[2, 2], dilations=[1, 1]),
    "k2x3": convtranspose([1, 3, 3, 4], 2, [2, 3], strides=[2, 3]),
    "same-upper": convtranspose([1, 3, 4, 5], 4, [2, 2], strides=[2, 2], auto_pad="SAME_UPPER"),
}
# the shuffle between two packed convs: its kernel reads the conv's packed output at 4 pixels per output pixel
PACKED = {
    "k2-then-conv": convtranspose([1, 6, 5, 5], 8, [2, 2], strides=[2, 2], then_conv=True),
    "k4-one-channel-then-conv": convtranspose([2, 4, 3, 4], 1, [4, 4], strides=[4, 4], then_conv=True),
}
KEPT = {
    "pads": convtranspose([1, 3, 4, 4], 4, [2, 2], strides=[2, 2], pads=[1, 0, 0, 1]),
    "output-padding": convtranspose([1, 3, 4, 4], 4, [2, 2], strides=[2, 2], output_padding=[1, 1]),
    "group2": convtranspose([1, 4, 4, 4], 4, [2, 2], group=2, strides=[2, 2]),
    "k3-s2": convtranspose([1, 3, 4, 4], 4, [3, 3], strides=[2, 2]),
    "weight-input": convtranspose([1, 3, 4, 4], 4, [2, 2], bias=False, weight_input=True, strides=[2, 2]),
}


def matches_onnxruntime(model, pocl_device, tmp_path, memory: str) -> None:
    """Compile `model` for `memory` and compare its output with onnxruntime's on the same seeded inputs."""
    import onnxruntime as ort

    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    rng = np.random.default_rng(7)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = Executor(compile_model(model, tmp_path / memory, CompileOptions(memory=memory)), pocl_device).run(
        list(feeds.values()))[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def shapes_of(model) -> dict[str, list[int]]:
    return {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}


@pytest.mark.parametrize("case", list(SHUFFLES))
def test_pixel_shuffle_becomes_conv_and_shuffle(case):
    from adreno.frontend.upsampling import rewrite

    model = SHUFFLES[case]
    out = rewrite(model, shapes_of(model))
    assert [n.op_type for n in out.graph.node] == ["Conv", "Reshape", "Transpose", "Reshape"]
    assert out.graph.node[-1].output[0] == "y"
    assert {t.name for t in out.graph.initializer}.isdisjoint({"w", "b"})  # the ConvTranspose's weights are gone
    assert [n.op_type for n in model.graph.node] == ["ConvTranspose"]  # the caller's model is untouched


@pytest.mark.parametrize("memory", ["buffer", "texture"])
@pytest.mark.parametrize("case", list(SHUFFLES))
def test_pixel_shuffle_matches_onnxruntime(case, memory, pocl_device, tmp_path):
    matches_onnxruntime(SHUFFLES[case], pocl_device, tmp_path, memory)


@pytest.mark.parametrize("case", list(PACKED))
def test_pixel_shuffle_in_the_packed_region_matches_onnxruntime(case, pocl_device, tmp_path):
    """Each lane of such an output pixel is computed on its own into registers, then the pixel is stored whole
    (`schedules.packed`): vectorising the lanes failed the build."""
    matches_onnxruntime(PACKED[case], pocl_device, tmp_path, "texture")


@pytest.mark.parametrize("case", list(KEPT))
def test_other_convtransposes_stay_and_match_onnxruntime(case, pocl_device, tmp_path):
    from adreno.frontend.upsampling import rewrite

    model = KEPT[case]
    assert rewrite(model, shapes_of(model)) is model
    matches_onnxruntime(model, pocl_device, tmp_path, "texture")
