"""The occupancy rule every family's `default_config` meets: a launch must fill the device it is compiled for.

A GPU hides memory latency by switching between resident waves, so a kernel needs enough work-items in flight on
every compute unit: `required_work_items` = compute units x `latency_waves` x wave width, and at least one
work-group per compute unit. The register tiles that make a kernel fast on a CPU (a few big work-items) starve a
GPU: the 512@7x7 3x3 conv of ResNet-18 got 896 work-items where an Adreno 740 wants 6 x 8 waves of 64 (3,072). A CPU
OpenCL device needs only one SIMD-wide work-group per core, so its defaults keep their big tiles (the rule holds for
them as they are).

A family lists its candidate configs from its preferred (biggest register tile) down to the most parallel one and
describes each one's launch (work-items, work-group, estimated registers: `tools/occupancy_table.py` prints them);
`choose` takes the first that fills the device, or the most parallel when none does (a workload too small to fill
it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Launch:
    """What a config launches: work-items in all, work-items per work-group, 32-bit registers per work-item
    (estimate: accumulators plus the loads staged in registers)."""

    work_items: int
    workgroup: int
    registers: int

    @property
    def groups(self) -> int:
        return -(-self.work_items // max(1, self.workgroup))


def grid(*axes: tuple[int, int, int], registers: int, batch: int = 1) -> Launch:
    """The launch of a tiled schedule: per axis (extent, tile per work-item, work-items per group along it), the
    axis covered by ceil(extent / (tile x threads)) groups; `batch` multiplies the groups (a fused outer axis)."""
    groups, workgroup = batch, 1
    for extent, tile, threads in axes:
        groups *= -(-extent // (tile * threads))
        workgroup *= threads
    return Launch(groups * workgroup, workgroup, registers)


def required_work_items(device) -> int:
    """Work-items a launch needs to fill `device`: `latency_waves` waves on every compute unit. Registers do not lower
    it: a kernel whose registers leave fewer resident waves (`AdrenoDevice.resident_waves`) runs them in rounds, and
    needs the rounds to keep its few slots busy; its register tile is what should shrink."""
    return device.compute_units * device.latency_waves * device.wave_size


def covers_units(device, launch: Launch) -> bool:
    """At least one work-group per compute unit."""
    return launch.groups >= device.compute_units


def fills(device, launch: Launch) -> bool:
    """The occupancy rule: enough work-items for every compute unit's waves in flight, a work-group per unit."""
    return launch.work_items >= required_work_items(device) and covers_units(device, launch)


def choose(device, candidates: list[dict], launch) -> dict:
    """The first of `candidates` (preferred first) whose `launch(config)` fills `device`; else the one launching the
    most work-items (the first of those)."""
    launches = [launch(c) for c in candidates]
    for config, found in zip(candidates, launches):
        if fills(device, found):
            return config
    best = max(range(len(candidates)), key=lambda i: (launches[i].work_items, -i))
    return candidates[best]


def smaller(value: int, choices: list[int], extent: int | None = None) -> int | None:
    """The next smaller choice below `value`: the largest dividing `extent` (when given), else the largest; None
    at the smallest."""
    below = [c for c in choices if c < value]
    if not below:
        return None
    dividing = [c for c in below if extent is None or extent % c == 0]
    return max(dividing or below)


def ladder(start: dict, steps: list[tuple[str, int, int | None]], choices: dict) -> list[dict]:
    """Tiles from `start` down: each step (knob, floor, extent) lowers that knob choice by choice (`smaller`) until
    it reaches `floor`, one candidate per change, in step order."""
    found, tiles = [dict(start)], dict(start)
    for knob, floor, extent in steps:
        while tiles[knob] > floor:
            lower = smaller(tiles[knob], choices[knob], extent)
            if lower is None or lower < floor:
                break
            tiles = {**tiles, knob: lower}
            found.append(tiles)
    return found
