"""A candidate group as a Relax module of its own: what is measured as the group's kernel, and what its cost is
keyed by.

The module's `main` takes every value the group reads as a parameter, weights included (a kernel's time does not
depend on its weights' values, so two blocks of the same shapes share one measurement), except constants of at
most one element and immediates: those are part of the operator (GELU's 0.5, LayerNorm's epsilon, clip's bounds)
and change the kernel. In texture memory every constant stays in the measured module (a weight is a param image of
its own geometry in the model, which the launch plan gives constants only, `plan.extract_plan`), and the key is
that of the module buffer memory's rule builds, weights as parameters: blocks of equal shapes share a measurement
in both memories, and a model retrained (its weights changed, its blocks not) measures nothing again. It binds
the group's primitives in graph order and returns the values the kernel writes (`candidates.kernel_of`); an operator
fission split whose primitives are all in the group (`graph.Composite`) is bound whole instead, as the default compile
lowers it (so FuseOps' partition of the unsplit model is measured as that compile runs it). Parameters
are named by position, so the module's structural hash (`key`) is that of the computation and its shapes alone:
equal for the same group in another place of the model, or in another model.
"""

from dataclasses import dataclass

from tvm import relax

from adreno.options import Memory
from adreno.orchestrate.exprs import inline, substitute
from adreno.orchestrate.graph import inner_of


@dataclass(frozen=True)
class Subgraph:
    """The group's module, the graph values its parameters stand for (in order), the values it returns, and the
    module its key is the hash of (`mod` itself, but for texture memory's weights: the module doc)."""

    mod: object
    reads: tuple
    writes: tuple
    keyed: object

    @property
    def key(self) -> str:
        """The canonical subgraph and its shapes: the structural hash of the keyed module, then its signature."""
        import tvm_ffi

        func = self.keyed["main"]
        shapes = ",".join("x".join(str(int(d)) for d in p.ty.shape) for p in func.params)
        digest = int(tvm_ffi.structural_hash(self.keyed)) & (2 ** 64 - 1)
        return f"{digest:016x}|{shapes}|{len(self.writes)}"


def subgraph(graph, kernel, memory: Memory = Memory.BUFFER) -> Subgraph:
    """The module computing `kernel` (a `blp.Kernel` over `graph`'s primitives), measured in `memory`. Texture
    memory's module is the keyed one with its constant parameters bound (built once, not walked again)."""
    mod, reads, writes = _module(graph, kernel)
    if memory is Memory.BUFFER:
        return Subgraph(mod, reads, writes, mod)
    main = mod["main"]
    constants = {param: graph.values[v] for param, v in zip(main.params, reads)
                 if not isinstance(graph.values[v], relax.Var)}
    texture = mod.clone()
    texture["main"] = main.bind_params(constants)
    return Subgraph(texture, tuple(v for v in reads if isinstance(graph.values[v], relax.Var)), writes, mod)


def _module(graph, kernel) -> tuple:
    """(the module, the values its parameters stand for, the values it returns), the values `exprs.inline` says are
    part of the operator kept in the module rather than being parameters."""
    whole = {c.final: c for c in graph.whole_in(kernel.primitives)}
    inner = inner_of(whole.values())
    order = [p for p in graph.primitives if p.name in kernel.primitives]
    reads = []
    for p in order:
        reads += [v for v in p.inputs if v in kernel.inputs and v not in reads and not inline(graph.values[v])]
    writes = tuple(p.name for p in order if p.name in kernel.outputs)
    params = [relax.Var(f"in{i}", graph.values[v].ty) for i, v in enumerate(reads)]
    mapping = {graph.values[v]: param for v, param in zip(reads, params)}
    callees = {}
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            for p in order:
                if p.name in inner:
                    continue
                composite = whole.get(p.name)
                call = (composite.call_in(graph.values, mapping) if composite
                        else substitute(graph.calls[p.name], mapping))
                callees.update({a.name_hint: a for a in call.args if isinstance(a, relax.GlobalVar)})
                mapping[graph.values[p.name]] = bb.emit(call, name_hint=f"t{len(mapping)}")
            outs = [mapping[graph.values[w]] for w in writes]
            out = bb.emit_output(outs[0] if len(outs) == 1 else relax.Tuple(outs))
        bb.emit_func_output(out)
    mod = bb.get()
    for gvar in callees.values():
        mod[gvar] = graph.functions[gvar.name_hint]
    return mod, tuple(reads), writes

