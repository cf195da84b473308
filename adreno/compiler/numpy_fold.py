"""Constant folding of Relax's elementwise and data-movement ops in numpy, before TVM's own `FoldConstant`.

TVM's `FoldConstant` evaluates a call whose arguments are all constants by legalizing it to a PrimFunc, building
that with LLVM and running it: about 40 ms per call on this machine. `DecomposeOpsForInference` turns each batch
norm into a chain of such calls on its constant parameters (`sqrt(var + eps)`, `gamma / ...`, reshapes), so
MobileNetV2's 52 batch norms cost about 800 LLVM builds, most of its compile time.

This pass evaluates those calls in numpy instead, before legalization, and leaves everything else to TVM's pass.
It folds only ops whose numpy result is the same, bit for bit, as the built PrimFunc's:
- IEEE-754 elementwise arithmetic (add, subtract, multiply, divide, sqrt, negative) on float operands of one
  dtype, each correctly rounded in both (TVM's LLVM build contracts and reorders nothing across separate calls:
  each call is its own PrimFunc);
- comparisons and selection (isnan, where) and casts between float dtypes (round to nearest even in both);
- pure data movement (reshape, permute_dims, expand_dims, squeeze).
A call whose numpy result would not have the shape and dtype Relax inferred for it is left unfolded, so the pass
can only ever hand TVM's `FoldConstant` less work, never a different value (`tests/test_numpy_fold.py` checks the
artifact's weights and kernels against a compile without this pass)."""

from __future__ import annotations

import numpy as np

FLOATS = ("float16", "float32", "float64")


def _attr(call, name):
    value = getattr(call.attrs, name, None)
    return None if value is None else [int(v) for v in value] if hasattr(value, "__len__") else int(value)


def _floats(*arrays) -> bool:
    return all(a.dtype.name in FLOATS for a in arrays) and len({a.dtype for a in arrays}) == 1


def _binary(fn):
    def apply(_call, a, b):
        return fn(a, b) if _floats(a, b) else None
    return apply


def _unary(fn):
    def apply(_call, a):
        return fn(a) if _floats(a) else None
    return apply


def _reshape(_call, a, shape):
    return a.reshape(shape)


def _permute_dims(call, a):
    axes = _attr(call, "axes")
    return np.transpose(a, axes)


def _expand_dims(call, a):
    out = a
    for axis in sorted(ax % (a.ndim + len(_attr(call, "axis"))) for ax in _attr(call, "axis")):
        out = np.expand_dims(out, axis)
    return out


def _squeeze(call, a):
    axis = _attr(call, "axis")
    return np.squeeze(a, axis=None if axis is None else tuple(axis))


def _astype(call, a):
    dtype = str(call.attrs.dtype)
    return a.astype(dtype) if a.dtype.name in FLOATS and dtype in FLOATS else None


def _where(_call, cond, a, b):
    return np.where(cond, a, b) if cond.dtype == np.bool_ and _floats(a, b) else None


def _isnan(_call, a):
    return np.isnan(a) if _floats(a) else None


# Relax op name -> numpy evaluation (None: leave the call to TVM).
EVALUATORS = {
    "relax.add": _binary(np.add),
    "relax.subtract": _binary(np.subtract),
    "relax.multiply": _binary(np.multiply),
    "relax.divide": _binary(np.divide),
    "relax.sqrt": _unary(np.sqrt),
    "relax.negative": _unary(np.negative),
    "relax.isnan": _isnan,
    "relax.where": _where,
    "relax.astype": _astype,
    "relax.reshape": _reshape,
    "relax.permute_dims": _permute_dims,
    "relax.expand_dims": _expand_dims,
    "relax.squeeze": _squeeze,
}


def _expected(call):
    """The (shape, dtype) Relax inferred for the call, or None when it is not a static tensor."""
    info = call.ty
    shape = getattr(info, "shape", None)
    values = getattr(shape, "values", None)
    if values is None or not all(hasattr(v, "value") for v in values):
        return None
    return tuple(int(v.value) for v in values), str(info.dtype)


def fold(mod):
    """`mod` with every foldable constant call of its Relax functions replaced by its value."""
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class _Folder(relax.expr_functor.PyExprMutator):
        def _value(self, arg):
            if isinstance(arg, relax.ShapeExpr):
                values = [getattr(v, "value", None) for v in arg.values]
                return None if None in values else [int(v) for v in values]
            if isinstance(arg, relax.Var):
                arg = self.lookup_binding(arg)
            if not isinstance(arg, tvm.ir.expr.Constant):
                return None
            value = arg.value  # an NDArray, or a Python scalar for a rank-0 constant
            return value.numpy() if hasattr(value, "numpy") else np.array(value, dtype=str(arg.ty.dtype))

        def visit_call_(self, call):  # noqa: N802 - visitor protocol
            call = self.builder_.normalize(super().visit_call_(call))
            evaluate = EVALUATORS.get(getattr(call.op, "name", None)) if isinstance(call.op, tvm.ir.Op) else None
            expected = _expected(call) if evaluate else None
            if expected is None:
                return call
            values = [self._value(a) for a in call.args]
            if any(v is None for v in values):
                return call
            with np.errstate(all="ignore"):
                result = evaluate(call, *values)
            if result is None or (tuple(result.shape), result.dtype.name) != expected:
                return call
            return relax.const(np.array(result, order="C"), expected[1])  # (np.ascontiguousarray: 0-d -> 1-d)

    folder = _Folder(mod)
    for gvar, func in mod.functions.items():
        if isinstance(func, relax.Function):
            folder.builder_.update_func(gvar, folder.visit_expr(func))
    return folder.builder_.get()


def fold_constants(mod):
    """All of `mod`'s constant calls folded: numpy's share first (`fold`), then TVM's `FoldConstant` for the rest."""
    from tvm import relax

    return relax.transform.FoldConstant()(fold(mod))


def fold_pass():
    """`fold` as a module pass, for a pass list (before legalization: it folds Relax ops, not PrimFunc calls)."""
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="adreno.NumpyFoldConstant")
    def _pass(mod, _ctx):
        return fold(mod)

    return _pass
