"""What a schedule family is: one object per op family, with the same small interface for the compiler, the tuner
and the tests.

A family recognises the fused primitive functions it handles (`match`: a `Matched` with the workload, its key and
how to schedule it with a config), chooses knobs without tuning (`default_config`), checks a config against its
space (`check_config`, ValueError), and schedules (`apply`). `apply` returns a scheduled `s_tir.Schedule`, `None`
when the function is not this family's (the next family, and finally TVM's dlight rules, take it), or a `Refused`
value when the family recognised the function but a schedule primitive refused its config: the function then falls
through like an unrecognised one, and whoever asked (`rule(..., refusals=[])`: the compiler, the tuner's builder)
gets the reason as data. Adding a family means writing its match, default and check functions and listing its
`Family` in `FAMILIES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import TVM_ERRORS


@dataclass(frozen=True)
class Refused:
    """A family recognised a function but could not schedule it with `config`: why (the function falls back)."""

    family: str
    key: str
    config: dict
    reason: str

    def __str__(self) -> str:
        return f"{self.family}: could not schedule {self.key} with {self.config}: {self.reason}"


# dlight's rules refuse some functions by failing their own asserts (`Reduction._normalize`, the GEMV analysis's
# `normalize`), others by a schedule primitive's error: where ours call them, both are a refusal
DLIGHT_ERRORS = (*TVM_ERRORS, AssertionError)


def dlight_failure(err: BaseException) -> str:
    """A dlight rule's failure (one of `DLIGHT_ERRORS`) as a refusal's reason: its type and first line."""
    first = (str(err).strip().splitlines() or ["the rule's own check failed"])[0]
    return f"{type(err).__name__}: {first}"


def reduction_name(func) -> str:
    """The name of `func`'s first reduction block (what a refusal of a dlight rule names: the function's own name
    is not dlight's to pass); "" when it has none."""
    import tvm_ffi

    found = []

    def visit(node):
        if type(node).__name__ == "SBlock" and any(int(iv.iter_type) == 2 for iv in node.iter_vars):  # CommReduce
            found.append(node.name_hint)
        return node

    tvm_ffi.structural_map(func.body, visit, order="post")
    return found[0] if found else ""


@dataclass
class Matched:
    """A function a family handles: its workload, the key its tuned knobs are stored under, and `schedule(cfg)`,
    which schedules it with a complete config. `knobs`: the names of `config[key]` that apply (None: all)."""

    workload: object
    key: str
    schedule: Callable[[dict], object]
    knobs: tuple[str, ...] | None = None
    # knobs added since older records were measured, with the value those records imply (split-K off: the kernel
    # they measured); applied to a tuned config that lacks them
    older_records: dict = field(default_factory=dict)


class Family:
    """One schedule family (see the module docstring): `name` (what tasks and records call it), `knobs` (knob ->
    choices: the tuner's space), `match(func) -> Matched | None`, `default_config(workload, ctx) -> dict`,
    `check_config(workload, config, ctx) -> config` (ValueError outside the space) and the dlight rule's name; `ctx`
    is the `ScheduleContext` (device, target, staging policy, knob source) every family is handed.
    `features(workload, config) -> feature_view.Seen | None`: the cost model's view of a candidate, as the direct
    conv it amounts to (None, or a view returning None: the cost models do not describe it); `row_knobs`: knobs
    of its own the feature row gets a column for, with their value when absent (`adreno.schedules.feature_view`);
    `launch(workload, config) -> occupancy.Launch | None`: what a config launches (what the occupancy rule judges;
    None where the family does not say)."""

    def __init__(self, name: str, knobs: dict[str, list], match: Callable, default_config: Callable,
                 check_config: Callable, rule_name: str, features: Callable | None = None,
                 row_knobs: dict[str, int] | None = None, launch: Callable | None = None):
        self.name, self.knobs, self.rule_name, self.features = name, knobs, rule_name, features
        self.row_knobs = dict(row_knobs or {})
        self.match, self.default_config, self.check_config = match, default_config, check_config
        self.launch = launch or (lambda workload, config: None)

    def __repr__(self) -> str:
        return f"Family({self.name!r})"

    def workload(self, func):
        """What `func` computes, when this family handles it; else None."""
        matched = self.matched(func)
        return None if matched is None else matched.workload

    def workload_key(self, func) -> str | None:
        """The key tuned knobs are stored under for `func`, or None when this family does not handle it."""
        matched = self.matched(func)
        return None if matched is None else matched.key

    def matched(self, func) -> Matched | None:
        from tvm import tirx

        return self.match(func) if isinstance(func, tirx.PrimFunc) else None

    def apply(self, func, ctx):
        """A scheduled `s_tir.Schedule` of `func`, None when this family does not handle it, or `Refused`. The knobs
        are the defaults (`default_config`, under the context's staging policy) with the tuned ones of the context's
        knob source over them (`ScheduleContext.knobs`). Knobs the family's check refuses go back to the source
        (`KnobSource.refuse`): compile's records move on to the next-fastest record, a tuning candidate is an error
        (ValueError)."""
        matched = self.matched(func)
        if matched is None:
            return None
        cfg = self.default_config(matched.workload, ctx)
        tuned = self._checked(matched, cfg, self._knobs(matched, ctx.knobs.tuned(matched.key)), ctx)
        if not tuned:  # compile's records may rank the space for a better default (`adreno.costmodel.ranked_defaults`)
            cfg = ctx.knobs.default(self, matched, cfg, ctx)
        cfg.update(tuned)
        try:
            return matched.schedule(cfg)
        except TVM_ERRORS as err:  # TVM's message ends a C++ traceback: its last line says why
            lines = str(err).strip().splitlines()
            return Refused(self.name, matched.key, cfg, lines[-1][:300] if lines else type(err).__name__)

    def _checked(self, matched: Matched, cfg: dict, tuned: dict, ctx) -> dict:
        """`tuned` if `check_config` accepts it over the defaults `cfg`; else what the knob source gives instead
        (`KnobSource.refuse`), checked again, down to {} (the defaults, which must pass the check)."""
        while True:
            try:
                self.check_config(matched.workload, {**cfg, **tuned}, ctx)
                return tuned
            except ValueError as err:
                if not tuned:
                    raise
                tuned = self._knobs(matched, ctx.knobs.refuse(matched.key, str(err)))

    @staticmethod
    def _knobs(matched: Matched, tuned: dict | None) -> dict:
        """The knobs of a tuned config that apply to `matched`, with the values older records imply."""
        tuned = {k: v for k, v in (tuned or {}).items() if matched.knobs is None or k in matched.knobs}
        return {**matched.older_records, **tuned} if tuned else {}

    def rule(self, ctx, refusals: list | None = None):
        """This family as a dlight ScheduleRule (None off OpenCL). A refusal falls through to the next rule and is
        appended to `refusals` when given."""
        from tvm.s_tir.dlight.base import ScheduleRule

        if ctx.target is None or ctx.target.kind.name != "opencl":
            return None
        family = self

        def _apply(rule, func, target, tunable):  # noqa: ARG001 - dlight's interface; the target is ctx's
            result = family.apply(func, ctx)
            if isinstance(result, Refused):
                if refusals is not None:
                    refusals.append(result)
                return None
            return result

        return type(self.rule_name, (ScheduleRule,), {"apply": _apply})()
