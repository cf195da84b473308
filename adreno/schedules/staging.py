"""Cooperative staging of a work-group's operand tiles in local memory (knob `cooperative`; TVM scope "shared" =
OpenCL `__local`), for every family that has the knob: buffers (`conv2d_direct`, the Winograd GEMM) and images
(`conv2d_texture`, `conv2d_1x1`, the packed Winograd GEMM).

Without it every work-item reads its own operands from global memory or the images, so an input element is fetched
once by every work-item whose outputs need it (a 3x3 conv: up to 9 times per output channel tile, once more per
work-item along the output channels). Staged, a work-group fetches its whole tile (the input patch with its halo,
the weights of its output channels) once per reduction step: all its work-items share the loads, a barrier follows
(TVM's ThreadSync inserts it), and every work-item then reads its operands from local memory. Two fetch mechanisms,
one per memory: `stage_in_local` (buffers: one flat loop over the tile, its innermost contiguous run vectorised) and
`stage_image` + `fetch_image` (images: one float4 pixel per read, which the texture lowering widens into one
`read_imagef`; it needed nothing new: a "shared" copy block reads the image like the register caches do).

One row-pitch rule (`pitch`, applied by `storage_align`): a local row's pitch is an odd number of vectors (a
buffer run's vector width; for images a vector is a float4 pixel, so an odd number of pixels). Why it is enough:
with a power-of-two number of banks, an odd pitch is a unit modulo the bank count, so the same column of
consecutive rows lands in distinct banks (8 consecutive rows for float4 accesses on 32 banks of 4 bytes) with at
most one vector of padding per row.

One legality check (`check`, every family's `check_config` on a staged config): a work-group of at least 2
work-items (one shares nothing) whose tiles fit the target's `local_memory_bytes`. One default policy (`default`):
staged on GPU targets where the family's evidence says it pays and its check accepts it, under `--staging auto`;
unstaged on CPU targets (their caches already share the loads, and their defaults were measured unstaged) and
under `--staging off` (`adreno.options.Staging`; `space` keeps the searches of `--defaults model` and `adreno tune`
unstaged too).
"""

from __future__ import annotations

import math

from ..targets.layout import LANES
from ..options import Staging

KNOB = "cooperative"
CHOICES = [0, 1]
# what a record from before the knob measured: every work-item reading its own operands
OLDER_RECORDS = {KNOB: 0}
FLOAT_BYTES = 4
PIXEL_BYTES = LANES * FLOAT_BYTES  # one float32 RGBA pixel (fp16 images are read as float4 too: local holds fp32)


def staged(config: dict) -> bool:
    return bool(config.get(KNOB, 0))


