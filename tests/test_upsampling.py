"""ConvTransposes rewritten as a Conv and a pixel shuffle (`adreno.frontend.upsampling`): kernel = stride (a 1x1
Conv), overlapping kernels (a ceil(k/s) Conv and a crop), and the ones that must stay: each compiled, run on PoCL and
checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.frontend.onnx_reading import attributes
from adreno.frontend.rewrites import InferredShapes


def convtranspose(x_shape: list[int], channels_out: int, kernel: list[int], bias: bool = True, group: int = 1,
                  weight_input: bool = False, weight_node: bool = False, then_conv: bool = False,
                  **attrs) -> onnx.ModelProto:
    """Input `x` of `x_shape` -> one ConvTranspose with seeded weights (an initializer, graph input `w`, or with
    `weight_node` a Constant node as PaddlePaddle exports them), and with `then_conv` a Relu and a 1x1 Conv after it
    (the texture path keeps the upsampled tensor packed then)."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((x_shape[1], channels_out // group, *kernel)).astype(np.float32)
    inits = [] if weight_input or weight_node else [numpy_helper.from_array(weight, "w")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    inputs += [helper.make_tensor_value_info("w", TensorProto.FLOAT, weight.shape)] if weight_input else []
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(channels_out).astype(np.float32), "b"))
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(weight))] if weight_node else []
    nodes += [helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], name="up",
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
    "k3-s2-p1-op1-then-conv": convtranspose([1, 4, 4, 5], 8, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                            output_padding=[1, 1], then_conv=True),
}
# overlapping kernels (the decoders of CenterNet, U-Net, DCGAN, FCN), padding, output_padding, stride 1
OVERLAPPING = {
    "k3-s2-p1-op1": convtranspose([2, 3, 5, 4], 4, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "k4-s2-p1": convtranspose([1, 4, 4, 5], 3, [4, 4], bias=False, strides=[2, 2], pads=[1, 1, 1, 1]),
    "k5-s2-p2-op1": convtranspose([1, 2, 4, 3], 5, [5, 5], strides=[2, 2], pads=[2, 2, 2, 2], output_padding=[1, 1]),
    "k3-s3-pads": convtranspose([1, 3, 3, 4], 2, [3, 3], strides=[3, 3], pads=[1, 0, 2, 1]),
    "k3-s2": convtranspose([1, 3, 4, 4], 4, [3, 3], strides=[2, 2]),
    "k3x4-s2x3": convtranspose([2, 3, 4, 3], 2, [3, 4], strides=[2, 3], pads=[1, 2, 0, 1], output_padding=[1, 2]),
    "k3-s1-p1": convtranspose([1, 4, 5, 5], 3, [3, 3], pads=[1, 1, 1, 1]),
    "k4-s2-p1-constant-node": convtranspose([1, 3, 4, 4], 4, [4, 4], weight_node=True, strides=[2, 2],
                                           pads=[1, 1, 1, 1]),
}
KEPT = {
    "group2": convtranspose([1, 4, 4, 4], 4, [2, 2], group=2, strides=[2, 2]),
    "dilation2": convtranspose([1, 3, 4, 4], 2, [3, 3], strides=[2, 2], dilations=[2, 2]),
    "k3-s2-same-upper": convtranspose([1, 3, 4, 4], 2, [3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
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


def shapes_of(model) -> InferredShapes:
    return InferredShapes({i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input})


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


@pytest.mark.parametrize("case", list(OVERLAPPING))
def test_overlapping_convtranspose_becomes_conv_shuffle_and_crop(case):
    from adreno.frontend.upsampling import rewrite

    model = OVERLAPPING[case]
    out = rewrite(model, shapes_of(model))
    ops = [n.op_type for n in out.graph.node]
    assert "ConvTranspose" not in ops and "Constant" not in ops and ops[0] == "Conv"  # the Constant weight too
    assert out.graph.node[-1].output[0] == "y"
    up = attributes(model.graph.node[-1])
    taps = [-(-k // s) for k, s in zip(up["kernel_shape"], up.get("strides", [1, 1]))]
    assert attributes(out.graph.node[0])["kernel_shape"] == taps  # ceil(k / s) taps: no zero-dilated input


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_rewrite_computes_the_convtranspose_in_onnxruntime(stride):
    """The index math on every kernel 1..5 (below the stride too: phases with no tap), first and last pads and
    output_padding at their limits, non-square, Cin != Cout, batch 2: onnxruntime runs both graphs."""
    import onnxruntime as ort

    from adreno.frontend.upsampling import rewrite

    def run(model, x):
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    x = np.random.default_rng(5).standard_normal((2, 3, 4, 3)).astype(np.float32)
    for k in range(1, 6):
        kw = max(k - 1, 1)
        for pads, output_padding in [([0, 0, 0, 0], [0, 0]), ([k - 1, 0, 0, kw - 1], [stride - 1, 0]),
                                     ([k // 2, kw - 1, k - 1, kw // 2], [0, stride - 1])]:
            model = convtranspose(list(x.shape), 2, [k, kw], bias=k % 2 == 1, strides=[stride, stride],
                                  pads=pads, output_padding=output_padding)
            out = rewrite(model, shapes_of(model))
            assert "ConvTranspose" not in [n.op_type for n in out.graph.node]
            np.testing.assert_allclose(run(out, x), run(model, x), rtol=1e-4, atol=1e-4,
                                       err_msg=f"k {k} pads {pads} output_padding {output_padding}")


@pytest.mark.parametrize("memory", ["buffer", "texture"])
@pytest.mark.parametrize("case", list(OVERLAPPING))
def test_overlapping_convtranspose_matches_onnxruntime(case, memory, pocl_device, tmp_path):
    matches_onnxruntime(OVERLAPPING[case], pocl_device, tmp_path, memory)


@pytest.mark.parametrize("case", list(KEPT))
def test_other_convtransposes_stay_and_match_onnxruntime(case, pocl_device, tmp_path):
    from adreno.frontend.upsampling import rewrite

    model = KEPT[case]
    assert rewrite(model, shapes_of(model)) is model
    matches_onnxruntime(model, pocl_device, tmp_path, "texture")


def decoder(output_shape: list[int]) -> onnx.ModelProto:
    """x -> ConvTranspose with `output_shape` -> Relu -> ConvTranspose k3 s2 p1 op1 -> LayerNormalization with its
    Mean output: each of the import-time rewrites (rewrites, upsampling, decompose) has work."""
    rng = np.random.default_rng(4)
    weights = {"w1": rng.standard_normal((3, 4, 3, 3)), "w2": rng.standard_normal((4, 2, 3, 3)),
               "g": rng.standard_normal(16) + 1, "b": rng.standard_normal(16)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w1"], ["u"], strides=[2, 2], output_shape=output_shape),
             helper.make_node("Relu", ["u"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "w2"], ["v"], strides=[2, 2], pads=[1, 1, 1, 1],
                              output_padding=[1, 1]),
             helper.make_node("LayerNormalization", ["v", "g", "b"], ["y", "mean"], axis=-1)]
    graph = helper.make_graph(nodes, "decoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 20, 16]),
                               helper.make_tensor_value_info("mean", TensorProto.FLOAT, [1, 2, 20, 1])],
                              [numpy_helper.from_array(w.astype(np.float32), n) for n, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("output_shape, inferences", [([10, 8], 1), ([1, 4, 10, 8], 2)])
def test_the_rewrites_share_one_shape_inference(output_shape, inferences, monkeypatch):
    """The import-time rewrites read the shapes of one ONNX shape inference over the whole model
    (`rewrites.InferredShapes`). An output_shape that lists N and C, which ONNX's inference refuses, leaves the values
    after that ConvTranspose without shapes until its explicit pads replace it: upsampling infers again, and
    rewrites the second ConvTranspose too."""
    from adreno.frontend import rewrites
    from adreno.frontend.importer import to_relax

    calls = []
    inferred = rewrites.static_shapes
    monkeypatch.setattr(rewrites, "static_shapes", lambda *args: calls.append(args) or inferred(*args))
    mod = to_relax(decoder(output_shape))
    assert len(calls) == inferences
    ops = {getattr(getattr(b.value, "op", None), "name", "") for block in mod["main"].body.blocks
           for b in block.bindings}
    assert "relax.nn.conv2d_transpose" not in ops and "relax.nn.layer_norm" not in ops, ops
    assert [[int(d) for d in t.shape] for t in mod["main"].body.body.ty.fields] == [[1, 2, 20, 16], [1, 2, 20, 1]]
