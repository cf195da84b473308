"""Texture path without an OpenCL device: layouts, image fitting, plan format, the generated OpenCL source."""

from __future__ import annotations

import re

import numpy as np
import pytest

from adreno import texture
from adreno.artifact import PLAN_FORMAT, Artifact, ImageSpec, Plan
from adreno.compile import CompileOptions, compile_model
from adreno.target import get_device
from tests.conftest import single_op_model


@pytest.mark.parametrize("channels", [3, 4, 10])
def test_nchw4c_roundtrip_pads_with_zeros(channels, rng):
    x = rng.standard_normal((1, channels, 5, 6)).astype(np.float32)
    packed = texture.pack_nchw4c(x)
    assert packed.shape == (1, (channels + 3) // 4, 5, 6, 4)
    assert np.array_equal(texture.unpack_nchw4c(packed, channels), x)
    assert packed[0, (channels - 1) // 4, 2, 3, (channels - 1) % 4] == x[0, channels - 1, 2, 3]
    flat = packed.transpose(0, 1, 4, 2, 3).reshape(1, -1, 5, 6)
    assert np.all(flat[:, channels:] == 0)


def test_oihw4o_layout(rng):
    w = rng.standard_normal((10, 3, 3, 3)).astype(np.float32)
    packed = texture.pack_oihw4o(w)
    assert packed.shape == (3, 4, 3, 3, 4)
    for o in range(10):
        assert np.array_equal(packed[o // 4, :3, :, :, o % 4], w[o])
    assert np.all(packed[:, 3] == 0) and np.all(packed[2, :, :, :, 2:] == 0)
    dw = texture.pack_oihw4o(rng.standard_normal((6, 1, 3, 3)).astype(np.float32), depthwise=True)
    assert dw.shape == (2, 1, 3, 3, 4)


@pytest.mark.parametrize("scope", texture.TEXTURE_SCOPES)
def test_image_pixels_roundtrip(scope, rng):
    x = rng.standard_normal((2, 3, 5, 7, 4)).astype(np.float32)
    width, height, layers = texture.image_dims(x.shape, scope)
    spec = ImageSpec(scope, width, height, layers)
    pixels = texture.to_image(x, spec)
    assert pixels.shape == (layers, height, width, 4)
    assert np.array_equal(texture.from_image(pixels, x.shape), x)
    half = texture.to_image(x, ImageSpec(scope, width, height, layers, channel_type="float16"))
    assert half.dtype == np.float16


def test_choose_image_scopes_and_fallback():
    device = get_device("adreno-740")
    image, _ = texture.choose_image([1, 16, 56, 56, 4], "float32", "act", device)
    assert (image.scope, image.width, image.height, image.layers) == ("global.texture", 56, 56, 16)
    weight, _ = texture.choose_image([16, 64, 3, 3, 4], "float32", "param", device)
    assert (weight.scope, weight.width, weight.height, weight.layers) == ("global.texture-weight", 576, 16, 1)
    deep, _ = texture.choose_image([1, 4096, 2, 2, 4], "float32", "act", device)
    assert deep.scope == "global.texture-nhwc"
    none, reason = texture.choose_image([1, 1, 1, 20000, 4], "float32", "act", device)
    assert none is None and "exceeds the image limits" in reason
    none, reason = texture.choose_image([1, 10, 4, 4], "float32", "act", device)
    assert none is None and "not a packed" in reason


def test_plan_format_roundtrip_with_images():
    from dataclasses import asdict

    from adreno.artifact import KernelArg, KernelLaunch, Step, TensorSpec

    image = asdict(ImageSpec("global.texture", 4, 4, 2))
    tensors = {"x": TensorSpec("x", [1, 2, 4, 4, 4], "float32", "input", "i0", "global.texture", image),
               "y": TensorSpec("y", [1, 8, 4, 4], "float32", "output", "s0", fallback="")}
    plan = Plan(["x"], ["y"], tensors, {"i0": 512, "s0": 512}, {"p": "kernels/p.cl"},
                [Step("f", "p", "unpack", ["x", "y"], [KernelLaunch("k", [KernelArg(arg=0), KernelArg(arg=1)], [64],
                                                                     [64])])], images={"i0": image})
    again = Plan.from_json(plan.to_json())
    assert again == plan and again.format == PLAN_FORMAT >= 2
    assert again.texture_summary()["image_tensors"] == 1


@pytest.fixture(scope="module")
def conv_artifact(tmp_path_factory):
    rng = np.random.default_rng(3)
    model = single_op_model("Conv", {"x": [1, 3, 9, 11]},
                            {"w": rng.standard_normal((10, 3, 3, 3)), "b": rng.standard_normal(10)}, pads=[1, 1, 1, 1])
    return model, compile_model(model, tmp_path_factory.mktemp("tex") / "conv",
                                CompileOptions(memory="texture", host="native"))


def test_conv_plan_maps_tensors_to_images(conv_artifact):
    _, path = conv_artifact
    artifact = Artifact.load(path)
    plan = artifact.plan
    assert artifact.manifest["memory"] == "texture"
    scopes = {t.scope for t in plan.tensors.values()}
    assert {"global.texture", "global.texture-weight"} <= scopes
    for tensor in plan.tensors.values():
        if tensor.image:
            assert tensor.storage in plan.images and plan.images[tensor.storage] == tensor.image
    assert [s.op for s in plan.steps] == ["pack", "conv2d", "unpack"]
    assert plan.tensors[plan.inputs[0]].image is None  # NCHW model input: a buffer, packed by the first step


def test_vectorized_texture_store_is_one_write_per_pixel(conv_artifact):
    _, path = conv_artifact
    artifact = Artifact.load(path)
    conv = next(s for s in artifact.plan.steps if s.op == "conv2d")
    source = artifact.kernel_source(conv.program)
    body = source[source.rindex("__kernel void"):]
    writes = re.findall(r"write_imagef\(.*, as_float4\((\w+)\)\);", body)
    assert len(writes) == 1 and body.count("write_imagef") == 1, body
    # the value written is a float4 variable loaded whole from the register array, not a lane of a loop
    assert re.search(rf"float4 {writes[0]} = vload4\(", body), body
    # inputs are read as whole pixels: no read is indexed by a lane afterwards
    assert "((float*)&" not in body
    assert "image2d_array_t" in body and "CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST" in body


def test_upstream_pipeline_would_write_per_lane(conv_artifact):
    """Guard for the bug we work around: without `widen_texture_access` the store is a per-lane loop."""
    import tvm

    from adreno.compile import lower_relax
    from adreno.frontend import to_relax
    from adreno.target import tvm_target

    model, _ = conv_artifact
    target = tvm_target("adreno-740", host="native")
    lowered = lower_relax(to_relax(model), target, memory="texture")
    gvar = next(g for g in lowered.functions if "conv2d" in g.name_hint)
    func = texture.specialize_scopes(lowered[gvar], ["global.texture", "global.texture-weight",
                                                    "global.texture-weight", "global.texture"], target)
    from tvm.s_tir.backend.adreno import pipeline as upstream

    module = tvm.tirx.transform.BindTarget(target)(tvm.IRModule({"f": func.with_attr("global_symbol", "f")}))
    with pytest.raises(texture.TextureLoweringError):
        lowered_mod = upstream.default_tir_pipeline()(module)
        texture.check_texture_stores(tvm.IRModule({g: f for g, f in lowered_mod.functions.items()
                                                   if g.name_hint != "f"}))


def test_layout_planning_keeps_one_region(rng):
    """conv -> relu -> conv -> add(residual) stays packed: one pack at the input, one unpack at the output."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from adreno.frontend import to_relax

    w1 = numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((6, 6, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["c"]),
             helper.make_node("Add", ["c", "a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8, 8])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    _, report = texture.plan_layouts(to_relax(model))
    assert (report.packed_convs, report.packs, report.unpacks, report.nchw_convs) == (2, 1, 1, [])
