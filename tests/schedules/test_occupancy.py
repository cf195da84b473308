"""The occupancy rule (`adreno.schedules.occupancy`) and the device facts it reads (`adreno.targets.devices`).

- every family's default, on every Adreno target and the H200 entry, fills the device (enough work-items for the
  waves in flight every compute unit needs, a work-group per unit), or the workload cannot: its tiles are then all
  at one output per work-item;
- on the H200, the direct and texture convs that no unsplit config fills split their reduction (split-K) and fill it;
- a CPU OpenCL device keeps the big register tiles (its rule holds for them as they are);
- compiled for adreno-740 (with the defaults a compile gets there: ranked by the analytical model among configs that
  meet this rule, `adreno.costmodel.ranked_defaults`), every conv and Winograd kernel of ResNet-18 and MobileNetV2
  launches at least 2,048 work-items (plan.json global sizes), with textures and with buffers (MobileNetV2's ->160
  1x1 convs on 7x7 images have 40 channel blocks x 49 pixels in all: they split their reduction).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from adreno.targets import devices
from adreno.options import Memory, Schedules, Winograd
from adreno.schedules import _conv, conv2d_1x1, conv2d_direct, conv2d_texture, conv2d_winograd, depthwise, occupancy
from adreno.schedules import packed, pool, reduce
from tests.schedules.sched_helpers import context

FLOOR = 2048
GPUS = [*devices.DEVICES, "nvidia-h200"]


def _conv_wl(c, hw, o, k, s, groups=1):
    pad = k // 2
    out = (hw + 2 * pad - k) // s + 1
    return _conv.ConvWorkload(1, c, hw, hw, o, k, k, out, out, (s, s), (1, 1), (pad,) * 4, groups, "float32")


def _resnet18():
    convs = [_conv_wl(3, 224, 64, 7, 2)]
    for c, o, hw in ((64, 64, 56), (64, 128, 56), (128, 256, 28), (256, 512, 14)):
        s = 1 if c == o else 2
        convs += [_conv_wl(c, hw, o, 3, s), _conv_wl(o, hw // s, o, 3, 1)]
        if s == 2:
            convs.append(_conv_wl(c, hw, o, 1, 2))
    return convs


def _mobilenetv2():
    convs, c, hw = [_conv_wl(3, 224, 32, 3, 2)], 32, 112
    for t, o, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            if t != 1:
                convs.append(_conv_wl(c, hw, c * t, 1, 1))
            convs.append(_conv_wl(c * t, hw, c * t, 3, stride, groups=c * t))
            hw //= stride
            convs.append(_conv_wl(c * t, hw, o, 1, 1))
            c = o
    return convs + [_conv_wl(320, 7, 1280, 1, 1)]


WORKLOADS = sorted(set(_resnet18() + _mobilenetv2()), key=lambda w: (w.c, w.h, w.o, w.kh, w.stride, w.groups))


def _cases():
    """(family, workload, config -> Launch, the knobs that are 1 at the most parallel end) of every default."""
    for wl in WORKLOADS:
        packed_wl = replace(wl, c=-(-wl.c // 4) * 4, o=-(-wl.o // 4) * 4, groups=wl.groups and (
            -(-wl.c // 4) * 4 if wl.groups > 1 else 1))
        if wl.groups == 1:
            yield "conv2d_direct", wl, conv2d_direct, lambda w, c: _conv.tiled_launch(w, c), ("tile_f", "tile_y",
                                                                                             "tile_x")
            if (wl.kh, wl.kw) == (1, 1) and wl.stride == (1, 1):
                yield "conv2d_1x1", packed_wl, conv2d_1x1, conv2d_1x1._launch, ("tile_cb", "tile_p")
            else:
                yield "conv2d_texture", packed_wl, conv2d_texture, lambda w, c: conv2d_texture._launch(
                    replace(w, o=w.o // 4), c), ("tile_cb", "tile_y", "tile_x")
        else:
            yield "depthwise", wl, depthwise, lambda w, c: _conv.tiled_launch(w, c), ("tile_y", "tile_x")
        if wl.groups == 1 and (wl.kh, wl.stride) == (3, (1, 1)) and min(wl.c, wl.o) >= 64:
            for m in (2, 4):
                for packed_stages in (False, True):
                    for stage in conv2d_winograd.stage_workloads(packed_wl if packed_stages else wl, m,
                                                                 packed_stages):
                        gemm = conv2d_winograd.base_stage(stage[0]) == "winograd_batch_gemm"
                        yield (stage[0], stage, conv2d_winograd,
                               conv2d_winograd._gemm_launch if gemm else conv2d_winograd._transform_launch,
                               ("tile_o", "tile_p") if gemm else ("split_t",))


CASES = list(_cases())


@pytest.mark.parametrize("name", GPUS)
def test_every_default_fills_the_device_or_is_most_parallel(name):
    target = context(name)
    device = devices.get_device(name)
    short = []
    for family, wl, module, launch, tiles in CASES:
        cfg = module.default_config(wl, target)
        module.FAMILY.check_config(wl, cfg, target)
        found = launch(wl, cfg)
        if occupancy.fills(device, found):
            continue
        most_parallel = all(cfg[k] == 1 for k in tiles)
        assert most_parallel, (family, wl, cfg, found, occupancy.required_work_items(device))
        short.append(family)
    # the small-map layers are what cannot fill the biggest device; on the phones nearly every default fills
    assert len(short) < len(CASES) // (2 if name == "nvidia-h200" else 10), short


def test_a_cpu_keeps_the_big_register_tiles():
    """pocl-cpu: the first candidate (the big tiles chosen on this 2-core CPU) always fills it, so its defaults are the
    ones measured in tools/bench_conv.py; adreno-740 shrinks the deep layers' tiles."""
    cpu, gpu = context("pocl-cpu"), context("adreno-740")
    deep = _conv_wl(512, 7, 512, 3, 1)
    assert conv2d_direct.default_config(deep, cpu)["tile_f"] * conv2d_direct.default_config(deep, cpu)["tile_x"] \
        == 28
    assert _conv.tiled_launch(deep, conv2d_direct.default_config(deep, gpu)).work_items >= FLOOR
    for family, wl, module, launch, _ in CASES:
        assert occupancy.fills(devices.get_device("pocl-cpu"), launch(wl, module.default_config(wl, cpu))), family


