"""Split-K across a work-group: for deep layers on maps too small to fill a GPU (ResNet-18's 512@7x7 conv has 128
channel blocks x 49 pixels of output on images; MobileNetV2's 960->160 1x1 conv 160 x 49 outputs), every output's
long serial reduction is split over `threads_k` work-items of a work-group (threadIdx.z).

Each of them sums a contiguous slice of the reduction axis into its own registers (TVM's rfactor block,
`partial_sums`), then a cross-thread reduction in local memory adds the slices (`sum_partials`: the write-back
block's reduction loop bound to threadIdx.z, which TVM lowers to a local-memory all-reduce), and the epilogue and
store follow. Used by `conv2d_1x1`, `conv2d_texture` and `conv2d_direct` (knob `threads_k`); a family lists its
split configs after its most parallel unsplit one (`candidates`), so a default splits only when no unsplit config
fills the device (`occupancy.choose`).
"""

from __future__ import annotations

KNOB = "threads_k"
CHOICES = [1, 2, 4, 8]
# a record from before split-K measured the whole reduction in one work-item
OLDER_RECORDS = {KNOB: 1}


def threads(cfg: dict) -> int:
    """The work-items each output's reduction is split over (1: not split)."""
    return cfg.get(KNOB, 1)


def check(cfg: dict, extent: int, step: int, what: str, staged: bool) -> None:
    """Raise ValueError when `cfg`'s split does not hold: `threads_k` slices of whole steps (`step` of the `extent`
    units of the reduction, named `what`) must cover it exactly, and cooperative staging (one staged step for the
    whole work-group) does not split."""
    k = threads(cfg)
    if k == 1:
        return
    if extent % (k * step):
        raise ValueError(f"threads_k={k} x {step} does not divide the {extent} {what}")
    if staged:
        raise ValueError("cooperative=1 stages one reduction step for the whole work-group: not with split-K")


def partial_sums(sch, conv, axis: int, cfg: dict):
    """Split `conv`'s loop `axis` (its reduction over input channels) into `threads_k` slices and rfactor them: the
    returned block sums a slice per work-item into local (register) partials, right after the conv's spatial loops;
    `conv` becomes their sum. Without a split: `conv` itself."""
    if threads(cfg) == 1:
        return conv
    kt, _ = sch.split(sch.get_loops(conv)[axis], [threads(cfg), None], preserve_unit_iters=True)
    main = sch.rfactor(kt, 0)
    sch.set_scope(main, 0, "local")
    return main


def sum_partials(sch, conv, main, at, outer: int) -> None:
    """The sum of the partials (`conv`, unless it is `main`: no split) computed at the work-item's loop `at`
    (`outer` loops deep), its reduction loop over the `threads_k` slices innermost and on threadIdx.z: TVM lowers it
    to a cross-thread reduction in local memory."""
    if main is conv:
        return
    sch.reverse_compute_at(conv, at, preserve_unit_loops=True)
    over_k, *spatial = sch.get_loops(conv)[outer:]
    sch.reorder(*spatial, over_k)
    sch.bind(over_k, "threadIdx.z")


def candidates(last: dict, extent: int, step: int, config, fills=None) -> list[dict]:
    """The split configs a default appends after its most parallel unsplit one (`last`): `config(last, k)` for
    each `threads_k` above 1 whose slices of whole steps cover the reduction (as `check` asks); with `fills` (the
    occupancy rule on a config) only those that fill the device, so that a workload too small to fill it even split
    keeps its unsplit kernel (`conv2d_direct`, `conv2d_texture`; the 1x1 GEMM splits such maps too)."""
    found = [config(last, k) for k in CHOICES[1:] if extent % (k * step) == 0]
    return [c for c in found if fills is None or fills(c)]
