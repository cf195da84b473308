"""conv2d_direct: correctness on PoCL against onnxruntime over a table of shapes and epilogues, proof that our rule
(not TVM's fallback) scheduled each conv, and the knob/config interface a tuner relies on."""

from __future__ import annotations

import pytest

from adreno.schedules import _conv, conv2d_direct
from tests.schedules.sched_helpers import (ConvCase, assert_close, checked_claims, compile_and_run, conv_model,
                                           model_inputs, record_claims, reference)
from tests.schedules.sched_helpers import context
from tests.kernel_files import kernel_sources

CASES = [
    # ResNet-18 layers, spatially cut down
    ConvCase(1, 64, 14, 14, 64, 3, 1, (1, 1, 1, 1)),                                # stage-1 3x3 + BN + ReLU
    ConvCase(1, 64, 28, 28, 128, 3, 2, (1, 1, 1, 1)),                               # 3x3 stride 2
    ConvCase(1, 64, 28, 28, 128, 1, 2, epilogue="bn"),                              # 1x1 stride-2 shortcut
    ConvCase(1, 3, 56, 56, 64, 7, 2, (3, 3, 3, 3)),                                 # 7x7 stem
    ConvCase(1, 512, 7, 7, 512, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu"),  # residual add fused
    # MobileNetV2-like: 1x1 expand/project with ReLU6, 3x3 stride-2 stem
    ConvCase(1, 32, 14, 14, 96, 1, epilogue="bn_clip"),
    ConvCase(1, 320, 7, 7, 1280, 1, epilogue="bn_clip"),
    ConvCase(1, 3, 15, 15, 32, 3, 2, (1, 1, 1, 1), epilogue="bn_clip"),
    # odd sizes, paddings, batch, dilation, no epilogue
    ConvCase(1, 3, 7, 7, 10, 3, epilogue="bias"),                                   # padding 0, 3 -> 10 channels
    ConvCase(1, 10, 9, 11, 3, 5, 1, (2, 2, 2, 2), epilogue="none"),                 # 5x5 pad 2, non-square
    ConvCase(2, 16, 14, 14, 32, 3, 1, (1, 1, 1, 1)),                                # batch 2
    ConvCase(1, 16, 14, 14, 16, 3, 1, (2, 2, 2, 2), dilation=2, epilogue="bias"),   # dilation 2
    ConvCase(1, 8, 14, 14, 24, 3, 2, (0, 0, 1, 1), epilogue="bn"),                  # asymmetric (SAME_UPPER) padding
    ConvCase(1, 7, 13, 13, 5, 1, epilogue="none"),                                  # primes everywhere
]


@pytest.mark.parametrize("case", CASES, ids=ConvCase.id)
def test_conv_matches_onnxruntime_and_is_ours(case, tmp_path, monkeypatch):
    artifact, claims = checked_claims(conv_model(case), tmp_path / "a", monkeypatch, "conv2d_direct")
    assert len(claims["conv2d_direct"]) == 1, "conv2d_direct did not schedule the conv (fell back to TVM)"
    key = claims["conv2d_direct"][0]
    assert key.startswith("conv2d_direct|") and f"k{case.k}x{case.k}" in key and f"s{case.stride}x{case.stride}" in key
    sources = list(kernel_sources(artifact, "*conv2d*").values())
    # a cross-thread reduction only where the default splits K (an 8->24 conv on 7x7 outputs fills an Adreno 740
    # only split), never TVM's default one
    split = conv2d_direct.default_config(case.workload(), context("adreno-740"))["threads_k"] > 1
    assert sources and any("red_buf" in s for s in sources) == split


def test_knob_table_and_default_config_are_valid():

    target = context("adreno-740")
    assert set(conv2d_direct.KNOBS) >= set(_conv.SCHEDULE_KNOBS)
    for name, choices in conv2d_direct.KNOBS.items():
        assert choices and len(set(choices)) == len(choices), name
    for case in CASES:
        oh, ow = case.out_hw
        wl = _conv.ConvWorkload(case.n, case.c, case.h, case.w, case.o, case.k, case.k, oh, ow, (case.stride,) * 2,
                                (case.dilation,) * 2, case.pads, case.groups, "float32")
        cfg = conv2d_direct.default_config(wl, target)
        assert set(cfg) == set(conv2d_direct.KNOBS)
        _conv.validate(cfg, conv2d_direct.KNOBS, target)


def test_workload_key_and_tuned_config_are_applied():
    """workload_key names the conv function; a config keyed by it changes the schedule (here the workgroup)."""
    import tvm
    from tvm.relax.backend.adreno import pipeline

    from adreno.frontend.importer import to_relax

    case = ConvCase(1, 16, 14, 14, 32, 3, 1, (1, 1, 1, 1))
    target = context("adreno-740")
    with target.target:
        passes = pipeline.library_dispatch_passes(target.target) + pipeline.legalize_passes(target.target)
        mod = tvm.transform.Sequential(passes[:-2])(to_relax(conv_model(case)))
    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    conv_name = next(n for n in funcs if "conv2d" in n)
    key = conv2d_direct.FAMILY.workload_key(funcs[conv_name])
    assert key == "conv2d_direct|n1c16h14w14|o32k3x3|s1x1|p1x1x1x1|d1x1|g1|float32"
    assert all(conv2d_direct.FAMILY.workload_key(f) is None for n, f in funcs.items() if n != conv_name)

    default = conv2d_direct.FAMILY.rule(target).apply(funcs[conv_name], target.target, False)
    tuned_cfg = {"tile_f": 2, "tile_y": 1, "tile_x": 7, "threads_f": 4, "threads_y": 2, "threads_x": 2, "tile_rc": 2,
                 "unroll_k": 0, "stage": 1}
    tuned = conv2d_direct.FAMILY.rule(target.candidate({key: tuned_cfg})).apply(funcs[conv_name], target.target,
                                                                                 False)
    assert default is not None and tuned is not None
    assert 'T.thread_binding(T.int64(2), thread="threadIdx.x")' in tuned.mod["main"].script()
    assert tuned.mod["main"].script() != default.mod["main"].script()
    with pytest.raises(ValueError):
        conv2d_direct.FAMILY.rule(target.candidate({key: {**tuned_cfg, "tile_f": 3}})).apply(funcs[conv_name],
                                                                                        target.target, False)


def test_knob_combinations_stay_correct(tmp_path, monkeypatch):
    """A few non-default corners of the knob space (ragged tiles, stage 1, rc split, no unroll) compute the same."""
    case = ConvCase(1, 12, 10, 10, 20, 3, 1, (1, 1, 1, 1), epilogue="bn_relu")
    model = conv_model(case)
    inputs = model_inputs(model)
    ref = reference(model, inputs)[0]
    corners = [
        {"tile_f": 8, "tile_y": 4, "tile_x": 8, "threads_f": 2, "threads_y": 2, "threads_x": 2, "tile_rc": 8,
         "unroll_k": 0, "stage": 1},
        {"tile_f": 1, "tile_y": 1, "tile_x": 1, "threads_f": 16, "threads_y": 1, "threads_x": 16, "tile_rc": 1,
         "unroll_k": 1, "stage": 0},
    ]
    for i, cfg in enumerate(corners):
        monkeypatch.setattr(conv2d_direct.FAMILY, "default_config", lambda _wl, _ctx, cfg=cfg: dict(cfg))
        with record_claims(monkeypatch, "conv2d_direct") as claims:
            _, outputs = compile_and_run(model, tmp_path / f"a{i}", inputs)
        assert claims["conv2d_direct"], cfg
        assert_close(outputs[0], ref)


# Deep convs on tiny maps, too small to fill an H200 unsplit (its defaults split them), and a ragged corner: tiles
# that overhang the 9x9 map, `stage` 1, tile_rc 4 inside each of the two reduction slices
SPLIT_K = [
    (ConvCase(1, 256, 7, 7, 256, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu"), None),
    (ConvCase(1, 960, 7, 7, 160, 1, epilogue="bias_residual_relu"), None),
    (ConvCase(1, 24, 9, 9, 20, 3, 1, (1, 1, 1, 1), epilogue="bn_relu"),
     {"tile_f": 4, "tile_y": 2, "tile_x": 4, "threads_f": 2, "threads_y": 2, "threads_x": 2, "tile_rc": 4,
      "unroll_k": 0, "stage": 1, "threads_k": 2, "cooperative": 0}),
]


@pytest.mark.parametrize("case,config", SPLIT_K, ids=[c.id() for c, _ in SPLIT_K])
def test_split_k_matches_onnxruntime(case, config, tmp_path, monkeypatch):
    """Split-K (`threads_k`: partial sums of a slice of the input channels per work-item, then a cross-thread sum in
    local memory) computes the conv and its fused epilogue; None: the nvidia-h200 default, which splits."""
    config = config or conv2d_direct.default_config(case.workload(), context("nvidia-h200"))
    assert config["threads_k"] > 1
    monkeypatch.setattr(conv2d_direct.FAMILY, "default_config", lambda _wl, _ctx: dict(config))
    artifact, claims = checked_claims(conv_model(case), tmp_path / "a", monkeypatch, "conv2d_direct")
    assert len(claims["conv2d_direct"]) == 1
    source = next(iter(kernel_sources(artifact, "*conv2d*").values()))
    assert "red_buf" in source and "__local" in source  # the partial sums meet in local memory


def test_split_k_defaults_and_refusals():
    """Only a device that no unsplit config fills gets a split default; `check_config` refuses splits that do not
    hold, each with its reason."""
    from adreno.schedules import occupancy
    from adreno.targets.devices import get_device

    deep = ConvCase(1, 256, 7, 7, 256, 3, 1, (1, 1, 1, 1)).workload()
    for name in ("pocl-cpu", "adreno-740", "adreno-640"):
        assert conv2d_direct.default_config(deep, context(name))["threads_k"] == 1, name
    h200 = context("nvidia-h200")
    split = conv2d_direct.default_config(deep, h200)
    unsplit = {**split, "threads_k": 1}
    assert not occupancy.fills(get_device("nvidia-h200"), conv2d_direct.FAMILY.launch(deep, unsplit))
    assert occupancy.fills(get_device("nvidia-h200"), conv2d_direct.FAMILY.launch(deep, split))
    ragged = ConvCase(1, 24, 9, 9, 20, 3, 1, (1, 1, 1, 1)).workload()
    grouped = ConvCase(1, 32, 7, 7, 32, 3, 1, (1, 1, 1, 1), groups=2).workload()
    one_channel = ConvCase(1, 1, 7, 7, 32, 3, 1, (1, 1, 1, 1)).workload()
    base = {**unsplit, "tile_rc": 4}
    for wl, config, reason in (
            (ragged, {**base, "threads_k": 4}, "does not divide the 24 input channels"),  # 4 x 4 channels
            (one_channel, {**base, "tile_rc": 1, "threads_k": 2}, "does not divide the 1 input channels"),
            (deep, {**base, "threads_k": 2, "cooperative": 1}, "not with split-K"),
            (grouped, {**base, "tile_rc": 1, "threads_k": 2}, "groups-1 convs only"),
            (deep, {**base, "threads_f": 16, "threads_y": 4, "threads_x": 16, "threads_k": 2}, "exceeds")):
        with pytest.raises(ValueError, match=reason):
            conv2d_direct.FAMILY.check_config(wl, config, h200)
    assert conv2d_direct.FAMILY.check_config(deep, {**base, "threads_k": 8}, h200)["threads_k"] == 8
