#!/usr/bin/env python3
"""The occupancy of our default conv schedules per layer and device: what `adreno.schedules.occupancy` chose.

For every conv layer of a zoo model (default ResNet-18), on each target (default adreno-640, adreno-740 and
nvidia-h200), with buffers (`conv2d_direct`, `depthwise`) and with textures (`conv2d_texture`, `conv2d_1x1`), the
default config's launch: work-items, work-groups per compute unit, estimated registers per work-item (accumulators
plus the loads staged in registers), and whether it fills the device (`occupancy.fills`). Direct kernels only: the
Winograd stages of 3x3 stride-1 layers are listed by `adreno compile`'s plan.json.

    tools/occupancy_table.py [--model resnet18] [--targets adreno-640,adreno-740,nvidia-h200] [--json out.json]
                              [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace


def conv_workloads(model_name: str) -> list:
    """The distinct convs of a zoo model as ConvWorkloads (its conv layers without their epilogues), in model order."""
    from adreno.conv_layers import conv_layers

    found = []
    for layer in conv_layers(model_name):
        if layer.workload() not in found:
            found.append(layer.workload())
    return found


def launches(wl, target_name: str) -> dict:
    """memory -> (family, config, Launch) of the default schedule of `wl` compiled for `target_name`."""
    from adreno.schedules import _conv, conv2d_1x1, conv2d_direct, conv2d_texture, depthwise
    from adreno.schedules.context import ScheduleContext
    from adreno.targets.devices import get_device

    target = ScheduleContext.for_device(get_device(target_name))
    direct = depthwise if wl.is_depthwise else conv2d_direct
    cfg = direct.default_config(wl, target)
    out = {"buffer": (direct.__name__.rsplit(".", 1)[1], cfg, _conv.tiled_launch(wl, cfg))}
    packed = replace(wl, c=-(-wl.c // 4) * 4, o=-(-wl.o // 4) * 4,
                     groups=-(-wl.c // 4) * 4 if wl.is_depthwise else 1)
    if (wl.kh, wl.kw, wl.groups) == (1, 1, 1) and not any(wl.padding):  # conv2d_1x1 claims these first
        cfg = conv2d_1x1.default_config(packed, target)
        out["texture"] = ("conv2d_1x1", cfg, conv2d_1x1._launch(packed, cfg))
    else:
        cfg = conv2d_texture.default_config(packed, target)
        out["texture"] = ("conv2d_texture", cfg, conv2d_texture._launch(replace(packed, o=packed.o // 4), cfg))
    return out


def label(wl) -> str:
    kind = "dw" if wl.is_depthwise else "conv"
    return f"{kind}{wl.kh}x{wl.kw}/s{wl.stride[0]} {wl.c}->{wl.o} @{wl.h}x{wl.w}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--targets", default="adreno-640,adreno-740,nvidia-h200")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny")
    args = ap.parse_args(argv)
    if args.smoke:
        args.model = "tiny"

    from adreno.schedules import occupancy
    from adreno.targets.devices import get_device

    devices = [get_device(t) for t in args.targets.split(",")]
    rows = []
    header = f"| layer | memory | {' | '.join(f'{d.name}: work-items, groups/CU, registers' for d in devices)} |"
    print(header)
    print("|" + "---|" * (2 + len(devices)))
    for wl in conv_workloads(args.model):
        per_device = {d.name: launches(wl, d.name) for d in devices}
        for memory in ("buffer", "texture"):
            cells, row = [], {"layer": label(wl), "memory": memory, "devices": {}}
            for d in devices:
                family, cfg, found = per_device[d.name][memory]
                fills = occupancy.fills(d, found)
                cells.append(f"{found.work_items:,}, {found.groups / d.compute_units:.1f}, {found.registers}"
                             + ("" if fills else " (short)"))
                row["devices"][d.name] = {"family": family, "config": cfg, "work_items": found.work_items,
                                          "groups_per_cu": found.groups / d.compute_units,
                                          "registers": found.registers, "fills": fills,
                                          "required_work_items": occupancy.required_work_items(d),
                                          "resident_waves": d.resident_waves(found.registers)}
            rows.append(row)
            print(f"| {row['layer']} | {memory} | {' | '.join(cells)} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "targets": [d.name for d in devices], "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
