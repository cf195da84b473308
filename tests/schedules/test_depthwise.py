"""depthwise: MobileNetV2's 3x3 depthwise layers (stride 1 and 2, cut down spatially) and odd cases on PoCL against
onnxruntime, each proven to be scheduled by our rule."""

from __future__ import annotations

import pytest

from adreno.schedules import _conv, depthwise
from tests.schedules.sched_helpers import (ConvCase, assert_close, checked_claims, compile_and_run, conv_model,
                                           model_inputs, record_claims, reference)
from tests.schedules.sched_helpers import context
from tests.kernel_files import kernel_sources

P1 = (1, 1, 1, 1)
CASES = [
    ConvCase(1, 32, 28, 28, 32, 3, 1, P1, groups=32, epilogue="bn_clip"),     # MobileNetV2 block 1 (112 -> 28)
    ConvCase(1, 96, 28, 28, 96, 3, 2, P1, groups=96, epilogue="bn_clip"),     # stride 2
    ConvCase(1, 144, 14, 14, 144, 3, 2, P1, groups=144, epilogue="bn_clip"),
    ConvCase(1, 576, 14, 14, 576, 3, 1, P1, groups=576, epilogue="bn_clip"),
    ConvCase(1, 960, 7, 7, 960, 3, 1, P1, groups=960, epilogue="bn_clip"),
    ConvCase(2, 16, 9, 9, 16, 3, 1, P1, groups=16, epilogue="bn_relu"),       # batch 2, odd spatial
    ConvCase(1, 10, 11, 11, 10, 5, 2, (2, 2, 2, 2), groups=10, epilogue="bias"),  # 5x5, stride 2, pad 2
    ConvCase(1, 8, 10, 10, 16, 3, 1, (0, 0, 0, 0), groups=8, epilogue="none"),  # channel multiplier 2, pad 0
]


@pytest.mark.parametrize("case", CASES, ids=ConvCase.id)
def test_depthwise_matches_onnxruntime_and_is_ours(case, tmp_path, monkeypatch):
    artifact, claims = checked_claims(conv_model(case), tmp_path / "a", monkeypatch, "conv2d_direct", "depthwise")
    assert claims["conv2d_direct"] == []
    assert len(claims["depthwise"]) == 1 and claims["depthwise"][0].startswith(f"depthwise_conv2d|n{case.n}c{case.c}")
    assert not any("red_buf" in s for s in kernel_sources(artifact, "*conv2d*").values())


def test_grouped_non_depthwise_conv_is_conv2d_direct(tmp_path, monkeypatch):
    """groups=2 with 4 channels per group is not depthwise: conv2d_direct claims it (dlight's cross-thread reduction
    fails to lower some grouped convs) and it runs correctly."""
    case = ConvCase(1, 8, 8, 8, 8, 3, 1, P1, groups=2, epilogue="bias")
    model = conv_model(case)
    inputs = model_inputs(model)
    with record_claims(monkeypatch, "conv2d_direct", "depthwise") as claims:
        _, outputs = compile_and_run(model, tmp_path / "a", inputs)
    assert len(claims["conv2d_direct"]) == 1 and "|g2|" in claims["conv2d_direct"][0] and not claims["depthwise"]
    assert_close(outputs[0], reference(model, inputs)[0])


def test_depthwise_defaults_are_valid():
    target = context("adreno-740")
    for case in CASES:
        oh, ow = case.out_hw
        wl = _conv.ConvWorkload(case.n, case.c, case.h, case.w, case.o, case.k, case.k, oh, ow, (case.stride,) * 2,
                                (1, 1), case.pads, case.groups, "float32")
        assert wl.is_depthwise
        cfg = depthwise.default_config(wl, target)
        assert set(cfg) == set(depthwise.KNOBS)
        _conv.validate(cfg, depthwise.KNOBS, target)
