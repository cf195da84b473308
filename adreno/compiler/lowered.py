"""Lower each primitive function once: the launch plan's lowering, kept for the host library's build.

`extract_plan` runs TVM's TIR pipeline on every PrimFunc it launches (`plan.lower_primfunc`); the host library's
`tvm.compile` would run the same pipeline on the same functions again (about a third of a ResNet-18 compile: the
Winograd input transforms alone take seconds each). `LoweredFunctions` keeps what the plan's lowering returned, keyed
by the function as it entered the pipeline (structural hash, then structural equality, so a hit is the same input to
the same pipeline); `reusing_pipeline` registers a TIR pipeline that takes those results for the functions it knows
and runs the real pipeline on the rest. The host library's kernels are then the plan's, by construction.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Iterator

_names = itertools.count()


class LoweredFunctions:
    """PrimFunc (as it enters the TIR pipeline, target bound) -> the module the pipeline made of it (its host
    function and its device kernels, before the finalize passes)."""

    def __init__(self):
        self._entries: dict[int, list[tuple[object, object]]] = {}
        self.hits = 0
        self.misses = 0

    def put(self, func, lowered_module) -> None:
        self._entries.setdefault(_hash(func), []).append((func, lowered_module))

    def get(self, func):
        import tvm_ffi

        for known, module in self._entries.get(_hash(func), []):
            if tvm_ffi.structural_equal(known, func):
                self.hits += 1
                return module
        self.misses += 1
        return None

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())


def _hash(func) -> int:
    import tvm_ffi

    return int(tvm_ffi.structural_hash(func))


@contextlib.contextmanager
def reusing_pipeline(store: LoweredFunctions, fallback: str) -> Iterator[str]:
    """The name of a TIR pipeline, registered while the context lasts, that is `fallback` (a registered pipeline
    name, e.g. "adreno_texture") for functions `store` does not hold and `store`'s result for those it does."""
    import tvm
    from tvm.tirx import compilation_pipeline as registry

    name = f"adreno_reuse_{next(_names)}"

    def factory():
        pipeline, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline(fallback)

        @tvm.transform.module_pass(opt_level=0, name="adreno.ReuseLowered")
        def reuse(mod, _ctx):
            functions, fresh = {}, {}
            for gvar, func in mod.functions.items():
                done = store.get(func)
                if done is None:
                    fresh[gvar] = func
                    continue
                for done_gvar, done_func in done.functions.items():
                    functions[gvar if _is_host(done_func) else done_gvar] = done_func
            if fresh:
                functions.update(pipeline(tvm.IRModule(fresh, attrs=mod.attrs)).functions)
            return tvm.IRModule(functions, attrs=mod.attrs)

        return reuse, finalize_host, finalize_device

    registry.register_tir_pipeline(name, factory)
    try:
        yield name
    finally:
        registry.PIPELINE_MAP.pop(name, None)


def _is_host(func) -> bool:
    """The host side of a lowered function (the rule of `tvm.tirx.build.split_host_device_mods`)."""
    target = func.attrs.get("target", None) if func.attrs else None
    return target is not None and target.kind.name in ("llvm", "c")
