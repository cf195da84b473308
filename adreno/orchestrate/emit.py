"""The chosen kernels into the artifact: TVM's FuseOps, run so that it fuses only inside each chosen kernel.

A candidate's cost was measured on its own module, lowered the normal way (`costs.py`): FuseOps ran on that group
alone, and its kernels are what the cost is the time of. The compile reproduces exactly that. `fuse_within(partition)`
replaces FuseOps in the buffer pipeline (`compile.lower_relax`'s `fuse`). Right where FuseOps would run, `main`'s
bindings (legalized `call_tir`s, still named `p<i>` by `graph.numbered`) are moved into one private function per
chosen kernel; TVM's own FuseOps then runs on that module, and since it never fuses across a call it fuses inside
each function only; the functions are inlined back into `main`, and FuseTIR and the rest of the pipeline follow
unchanged. So the artifact launches, for every chosen kernel, the kernels its measured candidate launched.

Chosen kernels may overlap (the BLP allows recomputation): a primitive in two of them is computed by both, and a
value several of them write is read from the first. A binding in no kernel (the pipeline's own alias of an output)
stays in `main` where its operands are ready. The order is a topological one of the kernels; a choice whose kernels
read each other's outputs has none, which `partition.py` finds first and replaces by FuseOps' partition of the block.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from adreno.errors import AdrenoError
from adreno.orchestrate.exprs import substitute


@dataclass(frozen=True)
class EmittedKernel:
    """One chosen kernel: its bindings (`p<i>`, in graph order) and those it writes for others or as outputs;
    `label` names its operators (`conv2d+add`) for the manifest."""

    members: tuple
    writes: tuple
    label: str


def topological(reads: list, writes: list) -> list[int] | None:
    """An order of units (unit i reads `reads[i]`, writes `writes[i]`) in which every value is written before it
    is read, its writer the earliest unit writing it; values no unit writes are external. None if there is none."""
    writer = {}
    for i, values in enumerate(writes):
        for v in values:
            writer.setdefault(v, i)
    needs = [{writer[v] for v in values if v in writer} - {i} for i, values in enumerate(reads)]
    order, done = [], set()
    while len(order) < len(needs):
        ready = next((i for i in range(len(needs)) if i not in done and needs[i] <= done), None)
        if ready is None:
            return None
        order.append(ready)
        done.add(ready)
    return order


def fuse_within(kernels: tuple, emitted: dict):
    """The pass that replaces FuseOps: fusion inside each of `kernels` (EmittedKernels) only. `emitted` is filled,
    per kernel index, with the names of the functions FuseOps made of it (or the PrimFunc of a single call)."""

    @tvm.transform.module_pass(opt_level=0, name="FuseOpsWithinKernels")
    def run(mod, _ctx):
        main = mod["main"]
        bindings = [b for block in main.body.blocks for b in block.bindings]
        by_name = {b.var.name: b for b in bindings}
        claimed = {m for k in kernels for m in k.members}
        missing = claimed - set(by_name)
        if missing:
            raise AdrenoError(f"orchestration: the pipeline's module has no bindings {sorted(missing)[:3]}; the "
                              "choice was made on another module")
        units = [([by_name[m] for m in k.members], [by_name[w].var for w in k.writes]) for k in kernels]
        units += [([b], [b.var]) for b in bindings if b.var.name not in claimed]
        reads = [_reads(members) for members, _ in units]
        order = topological(reads, [writes for _, writes in units])
        if order is None:
            raise AdrenoError("orchestration: the chosen kernels read each other's outputs (no order exists)")
        rest = tvm.IRModule({gv: f for gv, f in mod.functions_items() if gv.name_hint != "main"})
        builder = relax.BlockBuilder(rest)
        grouped = {i: builder.add_func(_kernel_function(*units[i], reads[i], i), f"orchestrated_kernel{i}")
                   for i in range(len(kernels))}
        fused = relax.transform.FuseOps()(builder.get())
        return _inlined(fused, main, units, reads, order, grouped, emitted)

    return run


def _reads(members) -> list:
    """The variables the bindings `members` read that none of them binds."""
    inside = {b.var for b in members}
    reads = []
    for b in members:
        for v in ([b.value] if isinstance(b.value, relax.Var) else relax.analysis.free_vars(b.value)):
            if v not in inside and v not in reads:
                reads.append(v)
    return reads


def _kernel_function(members, writes, reads, index: int):
    """A private function binding `members` on parameters standing for what they read (`reads`), returning
    `writes`."""
    params = [relax.Var(f"in{k}", v.ty) for k, v in enumerate(reads)]
    local = dict(zip(reads, params))
    builder = relax.BlockBuilder()
    with builder.function(f"orchestrated_kernel{index}", params, private=True):
        with builder.dataflow():
            for b in members:
                local[b.var] = builder.emit(substitute(b.value, local), name_hint=b.var.name)
            outs = [local[w] for w in writes]
            out = builder.emit_output(outs[0] if len(outs) == 1 else relax.Tuple(outs))
        builder.emit_func_output(out)
    return builder.get()[f"orchestrated_kernel{index}"]


def _inlined(fused, main, units, reads, order, grouped, emitted):
    """`fused` with `main` rebuilt in `order`: each kernel function's (fused) body in place of its call."""
    kernel_names = {gv.name_hint for gv in grouped.values()}
    rest = tvm.IRModule({gv: f for gv, f in fused.functions_items()
                         if gv.name_hint != "main" and gv.name_hint not in kernel_names})
    builder = relax.BlockBuilder(rest)
    mapping = {}
    with builder.function("main", list(main.params), attrs=dict(main.attrs) if main.attrs else None):
        with builder.dataflow():
            for i in order:
                members, writes = units[i]
                if i not in grouped:
                    b = members[0]
                    value = substitute(b.value, mapping)
                    mapping[b.var] = value if isinstance(value, relax.Var) else builder.emit(value, b.var.name)
                    continue
                func = fused[grouped[i].name_hint]
                local = dict(zip(func.params, [mapping.get(v, v) for v in reads[i]]))
                callees = []
                for block in func.body.blocks:
                    for b in block.bindings:
                        value = substitute(b.value, local)
                        if isinstance(value, (relax.Var, relax.Tuple)):  # an alias, or the writes gathered
                            local[b.var] = value
                            continue
                        if isinstance(value, relax.Call):
                            callees.append(_callee_name(value))
                        local[b.var] = builder.emit(value)
                emitted[i] = callees
                result = substitute(func.body.body, local)
                fields = result.fields if isinstance(result, relax.Tuple) else [result]
                mapping.update(zip(writes, fields))
            out = builder.emit_output(substitute(main.body.body, mapping))
        builder.emit_func_output(out)
    return builder.get()


def _callee_name(call) -> str:
    """The function a binding calls: a fused function's name, or the PrimFunc of a lone `call_tir`."""
    target = call.op if isinstance(call.op, relax.GlobalVar) else call.args[0]
    return target.name_hint if isinstance(target, relax.GlobalVar) else str(call.op)
