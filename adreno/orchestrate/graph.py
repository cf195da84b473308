"""The primitive graph of a fissioned Relax module: one Primitive per operator binding of `main`'s dataflow.

Values that are not bound by an operator call in the dataflow block (function parameters, constants) are external:
graph inputs and weights, which every kernel may read. Conv and matmul are the heavy primitives (the one our
schedule families are built around), and so are a Winograd conv's batched GEMM (`adreno.compiler.winograd`: a module
rewritten before fission has its three stages as `call_tir`s) and a packed conv of texture memory's layout planning
(`texture.planning`); everything else is light (elementwise, broadcast, reduction, layout, packing, the Winograd
transforms).

`numbered(mod)` first renames primitive i's variable to `p<i>` (aliases dropped): TVM's passes keep a binding's name
hint, so FuseOps' fused functions can be mapped back to primitives by name (`fuseops.py`), and a group's bindings
can be rebuilt into a small function of their own (`subgraph.py`) from `PrimitiveGraph.calls` and `values`.

`prepared_graph` also keeps, as `Composite`s, the operators fission split (softmax, LayerNorm, GELU, SiLU), so that a
kernel holding all of one's primitives is lowered with the operator itself (`Composite.call_in`), and FuseOps'
partition of the unsplit model, which is today's compile, can be read (`fuseops.py`).
"""

from dataclasses import dataclass, field

from tvm import relax

from adreno.orchestrate.candidates import Primitive
from adreno.orchestrate.exprs import inline, operands, substitute
from adreno.orchestrate.fission import COMPOSITE_HINT, fission_with_templates
from adreno.texture.planning import is_packed_conv_function
from adreno.compiler.winograd import is_gemm_function

BINDING_PREFIX = "p"  # primitive i's variable is `p<i>` in a `numbered` module
HEAVY_OPS = frozenset({"relax.nn.conv2d", "relax.matmul", "relax.nn.conv2d_transpose", "relax.nn.conv1d"})


@dataclass(frozen=True)
class PrimitiveGraph:
    """Primitives in topological order, the model outputs among their values, the external values read; `calls`
    (primitive name -> its Relax call) and `values` (value name -> the Relax variable or constant it names)."""

    primitives: tuple
    outputs: tuple
    external: frozenset
    calls: dict = field(default_factory=dict, compare=False)
    values: dict = field(default_factory=dict, compare=False)
    functions: dict = field(default_factory=dict, compare=False)
    composites: tuple = field(default=(), compare=False)

    def whole_in(self, group) -> list:
        """The composites all of whose primitives are in `group`."""
        return [c for c in self.composites if c.members <= group]


@dataclass(frozen=True)
class Composite:
    """An operator fission split: its primitives, the last of them (whose value is the operator's), and the
    operator's call over `params`, which stand for `operands` (the graph values its primitives read from outside
    them, in `exprs.operands` order)."""

    members: frozenset
    final: str
    operands: tuple
    params: tuple
    call: object

    @property
    def inner(self) -> frozenset:
        """The primitives whose values only the operator itself reads."""
        return self.members - {self.final}

    def call_in(self, values, mapping) -> relax.Call:
        """The operator on its operands: `values` (graph value name -> expression) as `mapping` replaces them."""
        args = [substitute(values[v], mapping) for v in self.operands]
        return substitute(self.call, dict(zip(self.params, args)))


def inner_of(composites) -> frozenset:
    """The inner primitives of `composites`: those that leave a module binding them whole."""
    return frozenset().union(*(c.inner for c in composites))


def binding_of(primitive: str) -> str:
    """The name of primitive `v<i>:p<i>`'s variable in the numbered module it was read from: `p<i>`."""
    return primitive.split(":", 1)[1]


def prepared_graph(mod):
    """(`prepared(mod)`, its PrimitiveGraph with its composites)."""
    split, templates = fission_with_templates(mod)
    hints = {}
    mod = numbered(relax.transform.FoldConstant()(split), hints)
    return mod, primitive_graph(mod, {name: templates[m.group(1)] for name, hint in hints.items()
                                      if (m := COMPOSITE_HINT.fullmatch(hint)) and m.group(1) in templates})


