"""The texture convs staged in local memory (knob `cooperative`, `adreno/schedules/staging.py`): outputs on PoCL
against onnxruntime (images really used: 8-16 channels, ragged tiles, stride 2, padding, a 3-channel 7x7 stem whose
images pad to 4 channels), the kernels really staged (`__local` tiles, barriers), the configs `check_config` refuses,
and the defaults (GPU targets stage where the tile fits, a CPU never). Oclgrind's checks and read counts of the
staged kernels are in test_oclgrind.py."""

from __future__ import annotations

import pytest

from adreno.options import Memory
from adreno.schedules import conv2d_1x1, conv2d_texture
from adreno.workload import ConvWorkload
from tests.schedules.sched_helpers import ConvCase, conv_model, model_inputs, record_claims, reference, assert_close
from tests.schedules.sched_helpers import context
from adreno.options import Host
from tests.kernel_files import kernel_sources

# (layer, family, knobs): each config a work-group of several work-items whose tiles overhang the output
CASES = [
    (ConvCase(1, 8, 9, 9, 16, 3, 1, (1, 1, 1, 1)), "conv2d_texture",  # 9x9 in 4x8 group tiles, bias + ReLU
     {"tile_cb": 2, "tile_y": 2, "tile_x": 4, "threads_cb": 1, "threads_y": 2, "threads_x": 2, "unroll_k": 0,
      "stage": 0}),
    (ConvCase(1, 8, 11, 13, 12, 3, 2, (1, 1, 1, 1), epilogue="bias_residual_relu"), "conv2d_texture",  # stride 2
     {"tile_cb": 1, "tile_y": 2, "tile_x": 2, "threads_cb": 2, "threads_y": 2, "threads_x": 4, "unroll_k": 1,
      "stage": 1}),
    (ConvCase(1, 3, 15, 15, 8, 7, 2, (3, 3, 3, 3)), "conv2d_texture",  # 3 channels: one padded block
     {"tile_cb": 2, "tile_y": 1, "tile_x": 4, "threads_cb": 1, "threads_y": 4, "threads_x": 2, "unroll_k": 0,
      "stage": 0}),
    (ConvCase(1, 8, 10, 10, 8, 3, 1, (0, 2, 1, 0)), "conv2d_texture",  # asymmetric padding, 7-wide tiles
     {"tile_cb": 1, "tile_y": 4, "tile_x": 7, "threads_cb": 2, "threads_y": 1, "threads_x": 2, "unroll_k": 1,
      "stage": 1}),
    (ConvCase(1, 16, 13, 13, 16, 1, 2, epilogue="bn"), "conv2d_1x1",  # stride 2: groups of two 7-pixel rows
     {"tile_cb": 2, "tile_p": 1, "tile_k": 1, "threads_cb": 2, "threads_p": 14, "threads_k": 1}),
    (ConvCase(1, 16, 7, 7, 24, 1, 1, epilogue="bn_clip"), "conv2d_1x1",  # 6 channel blocks in groups of 4
     {"tile_cb": 2, "tile_p": 7, "tile_k": 2, "threads_cb": 2, "threads_p": 1, "threads_k": 1}),
]


@pytest.mark.parametrize("case,family,knobs", CASES, ids=lambda v: getattr(v, "__class__", type(v)).__name__)
def test_staged_convs_match_onnxruntime(case, family, knobs, tmp_path, monkeypatch):
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions
    from adreno.schedules import family as schedule_family

    staged = {**knobs, "cooperative": 1}
    fam = schedule_family(family)
    apply = fam.apply
    monkeypatch.setattr(fam, "apply", lambda func, ctx: apply(
        func, ctx.candidate({fam.workload_key(func): staged}) if fam.workload_key(func) else ctx))
    with record_claims(monkeypatch, family) as claims:
        model = conv_model(case)
        artifact = compile_model(model, tmp_path / "a", CompileOptions(target="adreno-740", memory="texture",
                                                                       winograd="off", host="native"))
    assert len(claims[family]) == 1, claims  # the staged schedule took the conv (no fallback)
    (source,) = kernel_sources(tmp_path / "a", "*conv2d*").values()
    assert "__local float4" in source and "barrier(CLK_LOCAL_MEM_FENCE)" in source and "read_imagef" in source
    inputs = model_inputs(model)
    ex = Executor(artifact)
    out = ex.run([inputs[n] for n in ex.artifact.plan.inputs])
    assert_close(out[0], reference(model, inputs)[0])


