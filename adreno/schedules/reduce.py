"""Row normalizations over one axis, with any elementwise epilogue FuseOps appended: softmax (the last axis of a
classifier's logits, the channel axis of an NCHW tensor, attention scores) and LayerNorm (a transformer's features,
ConvNeXt's channels-last blocks). Means and other sums/maxima over trailing axes are global pools
(`adreno/schedules/pool.py`).

How they arrive after TVM's legalization: four blocks, a reduction over the axis, an elementwise stage, a second
reduction over the axis that reads the first's result, and the normalisation, then elementwise blocks (`ROW_NORMS`):
- softmax: `T_softmax_maxelem` (max), `T_softmax_exp` (exp(x - max)), `T_softmax_expsum` (sum), `T_softmax_norm`
  (exp / sum);
- LayerNorm: `<x>_sum` (sum), `<x>_mean` (sum / n), `<x>_var_sum` (sum of (x - mean)^2), `T_layer_norm`
  ((x - mean) * rsqrt(var + eps) * gamma + beta).

Schedule: a row is one normalization (every index but the axis); `threads_y` rows per workgroup and `threads_x`
work-items per row. With `threads_x` > 1 the lanes split the row (lane i takes elements i, i + threads_x, ...:
neighbouring lanes read neighbouring addresses when the axis is the last one) and the two reductions are each a
cross-lane reduction in local memory, after which every lane normalises its own elements (the reduced values are
"local"-scope blocks: every lane then reads the reduction's result after its barrier. As "shared" blocks, lane 0
copied the result into shared memory and the other lanes read it with no barrier in between, which TVM's sync
analysis does not see, since the index is the same expression: a race, wrong on PoCL for rows of 4); with
`threads_x` = 1 one work-item does its row serially (neighbouring work-items then read neighbouring addresses for a
softmax over a non-last axis, e.g. the channels of NCHW). The elementwise stage (exp(x - max), the mean) is
recomputed where it is read instead of being stored.

Without this rule TVM's dlight gave a LayerNorm one 256-work-item workgroup a row, all but the row's length idle
(ConvNeXt's rows of 32 and 64: 87% and 75% of the work-items), each reduction a 9-step tree with a barrier a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from . import _conv, occupancy
from .family import Family, Matched
from .feature_view import direct_view
from .pool import PoolWorkload, combiner

KNOBS: dict[str, list] = {
    "threads_x": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    "threads_y": [1, 2, 4, 8, 16, 32, 64],
}


@dataclass(frozen=True)
class RowNorm:
    """One row normalization as TVM legalizes it: which four stage names are its, and the two reductions' combiners."""

    op: str
    is_stages: Callable[[tuple[str, ...]], bool]
    combiners: tuple[str, str]


SOFTMAX_STAGES = ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm")
ROW_NORMS = (
    RowNorm("softmax", lambda names: names == SOFTMAX_STAGES, ("max", "sum")),
    RowNorm("layer_norm", lambda names: (names[0].endswith("_sum") and names[1].endswith("_mean")
                                         and names[2].endswith("_var_sum") and names[3] == "T_layer_norm"),
            ("sum", "sum")),
)


