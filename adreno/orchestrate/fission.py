"""Operator fission: a Relax rewrite that splits composite operators into tensor-algebra primitives.

After `fission(mod)` the graph holds only elementwise, broadcast, reduction (max/sum/mean), matmul/conv and layout
operators, so candidate kernels can regroup a softmax's reductions with the matmul before it, or a LayerNorm's
scale with the GELU after it, instead of taking TVM's fixed per-op boundaries. What it rewrites:

- `nn.softmax(x, a)`      -> e = exp(x - max(x, a)); e / sum(e, a)           (the max keeps exp in range)
- `nn.log_softmax(x, a)`  -> d = x - max(x, a); d - log(sum(exp(d), a))
- `nn.layer_norm`         -> d = x - mean(x); d * rsqrt(mean(d*d) + eps) * gamma + beta (gamma/beta if scaled)
- `nn.gelu(x)`            -> x * (0.5 + 0.5 * erf(x / sqrt(2)))                 (exact, not the tanh form)
- `nn.gelu_tanh(x)`       -> 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
- `nn.silu(x)`            -> x * sigmoid(x)
- `nn.batch_norm` left unfused by FoldBatchnormToConv2D -> TVM's DecomposeOpsForInference (scale and shift)

HardSwish, HardSigmoid, the SE block and attention arrive from the ONNX importer already as primitives (clip,
multiply, mean, conv, sigmoid, matmul); after the rewrite of their softmax they need nothing more.

Guarantee: the rewrite is exact in real arithmetic and keeps every output's dtype and shape; in float32 the outputs
stay within the tolerance the tests check against onnxruntime. It refuses nothing: an operator it does not know
passes through unchanged, so the graph is never wrong, only less split.

`fission_with_templates` also says where each rewritten operator went: the primitives of the j-th are bound to
variables named `composite<j>_` (the builder appends a count to repeats; the operator's own variable becomes an alias
of the last), and its `Template` keeps the operator over the values those primitives read. So a kernel that holds all
of an operator's primitives can be lowered with the operator itself, as the default compile lowers it (one softmax
kernel, not three; `graph.Composite`).
"""

import math
import re
from dataclasses import dataclass

from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from adreno.orchestrate.exprs import inline, operands, substitute

COMPOSITE_HINT = re.compile(r"(composite\d+_)\d*")  # the j-th rewritten operator's variables: composite<j>_[count]


@dataclass(frozen=True)
class Template:
    """A rewritten operator: `call` is the operator over `params`, which stand for the values its `size` primitives
    read from outside themselves (`exprs.operands` order, first reads first, inline values left out)."""

    params: tuple
    call: object
    size: int


def fission(mod):
    """`mod` with every composite operator of the list above split into primitives."""
    return fission_with_templates(mod)[0]


def fission_with_templates(mod):
    """(`fission(mod)`, {`composite<j>_`, its primitives' name hint up to the builder's count: the `Template`})."""
    rewrite = _Fission(relax.transform.DecomposeOpsForInference()(mod))
    return rewrite.run(), rewrite.templates


@mutator
class _Fission(PyExprMutator):
    """Rewrites calls by operator name, emitting each primitive as its own binding."""

    def __init__(self, mod):
        super().__init__(mod)
        self.mod_ = mod
        self.templates, self.hint, self.emitted = {}, "lv", []
        self.rules = {"relax.nn.softmax": self._softmax, "relax.nn.log_softmax": self._log_softmax,
                      "relax.nn.layer_norm": self._layer_norm, "relax.nn.gelu": self._gelu,
                      "relax.nn.gelu_tanh": self._gelu_tanh, "relax.nn.silu": self._silu}

    def run(self):
        for gv, func in self.mod_.functions_items():
            if isinstance(func, relax.Function):
                self.builder_.update_func(gv, self.visit_expr(func))
        return self.builder_.finalize()

    def visit_call_(self, call):
        rule = self.rules.get(getattr(call.op, "name", None))
        if rule:  # every rewritten op keeps its input's dtype: take it from the call, which the module normalised
            self.dtype = call.ty.dtype
        call = super().visit_call_(call)
        if not rule:
            return call
        self.hint, self.emitted = f"composite{len(self.templates)}_", []
        result = self._emit(rule(call))
        self.templates[self.hint] = _template(call, self.emitted)
        self.hint = "lv"
        return result

    def _emit(self, expr):
        var = self.builder_.emit(expr, name_hint=self.hint)
        self.emitted.append((var, expr))
        return var

    def _const(self, value):
        """A scalar of the rewritten call's dtype."""
        return relax.const(value, self.dtype)

    def _stable_shift(self, x, axis):
        return self._emit(relax.op.subtract(x, self._emit(relax.op.max(x, axis, keepdims=True))))

    def _softmax(self, call):
        x, axis = call.args[0], [int(call.attrs.axis)]
        e = self._emit(relax.op.exp(self._stable_shift(x, axis)))
        return relax.op.divide(e, self._emit(relax.op.sum(e, axis, keepdims=True)))

    def _log_softmax(self, call):
        x, axis = call.args[0], [int(call.attrs.axis)]
        d = self._stable_shift(x, axis)
        total = self._emit(relax.op.sum(self._emit(relax.op.exp(d)), axis, keepdims=True))
        return relax.op.subtract(d, self._emit(relax.op.log(total)))

    def _layer_norm(self, call):
        x, gamma, beta = call.args
        axes = [int(a) for a in call.attrs.axes]
        d = self._emit(relax.op.subtract(x, self._emit(relax.op.mean(x, axes, keepdims=True))))
        var = self._emit(relax.op.mean(self._emit(relax.op.multiply(d, d)), axes, keepdims=True))
        inv = self._emit(relax.op.rsqrt(self._emit(relax.op.add(var, self._const(float(call.attrs.epsilon))))))
        y = self._emit(relax.op.multiply(d, inv))
        if call.attrs.scale:
            y = self._emit(relax.op.multiply(y, gamma))
        return relax.op.add(y, beta) if call.attrs.center else y

    def _gelu(self, call):
        x = call.args[0]
        erf = self._emit(relax.op.erf(self._emit(relax.op.multiply(x, self._const(1 / math.sqrt(2))))))
        half = self._emit(relax.op.add(self._const(0.5), self._emit(relax.op.multiply(erf, self._const(0.5)))))
        return relax.op.multiply(x, half)

    def _gelu_tanh(self, call):
        x = call.args[0]
        cube = self._emit(relax.op.multiply(self._emit(relax.op.multiply(x, x)), x))
        inner = self._emit(relax.op.add(x, self._emit(relax.op.multiply(cube, self._const(0.044715)))))
        t = self._emit(relax.op.tanh(self._emit(relax.op.multiply(inner, self._const(math.sqrt(2 / math.pi))))))
        half = self._emit(relax.op.multiply(self._emit(relax.op.add(t, self._const(1.0))), self._const(0.5)))
        return relax.op.multiply(x, half)

    def _silu(self, call):
        x = call.args[0]
        return relax.op.multiply(x, self._emit(relax.op.sigmoid(x)))


def _template(call, emitted) -> Template:
    """The operator `call` over the values its primitives (`emitted`: (variable, value) pairs) read from outside."""
    inside = {var for var, _ in emitted}
    reads = []
    for _, expr in emitted:
        for a in operands(getattr(expr, "args", ())):
            if a not in inside and not inline(a) and a not in reads:
                reads.append(a)
    params = tuple(relax.Var(f"in{k}", value.ty) for k, value in enumerate(reads))
    return Template(params, substitute(call, dict(zip(reads, params))), len(emitted))