def pitch(elements: int, vector: int = 1) -> int:
    """The padded length of a local row of `elements` (a multiple of `vector`): an odd number of vectors."""
    return (-(-elements // vector) | 1) * vector


def _align_rows(sch, block, axis: int, vector: int) -> None:
    """Pad the stride of `block`'s local buffer along `axis` to an odd number of `vector`s (`pitch`)."""
    sch.storage_align(block, 0, axis, 2 * vector, vector)


def vector_width(extent: int, widest: int = 4) -> int:
    """The widest vector (4, 2, 1) dividing the extent of a staged tile's contiguous run: one vector never spans two
    runs."""
    return next(v for v in (widest, 2, 1) if v <= widest and extent % v == 0)


def stage_in_local(sch, block, read_index: int, at_loop, threads: list[tuple[str, int]], producer=None):
    """Stage the buffer `block` reads at `read_index` in local memory, computed under `at_loop` (the reduction step's
    loop, inside the work-group's thread loops) by all the work-group's `threads` ((thread tag, extent), outermost
    first): one flat loop over the tile, split across the threads, its innermost run of contiguous elements
    vectorised (the innermost dimension, with the dimensions inside it that the tile covers whole: a 3x3 conv's
    weights of `tile_rc` channels are one run of tile_rc x 9). `producer`: a block that already writes that buffer (a
    zero-padding block: the guarded loads then fill the local tile, one row at a time) instead of a new cache-read
    block. Returns the staging block."""
    if producer is None:
        stage = sch.cache_read(block, read_index, "shared")
    else:
        stage = producer
        sch.set_scope(stage, 0, "shared")
    sch.compute_at(stage, at_loop, preserve_unit_loops=True)
    loops = sch.get_loops(stage)
    at = sch.get(at_loop)
    loops = loops[1 + next(i for i, loop in enumerate(loops) if sch.get(loop).same_as(at)):]
    run = 1 + (_whole_dims(sch, stage, loops) if producer is None else 0)
    if run > 1:
        loops = loops[:-run] + [sch.fuse(*loops[-run:], preserve_unit_iters=True)]
    vector = vector_width(_extent(sch, loops[-1]))
    axis = len(sch.get(stage).writes[0].source.shape) - 1 - run
    if axis >= 0:
        _align_rows(sch, stage, axis, vector)
    outer, lanes = sch.split(loops[-1], [None, vector], preserve_unit_iters=True)
    flat = sch.fuse(*loops[:-1], outer, preserve_unit_iters=True)
    parts = sch.split(flat, [None] + [n for _, n in threads], preserve_unit_iters=True)
    for loop, (tag, _) in zip(parts[1:], threads):
        sch.bind(loop, tag)
    if vector > 1:
        sch.vectorize(lanes)
    return stage


def _whole_dims(sch, stage, loops) -> int:
    """How many innermost dimensions of a cache-read tile cover their buffer dimension whole (the loops of the
    staging block are its dimensions, in order)."""
    shape = [int(d) for d in sch.get(stage).reads[0].source.shape]
    whole = 0
    for loop, dim in zip(reversed(loops[1:]), reversed(shape[1:])):
        if _extent(sch, loop) != dim:
            break
        whole += 1
    return whole


def _extent(sch, loop) -> int:
    return int(sch.get(loop).extent)


def stage_image(sch, block, index: int):
    """A local-memory copy of image input `index` of `block`, read by `block` (made before any register cache of
    that input, which then reads local memory); `fetch_image` spreads it over the work-group."""
    return sch.cache_read(block, index, "shared")


def fetch_image(sch, copy, threads: tuple, row_axis: int | None = None) -> None:
    """Spread a staged image copy block (computed at its reduction step) over the work-group: its own loops but the
    lane fused and split over `threads` (threadIdx z, y, x extents), the lane vectorised (one float4 pixel per
    read); a guard covers a tile that is not a multiple of the work-group. `row_axis`: the local buffer axis whose
    rows get the odd pitch in pixels (`pitch`), the input tile's row axis."""
    loops = sch.get_loops(copy)[-5:]
    fused = sch.fuse(*loops[:-1], preserve_unit_iters=True)
    _, *bound = sch.split(fused, [None, *threads], preserve_unit_iters=True)
    for loop, axis in zip(bound, ("threadIdx.z", "threadIdx.y", "threadIdx.x")[-len(threads):]):
        sch.bind(loop, axis)
    sch.vectorize(loops[-1])
    if row_axis is not None:
        _align_rows(sch, copy, row_axis, LANES)


def local_bytes(*tiles: tuple[int, ...]) -> int:
    """Local memory of staged buffer tiles (their shapes, innermost last), an upper bound: `stage_in_local` pads a
    run to an odd number of vectors, less than 2 x 4 floats, and a run is at least a row."""
    return sum(math.prod(shape[:-1]) * (shape[-1] + 7) for shape in tiles) * FLOAT_BYTES


def check(threads: int, need_bytes: int, ctx) -> None:
    """Raise ValueError when a staged config cannot run: a work-group of one work-item (nothing to share) or tiles of
    `need_bytes` over the target's local memory."""
    if threads < 2:
        raise ValueError("cooperative=1 needs a work-group of at least 2 work-items to share the loads")
    have = ctx.device.local_memory_bytes
    if need_bytes > have:
        raise ValueError(f"cooperative=1 stages {need_bytes} bytes of local memory per work-group; the target has "
                         f"{have}")


def halves(unstaged_reads: int, staged_reads: int) -> bool:
    """The image families' evidence that staging pays: it at least halves the pixels a work-group reads per step.
    Under Oclgrind the adreno-740 defaults of ResNet-18's layer shapes read 2.6x (1x1/s2 GEMM), 2.7x (F(4x4) GEMM),
    4.7x (3x3/s2) and 8.1x (3x3/s1) fewer image pixels staged (`tools/image_reads.py`) with the same tiles and
    work-groups; where the staged box is mostly pixels a strided 1x1 conv skips (ResNet-18's 64->128 1x1/s2 at
    56x56: 1.8x fewer reads by count) the copy cost more than it saved (2.6x slower on PoCL)."""
    return unstaged_reads >= 2 * staged_reads


def default(config: dict, ctx, pays: bool, legal) -> dict:
    """A family's default `config` with `cooperative` 1 when the context's staging policy is auto, its device is a
    GPU, staging `pays` (the family's evidence) and `legal` (its check_config) accepts it; else with 0.
    Tiles and work-groups are those of the unstaged default, so the occupancy rule still holds."""
    if ctx.staging is Staging.AUTO and pays and ctx.device.device_class == "gpu":
        chosen = {**config, KNOB: 1}
        try:
            return legal(chosen)
        except ValueError:  # a work-group of one, or tiles too big for local memory: unstaged
            pass
    return {**config, KNOB: 0}


def space(knobs: dict[str, list], policy: Staging = Staging.AUTO) -> dict[str, list]:
    """A family's knob table as a search under `policy` sees it: `--staging off` keeps `cooperative` at 0."""
    if policy is Staging.OFF and KNOB in knobs:
        return {**knobs, KNOB: [0]}
    return knobs
