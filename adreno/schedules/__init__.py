"""Our schedules, one family per op (see `family.py` for the interface every family implements).

`FAMILIES` is the priority order: the first family whose rule recognises a function schedules it; functions no
family claims (or that a family refuses) fall through to TVM's own dlight rules (`last_resort`: its reduction rules,
each schedule checked against the device). Every family is handed one `context.ScheduleContext`: the device's
facts, the TVM target, the staging policy and the knob source (compile's records, or the tuner's candidate).
"""

from __future__ import annotations

from . import conv2d_1x1, conv2d_direct, conv2d_texture, conv2d_winograd, dense, depthwise, pool, reduce
from .family import Family, Refused

# Order matters: the first rule that recognises a function schedules it (the 1x1 GEMM before the general packed conv).
FAMILIES: list[Family] = [conv2d_winograd.FAMILY, conv2d_direct.FAMILY, depthwise.FAMILY, conv2d_1x1.FAMILY,
                          conv2d_texture.FAMILY, pool.FAMILY, reduce.FAMILY, dense.FAMILY]


def family(name: str) -> Family:
    """The family called `name` (a task's `family`)."""
    for found in FAMILIES:
        if found.name == name:
            return found
    raise KeyError(f"no schedule family {name!r}; families: {[f.name for f in FAMILIES]}")


def schedule_pass(ctx, refusals: list[Refused] | None = None):
    """A module pass that schedules every function one of our families recognises (marking it scheduled) in the
    `ScheduleContext` `ctx` (its knob source holds the tuned knobs); the refusals are appended to `refusals` when
    given."""
    from tvm.s_tir import dlight

    rules = [f.rule(ctx, refusals) for f in FAMILIES]
    return dlight.ApplyDefaultSchedule(*[r for r in rules if r is not None])
