"""Cooperative staging of image tiles in local memory for the texture conv schedules (knob `cooperative`).

With `cooperative=0` every work-item of a texture conv reads its own input pixels and weights from the images
(`read_imagef`), so the pixels that neighbouring work-items share (the kh x kw halo, the weights of a channel block,
the input pixels of a 1x1 GEMM step) are read once per work-item. With `cooperative=1` a work-group first copies the
tile one reduction step needs (the input patch of its output tile for one input channel block, the weights of its
output channel blocks for that block) into local memory (TVM scope "shared", OpenCL `__local`): the tile's pixels
are spread over all the work-group's work-items, one float4 pixel per read (the lane loop is vectorised, so the
texture lowering widens it into one `read_imagef`), then a barrier, then every work-item computes from local
memory; TVM's ThreadSync inserts the barriers before and after the copy. The texture lowering needs nothing new:
a "shared" copy block reads the image like the register caches do (`adreno/texture/tir.py`).

Local rows are skewed (`sch.storage_align`): a row of the input tile is padded to a stride of 4 floats (one pixel)
past a multiple of 32 floats, so the same column of consecutive rows falls in different banks of a 32-bank local
memory (work-items of a group along y read the same column of different rows).

Measured under Oclgrind (`tests/schedules/test_oclgrind.py` counts `read_imagef` calls per kernel; README,
"Cooperative staging"): the staged kernels read their bound and several times fewer pixels than the unstaged ones.
"""

from __future__ import annotations

from ..layout import LANES

KNOB = "cooperative"
CHOICES = [0, 1]
# what a record from before `cooperative` measured: every work-item reading its own pixels
OLDER_RECORDS = {KNOB: 0}
PIXEL_BYTES = LANES * 4  # one float32 RGBA pixel (fp16 images are read as float4 too: local memory holds fp32)
BANK_FLOATS = 32  # local memory banks of 4 bytes: a row stride congruent to one pixel mod this skews rows
SKEW_FLOATS = LANES


def skewed_row(pixels: int) -> int:
    """Pixels a local row of `pixels` takes once skewed (`fetch`'s `skew_axis`): its float stride made SKEW_FLOATS
    past a multiple of BANK_FLOATS."""
    floats = pixels * LANES
    return (floats + (SKEW_FLOATS - floats) % BANK_FLOATS) // LANES


def check(local_pixels: int, threads: int, target) -> None:
    """Raise ValueError when a staged tile of `local_pixels` pixels does not fit the target's local memory, or a
    work-group of `threads` work-items has no one to share it with."""
    from .occupancy import device

    if threads < 2:
        raise ValueError("cooperative=1 needs a work-group of at least 2 work-items (one work-item shares nothing)")
    need, have = local_pixels * PIXEL_BYTES, device(target).local_memory_bytes
    if need > have:
        raise ValueError(f"cooperative=1 stages {need} bytes in local memory, over the target's {have}")


def stage(sch, block, index: int):
    """A local-memory copy of input `index` of `block` (TVM scope "shared"), read by `block` (before any register
    cache of that input is made, which then reads local memory)."""
    return sch.cache_read(block, index, "shared")


def fetch(sch, copy, threads: tuple, skew_axis: int | None = None) -> None:
    """Spread a staged copy block (computed at its reduction step) over the work-group: its own loops but the lane
    fused and split over `threads` (threadIdx z, y, x extents), the lane vectorised (one float4 pixel per read); a
    guard covers a tile that is not a multiple of the work-group. `skew_axis`: the buffer axis whose stride is
    skewed (`skewed_row`), the input tile's row axis."""
    loops = sch.get_loops(copy)[-5:]
    fused = sch.fuse(*loops[:-1], preserve_unit_iters=True)
    _, *bound = sch.split(fused, [None, *threads], preserve_unit_iters=True)
    for loop, axis in zip(bound, ("threadIdx.z", "threadIdx.y", "threadIdx.x")[-len(threads):]):
        sch.bind(loop, axis)
    sch.vectorize(loops[-1])
    if skew_axis is not None:
        sch.storage_align(copy, 0, skew_axis, BANK_FLOATS, SKEW_FLOATS)


def default(config: dict, legal, reads, target) -> dict:
    """A family's default `config` with `cooperative=1` on a GPU target where `legal(config)` accepts it and staging
    at least halves the image reads (`reads(config)`: pixels a work-group reads per reduction step unstaged and
    staged); a CPU device keeps 0. Why: under Oclgrind the adreno-740 defaults of ResNet-18's layer shapes read 2.6x
    (1x1/s2 GEMM), 2.7x (F(4x4) GEMM), 4.7x (3x3/s2) and 8.1x (3x3/s1) fewer image pixels staged
    (`tools/image_reads.py`) with the same tiles and work-groups, so the occupancy rule still holds; where the
    staged box is mostly pixels a strided 1x1 conv skips (ResNet-18's 64->128 1x1/s2 at 56x56: 1.8x fewer reads by
    count) the copy costs more than it saves (2.6x slower on PoCL). A CPU keeps 0: its defaults (big register tiles,
    one small work-group per core) were measured unstaged, and its "local memory" is ordinary memory."""
    from .occupancy import device

    if device(target).device_class != "gpu":
        return config
    staged = {**config, KNOB: 1}
    try:
        legal(staged)
    except ValueError:
        return config
    unstaged_reads, staged_reads = reads(config)
    return staged if unstaged_reads >= 2 * staged_reads else config
