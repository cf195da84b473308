"""Texture path: layouts, image fitting, plan format, the generated OpenCL source, and the register-tiled texture
conv schedule (`adreno/schedules/conv2d_texture.py`) run on PoCL against numpy for a table of shapes and knob
configs."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.targets import layout
from adreno.artifact.format import PLAN_FORMAT, Artifact, Plan
from adreno.compile import compile_model, lower_relax
from adreno.frontend.importer import to_relax
from adreno.targets.layout import ImageSpec
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions, Memory, Schedules
from adreno.targets.devices import get_device
from adreno.texture import planning
from adreno.texture import tir as texture_tir
from tests.conftest import single_op_model
from tests.schedules.sched_helpers import context, record_claims
from adreno.options import Host
from tests.kernel_files import kernel_sources


@pytest.mark.parametrize("channels", [3, 4, 10])
def test_nchw4c_roundtrip_pads_with_zeros(channels, rng):
    x = rng.standard_normal((1, channels, 5, 6)).astype(np.float32)
    packed = layout.pack_nchw4c(x)
    assert packed.shape == (1, (channels + 3) // 4, 5, 6, 4)
    assert np.array_equal(layout.unpack_nchw4c(packed, channels), x)
    assert packed[0, (channels - 1) // 4, 2, 3, (channels - 1) % 4] == x[0, channels - 1, 2, 3]
    flat = packed.transpose(0, 1, 4, 2, 3).reshape(1, -1, 5, 6)
    assert np.all(flat[:, channels:] == 0)


def test_oihw4o_layout(rng):
    w = rng.standard_normal((10, 3, 3, 3)).astype(np.float32)
    packed = layout.pack_oihw4o(w)
    assert packed.shape == (3, 4, 3, 3, 4)
    for o in range(10):
        assert np.array_equal(packed[o // 4, :3, :, :, o % 4], w[o])
    assert np.all(packed[:, 3] == 0) and np.all(packed[2, :, :, :, 2:] == 0)
    dw = layout.pack_oihw4o(rng.standard_normal((6, 1, 3, 3)).astype(np.float32), depthwise=True)
    assert dw.shape == (2, 1, 3, 3, 4)


@pytest.mark.parametrize("scope", layout.TEXTURE_SCOPES)
def test_image_pixels_roundtrip(scope, rng):
    x = rng.standard_normal((2, 3, 5, 7, 4)).astype(np.float32)
    width, height, layers = layout.image_dims(x.shape, scope)
    spec = ImageSpec(scope, width, height, layers)
    pixels = layout.to_image(x, spec)
    assert pixels.shape == (layers, height, width, 4)
    assert np.array_equal(layout.from_image(pixels, x.shape), x)
    half = layout.to_image(x, ImageSpec(scope, width, height, layers, channel_type="float16"))
    assert half.dtype == np.float16


def test_choose_image_scopes_and_fallback():
    device = get_device("adreno-740")
    image, _ = layout.choose_image([1, 16, 56, 56, 4], "float32", "act", device)
    assert (image.scope, image.width, image.height, image.layers) == ("global.texture", 56, 56, 16)
    weight, _ = layout.choose_image([16, 64, 3, 3, 4], "float32", "param", device)
    assert (weight.scope, weight.width, weight.height, weight.layers) == ("global.texture-weight", 576, 16, 1)
    deep, _ = layout.choose_image([1, 4096, 2, 2, 4], "float32", "act", device)
    assert deep.scope == "global.texture-nhwc"
    none, reason = layout.choose_image([1, 1, 1, 20000, 4], "float32", "act", device)
    assert none is None and "exceeds the image limits" in reason
    none, reason = layout.choose_image([1, 10, 4, 4], "float32", "act", device)
    assert none is None and "not a packed" in reason


def test_plan_format_roundtrip_with_images():
    from dataclasses import asdict

    from adreno.artifact.format import KernelArg, KernelLaunch, Step, TensorSpec

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
    body = _kernel_body(artifact, conv)
    writes = re.findall(r"write_imagef\(.*, as_float4\((\w+)\)\);", body)
    assert writes and len(writes) == body.count("write_imagef"), body
    # each value written is a float4 variable loaded whole from a register array, not a lane of a loop
    assert all(re.search(rf"float4 {w} = ", body) for w in writes), body
    # inputs are read as whole pixels: no read is indexed by a lane afterwards
    assert "((float*)&" not in body
    assert "image2d_array_t" in body and "CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST" in body


def test_upstream_pipeline_would_write_per_lane(conv_artifact):
    """Guard for the bug we work around: without `widen_texture_access` the store is a per-lane loop."""
    import tvm

    from adreno.compile import lower_relax
    from adreno.frontend.importer import to_relax

    model, _ = conv_artifact
    target = context("adreno-740", host=Host.NATIVE)
    lowered = lower_relax(to_relax(model), target, memory=Memory.TEXTURE)
    gvar = next(g for g in lowered.functions if "conv2d" in g.name_hint)
    func = texture_tir.specialize_scopes(lowered[gvar], ["global.texture", "global.texture-weight",
                                                    "global.texture-weight", "global.texture"], target.target)
    from tvm.s_tir.backend.adreno import pipeline as upstream

    module = tvm.tirx.transform.BindTarget(target.target)(tvm.IRModule({"f": func.with_attr("global_symbol", "f")}))
    with pytest.raises(texture_tir.TextureLoweringError):
        lowered_mod = upstream.default_tir_pipeline()(module)
        texture_tir.check_texture_stores(tvm.IRModule({g: f for g, f in lowered_mod.functions.items()
                                                   if g.name_hint != "f"}))


def test_layout_planning_keeps_one_region(rng):
    """conv -> relu -> conv -> add(residual) stays packed: one pack at the input, one unpack at the output."""
    import onnx

    from adreno.frontend.importer import to_relax

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
    _, report = planning.plan_layouts(to_relax(model))
    assert (report.packed_convs, report.packs, report.unpacks, report.nchw_convs) == (2, 1, 1, [])


def _conv_gelu_model(gelu: str):
    """conv 3x3 (3 -> 6 channels: a padded channel block) + bias -> GELU: exact GELU spelled with Erf
    (x * 0.5 * (1 + erf(x / sqrt 2)), opset 17) or opset 20's Gelu node (`approximate` none or tanh)."""
    rng = np.random.default_rng(7)
    weights = [numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.5, "w"),
               numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    if gelu == "erf":
        weights += [numpy_helper.from_array(np.array(v, np.float32), n)
                    for n, v in (("root2", np.sqrt(2)), ("one", 1), ("half", 0.5))]
        nodes = [conv, helper.make_node("Div", ["c", "root2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["c", "a"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["y"])]
    else:
        nodes = [conv, helper.make_node("Gelu", ["c"], ["y"], approximate=gelu)]
    graph = helper.make_graph(nodes, "conv_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8, 8])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17 if gelu == "erf" else 20)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("gelu", ["erf", "none", "tanh"])
def test_erf_gelu_stays_packed_and_fuses_into_the_conv(gelu, tmp_path):
    """Erf and GELU are elementwise: a conv's GELU stays on images and runs in the conv's epilogue (one pack of the
    input, the conv kernel, one unpack of the output), not in an unpack -> GELU -> pack round trip."""
    from tests.schedules.sched_helpers import check_against_onnxruntime

    model = _conv_gelu_model(gelu)
    _, report = planning.plan_layouts(to_relax(model))
    assert (report.packed_convs, report.unpacks) == (1, 1)
    artifact = Artifact.load(check_against_onnxruntime(model, tmp_path / "a", "texture", winograd="off"))
    assert [s.op for s in artifact.plan.steps] == ["pack", "conv2d", "unpack"]
    (conv,) = [s for s in artifact.plan.steps if s.op == "conv2d"]
    assert "pack" not in conv.kernels[0].name  # no unpack or pack fused around the GELU
    body = _kernel_body(artifact, conv)
    assert "write_imagef" in body and ("erf(" in body if gelu != "tanh" else "tanh(" in body)


def _global_pool_model(op: str, size: int):
    """conv 1x1 (8 -> 64 channels: 16 packed blocks) at size x size -> a pool over the whole map, `op`
    GlobalAveragePool (a squeeze-and-excitation's squeeze) or MaxPool (a size x size window): 16 output pixels."""
    w = numpy_helper.from_array(np.random.default_rng(5).standard_normal((64, 8, 1, 1)).astype(np.float32), "w")
    pool = helper.make_node(op, ["c"], ["y"], **({"kernel_shape": [size, size]} if op == "MaxPool" else {}))
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"]), pool], "pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("op,size", [("GlobalAveragePool", 32), ("GlobalAveragePool", 7), ("MaxPool", 9)])
def test_a_long_global_mean_is_shared_by_a_work_group_per_pixel(op, size, tmp_path):
    """A global mean over 32x32 of 16 packed output pixels launches a work-group of 64 work-items per pixel (they
    sum strided slices, then add the partials in local memory, and one of them stores the pixel); so does a 9x9 max
    pool to 1x1 (81 elements a pixel: a ragged last slice; a max, and no epilogue after it); over 7x7 (49 elements,
    below MIN_EXTENT) a mean keeps one work-item per pixel. All match onnxruntime."""
    from adreno.schedules import cross_thread, occupancy
    from tests.schedules.sched_helpers import check_against_onnxruntime

    artifact = Artifact.load(check_against_onnxruntime(_global_pool_model(op, size), tmp_path / "a", "texture",
                                                       winograd="off"))
    (step,) = [s for s in artifact.plan.steps if "mean" in s.kernels[0].name or "pool" in s.kernels[0].name]
    (launch,) = step.kernels
    body = _kernel_body(artifact, step)
    assert body.count("write_imagef") == 1
    if size > 7:
        assert (launch.global_size, launch.local_size) == ([16 * cross_thread.THREADS], [cross_thread.THREADS])
        assert "__local" in body and "barrier(CLK_LOCAL_MEM_FENCE)" in body
    else:
        assert launch.global_size[0] == 16 and "__local" not in body
    ctx = context("adreno-740")
    assert cross_thread.shares(16, size * size, False, ctx) == (size > 7)
    # enough pixels to fill the device one work-item each, or a conv (`--schedules tvm`): serial
    assert not cross_thread.shares(occupancy.required_work_items(ctx.device), 1024, False, ctx)
    assert not cross_thread.shares(16, 1024, True, ctx)


# ---------------------------------------------------------------------------------------------------------------
# the register-tiled texture conv schedule (adreno/schedules/conv2d_texture.py), run on PoCL against numpy
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Conv:
    n: int
    c: int
    hw: int
    o: int
    k: int
    stride: int = 1
    groups: int = 1

    @property
    def pad(self) -> int:
        return self.k // 2

    @property
    def out(self) -> int:
        return (self.hw + 2 * self.pad - self.k) // self.stride + 1

    def workload(self):
        """The workload the texture family sees (channels counted as stored: padded to multiples of 4)."""
        from adreno.schedules import _conv

        c4, o4 = -(-self.c // 4) * 4, -(-self.o // 4) * 4
        return _conv.ConvWorkload(self.n, c4, self.hw, self.hw, o4, self.k, self.k, self.out, self.out,
                                  (self.stride,) * 2, (1, 1), (self.pad,) * 4, c4 if self.groups > 1 else 1, "float32")

    @property
    def family(self) -> str:
        """The schedule family that claims this conv on textures: 1x1 convs are GEMMs (`conv2d_1x1`)."""
        return "conv2d_1x1" if self.k == 1 and self.groups == 1 else "conv2d_texture"

    def key(self) -> str:
        from adreno.schedules import conv2d_1x1

        if self.family == "conv2d_1x1":
            return self.workload().key(conv2d_1x1.OP)
        return self.workload().key("depthwise_nchw4c" if self.groups > 1 else "conv2d_nchw4c")

    def config(self, tuned: dict | None = None) -> dict:
        """The knobs the conv is compiled with: its family's defaults under `tuned`."""
        module = importlib.import_module(f"adreno.schedules.{self.family}")
        return {**module.default_config(self.workload(), context("adreno-740", host=Host.NATIVE)), **(tuned or {})}


SHAPES = {  # ResNet-18 layers (spatial sizes reduced), 7x7 spatial, 3 and 10 channels, depthwise, batch 2
    "r18_3x3": Conv(1, 64, 14, 64, 3),
    "r18_3x3_s2": Conv(1, 64, 14, 128, 3, 2),
    "r18_1x1_s2": Conv(1, 64, 14, 128, 1, 2),
    "mbv2_1x1": Conv(1, 96, 14, 24, 1),
    "1x1_7x7_c10": Conv(1, 10, 7, 20, 1),
    "1x1_batch2": Conv(2, 16, 10, 40, 1),
    "r18_7x7_s2_c3": Conv(1, 3, 32, 64, 7, 2),
    "spatial_7x7": Conv(1, 128, 7, 128, 3),
    "c3_to_c10": Conv(1, 3, 9, 10, 3),
    "c10_to_c3_s2": Conv(1, 10, 11, 3, 3, 2),
    "dw_s1": Conv(1, 24, 13, 24, 3, 1, 24),
    "dw_s2": Conv(1, 24, 14, 24, 3, 2, 24),
    "dw_c10": Conv(1, 10, 8, 10, 3, 1, 10),
    "batch2": Conv(2, 16, 10, 32, 3),
    "batch2_dw_s2": Conv(2, 16, 10, 16, 3, 2, 16),
}


def _conv_model(case: Conv, seed: int = 0):
    """Conv + bias + ReLU (an epilogue the schedule fuses) as ONNX, with its weights."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((case.o, case.c // case.groups, case.k, case.k))
         / np.sqrt(case.c // case.groups * case.k * case.k)).astype(np.float32)
    b = rng.standard_normal(case.o).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[case.pad] * 4, strides=[case.stride] * 2,
                          group=case.groups), helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [case.n, case.c, case.hw, case.hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [case.n, case.o, case.out, case.out])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, w, b


def _numpy_conv_relu(x, w, b, case: Conv):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (case.pad,) * 2, (case.pad,) * 2))
    cig, og, s, span = case.c // case.groups, case.o // case.groups, case.stride, case.stride * case.out
    out = np.zeros((case.n, case.o, case.out, case.out))
    for g in range(case.groups):
        for i in range(case.k):
            for j in range(case.k):
                patch = xp[:, g * cig:(g + 1) * cig, i:i + span:s, j:j + span:s]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return np.maximum(out + b[None, :, None, None], 0)


def _kernel_body(artifact, step) -> str:
    source = artifact.kernel_source(step.program)
    return source[source.rindex("__kernel void"):]


def _run_conv(case: Conv, tmp_path, device, precision="fp32", config=None):
    """Compile `case` for texture memory (with `config` as a tuning record for its workload), run it on `device`;
    (artifact, output, numpy reference, the conv step)."""
    from adreno.records import Database, Record

    model, w, b = _conv_model(case)
    records = None
    if config is not None:
        records = tmp_path / "records.jsonl"
        Database(records).append([Record(case.key(), "pocl", config, seconds=[1e-3])])
    artifact = Artifact.load(compile_model(model, tmp_path / "art", CompileOptions(  # direct convs: no Winograd
        memory="texture", host="native", precision=precision, records=str(records) if records else None,
        winograd="off", defaults="rule")))  # the rule's knobs: what `Conv.config` says the kernel holds
    x = np.random.default_rng(1).standard_normal((case.n, case.c, case.hw, case.hw)).astype(np.float32)
    out = Executor(artifact, device=device).run([x])[0]
    return artifact, out, _numpy_conv_relu(x, w, b, case), next(s for s in artifact.plan.steps if s.op == "conv2d")


def _writes_per_item(case: Conv, config: dict) -> int:
    """write_imagef calls in a work-item's code: one per pixel and channel block of its register tile (a tile
    larger than the whole output is clipped at compile time; a 1x1 conv's tile is `tile_p` pixels of a row)."""
    pixels = config["tile_p"] if case.family == "conv2d_1x1" else \
        min(config["tile_y"], case.out) * min(config["tile_x"], case.out)
    return min(config["tile_cb"], -(-case.o // 4)) * pixels


@pytest.mark.parametrize("name", SHAPES)
def test_tiled_texture_conv_matches_numpy(name, tmp_path, pocl_device, monkeypatch):
    case = SHAPES[name]
    with record_claims(monkeypatch, "conv2d_1x1", "conv2d_texture") as claims:
        artifact, out, ref, conv = _run_conv(case, tmp_path, pocl_device)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))
    assert claims[case.family] == [case.key()]  # 1x1 convs are GEMMs, every other conv the 2-D tiled schedule
    assert not artifact.manifest["textures"]["fallbacks"]
    assert all(artifact.plan.tensors[a].image for a in conv.args)  # input, weight, bias and output are images
    # one float4 write_imagef per output pixel per channel block of the work-item's register tile
    assert _kernel_body(artifact, conv).count("write_imagef(") == _writes_per_item(case, case.config())


@pytest.mark.parametrize("name", ["r18_3x3_s2", "c3_to_c10", "dw_s2", "1x1_7x7_c10"])
def test_tiled_texture_conv_fp16_storage(name, tmp_path, pocl_device):
    artifact, out, ref, _ = _run_conv(SHAPES[name], tmp_path, pocl_device, precision="fp16")
    assert all(i["channel_type"] == "float16" for i in artifact.plan.images.values())
    rel = float(np.abs(out - ref).max() / np.abs(ref).max())
    assert 1e-6 < rel < 1e-2, rel  # half-precision storage (11-bit mantissa) of input, weights and output


@pytest.mark.parametrize("name,config", [
    ("r18_3x3", {"stage": 1}),
    ("r18_3x3", {"tile_cb": 4, "tile_y": 4, "tile_x": 2, "threads_cb": 2, "threads_y": 2, "threads_x": 4,
                 "unroll_k": 0}),
    ("r18_3x3_s2", {"tile_cb": 1, "tile_y": 4, "tile_x": 8, "threads_cb": 4, "threads_y": 1, "threads_x": 1,
                    "stage": 1}),  # ragged tiles: 7 rows and columns in tiles of 4 x 8
    ("c10_to_c3_s2", {"tile_cb": 2, "tile_x": 4, "threads_x": 2}),  # more channel blocks than there are
    ("dw_s1", {"tile_cb": 2, "tile_y": 1, "tile_x": 7, "threads_cb": 1, "threads_y": 7, "stage": 1}),
    ("batch2_dw_s2", {"tile_cb": 4, "tile_y": 2, "tile_x": 1, "unroll_k": 0}),
    ("mbv2_1x1", {"tile_k": 4, "tile_p": 2, "threads_p": 49, "threads_cb": 1}),  # K unrolled by 16 channels
    ("mbv2_1x1", {"tile_p": 14, "tile_cb": 2, "threads_p": 16}),  # 14 tiles over 16 work-items: ragged
    ("1x1_7x7_c10", {"tile_cb": 8, "tile_p": 1, "threads_p": 64}),  # more channel blocks than there are
    ("r18_1x1_s2", {"tile_p": 7, "tile_cb": 1, "threads_p": 7, "threads_cb": 8}),
])
def test_tiled_texture_conv_tuned_configs(name, config, tmp_path, pocl_device):
    """Non-default knobs, given the way `adreno compile --records` gives them (a record for the workload key)."""
    case = SHAPES[name]
    artifact, out, ref, conv = _run_conv(case, tmp_path, pocl_device, config=config)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))
    assert artifact.manifest["tuned_kernels"] == 1
    assert _kernel_body(artifact, conv).count("write_imagef(") == _writes_per_item(case, case.config(config))


def test_compile_applies_only_records_of_its_image_precision(tmp_path):
    """A record measured on half-float images tunes an fp16 compile, not an fp32 one."""
    from adreno.records import Database, Record

    case = SHAPES["r18_3x3_s2"]
    model, _, _ = _conv_model(case)
    records = tmp_path / "records.jsonl"
    Database(records).append([Record(case.key(), "pocl", {"tile_cb": 1}, seconds=[1e-3],
                                     extra={"precision": "fp16"})])
    tuned = {}
    for precision in ("fp32", "fp16"):
        out = compile_model(model, tmp_path / precision, CompileOptions(memory="texture", host="native",
                                                                       precision=precision, records=str(records)))
        tuned[precision] = Artifact.load(out).manifest["tuned_kernels"]
    assert tuned == {"fp32": 0, "fp16": 1}


def test_texture_family_interface():
    """The family claims packed convs only (the buffer path's NCHW functions and its tuning tasks never reach it),
    and refuses configs outside its space."""
    from adreno.compile import lower_relax
    from adreno.frontend.importer import to_relax
    from adreno.schedules import FAMILIES, conv2d_texture

    assert conv2d_texture.FAMILY in FAMILIES
    target = context("adreno-740", host=Host.NATIVE)
    model, _, _ = _conv_model(SHAPES["c3_to_c10"])
    buffer = lower_relax(to_relax(model), target, schedules=Schedules.NONE)
    assert all(conv2d_texture.FAMILY.workload_key(f) is None for f in buffer.functions.values())
    wl = SHAPES["dw_s2"].workload()
    config = conv2d_texture.default_config(wl, target)
    assert config["tile_cb"] == 1 and conv2d_texture.check_config(wl, config, target) == config
    for bad in ({**config, "tile_cb": 3}, {**config, "spin": 1}, {**config, "threads_cb": 16, "threads_x": 32},
                {**config, "tile_cb": 8, "tile_y": 4, "tile_x": 2}):
        with pytest.raises(ValueError):
            conv2d_texture.check_config(wl, bad, target)


# Split-K on images: a deep conv on a tiny map (the nvidia-h200 default splits it) with bias + residual + ReLU, and a
# ragged corner (5x5 outputs in 2x4 tiles, 3 channel blocks in tiles of 2, `stage` 1, 10 input blocks in 2 slices)
TEXTURE_SPLIT_K = [
    ("deep_7x7", dict(c=256, h=7, w=7, o=256, k=3, stride=1, pads=(1, 1, 1, 1), epilogue="bias_residual_relu"), None),
    ("ragged_s2", dict(c=40, h=9, w=9, o=12, k=3, stride=2, pads=(1, 1, 1, 1), epilogue="bn_relu"),
     {"tile_cb": 2, "tile_y": 2, "tile_x": 4, "threads_cb": 2, "threads_y": 2, "threads_x": 1, "unroll_k": 0,
      "stage": 1, "threads_k": 2, "cooperative": 0}),
]


@pytest.mark.parametrize("layer,config", [case[1:] for case in TEXTURE_SPLIT_K], ids=[c[0] for c in TEXTURE_SPLIT_K])
def test_texture_split_k_matches_onnxruntime(layer, config, tmp_path, monkeypatch):
    """Split-K (`threads_k` work-items per output, each summing a slice of the input channel blocks, then a
    cross-thread sum in local memory) on images computes the conv and its fused epilogue; None: the nvidia-h200
    default, which splits."""
    from adreno.conv_layers import Layer
    from adreno.schedules import conv2d_texture
    from tests.schedules.sched_helpers import check_against_onnxruntime, conv_model, record_claims

    case = Layer(1, **layer)
    config = config or conv2d_texture.default_config(case.workload(), context("nvidia-h200"))
    assert config["threads_k"] > 1
    monkeypatch.setattr(conv2d_texture.FAMILY, "default_config", lambda _wl, _ctx: dict(config))
    with record_claims(monkeypatch, "conv2d_texture") as claims:
        artifact = check_against_onnxruntime(conv_model(case), tmp_path / "a", "texture", winograd="off",
                                             defaults="rule")
    assert len(claims["conv2d_texture"]) == 1
    plan = Artifact.load(artifact).plan
    conv = next(s for s in plan.steps if s.op == "conv2d")
    assert all(plan.tensors[a].image for a in conv.args)  # still on images
    body = _kernel_body(Artifact.load(artifact), conv)
    assert "red_buf" in body and "__local" in body  # the partial sums meet in local memory


def test_texture_split_k_defaults_and_refusals():
    """Only a device that no unsplit config fills gets a split default; `check_config` refuses splits that do not
    hold, each with its reason."""
    from adreno.schedules import conv2d_texture, occupancy

    deep = Conv(1, 256, 7, 256, 3).workload()
    for name in ("pocl-cpu", "adreno-740", "adreno-640"):
        assert conv2d_texture.default_config(deep, context(name))["threads_k"] == 1, name
    h200, device = context("nvidia-h200"), get_device("nvidia-h200")
    split = conv2d_texture.default_config(deep, h200)
    assert occupancy.fills(device, conv2d_texture.FAMILY.launch(deep, split))
    assert not occupancy.fills(device, conv2d_texture.FAMILY.launch(deep, {**split, "threads_k": 1}))
    three_blocks = Conv(1, 12, 7, 16, 3).workload()
    for wl, config, reason in (
            (three_blocks, {**split, "threads_k": 2}, "does not divide the 3 input channel blocks"),
            (SHAPES["dw_s1"].workload(), {**split, "threads_k": 2}, "depthwise"),
            (deep, {**split, "cooperative": 1}, "not with split-K"),
            (deep, {**split, "threads_cb": 16, "threads_y": 4, "threads_x": 16}, "exceeds")):
        with pytest.raises(ValueError, match=reason):
            conv2d_texture.check_config(wl, config, h200)


def test_1x1_family_interface():
    """The GEMM family claims packed 1x1 convs without padding only, and refuses tiles that straddle rows."""
    from adreno.schedules import FAMILIES, conv2d_1x1, conv2d_texture

    assert FAMILIES.index(conv2d_1x1.FAMILY) < FAMILIES.index(conv2d_texture.FAMILY)  # it claims 1x1 convs first
    target = context("adreno-740", host=Host.NATIVE)
    for name, claimed in (("mbv2_1x1", True), ("r18_1x1_s2", True), ("r18_3x3", False), ("dw_s1", False)):
        model, _, _ = _conv_model(SHAPES[name])
        packed = lower_relax(to_relax(model), target, schedules=Schedules.NONE, memory=Memory.TEXTURE)
        keys = {conv2d_1x1.FAMILY.workload_key(f) for f in packed.functions.values()} - {None}
        assert keys == ({SHAPES[name].key()} if claimed else set())
        assert any(conv2d_texture.FAMILY.workload_key(f) for f in packed.functions.values())  # its fallback
    wl = SHAPES["mbv2_1x1"].workload()
    config = conv2d_1x1.default_config(wl, target)
    assert conv2d_1x1.check_config(wl, config, target) == config
    for bad in ({**config, "tile_p": 4}, {**config, "tile_k": 3},
                {**config, "threads_p": 64, "threads_cb": 8}, {**config, "tile_p": 14, "tile_cb": 4}):
        with pytest.raises(ValueError):
            conv2d_1x1.check_config(wl, bad, target)


# PP-OCRv4 rec's 1x1 conv 32->64 on a 24x160 map: work-groups of 32 pixels (tile_p 2 x threads_p 16, the
# adreno-740 model pick) divide its rows
OCR_1X1 = dict(c=32, h=24, w=160, o=64)
ROW_SPLITTING = [
    {"tile_cb": 2, "tile_p": 2, "tile_k": 1, "threads_cb": 4, "threads_p": 16, "threads_k": 1, "cooperative": 0},
    {"tile_cb": 2, "tile_p": 4, "tile_k": 4, "threads_cb": 2, "threads_p": 4, "threads_k": 1, "cooperative": 1},
    {"tile_cb": 2, "tile_p": 8, "tile_k": 1, "threads_cb": 1, "threads_p": 4, "threads_k": 2, "cooperative": 0},
]


def _ocr_1x1(tmp_path, config: dict, epilogue: str = "bn_relu"):
    """The OCR_1X1 conv as a one-layer model compiled for PoCL with `config` as its tuning record: (artifact dir,
    model path)."""
    import onnx

    from adreno.conv_layers import Layer, layer_model, layer_params
    from adreno.records import Database, Record
    from adreno.schedules import conv2d_1x1

    layer = Layer(1, OCR_1X1["c"], OCR_1X1["h"], OCR_1X1["w"], OCR_1X1["o"], 1, epilogue=epilogue)
    onnx.save(layer_model(layer, layer_params(layer)), tmp_path / "m.onnx")
    Database(tmp_path / "r.jsonl").append([Record(layer.workload().key(conv2d_1x1.OP), "pocl", config,
                                                  seconds=[1e-3])])
    compile_model(str(tmp_path / "m.onnx"), tmp_path / "art", CompileOptions(
        memory="texture", host="native", target="pocl-cpu", records=str(tmp_path / "r.jsonl"), winograd="off"))
    return tmp_path / "art", tmp_path / "m.onnx"


@pytest.mark.parametrize("config,epilogue", [(ROW_SPLITTING[0], "bn_relu"), (ROW_SPLITTING[0], "none"),
                                             (ROW_SPLITTING[1], "bn_relu"), (ROW_SPLITTING[2], "bn_relu")],
                         ids=["tile_p2", "tile_p2_no_epilogue", "staged", "split_k"])
def test_1x1_gemm_private_arrays_stay_register_tiles_when_work_groups_split_rows(config, epilogue, tmp_path):
    """Each private array of the GEMM kernel is a register tile (accumulators: tile_p x tile_cb float4, weights:
    tile_k x 4 x tile_cb), not the whole map: TVM compacted the accumulators of the fused-pixel split to 1.5M floats
    per work-item where the work-group's pixels divide a row (PoCL segfaults on such a stack)."""
    artifact, _ = _ocr_1x1(tmp_path, config, epilogue)
    manifest = Artifact.load(artifact).manifest
    assert (manifest["tuned_kernels"], manifest["refused"]) == (1, [])  # the GEMM family scheduled it
    source = "".join(kernel_sources(artifact, "*conv2d*").values())
    arrays = re.findall(r"\n\s*(float4?) (\w+)\[(\d+)\];", source)
    assert any(name.startswith("conv2d_NCHW4c") for _, name, _ in arrays)
    bound = 4 * max(config["tile_p"] * config["tile_cb"], config["tile_k"] * 4 * config["tile_cb"])  # floats
    assert {name: int(n) * (4 if dtype == "float4" else 1) for dtype, name, n in arrays
            if int(n) * (4 if dtype == "float4" else 1) > bound} == {}


def test_1x1_gemm_whose_work_groups_split_rows_runs_on_pocl(tmp_path):
    """The config that made PoCL segfault (`--defaults model` for adreno-740 on PP-OCRv4 rec) runs and matches
    onnxruntime; in a subprocess, since a regression crashes it."""
    import subprocess
    import sys

    artifact, model = _ocr_1x1(tmp_path, ROW_SPLITTING[0])
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "run", str(artifact), "--check", "--reference",
                           str(model), "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "vs onnxruntime" in proc.stdout and ": OK" in proc.stdout


def test_texture_records_from_before_split_k_stay_unsplit():
    """A tuned record without `threads_k` (measured before it existed) schedules the unsplit kernel, also where the
    default splits (the H200's 256@7x7 conv): `OLDER_RECORDS`."""
    from adreno.conv_layers import Layer
    from adreno.schedules import conv2d_texture
    from tests.schedules.sched_helpers import conv_model, primitive_function

    layer = Layer(1, 256, 7, 7, 256, 3, 1, (1, 1, 1, 1))
    func, _ = primitive_function(conv_model(layer), "fused_conv2d", memory=Memory.TEXTURE)
    h200 = context("nvidia-h200", host=Host.NATIVE)
    default = conv2d_texture.FAMILY.default_config(conv2d_texture.FAMILY.workload(func), h200)
    assert default["threads_k"] > 1
    old = {k: v for k, v in default.items() if k not in ("threads_k", "cooperative")}
    key = conv2d_texture.FAMILY.workload_key(func)
    assert "_rf" in conv2d_texture.FAMILY.apply(func, h200).mod.script()  # the default's partial sums (rfactor)
    assert "_rf" not in conv2d_texture.FAMILY.apply(func, h200.candidate({key: old})).mod.script()
