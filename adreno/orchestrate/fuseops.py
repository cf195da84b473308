"""TVM FuseOps' partition of a primitive graph: the groups `adreno compile` would make, as sets of primitive names.

The module (numbered: primitive i bound to `p<i>`, `graph.numbered`) goes through the compile's own Relax pipeline
(`compile.lower_relax`, schedules "none"); a pass instrument keeps the modules right before and after FuseOps.
FuseOps leaves `main` calling one function per fused group, and calls one function at every site of identical
groups (the four Winograd epilogues of ResNet-18's first stage are two functions, each called at two
sites). So the groups are read per call site: each binding of the called function is matched to the one unclaimed
primitive of `main` before FuseOps with the same callee on the same operands (the site's arguments, values bound
earlier in the function, constants by their structure; a site's own result stands for its group's output). A
mapping that is not exact (no or several matches, a binding of the pipeline's own, a group of several outputs) is a
`FuseOpsMismatch` value, never a guessed partition: the groups become `required` candidates, and a wrong one would
make the "never worse than FuseOps" guarantee a false claim.

Given the graph's composites (the operators fission split, `graph.Composite`), the partition is that of the unsplit
model, which is what `adreno compile` makes: each composite is bound whole first (`graph.recomposed`), its binding
stands for all of its primitives, and a composite FuseOps leaves alone is a group too (one kernel of several
primitives).
"""

from dataclasses import dataclass

import tvm
from tvm import relax

from adreno.compile import lower_relax
from adreno.options import Host, Memory, Schedules
from adreno.orchestrate.exprs import operands
from adreno.orchestrate.graph import binding_of, inner_of, recomposed
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


def fuseops_groups(numbered_mod, graph, device, memory: Memory = Memory.BUFFER, composites=()):
    """FuseOps' fused groups (FusedGroup, over `graph`'s primitive names, one per call site; primitives left alone
    are not listed) of `numbered_mod` with `composites` (of `graph`) bound whole, as compiled for `device` (an
    `adreno.targets.devices.AdrenoDevice`) in `memory`; or a FuseOpsMismatch."""
    ctx = ScheduleContext.for_device(device, host=Host.NATIVE)
    mod = recomposed(numbered_mod, graph, composites)
    before, after = _capture(lambda: lower_relax(mod, ctx, Schedules.NONE, memory=memory))
    if before is None or after is None:
        return FuseOpsMismatch("the pipeline ran no FuseOps")
    calls = {b.var.name: b.value for b in _bindings(before["main"]) if isinstance(b.value, relax.Call)}
    inner = inner_of(composites)
    numbers = {binding_of(p.name): p.name for p in graph.primitives if p.name not in inner}
    stands_for = {binding_of(c.final): c.members for c in composites}
    if set(calls) != set(numbers):
        return FuseOpsMismatch(f"the pipeline's operator bindings {sorted(set(calls) ^ set(numbers))[:3]} are not "
                               "the graph's primitives")
    producers = {}
    for name, call in calls.items():
        producers.setdefault(_signature(call, lambda var: var.name), []).append(name)
    groups, claimed, site_output = [], set(), {}
    for site in _bindings(after["main"]):
        if not (isinstance(site.value, relax.Call) and isinstance(site.value.op, relax.GlobalVar)):
            continue
        func = after[site.value.op]
        # a parameter stands for the site's argument: a value of main (a site's result is its group's output
        # primitive) or a constant
        inside = {param: (site_output.get(arg.name, arg.name) if isinstance(arg, relax.Var) else _constant(arg))
                  for param, arg in zip(func.params, site.value.args)}
        members = []
        for binding in _bindings(func):
            if not isinstance(binding.value, relax.Call):
                return FuseOpsMismatch(f"{site.value.op.name_hint} binds a {type(binding.value).__name__}")
            signature = _signature(binding.value, lambda var: inside.get(var, var.name))
            matches = [p for p in producers.get(signature, []) if p not in claimed]
            if len(matches) != 1:
                return FuseOpsMismatch(f"{len(matches)} primitives match {binding.var.name} of a call of "
                                       f"{site.value.op.name_hint}")
            inside[binding.var] = matches[0]
            members.append(matches[0])
            claimed.add(matches[0])
        result = func.body.body
        if not isinstance(result, relax.Var) or inside.get(result) not in members:
            return FuseOpsMismatch(f"{site.value.op.name_hint} returns a group of several outputs")
        site_output[site.var.name] = inside[result]
        groups.append(FusedGroup(site.value.op.name_hint, _members(members, numbers, stands_for)))
    alone = [name for name in stands_for if name not in claimed]
    return groups + [FusedGroup(_callee(calls[name]), stands_for[name]) for name in alone]


def _members(bindings, numbers, stands_for) -> frozenset:
    """The primitives a group's bindings compute: a composite's binding stands for all of its primitives."""
    return frozenset(p for b in bindings for p in stands_for.get(b, {numbers[b]}))


def _signature(call, value_of) -> tuple:
    """A call as its callee and operands: a variable as `value_of(var)` says, a constant by its structure."""
    return (_callee(call),) + tuple(value_of(a) if isinstance(a, relax.Var) else _constant(a)
                                    for a in operands(call.args))


def _constant(expr) -> tuple:
    import tvm_ffi

    return ("const", int(tvm_ffi.structural_hash(expr)))


def _callee(call):
    return call.args[0].name_hint if isinstance(call.args[0], relax.GlobalVar) else str(call.op)


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
