"""The last pass of both pipelines: TVM's dlight reduction rules, each schedule they make checked before it is kept.

What no family of ours claims (or what one refuses) ends with TVM's dlight rules. Their `Reduction` and
`GeneralReduction` rules do not know the device's local memory, and what they fail or get wrong surfaced, if at
all, later and far from its cause. Measured on adreno-740 (TVM 0.27), a 3x3 SAME_UPPER stem conv on a 32x32 or
16x16 image followed by ReduceMean over every axis (a global reduction to a scalar):
- `Reduction` raises inside its rfactor (the compile failed with TVM's InternalError);
- `GeneralReduction` binds only unit loops: the reduction's loops stay on the host, a single-work-group kernel of one
  work-item launched once per element (2,048 times for the 32x32 image), which `plan.lower_primfunc` refuses;
- their cross-thread reductions take local memory per reduction (1 KiB for 256 work-items, more with
  `GeneralReduction`'s `shared` intermediates), which nothing held to the device's `local_memory_bytes`.

One policy (`rule`): apply dlight's rule, lower its schedule with TVM's TIR pipeline, and keep it only when every
kernel fits the device's local memory and no kernel is launched from a host loop (`refusal`). Otherwise, and when
dlight's rule or the lowering raises, return None, so the next rule, and at the end dlight's `Fallback`, takes the
function, and append the reason as a `Refused` value (the compile's `fallback:` line and the manifest's `refused`
list). The same local-memory bound holds for every kernel at lowering (`adreno.local_arrays.check`).

Not refused: `Reduction`'s one work-group for up to 16 outputs of a reduction along a leading axis (ReduceSum over
axis 0 of 9000x16: 16 x 16 work-items, each summing 1/16 of a column). It is right on PoCL, and `Fallback`, which
would take it, launches one work-group too, with 16 of its 256 work-items busy, each summing a whole column.
"""

from __future__ import annotations

from ..compiler.local_arrays import local_memory_bytes
from .family import DLIGHT_ERRORS, Refused, dlight_failure, reduction_name

def _lowered(sch, target) -> tuple:
    """(host function, kernels) TVM's TIR pipeline lowers the scheduled function of `sch` to: what
    `plan.lower_primfunc` will extract the launches and the kernels from."""
    import tvm

    func = sch.mod["main"].with_attr("global_symbol", "main").with_attr("tirx.is_scheduled", True)
    module = tvm.tirx.transform.BindTarget(target)(tvm.IRModule({"main": func}))
    lowered = tvm.tirx.get_tir_pipeline("s_tir")[0](module)
    return lowered["main"], [f for gv, f in lowered.functions.items() if gv.name_hint != "main"]


def _host_loop(host) -> bool:
    """Whether the host function loops: a kernel launched once per iteration."""
    import tvm_ffi

    found = []

    def visit(node):
        if type(node).__name__ in ("For", "While"):
            found.append(node)
        return node

    tvm_ffi.structural_map(host.body, visit, order="post")
    return bool(found)


def refusal(host, kernels, local_bytes: int) -> str | None:
    """Why a schedule lowered to `host` and `kernels` is not kept on a device of `local_bytes` bytes of local memory
    per work-group; None when it is."""
    for kernel in kernels:
        used = local_memory_bytes(kernel)
        if used > local_bytes:
            return f"{used} bytes of local memory per work-group, more than the device's {local_bytes}"
    if _host_loop(host):
        return "its reduction loops stay on the host: a single-work-group kernel launched once per iteration"
    return None


def rule(dlight_rule, ctx, refusals: list | None = None):
    """dlight's `dlight_rule` (a `Reduction()` or `GeneralReduction()`) as a ScheduleRule whose schedules are checked
    against the `ScheduleContext` `ctx`'s device (`refusal`): a refused or failed schedule is None, and the reason is
    appended to `refusals` when given."""
    from tvm.s_tir.dlight.base import ScheduleRule

    name = type(dlight_rule).__name__

    def _apply(self, func, target, tunable):  # noqa: ARG001 - dlight's interface; the target is ctx's
        try:
            sch = dlight_rule.apply(func, ctx.target, False)
            why = None if sch is None else refusal(*_lowered(sch, ctx.target), ctx.device.local_memory_bytes)
        except DLIGHT_ERRORS as err:
            sch, why = None, dlight_failure(err)
        if why is None:
            return sch
        if refusals is not None:
            refusals.append(Refused("last_resort", reduction_name(func), {"rule": name}, why))
        return None

    return type(f"LastResort{name}", (ScheduleRule,), {"apply": _apply})()


def schedule_pass(ctx, refusals: list | None = None):
    """The pipelines' last pass: dlight's Reduction and GeneralReduction checked for `ctx`'s device (`rule`), then
    dlight's Fallback for what both refuse."""
    from tvm.s_tir import dlight

    return dlight.ApplyDefaultSchedule(rule(dlight.gpu.Reduction(), ctx, refusals),
                                       rule(dlight.gpu.GeneralReduction(), ctx, refusals), dlight.gpu.Fallback())
