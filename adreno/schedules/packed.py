"""The schedule of a fused function whose output is a packed (texture) tensor: one output pixel per work-item.

Convolutions normally never get here: the register-tiled families (`conv2d_texture`, `conv2d_1x1`, the Winograd
stages) claim them first. This is what pack, pooling and elementwise functions of the packed region get, and what a
conv gets with `--schedules tvm` or when a tiled schedule refuses it. A long reduction over fewer pixels than the
device needs work-items (a squeeze-and-excitation mean) is shared by a work-group per pixel instead (`cross_thread`).
"""

from __future__ import annotations

import math

from ..errors import TVM_ERRORS
from ..targets.layout import LANES
from . import cross_thread, occupancy

THREADS = 64
# A workgroup never has more work-items than the function has output pixels: when the fused pixel axis is shorter
# than the workgroup, TVM 0.27 keeps the guard on the reduction but drops it on the store, and the idle work-items
# write their uninitialised pixels past the output (PyTorch's Conv2d_no_bias with --schedules tvm: 32 pixels).


def group_size(pixels: int, ctx) -> int:
    """Work-items per group for `pixels` work-items (one per pixel: as parallel as the function can be): THREADS,
    halved (to 16) while that leaves a compute unit without a group (`occupancy.covers_units`)."""
    device = ctx.device
    candidates = [THREADS, THREADS // 2, THREADS // 4]
    return next((t for t in candidates if occupancy.covers_units(device, occupancy.grid((pixels, 1, t), registers=0))),
                candidates[-1])


def schedule_packed(func, ctx):
    """Schedule a fused function whose output is a packed 5-D tensor (last axis 4) so that every work-item owns one
    output pixel: the spatial axes are fused over the NDRange, the 4 lanes are the innermost (vectorised) loop, the
    reduction (if any) runs serially in registers with its channel axis split by 4 (so inputs are read as whole
    pixels), and every other block (padding, epilogue) is inlined; a reduction `cross_thread.shares` gets its
    schedule instead. None when the function does not have that form.

    Convolutions normally never get here: the register-tiled family `adreno/schedules/conv2d_texture.py` (one of
    `schedules.FAMILIES`, run first) claims them; this is what pack, pooling and elementwise functions get, and
    what a conv gets with `--schedules tvm` or when the tiled schedule refuses it."""
    from tvm import s_tir, tirx
    from tvm.s_tir.dlight import analysis

    params = list(func.params)
    if not all(isinstance(d, tirx.IntImm) for d in params[-1].ty.shape):
        return None  # a size the data sets (refused at import): the work-items below are counted from the sizes
    out_shape = [int(d) for d in params[-1].ty.shape]
    if len(out_shape) != 5 or out_shape[-1] != LANES:
        return None
    pixels = math.prod(out_shape[:4])
    threads = min(group_size(pixels, ctx), pixels)  # see the note above: never more than the pixels
    try:
        sch = s_tir.Schedule(func)
        root = analysis.get_root_block(sch)
        blocks = sch.get_child_blocks(root)
        reductions = [b for b in blocks if analysis.get_sblock_info(sch, b).is_reduction()]
        if len(reductions) > 1:
            return None
        red = reductions[0] if reductions else None
        out_block = blocks[-1]
        for blk in blocks[:-1]:
            if red is not None and sch.get(blk).same_as(sch.get(red)):
                continue
            try:
                sch.compute_inline(blk)
            except TVM_ERRORS:  # ScheduleError: not inlinable forwards, inline it backwards
                sch.reverse_compute_inline(blk)
        if red is None:
            loops = sch.get_loops(out_block)
            if len(loops) != 5:
                return None
            fused = sch.fuse(*loops[:4])
            bx, tx = sch.split(fused, [None, threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            _stage_bytes(sch, out_block, tx)
            if _lanes_read_other_pixels(sch.get(out_block)):  # lane by lane into registers, then one pixel store
                writer = sch.cache_write(out_block, 0, "local")
                sch.reverse_compute_at(writer, tx, preserve_unit_loops=True)
                sch.unroll(loops[4])
                sch.vectorize(sch.get_loops(writer)[-1])
            else:
                sch.vectorize(loops[4])
            return sch
        loops = sch.get_loops(red)
        iters = analysis.get_sblock_info(sch, red).iters
        kinds = "".join(i.kind for i in iters)
        if len(loops) < 6 or kinds[:5] != "SSSSS" or set(kinds[5:]) != {"R"}:
            return None
        spatial, lane, rloops = loops[:4], loops[4], loops[5:]
        conv = sch.get(red).name_hint.startswith("conv2d_NCHW4c")
        if cross_thread.shares(pixels, math.prod(int(sch.get(loop).extent) for loop in rloops), conv, ctx):
            cross_thread.schedule(sch, red, out_block, spatial, rloops)
            return sch
        fused = sch.fuse(*spatial)
        bx, tx = sch.split(fused, [None, threads])
        order = list(rloops)
        if conv:
            rc, rest = rloops[0], rloops[1:]
            rco, rci = sch.split(rc, [None, LANES])
            order = [rco, *rest, rci]
        sch.reorder(bx, tx, *order, lane)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if sch.get(out_block).same_as(sch.get(red)):
            writer = sch.cache_write(red, 0, "local")
            sch.reverse_compute_at(writer, tx, preserve_unit_loops=True)
        else:
            sch.reverse_compute_at(out_block, tx, preserve_unit_loops=True)
            sch.set_scope(red, 0, "local")
            writer = out_block
        sch.vectorize(sch.get_loops(writer)[-1])
        init = sch.decompose_reduction(red, order[0])
        sch.vectorize(sch.get_loops(init)[-1])
        return sch
    except TVM_ERRORS:  # a schedule primitive refused: TVM's dlight rules take the function
        return None


def schedule_rule(ctx):
    """A dlight ScheduleRule wrapping `schedule_packed`."""
    from tvm.s_tir.dlight.base import ScheduleRule

    class PackedTexture(ScheduleRule):
        def apply(self, func, target, tunable):  # noqa: D102, ARG002
            return schedule_packed(func, ctx)

    return PackedTexture()


def _lanes_read_other_pixels(block) -> bool:
    """Whether `block`'s 4 lanes read a packed input at pixels that depend on the lane: a layout change across
    channels, such as the pixel shuffle of `adreno.frontend.upsampling` (with k = 2, output channel c reads input
    channel 4c + 2i + j: each lane another pixel). TVM 0.27's VectorizeLoop cannot make one texture read of 4
    pixels: the vectorised lane loop leaves its variable outside the loop and the kernel fails to build ("variables
    (k,) are used, but are not passed in as API arguments"). Such a block computes its lanes one by one into a
    register pixel that is then stored whole."""
    from tvm import tirx

    lane = block.iter_vars[-1].var
    for region in block.reads:
        shape = region.source.shape
        if len(shape) == 5 and int(shape[-1]) == LANES:
            for axis in region.region[:4]:
                if any(v.same_as(lane) for v in tirx.analysis.undefined_vars(axis.min, [])):
                    return True
    return False


def _stage_bytes(sch, block, thread) -> None:
    """Read each 8-bit input of `block` (a quantized tensor) into registers, one lane at a time, before the
    vectorised lanes loop: TVM 0.27's OpenCL codegen writes a strided 4-lane load of 8-bit values (a pack's 4
    channels) as bits shifted into one int, which `convert_float4` then refuses ("call to '_cl_convert_float4' is
    ambiguous"). From registers the 4 lanes are contiguous: one `uchar4`/`char4` load."""
    reads = [region.source for region in sch.get(block).reads]
    for index, buffer in enumerate(reads):
        if buffer.dtype in ("int8", "uint8") and buffer.scope() == "global":
            cache = sch.cache_read(block, index, "local")
            sch.compute_at(cache, thread)
            for loop in sch.get_loops(cache)[2:]:  # inside the fused block and thread loops
                sch.unroll(loop)
