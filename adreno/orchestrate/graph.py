"""The primitive graph of a fissioned Relax module: one Primitive per operator binding of `main`'s dataflow.

Values that are not bound by an operator call in the dataflow block (function parameters, constants) are external:
graph inputs and weights, which every kernel may read. Conv and matmul are the heavy primitives (the one our
schedule families are built around), and so is a Winograd conv's batched GEMM (`adreno.winograd`: a module rewritten
before fission has its three stages as `call_tir`s); everything else is light (elementwise, broadcast, reduction,
layout, the Winograd transforms).

`numbered(mod)` first renames primitive i's variable to `p<i>` (aliases dropped): TVM's passes keep a binding's name
hint, so FuseOps' fused functions can be mapped back to primitives by name (`fuseops.py`), and a group's bindings
can be rebuilt into a small function of their own (`subgraph.py`) from `PrimitiveGraph.calls` and `values`.
"""

from dataclasses import dataclass, field

import tvm
from tvm import relax

from adreno.orchestrate.candidates import Primitive
from adreno.orchestrate.fission import fission
from adreno.winograd import is_gemm_function

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


def primitive_graph(mod) -> PrimitiveGraph:
    """Read `main`'s bindings into a PrimitiveGraph; variables that only rename others are followed through.

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
            args = tuple(value(a) for a in _operands(getattr(rhs, "args", ())))
            op = getattr(getattr(rhs, "op", None), "name", "tuple")
            names[binding.var] = f"v{len(prims)}:{binding.var.name}"
            values[names[binding.var]] = binding.var
            calls[names[binding.var]] = rhs
            prims.append(Primitive(names[binding.var], args, heavy=_heavy(rhs, op)))
    body = func.body.body
    outs = body.fields if isinstance(body, relax.Tuple) else [body]
    functions = {gv.name_hint: f for gv, f in mod.functions_items() if gv.name_hint != "main"}
    return PrimitiveGraph(tuple(prims), tuple(value(o) for o in outs), frozenset(external), calls, values,
                          functions)


def _heavy(call, op: str) -> bool:
    return op in HEAVY_OPS or (op == "relax.call_tir" and is_gemm_function(call.args[0].name_hint))


def op_name(call) -> str:
    """An operator's short name (`conv2d`, `add`); a call_tir the importer emitted (ReLU6's clip) is named by its
    PrimFunc."""
    name = call.op.name.split(".")[-1]
    return call.args[0].name_hint if name == "call_tir" else name


def prepared(mod):
    """The module orchestration works on: fissioned, primitives of constants only folded (the weight arithmetic the
    importer leaves, which the compile folds too, so it is no kernel to choose), primitives numbered."""
    return numbered(relax.transform.FoldConstant()(fission(mod)))


def numbered(mod):
    """`mod` with `main`'s i-th operator binding named `p<i>` and variable-to-variable aliases substituted away."""
    func = mod["main"]
    bb = relax.BlockBuilder()
    mapping = {}
    with bb.function("main", list(func.params), attrs=dict(func.attrs) if func.attrs else None):
        with bb.dataflow():
            count = 0
            for block in func.body.blocks:
                for binding in block.bindings:
                    rhs = substitute(binding.value, mapping)
                    if isinstance(rhs, relax.Var):
                        mapping[binding.var] = rhs
                        continue
                    mapping[binding.var] = bb.emit(rhs, name_hint=f"{BINDING_PREFIX}{count}")
                    count += 1
            out = bb.emit_output(substitute(func.body.body, mapping))
        bb.emit_func_output(out)
    result = bb.get()
    for gv, other in mod.functions_items():
        if gv.name_hint != "main":
            result[gv] = other
    return result


def substitute(expr, mapping):
    """`expr` with the variables (and constants) of `mapping` replaced, through tuples, their items and call
    arguments."""
    if isinstance(expr, (relax.Var, tvm.ir.expr.GenericConst)):
        return mapping.get(expr, expr)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([substitute(f, mapping) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(substitute(expr.tuple_value, mapping), expr.index)
    if isinstance(expr, relax.Call):
        return relax.Call(expr.op, [substitute(a, mapping) for a in expr.args], expr.attrs, expr.ty_args)
    return expr


def _operands(args):
    """The tensor operands of a call: tuples (call_tir's argument tuple, concat's) flattened; the callee and shapes
    dropped, since they are not values a kernel reads."""
    for arg in args:
        if isinstance(arg, relax.Tuple):
            yield from _operands(arg.fields)
        elif not isinstance(arg, (relax.GlobalVar, relax.ShapeExpr)):
            yield arg
