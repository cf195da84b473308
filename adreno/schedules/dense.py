"""Dense / matmul with a single row (classifier heads such as MobileNetV2's 1280 -> 1000): TVM's own dlight GEMV
rule, which TVM 0.27's Adreno pipeline does not apply (it falls back to a generic reduction schedule).

GEMV assumes that its epilogue is elementwise on the reduction's output: it binds the epilogue's loops as it bound
the reduction's rows, so an epilogue that broadcasts to a larger tensor (a squeeze-and-excitation block's 1x1 conv
on a pooled 1x1 map, fused with `sigmoid(conv) * x`) would store only the first rows' worth of outputs. Such
functions are refused here and left to the rules after ours.

Not tunable yet: no knobs, and it matches no workload, so the tuner skips these functions.
"""

from __future__ import annotations

import math

from . import _conv
from .family import Family


def elementwise_epilogue(func) -> bool:
    """Whether `func` is one reduction block followed only by blocks that write as many elements as it does."""
    found = _conv.one_reduction(func)
    if found is None:
        return False
    sch, blocks, _, ri = found

    def size(block):
        shape = _conv._ints(sch.get(block).writes[0].source.shape)
        return None if shape is None else math.prod(shape)

    out = size(blocks[ri])
    return out is not None and all(size(b) == out for b in blocks[ri + 1:])


class Dense(Family):
    """dlight's GEMV schedule of matrix-vector products with an elementwise epilogue, on OpenCL targets."""

    def __init__(self):
        super().__init__("dense", {}, lambda func: None, lambda wl, ctx: {}, lambda wl, config, ctx: config,
                         "DenseGEMV")

    def apply(self, func, ctx):
        from tvm.s_tir import dlight

        if not elementwise_epilogue(func):
            return None
        return dlight.gpu.GEMV().apply(func, ctx.target, False)


FAMILY = Dense()
