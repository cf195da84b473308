"""Matrix products: TVM's own dlight GEMV rule for a single row (classifier heads such as MobileNetV2's 1280 -> 1000),
and dlight's Matmul rule, with the Adreno configuration TVM ships for it (8x2 outputs a work-item, 32x4 work-groups,
K in steps of 16, vectors of 8, no local memory), for products with many rows (a transformer's linear layers and
attention, an LSTM's gates). TVM 0.27's Adreno pipeline applies neither: its generic reduction schedule gives every
output element a work-group of 256 work-items, so MobileViT-XS's 64x48 by 48x48 linear layers launched 786,432
work-items for 3,072 outputs, 208 of each 256 with no product to add.

GEMV (and Matmul, which computes its epilogue in the output tile) assumes that its epilogue is elementwise on the
reduction's output: it binds the epilogue's loops as it bound the reduction's rows, so an epilogue that broadcasts
to a larger tensor (a squeeze-and-excitation block's 1x1 conv on a pooled 1x1 map, fused with `sigmoid(conv) * x`)
would store only the first rows' worth of outputs. Such functions are refused here and left to the rules after ours.

Not tunable yet: no knobs, and it matches no workload, so the tuner skips these functions.
"""

from __future__ import annotations

import math

from . import _conv
from .family import DLIGHT_ERRORS, Family, Refused, dlight_failure, reduction_name


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
    """dlight's GEMV schedule of matrix-vector products, else its Matmul schedule of matrix products, with an
    elementwise epilogue, on OpenCL targets."""

    def __init__(self):
        super().__init__("dense", {}, lambda func: None, lambda wl, ctx: {}, lambda wl, config, ctx: config,
                         "DenseGEMV")

    def apply(self, func, ctx):
        from tvm.s_tir import dlight

        if not elementwise_epilogue(func):
            return None
        try:
            return (dlight.gpu.GEMV().apply(func, ctx.target, False)
                    or dlight.gpu.Matmul().apply(func, ctx.target, False))
        except DLIGHT_ERRORS as err:  # a reduction GEMV's analysis does not take (a log-sum-exp's sum of exponentials)
            return Refused("dense", reduction_name(func), {}, dlight_failure(err))


FAMILY = Dense()
