"""features: the analytical metrics of direct-conv candidates (finite, positive, moving the right way) and the
feature rows built from them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adreno.schedules._conv import ConvWorkload
from adreno.schedules import conv2d_1x1, conv2d_direct, conv2d_texture, conv2d_winograd
from adreno.schedules.conv2d_direct import KNOBS
from adreno.costmodel import features as feats

LIMITS = {"compute_units": 4, "max_threads": 256, "local_memory_bytes": 32768}


def conv(c, hw, o, k, s=1, n=1):
    p = k // 2
    oh = (hw + 2 * p - k) // s + 1
    return ConvWorkload(n, c, hw, hw, o, k, k, oh, oh, (s, s), (1, 1), (p, p, p, p), 1, "float32")


WORKLOADS = [conv(3, 224, 64, 7, 2), conv(64, 56, 64, 3), conv(128, 28, 256, 1, 2), conv(512, 7, 512, 3),
             conv(7, 13, 5, 1)]
BASE = {"tile_f": 4, "tile_y": 2, "tile_x": 4, "threads_f": 2, "threads_y": 4, "threads_x": 8, "tile_rc": 1,
        "unroll_k": 1, "stage": 0}


def random_configs(rng, count):
    out = []
    while len(out) < count:
        cfg = {k: v[int(rng.integers(len(v)))] for k, v in KNOBS.items()}
        if cfg["threads_f"] * cfg["threads_y"] * cfg["threads_x"] <= 256:
            out.append(cfg)
    return out


def test_metrics_finite_positive_and_bounded_over_random_configs():
    rng = np.random.default_rng(0)
    for wl in WORKLOADS:
        for cfg in random_configs(rng, 200):
            m = feats.conv_metrics(wl, cfg, LIMITS)
            assert list(m) == feats.METRIC_NAMES
            for name, value in m.items():
                assert math.isfinite(value) and value > 0, (name, value, cfg)
            for name in ("parallelism", "occupancy", "memory_efficiency", "bank_conflict", "branch_efficiency",
                         "local_fit"):
                assert m[name] <= 1.0 + 1e-12, (name, m[name], cfg)


def test_more_work_items_give_higher_parallelism():
    wl = conv(512, 7, 512, 3)  # small output (7x7): parallelism depends on how many work-items cover it
    narrow = {**BASE, "threads_f": 1, "threads_y": 1, "threads_x": 8}
    big_tiles = feats.conv_metrics(wl, {**narrow, "tile_f": 16, "tile_x": 8, "tile_y": 4}, LIMITS)["parallelism"]
    small_tiles = feats.conv_metrics(wl, {**narrow, "tile_f": 2, "tile_x": 1, "tile_y": 1}, LIMITS)["parallelism"]
    assert big_tiles < 1.0
    assert small_tiles > big_tiles
    # more threads per workgroup (same tiles) never lowers it (the grid is rounded up to whole workgroups)
    big = {**narrow, "tile_f": 16, "tile_x": 8, "tile_y": 4}
    for knob in ("threads_f", "threads_y", "threads_x"):
        assert feats.conv_metrics(wl, {**big, knob: 16}, LIMITS)["parallelism"] >= big_tiles
    # and the same candidate on a device with fewer thread slots fills more of it
    assert feats.conv_metrics(wl, big, {**LIMITS, "compute_units": 1})["parallelism"] > big_tiles


def test_ragged_tiles_lower_branch_efficiency():
    wl = conv(64, 56, 64, 3)  # 56 x 56 output, 64 channels
    exact = feats.conv_metrics(wl, {**BASE, "tile_x": 4, "threads_x": 14, "tile_y": 2, "threads_y": 4}, LIMITS)
    ragged_x = feats.conv_metrics(wl, {**BASE, "tile_x": 8, "threads_x": 8, "tile_y": 2, "threads_y": 4}, LIMITS)
    ragged_rc = feats.conv_metrics(wl, {**BASE, "tile_x": 4, "threads_x": 14, "tile_y": 2, "threads_y": 4}
                               | {"tile_rc": 8}, LIMITS)
    assert exact["branch_efficiency"] == pytest.approx(1.0)
    assert ragged_x["branch_efficiency"] == pytest.approx(56 / 64)
    assert ragged_rc["branch_efficiency"] == pytest.approx(1.0)  # 64 input channels split by 8: exact
    odd = conv(7, 13, 5, 1)
    assert feats.conv_metrics(odd, {**BASE, "tile_rc": 4}, LIMITS)["branch_efficiency"] < \
        feats.conv_metrics(odd, {**BASE, "tile_rc": 1}, LIMITS)["branch_efficiency"]


def test_register_tiles_trade_reuse_for_pressure_and_coalescing_follows_threads_x():
    wl = conv(64, 56, 64, 3)
    small = feats.conv_metrics(wl, {**BASE, "tile_f": 1, "tile_y": 1, "tile_x": 1}, LIMITS)
    large = feats.conv_metrics(wl, {**BASE, "tile_f": 8, "tile_y": 2, "tile_x": 4}, LIMITS)
    assert large["register_reuse"] > small["register_reuse"]
    assert large["registers"] > small["registers"]
    one_lane = feats.conv_metrics(wl, {**BASE, "threads_x": 1, "threads_y": 16, "tile_x": 1}, LIMITS)
    wide = feats.conv_metrics(wl, {**BASE, "threads_x": 16, "threads_y": 1, "tile_x": 1}, LIMITS)
    assert wide["memory_efficiency"] > one_lane["memory_efficiency"]


def test_staging_metrics_only_move_when_staging():
    wl = conv(64, 56, 64, 3)
    unstaged = feats.conv_metrics(wl, {**BASE, "stage": 0}, LIMITS)
    staged = feats.conv_metrics(wl, {**BASE, "stage": 1}, LIMITS)
    assert unstaged["local_reuse"] == unstaged["bank_conflict"] == unstaged["local_fit"] == 1.0
    assert staged["local_reuse"] > 1.0  # threads_f groups share the patch, neighbours share halos
    tiny_local = feats.conv_metrics(wl, {**BASE, "stage": 1, "tile_rc": 8}, {**LIMITS, "local_memory_bytes": 1024})
    assert tiny_local["local_fit"] < 1.0


def test_featurize_rows_and_names():
    wl = conv(64, 56, 64, 3)
    cfgs = random_configs(np.random.default_rng(1), 20)
    x = feats.featurize(wl, cfgs, LIMITS)
    assert x.shape == (20, len(feats.FEATURE_NAMES))
    assert np.isfinite(x).all()
    m = feats.conv_metrics(wl, cfgs[3], LIMITS)
    assert x[3, feats.FEATURE_NAMES.index("log_branch_efficiency")] == pytest.approx(math.log(m["branch_efficiency"]))
    assert x[3, feats.FEATURE_NAMES.index("tile_f")] == cfgs[3]["tile_f"]
    assert feats.featurize(wl, [], LIMITS).shape == (0, len(feats.FEATURE_NAMES))
    # compute_units None (not public for some targets) falls back to the default
    assert feats.conv_metrics(wl, BASE, {**LIMITS, "compute_units": None}) == feats.conv_metrics(
        wl, BASE, {**LIMITS, "compute_units": feats.DEFAULT_LIMITS["compute_units"]})


def test_1x1_gemm_configs_are_the_direct_conv_on_one_row_of_pixels():
    """A `conv2d_1x1` candidate is described as the direct conv over OH*OW pixels in one row: its pixel tile is
    tile_x (not the Winograd GEMM's tile_p column), its K step 4 * tile_k input channels."""
    wl = conv(96, 14, 24, 1)
    gemm = {"tile_cb": 2, "tile_p": 7, "tile_k": 2, "threads_cb": 1, "threads_p": 14}
    row = feats.featurize(wl, [gemm], LIMITS, conv2d_1x1.features)[0]
    assert np.isfinite(row).all()
    named = dict(zip(feats.FEATURE_NAMES, row))
    assert (named["tile_f"], named["tile_x"], named["threads_x"], named["tile_rc"]) == (8, 7, 14, 8)
    assert named["tile_p"] == named["threads_p"] == conv2d_winograd.ROW_KNOBS["tile_p"]  # Winograd columns untouched
    # one row of 196 pixels in 14 tiles of 7 over 14 work-items: nothing ragged; 16 work-items would waste two
    assert feats.layout_metrics(wl, gemm, LIMITS, conv2d_1x1.features)["branch_efficiency"] == 1.0
    assert feats.layout_metrics(wl, {**gemm, "threads_p": 16}, LIMITS, conv2d_1x1.features)["branch_efficiency"] < 1.0


def test_split_k_and_cooperative_staging_are_seen_by_the_features_and_the_model():
    """`threads_k` (conv2d_1x1's split-K) and `cooperative` (local-memory staging of the workgroup's tiles) change
    the metrics they act on, through every family view, and so the analytical model's score."""
    from adreno.targets.devices import get_device
    from adreno.costmodel import AnalyticalModel

    model, gpu = AnalyticalModel(), feats.device_limits(get_device("adreno-740"))
    deep = conv(640, 7, 160, 1)  # MobileNetV2's ->160 1x1 on 7x7: too few pixels to fill a GPU without split-K
    gemm = {"tile_cb": 1, "tile_p": 1, "tile_k": 1, "threads_cb": 8, "threads_p": 7, "threads_k": 1}
    rows = feats.featurize(deep, [gemm, {**gemm, "threads_k": 4}, {**gemm, "cooperative": 1}], gpu, conv2d_1x1.features)
    assert len({tuple(r) for r in rows}) == 3
    one, split = (feats.layout_metrics(deep, {**gemm, "threads_k": k}, gpu, conv2d_1x1.features) for k in (1, 4))
    assert split["parallelism"] > one["parallelism"] and split["sync_efficiency"] < one["sync_efficiency"] == 1.0
    assert rows[1, feats.FEATURE_NAMES.index("threads_k")] == 4
    assert len(set(model.predict(rows).tolist())) == 3
    wl = conv(64, 56, 64, 3)
    texture = {**{k: v for k, v in BASE.items() if k not in ("tile_f", "threads_f", "tile_rc")}, "tile_cb": 1,
               "threads_cb": 2}
    for view, config in ((conv2d_direct.FAMILY.features, BASE), (conv2d_texture.features, texture)):
        alone, shared = (feats.layout_metrics(wl, {**config, "cooperative": c}, LIMITS, view) for c in (0, 1))
        assert shared["local_reuse"] > alone["local_reuse"] == 1.0  # global loads divided by the group's reuse
        assert shared["sync_efficiency"] < 1.0 == alone["sync_efficiency"]  # a barrier per reduction step
        assert shared["local_fit"] <= 1.0 and shared["occupancy"] <= alone["occupancy"]
        small = feats.layout_metrics(wl, {**config, "cooperative": 1}, {**LIMITS, "local_memory_bytes": 512}, view)
        assert small["local_fit"] < shared["local_fit"] and small["occupancy"] < shared["occupancy"]


def test_split_k_of_the_tiled_families_is_seen_by_their_launch_and_features():
    """`threads_k` of `conv2d_direct` and `conv2d_texture` (a 256@7x7 3x3 conv, too small for an H200 without it)
    multiplies the work-group and the launch (`Family.launch`, what the occupancy rule judges), and the features of
    both views see it as for the 1x1 GEMM: more parallelism, a cross-thread sum to pay."""
    from adreno.targets.devices import get_device

    h200 = feats.device_limits(get_device("nvidia-h200"))
    deep = conv(256, 7, 256, 3)
    one = {"tile_f": 1, "tile_y": 1, "tile_x": 1, "threads_f": 1, "threads_y": 1, "threads_x": 7, "tile_rc": 1,
           "unroll_k": 1, "stage": 0, "threads_k": 1, "cooperative": 0}
    texture = {**{k: v for k, v in one.items() if k not in ("tile_f", "threads_f", "tile_rc")}, "tile_cb": 1,
               "threads_cb": 1}
    for family, config, wl in ((conv2d_direct.FAMILY, one, deep), (conv2d_texture.FAMILY, texture, deep)):
        view = family.features
        launches = [family.launch(wl, {**config, "threads_k": k}) for k in (1, 4)]
        assert (launches[1].work_items, launches[1].workgroup) == (4 * launches[0].work_items, 28)
        rows = feats.featurize(wl, [config, {**config, "threads_k": 4}], h200, view)
        assert rows[1, feats.FEATURE_NAMES.index("threads_k")] == 4
        alone, split = (feats.layout_metrics(wl, {**config, "threads_k": k}, h200, view) for k in (1, 4))
        assert split["parallelism"] > alone["parallelism"], family
        assert split["sync_efficiency"] < alone["sync_efficiency"] == 1.0, family