def primitive_graph(mod, templates=None) -> PrimitiveGraph:
    """Read `main`'s bindings into a PrimitiveGraph; variables that only rename others are followed through.
    `templates`: binding name `p<i>` -> the `fission.Template` of the operator it is a primitive of.

    Values are named `v<i>:<hint>` by binding order, since fission's fresh variables may repeat a name hint."""
    func = mod["main"]
    names, prims, external, calls, values = {}, [], set(), {}, {}

    def value(arg):
        if isinstance(arg, relax.Var):
            if arg not in names:
                names[arg] = arg.name
                external.add(arg.name)
                values[arg.name] = arg
            return names[arg]
        name = f"const{len(external)}"
        external.add(name)
        values[name] = arg
        return name

    for block in func.body.blocks:
        for binding in block.bindings:
            rhs = binding.value
            if isinstance(rhs, relax.Var):
                names[binding.var] = value(rhs)
                continue
            args = tuple(value(a) for a in operands(getattr(rhs, "args", ())))
            op = getattr(getattr(rhs, "op", None), "name", "tuple")
            names[binding.var] = f"v{len(prims)}:{binding.var.name}"
            values[names[binding.var]] = binding.var
            calls[names[binding.var]] = rhs
            prims.append(Primitive(names[binding.var], args, heavy=_heavy(rhs, op)))
    body = func.body.body
    outs = body.fields if isinstance(body, relax.Tuple) else [body]
    functions = {gv.name_hint: f for gv, f in mod.functions_items() if gv.name_hint != "main"}
    outputs = tuple(value(o) for o in outs)
    return PrimitiveGraph(tuple(prims), outputs, frozenset(external), calls, values, functions,
                          _composites(prims, outputs, values, templates or {}))


def _composites(prims, outputs, values, templates) -> tuple:
    """The composites whose primitives all survived constant folding and whose inner values nothing else reads:
    those a kernel can compute with the operator itself."""
    members = {}
    for p in prims:
        template = templates.get(binding_of(p.name))
        if template is not None:
            members.setdefault(id(template), (template, []))[1].append(p)
    read_by = {}
    for p in prims:
        for v in p.inputs:
            read_by.setdefault(v, set()).add(p.name)
    found = []
    for template, inside in members.values():
        names = frozenset(p.name for p in inside)
        reads = []
        for p in inside:
            for v in p.inputs:
                if v not in names and not inline(values[v]) and v not in reads:
                    reads.append(v)
        final = inside[-1].name
        private = all(read_by.get(p.name, set()) <= names and p.name not in outputs for p in inside[:-1])
        if len(inside) == template.size and len(reads) == len(template.params) and private:
            found.append(Composite(names, final, tuple(reads), template.params, template.call))
    return tuple(found)


def _heavy(call, op: str) -> bool:
    if op != "relax.call_tir":
        return op in HEAVY_OPS
    name = call.args[0].name_hint
    return is_gemm_function(name) or is_packed_conv_function(name)


def op_name(call) -> str:
    """An operator's short name (`conv2d`, `add`); a call_tir the importer emitted (ReLU6's clip) is named by its
    PrimFunc."""
    name = call.op.name.split(".")[-1]
    return call.args[0].name_hint if name == "call_tir" else name


def prepared(mod):
    """The module orchestration works on: fissioned, primitives of constants only folded (the weight arithmetic the
    importer leaves, which the compile folds too, so it is no kernel to choose), primitives numbered."""
    return prepared_graph(mod)[0]


def recomposed(mod, graph, composites):
    """`mod` (the numbered module `graph` was read from) with each of `composites` bound whole: its inner bindings
    dropped and its last one, still `p<i>`, the operator itself."""
    final = {binding_of(c.final): c for c in composites}
    inner = {binding_of(p) for p in inner_of(composites)}

    def rebind(binding, mapping):
        name, composite = binding.var.name, final.get(binding.var.name)
        if name in inner:
            return None
        if composite is None:
            return substitute(binding.value, mapping), name
        return composite.call_in(graph.values, mapping), name

    return _rebuilt(mod, rebind)


def numbered(mod, hints=None):
    """`mod` with `main`'s i-th operator binding named `p<i>` and variable-to-variable aliases substituted away;
    `hints`, if given, is filled with each `p<i>`'s former name."""
    names = hints if hints is not None else {}

    def rebind(binding, mapping):
        rhs = substitute(binding.value, mapping)
        if isinstance(rhs, relax.Var):
            return rhs, None
        name = f"{BINDING_PREFIX}{len(names)}"
        names[name] = binding.var.name
        return rhs, name

    return _rebuilt(mod, rebind)


def _rebuilt(mod, rebind):
    """`mod` with `main`'s dataflow rebuilt binding by binding: `rebind(binding, mapping)` (mapping: old variables to
    new values) gives None to drop it, (a variable, None) to alias it, or (the value, its variable's name)."""
    func = mod["main"]
    bb = relax.BlockBuilder()
    mapping = {}
    with bb.function("main", list(func.params), attrs=dict(func.attrs) if func.attrs else None):
        with bb.dataflow():
            for block in func.body.blocks:
                for binding in block.bindings:
                    rebound = rebind(binding, mapping)
                    if rebound is not None:
                        value, name = rebound
                        mapping[binding.var] = value if name is None else bb.emit(value, name_hint=name)
            out = bb.emit_output(substitute(func.body.body, mapping))
        bb.emit_func_output(out)
    result = bb.get()
    for gv, other in mod.functions_items():
        if gv.name_hint != "main":
            result[gv] = other
    return result
