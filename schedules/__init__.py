"""Our schedules, one module per op family; each exposes `rule(target) -> dlight ScheduleRule | None`.

A rule's `apply(func, target, tunable)` returns a scheduled `s_tir.Schedule` when it recognises the function
and `None` otherwise, so functions no rule claims fall through to TVM's own dlight rules.
"""

from __future__ import annotations

import importlib

# Order matters: the first rule that recognises a function schedules it.
FAMILIES: list[str] = []


def rules(target) -> list:
    """The schedule rules of every family, in priority order."""
    found = []
    for family in FAMILIES:
        rule = importlib.import_module(f"{__name__}.{family}").rule(target)
        if rule is not None:
            found.append(rule)
    return found


def schedule_pass(target):
    """A module pass that schedules every function one of our rules recognises (marking it scheduled)."""
    from tvm.s_tir import dlight

    return dlight.ApplyDefaultSchedule(*rules(target))