@pytest.mark.parametrize("winograd,knobs", [
    ("f2", {"tile_o": 1, "tile_p": 2, "threads_o": 2, "threads_p": 4, "tile_k": 1}),  # 25 tiles: ragged groups
    ("f4", {"tile_o": 2, "tile_p": 4, "threads_o": 1, "threads_p": 4, "tile_k": 2}),  # 2 blocks per step
])
def test_staged_winograd_gemm_matches_onnxruntime(winograd, knobs, tmp_path, monkeypatch):
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions
    from adreno.schedules import conv2d_winograd

    fam, staged = conv2d_winograd.FAMILY, {**knobs, "cooperative": 1}
    apply = fam.apply

    def gemm_staged(func, ctx):
        key = fam.workload_key(func)
        return apply(func, ctx.candidate({key: staged}) if key and "gemm" in key else ctx)

    monkeypatch.setattr(fam, "apply", gemm_staged)
    model = conv_model(ConvCase(1, 8, 9, 9, 8, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu"))
    artifact = compile_model(model, tmp_path / "a", CompileOptions(target="adreno-740", memory="texture",
                                                                   winograd=winograd, host="native"))
    (source,) = kernel_sources(tmp_path / "a", "*gemm*").values()
    assert "__local float4" in source and "barrier(CLK_LOCAL_MEM_FENCE)" in source
    inputs = model_inputs(model)
    ex = Executor(artifact)
    assert_close(ex.run([inputs[n] for n in ex.artifact.plan.inputs])[0], reference(model, inputs)[0], 1e-3)


def test_winograd_stages_both_gemms():
    """The buffer GEMM (a flat vectorised loop) and the packed one (a pixel per read) both accept the knob."""
    from adreno.schedules import conv2d_winograd

    gemm = {"tile_o": 2, "tile_p": 4, "threads_o": 4, "threads_p": 16, "tile_k": 4, "cooperative": 1}
    conv2d_winograd.check_config(("winograd_batch_gemm", [6, 6, 64, 196, 64]), gemm, ADRENO)
    packed = ("winograd_batch_gemm_nchw4c", [6, 6, 16, 196, 4, 64])
    conv2d_winograd.check_config(packed, {**gemm, "tile_k": 1}, ADRENO)
    assert conv2d_winograd.default_config(packed, ADRENO)["cooperative"] == 1


def _wl(c, hw, o, k, s, groups=1):
    pad = k // 2
    out = (hw + 2 * pad - k) // s + 1
    return ConvWorkload(1, c, hw, hw, o, k, k, out, out, (s, s), (1, 1), (pad,) * 4, groups, "float32")


ADRENO = context("adreno-740", host=Host.NATIVE)
TEXTURE = {"tile_cb": 2, "tile_y": 2, "tile_x": 4, "threads_cb": 1, "threads_y": 4, "threads_x": 14, "unroll_k": 1,
           "stage": 0, "cooperative": 1}


@pytest.mark.parametrize("wl,config,reason", [
    (_wl(64, 56, 64, 3, 1, groups=64), {}, "groups-1"),  # depthwise shares no channels
    (_wl(4, 224, 64, 7, 2), {}, "local memory"),  # the stem's 7x7/s2 patch of a 4x14 group: 46 KB > 32 KB
    (_wl(64, 56, 64, 3, 1), {"threads_y": 1, "threads_x": 1}, "at least 2 work-items"),
])
def test_texture_refuses_what_staging_cannot_do(wl, config, reason):
    with pytest.raises(ValueError, match=reason):
        conv2d_texture.check_config(wl, {**TEXTURE, **config}, ADRENO)
    conv2d_texture.check_config(wl, {**TEXTURE, **config, "cooperative": 0}, ADRENO)


GEMM = {"tile_cb": 1, "tile_p": 7, "tile_k": 1, "threads_cb": 4, "threads_p": 16, "threads_k": 1, "cooperative": 1}


@pytest.mark.parametrize("config,reason", [
    ({"threads_p": 2, "threads_cb": 1, "threads_k": 4}, "split-K"),
    ({"tile_p": 4, "threads_p": 2}, "whole output rows"),  # 8 pixels of a 28-pixel row start mid-row
    ({"tile_k": 4, "threads_p": 64}, "local memory"),  # 4 blocks x a 31 x 55 box under 16 rows: 113 KB
])
def test_gemm_refuses_what_staging_cannot_do(config, reason):
    wl = _wl(64, 56, 128, 1, 2)
    conv2d_1x1.check_config(wl, GEMM, ADRENO)  # 112 pixels: 4 whole rows
    with pytest.raises(ValueError, match=reason):
        conv2d_1x1.check_config(wl, {**GEMM, **config}, ADRENO)


def test_gpu_defaults_stage_where_it_halves_the_reads_and_a_cpu_keeps_its_schedule():
    """adreno-740 and the H200 stage every ResNet-18 3x3 conv whose tile fits their local memory (the 7x7 stem's
    patch does not fit 32 KB) and the 1x1 GEMMs whose staged box at least halves the reads (not 64->128 at 56x56,
    whose stride-2 box is mostly skipped pixels: 704 reads unstaged, 401 staged); pocl-cpu never stages. The 3x3
    convs too small to fill the H200 unsplit split K there instead, which does not stage."""
    h200 = context("nvidia-h200", host=Host.NATIVE)
    cpu = context("pocl-cpu", host=Host.NATIVE)
    for wl, h200_splits in ((_wl(64, 56, 64, 3, 1), False), (_wl(128, 28, 256, 3, 2), True),
                            (_wl(512, 7, 512, 3, 1), True)):
        assert conv2d_texture.default_config(wl, ADRENO)["cooperative"] == 1, wl
        split = conv2d_texture.default_config(wl, h200)  # too small for the H200 unsplit: split-K, which never stages
        assert (split["threads_k"] > 1, split["cooperative"]) == (h200_splits, int(not h200_splits)), wl
        assert conv2d_texture.default_config(wl, cpu)["cooperative"] == 0
    assert conv2d_texture.default_config(_wl(4, 224, 64, 7, 2), ADRENO)["cooperative"] == 0
    for wl, staged in ((_wl(64, 56, 128, 1, 2), 0), (_wl(128, 28, 256, 1, 2), 1), (_wl(256, 14, 512, 1, 2), 1)):
        assert conv2d_1x1.default_config(wl, ADRENO)["cooperative"] == staged, wl
        assert conv2d_1x1.default_config(wl, cpu)["cooperative"] == 0


def test_records_from_before_the_knob_stay_unstaged():
    """A tuned record without `cooperative` (measured before it existed) schedules the unstaged kernel, also where
    the GPU default stages; a layout record of a direct texture conv without it is still in the layout space."""
    from adreno.records import layout_key
    from adreno.schedules import conv2d_winograd
    from tests.schedules.sched_helpers import primitive_function

    layer = ConvCase(1, 16, 28, 28, 16, 3, 1, (1, 1, 1, 1))
    func, target = primitive_function(conv_model(layer), "fused_conv2d", memory=Memory.TEXTURE)
    assert conv2d_texture.default_config(conv2d_texture.FAMILY.workload(func), target)["cooperative"] == 1
    old = dict(CASES[0][2])  # tiles and work-group, no `cooperative`
    key = conv2d_texture.FAMILY.workload_key(func)
    assert '"shared"' not in conv2d_texture.FAMILY.apply(func, target.candidate({key: old})).mod.script()
    staged = conv2d_texture.FAMILY.apply(func, target.candidate({key: {**old, "cooperative": 1}}))
    assert '"shared"' in staged.mod.script()
    texture_key = layout_key(CASES[0][0].workload(), Memory.TEXTURE)
    assert conv2d_winograd.layout_config_in_space(texture_key, {"tile": 0, **old})


def test_the_1x1_gemm_refuses_work_items_beyond_a_one_pixel_map():
    """A squeeze-and-excitation 1x1 conv on a 1x1 map with 2+ work-items per pixel wrote wrong outputs (TVM drops
    the store guard of the one-pixel loop): the family refuses such a config, and its default is one work-item."""
    from adreno.schedules import conv2d_1x1

    one = _wl(32, 1, 8, 1, 1)
    default = conv2d_1x1.default_config(one, ADRENO)
    assert default["threads_p"] == 1
    with pytest.raises(ValueError, match="one-pixel map"):
        conv2d_1x1.check_config(one, {**default, "threads_p": 2}, ADRENO)
    conv2d_1x1.check_config(_wl(32, 2, 8, 1, 1), {**default, "threads_p": 4}, ADRENO)  # 4 pixels: guarded