def match_row_norm(func):
    """(schedule, workload, the four stage blocks, epilogue blocks) for a float32 row normalization of `ROW_NORMS`
    over one axis, with its epilogue; else None."""
    found = _conv.schedulable_blocks(func)
    if found is None:
        return None
    sch, blocks, infos = found
    names = tuple(str(sch.get(b).name_hint) for b in blocks)
    if len(names) < 4 or not all(info.is_injective() for info in infos[4:]):
        return None
    norm = next((n for n in ROW_NORMS if n.is_stages(names[:4])), None)
    if norm is None:
        return None
    first, _, second, last = (sch.get(b) for b in blocks[:4])
    if (combiner(first), combiner(second)) != norm.combiners or len(first.reads) != 1:
        return None
    if _conv.iter_kinds(first).count("R") != 1 or _conv.iter_kinds(second).count("R") != 1:
        return None
    data = first.reads[0]
    shape = _conv._ints(data.source.shape)
    out_shape = _conv._ints(last.writes[0].source.shape)
    if shape is None or shape != out_shape or str(data.source.dtype) != "float32":
        return None
    k = first.iter_vars[-1].var
    axes = [i for i, r in enumerate(data.region) if r.min.same_as(k)]
    if len(axes) != 1 or any(_conv._ints(sch.get(b).writes[0].source.shape) != shape for b in blocks[4:]):
        return None
    axis, length = axes[0], shape[axes[0]]
    rows = math.prod(shape) // length
    wl = PoolWorkload(norm.op, 1, rows, 1, length, 1, 1, 1, length, dtype="float32", shape=tuple(shape),
                      axes=(axis,), epilogue=names[4:])
    return sch, wl, blocks[:4], blocks[4:]


def default_config(wl: PoolWorkload, ctx) -> dict:
    """Serial rows up to 32 elements (64 rows per workgroup); longer rows, or too few rows to fill the device
    (`occupancy`): 32 lanes, 128 from 512 elements."""
    limit = min(ctx.max_threads, 64)
    lanes = min(ctx.max_threads, 128 if wl.length >= 512 else 32, 1 << (wl.length.bit_length() - 1))
    cooperative = {"threads_x": lanes, "threads_y": max(1, limit // lanes)}
    candidates = [{"threads_x": 1, "threads_y": limit}, cooperative] if wl.length <= 32 else [cooperative]
    return occupancy.choose(ctx.device, candidates, lambda c: occupancy.grid(
        (wl.c, 1, c["threads_y"]), (c["threads_x"], 1, c["threads_x"]), registers=2))


def check_config(wl: PoolWorkload, config: dict, ctx) -> dict:
    """Raise ValueError when `config` is not a valid point of this family's space for `wl` on `target`."""
    _conv.validate(config, KNOBS, ctx)
    if config.get("threads_x", 1) > wl.length:
        raise ValueError(f"threads_x={config['threads_x']} lanes for rows of {wl.length}")
    return config


def _split_lanes(sch, loop, lanes: int):
    if lanes > 1:
        sch.bind(sch.split(loop, [None, lanes], preserve_unit_iters=True)[1], "threadIdx.x")


def schedule_row_norm(sch, wl: PoolWorkload, stages, epilogue, cfg: dict):
    """The row normalization schedule (see the module doc). Mutates and returns `sch`."""
    tx, ty = cfg["threads_x"], cfg["threads_y"]
    first, between, second, norm = stages
    *inlined, out = norm, *epilogue
    for block in [between, *inlined]:
        sch.compute_inline(block)
    loops = sch.get_loops(out)
    axis = wl.axes[0]
    sch.reorder(*loops[:axis], *loops[axis + 1:], loops[axis])
    rows = sch.fuse(*loops[:axis], *loops[axis + 1:], preserve_unit_iters=True)
    ro, rt = sch.split(rows, [None, ty], preserve_unit_iters=True)
    sch.bind(ro, "blockIdx.x")
    sch.bind(rt, "threadIdx.y")
    _split_lanes(sch, loops[axis], tx)
    for block in (second, first):
        sch.compute_at(block, rt, preserve_unit_loops=True)
        sch.set_scope(block, 0, "local")  # not "shared": see the module doc
        _split_lanes(sch, sch.get_loops(block)[-1], tx)
    return sch


def match(func) -> Matched | None:
    """A softmax or LayerNorm with its epilogue."""
    found = match_row_norm(func)
    if found is None:
        return None
    sch, wl, stages, epilogue = found
    return Matched(wl, wl.key(), lambda cfg: schedule_row_norm(sch, wl, stages, epilogue, cfg))


FAMILY = Family("reduce", KNOBS, match, default_config, check_config, "RowNorm",
                features=direct_view)  # as a pool
