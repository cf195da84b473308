"""Float32 constants in the OpenCL source, exactly.

TVM 0.27's C codegen prints a float32 constant with 7 significant digits (`std::scientific`: `2.265232e-03f`).
Seven digits do not name every float32 (nine do), so a kernel may compute with a neighbour of the constant, one
ulp off. In a float model that is noise. In a dynamically quantized model the constant is a layer's weight scale:
the product with the input scale came out one ulp off onnxruntime's, every output of the layer moved with it, and
the next DynamicQuantizeLinear rounded some of them to the other step. On ResNet-18 those flips compounded, layer
after layer.

`exact_float_literals` rewrites each float32 constant whose printed form does not read back as itself into a sum
of two constants that do (`hi + lo`, checked in float32 arithmetic), which the OpenCL compiler folds into the exact
value. The rewrite is idempotent, and constants that already print exactly are left alone, so most kernels keep
their source byte for byte. It runs once, as the last of the device finalize passes of our TIR pipeline
(`adreno.texture.tir.register_pipeline`), which both the launch plan (`plan.lower_primfunc`) and the host library's
build finalize their kernels with.
"""

from __future__ import annotations

import numpy as np


def _printed(value: float) -> np.float32:
    """What the OpenCL compiler reads back from TVM's text of a float32 constant (`%e`, then `f`)."""
    return np.float32(float(f"{value:e}"))


def _prints_exactly(value: np.float32) -> bool:
    return _printed(float(value)) == value


def exact_pair(value: float) -> tuple[float, float] | None:
    """(hi, lo): two float32 constants that print exactly and sum to `value` in float32; None when `value` prints
    exactly already (or is not finite), or when no such pair is found (then the constant stays as TVM prints it)."""
    target = np.float32(value)
    if not np.isfinite(target) or _prints_exactly(target):
        return None
    guess = _printed(float(target))
    for steps in (0, 1, -1, 2, -2):
        hi = guess
        for _ in range(abs(steps)):
            hi = np.nextafter(hi, np.float32(np.inf if steps > 0 else -np.inf), dtype=np.float32)
        if not _prints_exactly(hi):
            continue
        lo = _printed(float(np.float32(target - hi)))  # target - hi is exact (Sterbenz); print it as TVM would
        if lo != 0 and _prints_exactly(lo) and np.float32(hi + lo) == target:
            return float(hi), float(lo)
    return None


def exact_float_literals(module):
    """`module` (device PrimFuncs, finalized) with every float32 constant that would print inexactly replaced by
    an exact `hi + lo` sum."""
    import tvm
    import tvm_ffi

    def visit(node):
        if type(node).__name__ == "FloatImm" and str(node.ty) == "float32":
            pair = exact_pair(node.value)
            if pair is not None:
                return tvm.tirx.Add(tvm.tirx.FloatImm("float32", pair[0]), tvm.tirx.FloatImm("float32", pair[1]))
        return node

    functions = {}
    for gvar, func in module.functions.items():
        functions[gvar] = func.with_body(tvm_ffi.structural_map(func.body, visit, order="post")) \
            if hasattr(func, "with_body") else func
    return tvm.IRModule(functions, attrs=module.attrs)


def exact_float_literals_pass():
    """`exact_float_literals` as a module pass, for a TIR pipeline's device finalize."""
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="adreno.ExactFloatLiterals")
    def run(mod, _ctx):
        return exact_float_literals(mod)

    return run
