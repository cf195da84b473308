"""A bound on each kernel's private (per work-item) arrays: what tells a register tile from a buffer TVM failed to
shrink.

A schedule keeps accumulators and operand caches in `local`-scope buffers that TVM's CompactBufferAllocation cuts
down to the region a work-item touches: a register tile of at most a few hundred floats (the largest in ResNet-18
and MobileNetV2 compiled for adreno-640/740 and pocl-cpu, both memories and both defaults: 392, a direct conv's
weight cache). Where it cannot prove that region it keeps the whole tensor: the 1x1 GEMM once
got each work-item a float4 array of its whole 24x160 output map (6 MB), legal OpenCL that a GPU spills to memory
and that crashes PoCL, which keeps a work-group's private arrays on a worker thread's stack (SIGSEGV, while
Oclgrind, which allocates them, reports nothing). `check` turns such a kernel into an error at lowering (compile:
exit 2 with the kernel and array named; tuning: a failed build) instead of a crash or a slow kernel on the device.
"""

from __future__ import annotations

from ..errors import AdrenoError

# bytes per work-item of one private array: far above any register tile, far below a tensor
MAX_BYTES = 16 * 1024


class PrivateArrayError(AdrenoError):
    """A kernel allocates a private array larger than MAX_BYTES per work-item (a schedule bug)."""


def buffer_bytes(buffer) -> int:
    """The bytes of a lowered TIR buffer of static shape (its lanes counted: a float4 element is 16 bytes); also what
    `adreno.compiler.local_arrays` sums over a kernel's local-memory buffers."""
    import tvm

    dtype = tvm.DataType(str(buffer.dtype))
    size = dtype.bits // 8 * dtype.lanes
    for dim in buffer.shape:
        size *= int(dim)
    return size


def check(device_module) -> None:
    """Raise PrivateArrayError when a kernel of `device_module` (TIR after SplitHostDevice) allocates a private
    array over MAX_BYTES."""
    import tvm_ffi

    for gv, func in device_module.functions.items():
        found = []

        def visit(node):
            if type(node).__name__ == "AllocBuffer" and str(node.buffer.scope()) == "local":
                found.append(node.buffer)
            return node

        tvm_ffi.structural_map(func.body, visit, order="post")
        for buf in found:
            size = buffer_bytes(buf)
            if size > MAX_BYTES:
                raise PrivateArrayError(
                    f"{gv.name_hint}: private array {buf.name} of {size} bytes per work-item (more than "
                    f"{MAX_BYTES}): a register tile TVM did not shrink to the work-item's region (a schedule bug; "
                    "another config, or --defaults rule, avoids it)")
