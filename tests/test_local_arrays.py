"""The bound on local memory (`adreno.compiler.local_arrays`): the bytes a kernel's work-group allocates in local memory
are counted exactly, and a kernel over the target's local memory fails at lowering with one line naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adreno.targets.devices import get_device
from adreno.compiler.local_arrays import LocalMemoryError, check, local_memory_bytes
from adreno.compiler.plan import lower_primfunc
from adreno.targets.target import tvm_target


def _staged_dot(n: int):
    """y[i] = i * sum(x * w) over 16 work-groups of 64 work-items, each work-group first staging all n float32 of x
    and n float16 of w in local memory: 6n bytes."""
    from tvm import s_tir, te

    x = te.placeholder((n,), "float32", name="x")
    w = te.placeholder((n,), "float16", name="w")
    k = te.reduce_axis((0, n), name="k")
    y = te.compute((1024,), lambda i: te.sum(x[k] * w[k].astype("float32") * i.astype("float32"), axis=k), name="y")
    sch = s_tir.Schedule(te.create_prim_func([x, w, y]))
    block = sch.get_sblock("y")
    i, _ = sch.get_loops(block)
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    for operand in (0, 1):
        sch.compute_at(sch.cache_read(block, operand, "shared"), bx)
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def _kernel(func, target):
    """The one kernel TVM's TIR pipeline lowers `func` to."""
    import tvm

    module = tvm.tirx.transform.BindTarget(target)(tvm.IRModule({"staged_dot": func.with_attr("global_symbol",
                                                                                                 "staged_dot")}))
    lowered = tvm.tirx.get_tir_pipeline("s_tir")[0](module)
    (kernel,) = [f for gv, f in lowered.functions.items() if gv.name_hint != "staged_dot"]
    return kernel


def test_the_local_memory_of_a_kernel_is_counted_exactly_and_bounded():
    kernel = _kernel(_staged_dot(1000), tvm_target("pocl-cpu", host="native"))
    assert local_memory_bytes(kernel) == 1000 * 4 + 1000 * 2
    check(kernel, 6000)  # at the limit
    with pytest.raises(LocalMemoryError) as err:
        check(kernel, 5999)
    assert "staged_dot_kernel: 6000 bytes of local memory per work-group, more than the target's 5999" in str(err.value)
    assert "\n" not in str(err.value)


def test_lowering_refuses_a_kernel_over_the_targets_local_memory():
    small = tvm_target(replace(get_device("pocl-cpu"), local_memory_bytes=4096), host="native")
    over = r"6000 bytes of local memory per work-group, more than the target's 4096:"
    with pytest.raises(LocalMemoryError, match=over):
        lower_primfunc(_staged_dot(1000), "staged_dot", small)
    launches, _, source = lower_primfunc(_staged_dot(600), "staged_dot", small)  # 3,600 bytes fit
    assert len(launches) == 1 and "__local float x_shared_ptr[600]" in source
