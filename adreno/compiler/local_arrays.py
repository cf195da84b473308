"""A bound on each kernel's local memory (OpenCL `__local`, TVM scope "shared"): what the target's work-group can
hold, so that no kernel that cannot launch leaves the compiler.

Local memory is allocated per work-group at launch: a kernel that asks for more than CL_DEVICE_LOCAL_MEM_SIZE fails
with CL_OUT_OF_RESOURCES on the phone, after the artifact was shipped (PoCL, whose local memory is 1 MiB, runs it,
so no test on this machine would notice). Our families check their staged tiles against the device
(`adreno.schedules.staging`), TVM's dlight rules do not (`adreno.schedules.last_resort` refuses their schedules
over the limit); `check`, run on every kernel at lowering (`plan.lower_primfunc`, with the target's
`max_shared_memory_per_block`, the device's local memory: `adreno.targets.target`), is the one place that holds for all
of them (compile: exit 2 with the kernel named; tuning: a failed build).
"""

from __future__ import annotations

from ..errors import AdrenoError
from .private_arrays import buffer_bytes


class LocalMemoryError(AdrenoError):
    """A kernel allocates more local memory per work-group than the target has (a schedule bug)."""


def local_memory_bytes(primfunc) -> int:
    """The bytes of local memory one work-group of `primfunc` (a kernel after TVM's SplitHostDevice) allocates: its
    "shared" and "shared.dyn" buffers, cross-thread reductions' scratch included."""
    import tvm_ffi

    found = []

    def visit(node):
        if type(node).__name__ == "AllocBuffer" and str(node.buffer.scope()).startswith("shared"):
            found.append(node.buffer)
        return node

    tvm_ffi.structural_map(primfunc.body, visit, order="post")
    return sum(buffer_bytes(buf) for buf in found)


def check(primfunc, limit: int) -> None:
    """Raise LocalMemoryError when the kernel `primfunc` allocates more than `limit` bytes of local memory."""
    used = local_memory_bytes(primfunc)
    if used > limit:
        raise LocalMemoryError(
            f"{primfunc.attrs['global_symbol']}: {used} bytes of local memory per work-group, more than the target's "
            f"{limit}: the kernel cannot launch (a schedule bug; another config, or --defaults rule, avoids it)")
