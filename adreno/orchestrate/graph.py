"""The primitive graph of a fissioned Relax module: one Primitive per operator binding of `main`'s dataflow.

Values that are not bound by an operator call in the dataflow block (function parameters, constants) are external:
graph inputs and weights, which every kernel may read. Conv and matmul are the heavy primitives (the one our
schedule families are built around); everything else is light (elementwise, broadcast, reduction, layout).
"""

from dataclasses import dataclass

from tvm import relax

from adreno.orchestrate.candidates import Primitive

HEAVY_OPS = frozenset({"relax.nn.conv2d", "relax.matmul", "relax.nn.conv2d_transpose", "relax.nn.conv1d"})


@dataclass(frozen=True)
class PrimitiveGraph:
    """Primitives in topological order, the model outputs among their values, the external values read."""

    primitives: tuple
    outputs: tuple
    external: frozenset


def primitive_graph(mod) -> PrimitiveGraph:
    """Read `main`'s bindings into a PrimitiveGraph; variables that only rename others are followed through.

    Values are named `v<i>:<hint>` by binding order, since fission's fresh variables may repeat a name hint."""
    func = mod["main"]
    names, prims, external = {}, [], set()

    def value(arg):
        if isinstance(arg, relax.Var):
            if arg not in names:
                names[arg] = arg.name
                external.add(arg.name)
            return names[arg]
        name = f"const{len(external)}"
        external.add(name)
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
            prims.append(Primitive(names[binding.var], args, heavy=op in HEAVY_OPS))
    body = func.body.body
    outs = body.fields if isinstance(body, relax.Tuple) else [body]
    return PrimitiveGraph(tuple(prims), tuple(value(o) for o in outs), frozenset(external))


def _operands(args):
    """The tensor operands of a call: tuples (call_tir's argument tuple, concat's) flattened; the callee and shapes
    dropped, since they are not values a kernel reads."""
    for arg in args:
        if isinstance(arg, relax.Tuple):
            yield from _operands(arg.fields)
        elif not isinstance(arg, (relax.GlobalVar, relax.ShapeExpr)):
            yield arg
