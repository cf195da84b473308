"""Cooperative staging (`cooperative` 1, `adreno.schedules.staging`) on PoCL: the staged direct conv (3x3 with
ragged tiles, stride 2, a 1x1 GEMM) and the staged buffer Winograd GEMM match onnxruntime (images:
test_cooperative.py); configs that cannot stage are refused before building; the defaults stage on GPU targets only
where it pays. (Oclgrind's checks of races, bounds and global loads: tests/schedules/test_oclgrind.py.)"""

from __future__ import annotations

import pytest

from adreno.schedules import conv2d_1x1, conv2d_direct, conv2d_winograd
from adreno.workload import ConvWorkload
from tests.schedules.sched_helpers import check_against_onnxruntime, context, conv_model, ConvCase, record_claims
from tests.kernel_files import kernel_sources

# (family, memory, conv, knobs replacing the defaults)
STAGED = [
    ("conv2d_direct", "buffer", ConvCase(1, 6, 10, 10, 12, 3, 1, (1, 1, 1, 1), epilogue="bn_relu"),  # ragged tiles,
     {"tile_f": 2, "tile_y": 2, "tile_x": 4, "threads_f": 2, "threads_y": 2, "threads_x": 2, "tile_rc": 4}),  # rc 4/6
    ("conv2d_direct", "buffer", ConvCase(1, 5, 13, 13, 8, 3, 2, (1, 1, 1, 1), epilogue="bias"),  # stride 2, stage 1
     {"tile_f": 1, "tile_y": 2, "tile_x": 2, "threads_f": 4, "threads_y": 2, "threads_x": 4, "tile_rc": 2,
      "stage": 1}),
    ("conv2d_direct", "buffer", ConvCase(1, 16, 7, 7, 20, 1, epilogue="bn_clip"),  # the 1x1 GEMM on buffers
     {"tile_f": 4, "tile_y": 1, "tile_x": 7, "threads_f": 2, "threads_y": 7, "threads_x": 1, "tile_rc": 8}),
]


@pytest.mark.parametrize("family,memory,case,knobs", STAGED, ids=[f"{f}-{m}-{c.id()}" for f, m, c, _ in STAGED])
def test_staged_conv_matches_onnxruntime(family, memory, case, knobs, tmp_path, monkeypatch):
    from adreno.schedules import family as schedule_family

    staged = schedule_family(family)
    default = staged.default_config
    monkeypatch.setattr(staged, "default_config", lambda wl, ctx: {**default(wl, ctx), "threads_k": 1, **knobs,
                                                                 "cooperative": 1})  # staged: not split
    with record_claims(monkeypatch, family) as claims:
        artifact = check_against_onnxruntime(conv_model(case), tmp_path / "a", memory, winograd="off")
    assert len(claims[family]) == 1
    assert any("__local" in s for s in kernel_sources(artifact, "*conv2d*").values())


@pytest.mark.parametrize("knobs", [{}, {"tile_o": 2, "tile_p": 2, "threads_o": 2, "threads_p": 8, "tile_k": 2}])
def test_staged_winograd_gemm_matches_onnxruntime(knobs, tmp_path, monkeypatch):
    default = conv2d_winograd.FAMILY.default_config

    def staged(wl, ctx):
        cfg = default(wl, ctx)
        return {**cfg, **knobs, "cooperative": 1} if "tile_o" in cfg else cfg

    monkeypatch.setattr(conv2d_winograd.FAMILY, "default_config", staged)
    case = ConvCase(1, 6, 10, 10, 10, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu")
    artifact = check_against_onnxruntime(conv_model(case), tmp_path / "a", "buffer", rtol=1e-3, winograd="f2")
    assert "__local" in next(iter(kernel_sources(artifact, "*batch_gemm*").values()))


def _wl(c, o, k, size, stride=1):
    out = (size + 2 * (k // 2) - k) // stride + 1
    return ConvWorkload(1, c, size, size, o, k, k, out, out, (stride, stride), (1, 1), (k // 2,) * 4, 1, "float32")


def test_configs_that_cannot_stage_are_refused():
    target = context("adreno-740")
    wl = _wl(64, 64, 3, 56)
    cfg = {**conv2d_direct.default_config(wl, target), "cooperative": 1}
    with pytest.raises(ValueError, match="local memory"):  # 16x16x8 outputs, 8 channels: 64 KiB > 32 KiB
        conv2d_direct.FAMILY.check_config(wl, {**cfg, "tile_f": 16, "threads_f": 16, "tile_x": 8, "threads_x": 16,
                                               "tile_y": 4, "threads_y": 1, "tile_rc": 8}, target)
    with pytest.raises(ValueError, match="at least 2 work-items"):
        conv2d_direct.FAMILY.check_config(wl, {**cfg, "threads_f": 1, "threads_y": 1, "threads_x": 1}, target)
    one = _wl(64, 64, 1, 14)
    split = {**conv2d_1x1.default_config(one, target), "threads_k": 2, "tile_k": 1, "cooperative": 1}
    with pytest.raises(ValueError, match="split-K"):
        conv2d_1x1.check_config(one, split, target)


def test_defaults_stage_on_gpus_where_it_pays():
    gpu, h200, cpu = (context(t) for t in ("adreno-740", "nvidia-h200", "pocl-cpu"))
    for target in (gpu, h200):  # (64@14x14 splits K on the H200, which does not stage: 64@28x28 fills it unsplit)
        assert conv2d_direct.default_config(_wl(64, 64, 3, 28), target)["cooperative"] == 1
        assert conv2d_direct.default_config(_wl(64, 128, 1, 14, 2), target)["cooperative"] == 0  # 1x1: no halo
        gemm = conv2d_winograd.stage_workloads(_wl(64, 64, 3, 14), 4)[1]
        assert conv2d_winograd.default_config(gemm, target)["cooperative"] == 1
    assert conv2d_direct.default_config(_wl(64, 64, 3, 14), cpu)["cooperative"] == 0
    assert conv2d_winograd.default_config(conv2d_winograd.stage_workloads(_wl(64, 64, 3, 14), 4)[1],
                                          cpu)["cooperative"] == 0
