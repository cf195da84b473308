"""Our schedules, one module per op family.

Each family module exposes: `KNOBS` (knob -> choices), `workload(func)` and `workload_key(func)` (None when the
family does not handle `func`), `default_config(workload, target)`, `check_config(workload, config, target)`
(ValueError when invalid), `apply(func, target, config)` and `rule(target, config) -> dlight ScheduleRule`.
`config` maps workload keys to tuned knob values (what `adreno compile --records` passes); a rule's
`apply(func, target, tunable)` returns a scheduled `s_tir.Schedule` when it recognises the function and `None`
otherwise, so functions no rule claims fall through to TVM's own dlight rules.
"""

from __future__ import annotations

import importlib

# Order matters: the first rule that recognises a function schedules it.
FAMILIES: list[str] = ["conv2d_winograd", "conv2d_direct", "depthwise", "conv2d_1x1", "conv2d_texture", "pool", "reduce", "dense"]


def rules(target, config: dict | None = None) -> list:
    """The schedule rules of every family, in priority order; `config`: workload key -> tuned knobs."""
    found = []
    for family in FAMILIES:
        rule = importlib.import_module(f"{__name__}.{family}").rule(target, config)
        if rule is not None:
            found.append(rule)
    return found


def schedule_pass(target, config: dict | None = None):
    """A module pass that schedules every function one of our rules recognises (marking it scheduled)."""
    from tvm.s_tir import dlight

    return dlight.ApplyDefaultSchedule(*rules(target, config))
