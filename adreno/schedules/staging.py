"""Cooperative staging of a work-group's operand tiles in local memory (TVM scope "shared" = OpenCL `__local`).

Without it every work-item reads its own operands from global memory, so an input element is fetched once by every
work-item whose outputs need it (a 3x3 conv: up to 9 times per output channel tile, once more per work-item along the
output channels). Staged, a work-group fetches its whole input tile (with its halo) and its weight tile once per
reduction step: all of its work-items share the loads (one flat loop over the tile, the innermost run of contiguous
elements vectorised), a barrier follows (TVM inserts it), and every work-item then reads its operands from local
memory. Local rows get a pitch that is an odd multiple of the vector width (`storage_align`), so work-items stepping
across rows hit different banks.

`stage_in_local(sch, block, read_index, at_loop, threads)` stages one operand of a block; `local_bytes` and
`check_cooperative` are the rule every family's `check_config` applies to a staged config; `prefer_cooperative` is
the families' default (staged on GPU targets where staging pays, when the config allows it).
"""

from __future__ import annotations

import math

FLOAT_BYTES = 4


def vector_width(extent: int, widest: int = 4) -> int:
    """The widest vector (4, 2, 1) dividing the extent of a staged tile's contiguous run: one vector never spans two
    runs."""
    return next(v for v in (widest, 2, 1) if v <= widest and extent % v == 0)


def stage_in_local(sch, block, read_index: int, at_loop, threads: list[tuple[str, int]], producer=None,
                   image: bool = False):
    """Stage the buffer `block` reads at `read_index` in local memory, computed under `at_loop` (the reduction step's
    loop, inside the work-group's thread loops) by all the work-group's `threads` ((thread tag, extent), outermost
    first): one flat loop over the tile, split across the threads, its innermost run of contiguous elements
    vectorised (the innermost dimension, with the dimensions inside it that the tile covers whole: a 3x3 conv's
    weights of `tile_rc` channels are one run of tile_rc x 9). `producer`: a block that already writes that buffer (a
    zero-padding block: the guarded loads then fill the local tile, one row at a time) instead of a new cache-read
    block. `image`: the buffer will be an image, read a pixel (the innermost 4 lanes) at a time. Returns the staging
    block."""
    if producer is None:
        stage = sch.cache_read(block, read_index, "shared")
    else:
        stage = producer
        sch.set_scope(stage, 0, "shared")
    sch.compute_at(stage, at_loop, preserve_unit_loops=True)
    loops = sch.get_loops(stage)
    at = sch.get(at_loop)
    loops = loops[1 + next(i for i, loop in enumerate(loops) if sch.get(loop).same_as(at)):]
    run = 1 + (_whole_dims(sch, stage, loops) if producer is None and not image else 0)
    if run > 1:
        loops = loops[:-run] + [sch.fuse(*loops[-run:], preserve_unit_iters=True)]
    vector = vector_width(_extent(sch, loops[-1]))
    axis = len(sch.get(stage).writes[0].source.shape) - 1 - run
    if axis >= 0:  # the pitch of a local run: an odd number of vectors (distinct banks across runs)
        sch.storage_align(stage, 0, axis, 2 * vector, vector)
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


def local_bytes(*tiles: tuple[int, ...]) -> int:
    """Local memory of staged tiles (their shapes, innermost last), an upper bound: `stage_in_local` pads a run to an
    odd number of vectors, less than 2 x 4 floats, and a run is at least a row."""
    return sum(math.prod(shape[:-1]) * (shape[-1] + 7) for shape in tiles) * FLOAT_BYTES


def check_cooperative(config: dict, threads: int, tiles: list[tuple[int, ...]], target) -> None:
    """Raise ValueError when a staged config (`cooperative` 1) cannot run: a work-group of one work-item (nothing to
    share) or tiles larger than the target's local memory."""
    if not config.get("cooperative", 0):
        return
    from ..target import device_of

    if threads < 2:
        raise ValueError("cooperative=1 needs a work-group of at least 2 work-items to share the loads")
    need, have = local_bytes(*tiles), device_of(target).local_memory_bytes
    if need > have:
        raise ValueError(f"cooperative=1 stages {need} bytes of local memory per work-group; the target has {have}")


def prefer_cooperative(config: dict, target, pays: bool, check) -> dict:
    """`config` with `cooperative` 1 on a GPU target when staging `pays` (the family's evidence) and `check` (its
    check_config) accepts it; else with 0 (CPU targets always: their caches already share the loads)."""
    from ..target import device_of

    if pays and device_of(target).device_class == "gpu":
        staged = {**config, "cooperative": 1}
        try:
            return check(staged)
        except ValueError:  # a work-group of one, or tiles too big for local memory: unstaged
            pass
    return {**config, "cooperative": 0}