def test_resident_waves_follow_the_register_file():
    a740, a650, h200 = (devices.get_device(n) for n in ("adreno-740", "adreno-650", "nvidia-h200"))
    # ir3: reg_size_vec4 // vec4 registers per fiber x 2, at most 16 waves
    assert [a740.resident_waves(r) for r in (8, 48, 96, 132, 400)] == [16, 16, 8, 4, 1]
    assert [a650.resident_waves(r) for r in (32, 64, 128)] == [16, 8, 4]
    assert a740.register_budget == 48 and a650.register_budget == 32 and h200.register_budget == 32
    # NVIDIA: 64K registers, allocated 8 per thread, 64 warps of 32 at most
    assert [h200.resident_waves(r) for r in (32, 40, 128, 255)] == [64, 51, 16, 8]
    assert occupancy.required_work_items(h200) == 132 * 4 * 32 and occupancy.required_work_items(a740) == 6 * 8 * 64
    for name in GPUS:
        d = devices.get_device(name)
        assert d.compute_units > 0 and d.wave_size in (32, 64) and d.latency_waves <= d.max_waves_per_cu
        assert set(d.estimated) <= {f for f in devices.describe(d)} and d.facts_source


def test_live_device_facts_override_the_table(pocl_device):
    assert devices.get_device("pocl-cpu") is devices.OTHER_DEVICES["pocl-cpu"]
    live = devices.from_opencl(pocl_device)
    assert live.name == "pocl-cpu" and live.device_class == "cpu"
    assert live.compute_units == pocl_device.max_compute_units and live.wave_size >= 1
    assert live.local_memory_bytes == pocl_device.local_mem_size
    assert "compute_units" not in live.estimated
    assert devices.get_device("pocl-cpu") is devices.OTHER_DEVICES["pocl-cpu"]  # the table is not changed


