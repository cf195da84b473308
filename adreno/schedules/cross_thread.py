"""Cross-thread packed reductions: a long reduction over few output pixels is shared by a work-group per pixel.

`schedules.packed` gives every output pixel of a packed (NCHW4c) function one work-item, which sums its reduction
serially. That fits a pool whose outputs are many; a squeeze-and-excitation global mean has one 1x1 pixel per 4
channels and a reduction over the whole map: efficientnet_se's first SE mean (16 channels at 48x48) launched 4
work-items, each summing 2,304 pixels, where an Adreno 740 wants 3,072 in flight (`occupancy.required_work_items`).

Shared, THREADS work-items of one work-group own each output pixel. The reduction's loops are fused and split, and
work-item t sums the pixels t, t + THREADS, ... of the map (neighbouring work-items read neighbouring pixels of a
row: one texture cache line serves several of them) into a float4 of registers (TVM's rfactor block, one
`read_imagef` per pixel); a cross-thread reduction in local memory then adds the THREADS partial float4s (the
write-back's reduction loop bound to threadIdx.x, which TVM lowers to an all-reduce), and the epilogue (the mean's
divide, whatever FuseOps appended) and the pixel's store follow in the same kernel.

One policy (`shares`), one table (its constants): a reduction of at least MIN_EXTENT elements per output, an output
of fewer pixels than the device needs work-items, and a work-group of THREADS allowed by the target. Anything else
keeps the serial schedule.
"""

from __future__ import annotations

from . import occupancy

THREADS = 64     # work-items per output pixel: one wave on Adreno, the partial sums of a 64 x 64 map 64 pixels each
MIN_EXTENT = 64  # below this a work-item's serial sum is short; sharing it would leave work-items without a pixel


def shares(pixels: int, extent: int, conv: bool, ctx) -> bool:
    """Whether a packed reduction of `extent` elements per output pixel, `pixels` output pixels, is shared by a
    work-group per pixel on `ctx`'s device: long enough for every work-item to sum at least one element, too few
    pixels to fill the device one work-item each, a work-group of THREADS within the target's limit, and not a conv
    (`conv`: one under `--schedules tvm`, whose reduction reads an input pixel per 4 channels; fused and split by
    THREADS it would read single lanes)."""
    return not conv and extent >= MIN_EXTENT and pixels < occupancy.required_work_items(ctx.device) \
        and THREADS <= ctx.max_threads


def schedule(sch, red, out_block, spatial, reduction) -> None:
    """Schedule the reduction block `red` (its `spatial` loops, fused into one pixel axis, and its `reduction`
    loops) and the block `out_block` that stores its result (`red` itself, or its last epilogue block) as the module
    doc says: a work-group (blockIdx.x) per output pixel, THREADS work-items (threadIdx.x) summing strided slices in
    registers, a cross-thread all-reduce of the partials, then the epilogue and one whole-pixel store."""
    if sch.get(out_block).same_as(sch.get(red)):  # the result is stored from registers, a whole pixel at a time
        out_block = sch.cache_write(red, 0, "local")
    sch.fuse(*spatial)
    _, thread = sch.split(sch.fuse(*reduction), [None, THREADS])
    partial = sch.rfactor(thread, 0)  # a loop nest of its own, before `red`'s
    sch.set_scope(partial, 0, "local")
    pixel, lane, serial, thread = sch.get_loops(partial)
    sch.reorder(pixel, thread, serial, lane)
    sch.bind(pixel, "blockIdx.x")
    sch.bind(thread, "threadIdx.x")
    init = sch.decompose_reduction(partial, serial)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.reverse_compute_at(red, pixel, preserve_unit_loops=True)
    over_threads, *lanes = sch.get_loops(red)[1:]  # the partials' axis first (rfactor's factor axis 0)
    sch.reorder(*lanes, over_threads)
    sch.bind(over_threads, "threadIdx.x")
    sch.set_scope(red, 0, "local")
    sch.reverse_compute_at(out_block, pixel, preserve_unit_loops=True)
    sch.vectorize(sch.get_loops(out_block)[-1])
