"""TVM FuseOps' partition of a primitive graph: the groups `adreno compile` would make, as sets of primitive names.

The module (numbered: primitive i bound to `p<i>`, `graph.numbered`) goes through the compile's own Relax pipeline
(`compile.lower_relax`, schedules "none"); a pass instrument keeps the module FuseOps returned. Each fused function
keeps its bindings' names except the last one, which FuseOps renames to its output; that one is found among the
unnamed primitives as the one calling the same PrimFunc on the same named arguments. A mapping that is not exact
(a binding of the pipeline's own, an ambiguous or missing last member, a primitive in two groups) is a
`FuseOpsMismatch` value, never a guessed partition: the groups become `required` candidates, and a wrong one would
make the "never worse than FuseOps" guarantee a false claim.
"""

from dataclasses import dataclass

import tvm
from tvm import relax

from adreno.compile import lower_relax
from adreno.options import Host, Memory, Schedules
from adreno.orchestrate.graph import BINDING_PREFIX, _operands
from adreno.schedules.context import ScheduleContext


@dataclass(frozen=True)
class FusedGroup:
    """One of FuseOps' fused functions: its name (e.g. `fused_conv2d_add_relu`) and the primitives it computes."""

    name: str
    primitives: frozenset


@dataclass(frozen=True)
class FuseOpsMismatch:
    """FuseOps' module could not be mapped back onto the primitives exactly; `reason` says where."""

    reason: str


def fuseops_groups(numbered_mod, graph, device, memory: Memory = Memory.BUFFER):
    """FuseOps' fused groups (FusedGroup, over `graph`'s primitive names; primitives left alone are not listed) of
    `numbered_mod`, as compiled for `device` (an `adreno.devices.AdrenoDevice`) in `memory`; or a FuseOpsMismatch."""
    ctx = ScheduleContext.for_device(device, host=Host.NATIVE)
    before, after = _capture(lambda: lower_relax(numbered_mod, ctx, Schedules.NONE, memory=memory))
    if before is None or after is None:
        return FuseOpsMismatch("the pipeline ran no FuseOps")
    calls = {b.var.name: b.value for b in _bindings(before["main"]) if isinstance(b.value, relax.Call)}
    functions = [(gv.name_hint, _bindings(f)) for gv, f in after.functions_items()
                 if isinstance(f, relax.Function) and gv.name_hint != "main"]
    fused = [members for _, members in functions]
    inside = {b.var.name for members in fused for b in members[:-1]}
    if not inside <= set(calls):
        return FuseOpsMismatch(f"fused functions bind {sorted(inside - set(calls))[:3]}, not primitives")
    unnamed = set(calls) - inside - {b.var.name for b in _bindings(after["main"])}
    groups, claimed = [], set()
    for members in fused:
        if not isinstance(members[-1].value, relax.Call):
            return FuseOpsMismatch("a fused function ends in a tuple (a group of several outputs)")
        named = {b.var.name for b in members[:-1]}
        last = _last_member(members[-1].value, named, unnamed - claimed, calls)
        if isinstance(last, FuseOpsMismatch):
            return last
        group = named | {last}
        if group & claimed:
            return FuseOpsMismatch(f"{sorted(group & claimed)} fall in two fused groups")
        claimed |= group
        groups.append(group)
    primitives = [p.name for p in graph.primitives]
    numbers = {f"{BINDING_PREFIX}{i}": name for i, name in enumerate(primitives)}
    if set(calls) != set(numbers):
        return FuseOpsMismatch(f"the pipeline's operator bindings {sorted(set(calls) ^ set(numbers))[:3]} are not "
                               "the graph's primitives")
    return [FusedGroup(name, frozenset(numbers[n] for n in group)) for (name, _), group in zip(functions, groups)]


def _last_member(call, named, candidates, calls):
    """The unnamed primitive that `call` (a fused function's last binding) is: same callee, same named operands."""
    operands = [_name(a) for a in _operands(call.args)]
    matches = [c for c in candidates
               if _callee(calls[c]) == _callee(call)
               and _same_named_operands(operands, [_name(a) for a in _operands(calls[c].args)], named)]
    if len(matches) != 1:
        return FuseOpsMismatch(f"{len(matches)} primitives match the last binding of a fused group of "
                               f"{sorted(named)}")
    return matches[0]


def _same_named_operands(fused, original, named):
    return len(fused) == len(original) and all(f == o for f, o in zip(fused, original) if f in named)


def _callee(call):
    return call.args[0].name_hint if isinstance(call.args[0], relax.GlobalVar) else str(call.op)


def _name(expr):
    return expr.name if isinstance(expr, relax.Var) else None


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def _capture(run):
    """The modules right before and right after FuseOps in the passes `run` executes."""
    seen = {}

    @tvm.instrument.pass_instrument
    class Keep:
        def run_before_pass(self, mod, info):
            if info.name == "FuseOps":
                seen["before"] = mod

        def run_after_pass(self, mod, info):
            if info.name == "FuseOps":
                seen["after"] = mod

    with tvm.transform.PassContext(instruments=[Keep()]):
        run()
    return seen.get("before"), seen.get("after")