def test_packed_groups_shrink_only_for_small_launches():
    gpu = context("adreno-740")
    assert packed.group_size(100_000, gpu) == packed.THREADS
    assert packed.group_size(200, gpu) < packed.THREADS  # 4 groups of 64 for 6 compute units: halve
    assert packed.group_size(200, context("pocl-cpu")) == packed.THREADS


def test_pool_and_softmax_defaults_add_lanes_when_rows_are_few():
    gpu, cpu = context("adreno-740"), context("pocl-cpu")
    gap = pool.PoolWorkload("global_sum", 1, 512, 7, 7, 1, 1, 7, 7, shape=(1, 512, 7, 7), axes=(2, 3))
    assert pool.default_config(gap, cpu)["threads_x"] == 1  # serial: 512 outputs fill a CPU
    assert pool.default_config(gap, gpu)["threads_x"] == 32  # 512 work-items do not fill 6 x 8 waves of 64
    rows = pool.PoolWorkload("softmax", 1, 1000, 1, 16, 1, 1, 1, 16, shape=(1000, 16), axes=(1,))
    assert reduce.default_config(rows, cpu) == {"threads_x": 1, "threads_y": 64}
    assert reduce.default_config(rows, gpu) == {"threads_x": 16, "threads_y": 4}  # lanes: 16 per row of 16


def _plan_launches(model: str, memory: Memory):
    from adreno.compile import lower_relax
    from adreno.compiler.plan import extract_plan
    from adreno.frontend.importer import to_relax
    from adreno.costmodel.ranked_defaults import RankedDefaults
    from adreno.frontend.zoo import get_model
    from adreno.options import Host
    from adreno.records import TunedConfigs
    from adreno.schedules.context import ScheduleContext

    device = devices.get_device("adreno-740")
    defaults = TunedConfigs(ranker=RankedDefaults())  # as `adreno compile` (--defaults model) without records
    ctx = ScheduleContext.for_device(device, host=Host.NATIVE, knobs=defaults)
    lowered = lower_relax(to_relax(get_model(model)), ctx, Schedules.ADRENO, memory=memory, winograd=Winograd.AUTO)
    assert defaults.ranker.summary()["changed"] > 0
    plan = extract_plan(lowered, ctx.target, memory=memory, device=device)[0].to_json()
    return [(math.prod(k["global_size"]), step["func"], k["name"]) for step in plan["steps"]
            for k in step["kernels"] if "conv" in step["func"] or "winograd" in step["func"]]


# each model once, both memories: ResNet-18's direct and Winograd convs in images, MobileNetV2's in buffers
@pytest.mark.parametrize("model, memory", [("resnet18", Memory.TEXTURE), ("mobilenetv2", Memory.BUFFER)])
def test_conv_and_winograd_launches_reach_the_floor_on_adreno_740(model, memory):
    launches = _plan_launches(model, memory)
    assert launches
    short = [launch for launch in launches if launch[0] < FLOOR]
    assert not short, short


def test_split_k_fills_the_h200_where_no_unsplit_config_does():
    """No direct or texture conv default of ResNet-18 and MobileNetV2 is short on the H200 any more: those whose
    unsplit tiles cannot fill it (deep layers on 14x14 and 7x7 maps) split their reduction (`threads_k`), and only
    those (the same tiles unsplit are short)."""
    target, device = context("nvidia-h200"), devices.get_device("nvidia-h200")
    split = []
    for family, wl, module, launch, _ in CASES:
        if family not in ("conv2d_direct", "conv2d_texture"):
            continue
        cfg = module.default_config(wl, target)
        assert occupancy.fills(device, launch(wl, cfg)), (family, wl, cfg)
        if cfg["threads_k"] > 1:
            assert not occupancy.fills(device, launch(wl, {**cfg, "threads_k": 1})), (family, wl, cfg)
            split.append((family, wl.c, wl.o, wl.oh))
    assert ("conv2d_texture", 512, 512, 7) in split and ("conv2d_direct", 960, 160, 7) in split, split
