"""The bound on private arrays (`adreno.compiler.private_arrays`): a kernel whose work-items each hold more than a
register tile fails at lowering with the kernel and array named, instead of crashing PoCL at run time."""

from __future__ import annotations

import pytest

from adreno.compiler.plan import lower_primfunc
from adreno.compiler.private_arrays import MAX_BYTES, PrivateArrayError
from adreno.targets.target import tvm_target


def _cached_sum(n: int):
    """y[i] = i * sum(x) over 64 x 64 work-items, each first copying all n floats of x into its registers."""
    from tvm import s_tir, te

    x = te.placeholder((n,), "float32", name="x")
    k = te.reduce_axis((0, n), name="k")
    y = te.compute((4096,), lambda i: te.sum(x[k] * i.astype("float32"), axis=k), name="y")
    sch = s_tir.Schedule(te.create_prim_func([x, y]))
    block = sch.get_sblock("y")
    i, _ = sch.get_loops(block)
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(sch.cache_read(block, 0, "local"), tx)
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def test_a_private_array_beyond_a_register_tile_fails_lowering():
    target = tvm_target("pocl-cpu", host="native")
    with pytest.raises(PrivateArrayError, match=r"x_local of 32768 bytes per work-item"):
        lower_primfunc(_cached_sum(8192), "cached_sum", target)
    launches, _, source = lower_primfunc(_cached_sum(MAX_BYTES // 4), "cached_sum", target)  # at the bound
    assert len(launches) == 1 and f"x_local_ptr[{MAX_BYTES // 4}]" in source
