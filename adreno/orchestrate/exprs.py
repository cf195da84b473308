"""Relax expression helpers shared by fission, the primitive graph, subgraphs and emission: which operands a call
reads, which values are part of an operator rather than data, and substitution of variables.

One rule each, so that fission's record of what a composite operator reads (`fission.Template`) lists the same
values, in the same order, as the primitive graph built from the fissioned module (`graph.Composite`).
"""

import tvm
from tvm import relax


def operands(args):
    """The tensor operands of a call: tuples (call_tir's argument tuple, concat's) flattened; the callee and shapes
    dropped, since they are not values a kernel reads."""
    for arg in args:
        if isinstance(arg, relax.Tuple):
            yield from operands(arg.fields)
        elif not isinstance(arg, (relax.GlobalVar, relax.ShapeExpr)):
            yield arg


def inline(value) -> bool:
    """A constant of at most one element, or an immediate (a `PrimValue` such as clip's bounds): part of the
    operator (GELU's 0.5, LayerNorm's epsilon), kept in a kernel's module rather than passed to it."""
    if isinstance(value, relax.Var):
        return False
    return not isinstance(value, tvm.ir.expr.GenericConst) or int(value.value.numpy().size) <= 1


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
