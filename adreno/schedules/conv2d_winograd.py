"""Winograd F(m x m, 3 x 3) convolution: schedules of the three stages `adreno.compiler.winograd` rewrites a conv into.

Stages (recognised by block name, so they are found again after FuseOps/FuseTIR renamed the functions):

- `winograd_input_transform` (V = B^T d B): one work-item per (input channel, tile); it loads the alpha x alpha
  patch (zero padding as a guarded load) into registers, computes T = B^T d in registers (block
  `winograd_input_rows`) and writes the alpha^2 values of T B; the transform matrix is inlined and, with every loop
  unrolled, folds to constants (zero terms vanish).
  Knobs: `threads_t` (workgroup size), `split_t` (1: one work-item per row `a` of the transformed tile, each
  loading the whole patch and computing its row of T: alpha times the work-items for deep layers with tiny maps).
- `winograd_batch_gemm` (M[a,b] = U[a,b] x V[a,b], alpha^2 GEMMs O x C by C x P): register-tiled like the direct
  conv: each work-item computes `tile_o` x `tile_p` outputs, the reduction over C runs serially inside it (split by
  `tile_k`, inner part unrolled), the workgroup is `threads_o` x `threads_p`, and along P the `tile_p` columns of a
  work-item are `threads_p` apart (coalesced / vectorisable). Knobs: tile_o, tile_p, threads_o, threads_p, tile_k,
  `cooperative` (1: the work-group's U rows and V columns of `tile_k` channels are staged in local memory, loaded
  once by all its work-items, float4 where the tile allows; `staging`). Staged by default on GPU targets (buffers):
  it cut Oclgrind's global-load count of the default GEMM of a 64->64 F(4x4) conv at 14x14 8x for adreno-740 and
  for nvidia-h200 (`tools/global_loads.py`); unstaged on CPU targets.
- `winograd_output_transform` (Y = A^T M A, fused with the conv's epilogue: bias, BatchNorm shift, ReLU/Clip,
  residual add): one work-item per (n, output channel, tile); the alpha^2 values of M are loaded once into registers,
  T = A^T M (block `winograd_output_rows`) and the m x m outputs T A are computed unrolled (constant coefficients
  folded) and the epilogue is applied before the store. Knobs: `threads_t`, `split_t` (1: one work-item per output
  row of a tile, computing that row of T: m times the work-items).

Packed stages (texture memory; main blocks `<stage>_nchw4c`) are the same schedules with a trailing 4-lane axis kept
innermost and vectorised wherever a tensor is read or written, so that every access is one float4 pixel; their GEMM
reduces over input channels in blocks of 4 (one V pixel) and counts `tile_o` in blocks of 4 output channels; its knob
`cooperative` (1: `staging`, one float4 pixel per read) copies each step's U rows and V tiles into local memory once
per work-group.

Which convs become Winograd, and with which tile, is decided before legalization
(`adreno.compiler.winograd.select_tile`): "auto" takes 3x3 stride-1 dilation-1 groups-1 convs with at least
`MIN_CHANNELS` input and output channels and an output of at least `MIN_SPATIAL` in both dimensions, with F(4x4) from
`F4_MIN_SPATIAL` up and F(2x2) below. The knob `tile` (0 = direct, 2, 4), tuned per conv workload key
`ConvWorkload.key("conv2d_winograd")`, overrides the rule.
"""

from __future__ import annotations

from dataclasses import replace

from ..targets.layout import LANES
from ..options import Memory
from ..records import direct_key, layout_workload
from ..workload import PACKED, ConvWorkload, key_memory
from . import _conv, conv2d_direct, conv2d_texture, occupancy, splitk, staging
from .family import Family, Matched
from .feature_view import Seen, shared

OP = "conv2d_winograd"
STAGES = ("winograd_input_transform", "winograd_batch_gemm", "winograd_output_transform")

# `tile` is read by the Relax rewrite (adreno.compiler.winograd), per conv; the others by the stage schedules below.
KNOBS: dict[str, list] = {
    "tile": [0, 2, 4],
    "tile_o": [1, 2, 4, 8],
    "tile_p": [1, 2, 4],
    "threads_o": [1, 2, 4, 8, 16],
    "threads_p": [1, 2, 4, 8, 16, 32, 64],
    "tile_k": [1, 2, 4, 8],
    "threads_t": [16, 32, 64, 128, 256],
    "split_t": [0, 1],
    staging.KNOB: staging.CHOICES,  # the GEMM's tiles staged in local memory per step
}
# knobs added after records were written: a record without them measured the value 0
OLDER_KNOBS = ("split_t", "cooperative")
STAGE_KNOBS = {
    "winograd_input_transform": ("threads_t", "split_t"),
    "winograd_batch_gemm": ("tile_o", "tile_p", "threads_o", "threads_p", "tile_k", "cooperative"),
    "winograd_output_transform": ("threads_t", "split_t"),
}


def _stage_of(func):
    """(stage name, schedule, blocks) when `func` is one of the Winograd stages, else None."""
    found = _conv.schedulable_blocks(func)
    if found is None:
        return None
    sch, blocks, _ = found
    names = [str(sch.get(b).name_hint) for b in blocks]
    found = [s for s in STAGES + tuple(s + PACKED for s in STAGES) if s in names]
    if len(found) != 1:
        return None
    return found[0], sch, blocks


def base_stage(stage: str) -> str:
    """The stage name without the packed suffix (what STAGE_KNOBS and the schedules are keyed by)."""
    return stage.removesuffix(PACKED)


def stage_key(wl) -> str:
    return f"{wl[0]}|" + "x".join(map(str, wl[1])) + "|float32"


def stage_workloads(conv, m: int, packed: bool = False) -> list[tuple[str, list[int]]]:
    """The stage workloads (as `workload` describes them) the rewrite of the conv `conv` (a ConvWorkload) with
    F(m x m, 3 x 3) produces, in STAGES order: what a conv's layout choice tunes. `packed`: the texture stages."""
    alpha = m + 2
    p = conv.n * -(-conv.oh // m) * -(-conv.ow // m)
    if not packed:
        return [("winograd_input_transform", [alpha, alpha, conv.c, p, alpha]),
                ("winograd_batch_gemm", [alpha, alpha, conv.o, p, conv.c]),
                ("winograd_output_transform", [conv.n, conv.o, conv.oh, conv.ow, alpha])]
    c4, o4 = -(-conv.c // LANES), -(-conv.o // LANES)
    return [("winograd_input_transform" + PACKED, [alpha, alpha, c4, p, LANES, alpha]),
            ("winograd_batch_gemm" + PACKED, [alpha, alpha, o4, p, LANES, c4 * LANES]),
            ("winograd_output_transform" + PACKED, [conv.n, o4, conv.oh, conv.ow, LANES, alpha])]


def layout_default(conv, m: int, ctx, packed: bool = False) -> dict:
    """The default knobs of every stage of `conv` rewritten with F(m x m, 3 x 3), with `tile` = m."""
    config = {"tile": m}
    for wl in stage_workloads(conv, m, packed):
        config.update(default_config(wl, ctx))
    return config


def _fit(extent: int, choices: list[int], prefer: int, waste: float = 0.15) -> int:
    """The largest choice <= prefer whose ragged last tile wastes at most `waste` of `extent` (1 if none)."""
    fitting = [c for c in choices if c <= prefer and (-(-extent // c) * c - extent) <= waste * extent]
    return max(fitting, default=1)


def default_config(wl, ctx) -> dict:
    """Defaults per stage, the first of a list (biggest register tiles first) whose launch fills the device
    (`occupancy`). GEMM: up to 8 output channels x 4 tiles per work-item, shrunk (channels, then tiles) as needed,
    and a workgroup of up to 64 work-items (16 along the tiles first), each allowed a ragged last tile wasting at
    most 15%, 4 input channels per unrolled reduction step (packed: 2 blocks of 4 output channels, 1 block of 4
    input channels); staged in local memory on a GPU (`staging.default` under the context's policy; packed: where
    staging at least halves the image reads); transforms: 64 work-items per group, a whole tile per work-item,
    else one row of it."""
    stage, dims = wl
    limit = min(ctx.max_threads, 64)
    device = ctx.device
    if base_stage(stage) != "winograd_batch_gemm":
        candidates = [{"threads_t": limit, "split_t": split} for split in (0, 1)]
        return occupancy.choose(device, candidates, lambda c: _transform_launch(wl, c))
    o, p, c = dims[2], dims[3], dims[-1]
    # a packed stage's output channel (tile_o) and reduction (tile_k) steps are blocks of 4 channels
    per = LANES if stage.endswith(PACKED) else 1
    start = {"tile_o": _fit(o, KNOBS["tile_o"], 8 // per), "tile_p": _fit(p, KNOBS["tile_p"], 4)}
    tiles = occupancy.ladder(start, [("tile_o", 1, o), ("tile_p", 1, p)], KNOBS)
    tile_k = _conv.pick_tile(c // per, KNOBS["tile_k"], 4 // per)
    candidates = []
    for t in tiles:
        threads_p = _fit(-(-p // t["tile_p"]), KNOBS["threads_p"], 16)
        threads_o = _fit(-(-o // t["tile_o"]), KNOBS["threads_o"], max(1, limit // threads_p))
        candidates.append({**t, "threads_o": threads_o, "threads_p": threads_p, "tile_k": tile_k, staging.KNOB: 0})
    chosen = occupancy.choose(device, candidates, lambda cfg: _gemm_launch(wl, cfg))

    def legal(cfg):
        return check_config(wl, cfg, ctx)

    pays = staging.halves(*_gemm_reads(chosen)) if stage.endswith(PACKED) else True
    return staging.default(chosen, ctx, pays, legal)


def _gemm_launch(wl, cfg: dict) -> occupancy.Launch:
    """Accumulators tile_o x tile_p plus one unrolled step's U and V loads (x 4 registers per pixel, packed)."""
    stage, (a, b, o, p, *rest) = wl
    lanes = LANES if stage.endswith(PACKED) else 1
    registers = lanes * (cfg["tile_o"] * cfg["tile_p"] + cfg["tile_k"] * (cfg["tile_o"] * lanes + cfg["tile_p"]))
    return occupancy.grid((o, cfg["tile_o"], cfg["threads_o"]), (p, cfg["tile_p"], cfg["threads_p"]),
                          registers=registers, batch=a * b)


def _transform_launch(wl, cfg: dict) -> occupancy.Launch:
    """One work-item per (channel, tile) or, split, per row of it; registers: the alpha x alpha values it loads plus
    its first pass's rows and the values it writes (alpha rows of alpha, or m rows of m; one row each when split),
    x 4 per pixel when packed."""
    stage, dims = wl
    lanes = LANES if stage.endswith(PACKED) else 1
    alpha = dims[-1]
    if base_stage(stage) == "winograd_input_transform":
        items, rows = dims[2] * dims[3], alpha  # (C, P)
    else:
        rows = alpha - 2  # m; (N, O, tiles)
        items = dims[0] * dims[1] * -(-dims[2] // rows) * -(-dims[3] // rows)
    written = rows * (1 if cfg["split_t"] else rows)
    first_pass = alpha * (1 if cfg["split_t"] else rows)
    return occupancy.grid((items * (rows if cfg["split_t"] else 1), 1, cfg["threads_t"]),
                          registers=lanes * (alpha * alpha + first_pass + written))


def check_config(wl, config: dict, ctx) -> dict:
    """Raise ValueError when `config` is not valid for the stage `wl` on `target`."""
    stage, dims = wl
    gemm = base_stage(stage) == "winograd_batch_gemm"
    if gemm and stage.endswith(PACKED) and (dims[-1] // LANES) % config.get("tile_k", 1):
        raise ValueError(f"tile_k={config['tile_k']} does not divide the {dims[-1] // LANES} input channel blocks")
    _conv.validate(config, KNOBS, ctx, ("threads_o", "threads_p") if gemm else ("threads_t",))
    if gemm and staging.staged(config):
        need = (_gemm_local_pixels(config) * staging.PIXEL_BYTES if stage.endswith(PACKED)
                else staging.local_bytes(*staged_tiles(config)))
        staging.check(config["threads_o"] * config["threads_p"], need, ctx)
    return config


def staged_tiles(cfg: dict) -> list[tuple[int, ...]]:
    """The local tiles of the buffer GEMM with `cooperative` 1: the work-group's U rows (its output channels) and V
    columns (its tiles), `tile_k` input channels of each."""
    return [(cfg["tile_o"] * cfg["threads_o"], cfg["tile_k"]), (cfg["tile_k"], cfg["tile_p"] * cfg["threads_p"])]


def _gemm_local_pixels(cfg: dict, row=staging.pitch) -> int:
    """Pixels the packed GEMM stages per step of `tile_k` input channel blocks (rows of `row(pixels)`: padded to
    `staging.pitch`): the U rows of its output channel blocks (4 channels x tile_k pixels each) and the V rows of
    its tiles (one per block)."""
    u_rows, v_rows = cfg["threads_o"] * cfg["tile_o"], cfg["tile_k"]
    return u_rows * row(LANES * cfg["tile_k"]) + v_rows * row(cfg["threads_p"] * cfg["tile_p"])


def _gemm_reads(cfg: dict) -> tuple[int, int]:
    """Image pixels a packed GEMM work-group reads per step: unstaged (each work-item its tile_o x 4 U pixels and
    tile_p V pixels per input block) and staged."""
    threads = cfg["threads_o"] * cfg["threads_p"]
    return (threads * cfg["tile_k"] * (LANES * cfg["tile_o"] + cfg["tile_p"]),
            _gemm_local_pixels(cfg, row=lambda pixels: pixels))


def _bind_flat(sch, loops, threads):
    fused = sch.fuse(*loops, preserve_unit_iters=True)
    bx, tx = sch.split(fused, [None, threads], preserve_unit_iters=True)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return tx


def _first_pass_in_registers(sch, rows, lanes: int) -> None:
    """The first pass of a transform (`winograd_input_rows` or `winograd_output_rows`, elementwise blocks), computed
    at its work-item: its (row, column, *lane) loops unrolled."""
    _conv.registers(sch, sch.get_loops(rows)[-2 - lanes:])


def _schedule_input(sch, blocks, cfg):
    names = {str(sch.get(b).name_hint): b for b in blocks}
    main = next(b for name, b in names.items() if name.startswith("winograd_input_transform"))
    tile, rows = names["winograd_data_tile"], names["winograd_input_rows"]
    for b in blocks:  # the transform matrix and any fused elementwise prologue go into the loads
        if b not in (main, tile, rows):
            sch.compute_inline(b)
    out = sch.cache_write(main, 0, "local")  # before any split: its write-back keeps the exact domain
    sch.set_scope(tile, 0, "local")
    sch.set_scope(rows, 0, "local")
    a, b_, ci, p, *lane, s = sch.get_loops(main)
    sch.reorder(ci, p, a, b_, s, *lane)
    split = cfg.get("split_t", 0)  # a row `a` per work-item: the row joins the work-item axes
    tx = _bind_flat(sch, [ci, p, a] if split else [ci, p], cfg["threads_t"])
    sch.compute_at(rows, tx, preserve_unit_loops=True)  # split: only the work-item's row of B^T d
    sch.compute_at(tile, tx, preserve_unit_loops=True)
    _conv.registers(sch, sch.get_loops(tile)[-2 - len(lane):], bool(lane))
    _first_pass_in_registers(sch, rows, len(lane))
    sch.reverse_compute_at(out, tx, preserve_unit_loops=True)
    _conv.registers(sch, sch.get_loops(out)[-4 - len(lane):], bool(lane))
    init = sch.decompose_reduction(main, b_ if split else a)
    _conv.registers(sch, sch.get_loops(init)[-(1 if split else 2) - len(lane):], bool(lane))
    # (TVM refuses to vectorise this lane loop: the registers stay scalar)
    _conv.registers(sch, ([] if split else [a]) + [b_, s, *lane])
    return sch


def _schedule_gemm(sch, blocks, cfg):
    (main,) = blocks
    to, tp, vo, vp, vk = cfg["threads_o"], cfg["threads_p"], cfg["tile_o"], cfg["tile_p"], cfg["tile_k"]
    # cooperative (packed only): local-memory copies of the step's U and V tiles, which the register caches read
    packed = len(sch.get_loops(main)) == 6  # a, b, o, p, lane, k: a packed stage has the lane loop
    staged = [staging.stage_image(sch, main, i) for i in (0, 1)] if packed and staging.staged(cfg) else []
    u_cache = sch.cache_read(main, 0, "local")
    v_cache = sch.cache_read(main, 1, "local")
    out = sch.cache_write(main, 0, "local")
    a, b, o, p, *lane, k = sch.get_loops(main)
    oo, ot, oi = sch.split(o, [None, to, vo], preserve_unit_iters=True)
    po, pt, pi = sch.split(p, [None, tp, vp], preserve_unit_iters=True)
    # packed: the reduction in blocks of 4 input channels, the 4 lanes of one V pixel innermost
    ko, ki, *kl = sch.split(k, [None, vk, LANES] if lane else [None, vk], preserve_unit_iters=True)
    sch.reorder(a, b, oo, po, ot, pt, ko, ki, *kl, oi, pi, *lane)
    grid = sch.fuse(a, b, oo, po, preserve_unit_iters=True)
    sch.bind(grid, "blockIdx.x")
    sch.bind(ot, "threadIdx.y")
    sch.bind(pt, "threadIdx.x")
    for cache in (u_cache, v_cache):
        sch.compute_at(cache, ki, preserve_unit_loops=True)
        _conv.registers(sch, sch.get_loops(cache)[-4 - len(lane):], bool(lane))
    if staging.staged(cfg) and not lane:  # buffers: the work-group's U rows and V columns per tile_k channels
        for cache in (u_cache, v_cache):
            staging.stage_in_local(sch, cache, 0, ko, [("threadIdx.y", to), ("threadIdx.x", tp)])
    for copy in staged:  # after their readers: these must precede them in the step
        sch.compute_at(copy, ko, preserve_unit_loops=True)
        staging.fetch_image(sch, copy, (to, tp), row_axis=2)
    _conv.registers(sch, [ki, *kl, oi, pi, *lane], bool(lane))
    sch.reverse_compute_at(out, pt, preserve_unit_loops=True)
    _conv.registers(sch, sch.get_loops(out)[-4 - len(lane):], bool(lane))
    init = sch.decompose_reduction(main, ko)
    _conv.registers(sch, sch.get_loops(init)[-2 - len(lane):], bool(lane))
    return sch


def _schedule_output(sch, blocks, cfg, m):
    names = [str(sch.get(b).name_hint) for b in blocks]
    index = next(i for i, name in enumerate(names) if name.startswith("winograd_output_transform"))
    main, rows = blocks[index], blocks[names.index("winograd_output_rows")]
    for b in blocks[:index]:  # the A^T matrix (and any elementwise prologue) inline into the two passes
        if b != rows:
            sch.compute_inline(b)
    epilogue = blocks[index + 1:]
    for b in epilogue[:-1]:
        sch.compute_inline(b)
    if epilogue:
        out = epilogue[-1]
        sch.set_scope(main, 0, "local")
    else:
        out = sch.cache_write(main, 0, "local")
    sch.set_scope(rows, 0, "local")
    n, o, y, x, *lane, rb = sch.get_loops(main)
    ty, yi = sch.split(y, [None, m], preserve_unit_iters=True)
    tx, xi = sch.split(x, [None, m], preserve_unit_iters=True)
    split = cfg.get("split_t", 0)  # an output row per work-item: the row joins the work-item axes
    if split:
        sch.reorder(n, o, ty, tx, yi, rb, xi, *lane)
    else:
        sch.reorder(n, o, ty, tx, rb, yi, xi, *lane)
    thread = _bind_flat(sch, [n, o, ty, tx, yi] if split else [n, o, ty, tx], cfg["threads_t"])
    m_cache = sch.cache_read(rows, 0, "local")
    sch.compute_at(rows, thread, preserve_unit_loops=True)  # split: only the work-item's row of A^T M
    sch.compute_at(m_cache, thread, preserve_unit_loops=True)
    _conv.registers(sch, sch.get_loops(m_cache)[-4 - len(lane):], bool(lane))
    _first_pass_in_registers(sch, rows, len(lane))
    _conv.registers(sch, [rb] + ([] if split else [yi]) + [xi, *lane], bool(lane))
    sch.reverse_compute_at(out, thread, preserve_unit_loops=True)
    _conv.registers(sch, sch.get_loops(out)[-2 - len(lane):], bool(lane))
    init = sch.decompose_reduction(main, rb)
    _conv.registers(sch, sch.get_loops(init)[-(1 if split else 2) - len(lane):], bool(lane))
    return sch


def _tile_of(sch, blocks) -> int:
    """m of the output transform: the row count of its inlined A^T matrix block."""
    for b in blocks:
        stmt = sch.get(b)
        if str(stmt.name_hint) == "winograd_AT":
            return int(stmt.writes[0].source.shape[0])
    raise ValueError("no winograd_AT block")


def match(func) -> Matched | None:
    """A Winograd stage function (buffer or packed); workload: (stage, iteration extents of its main block).

    Extents: input transform (alpha, alpha, C, P, alpha); GEMM (alpha, alpha, O, P, C); output transform
    (N, O, OH, OW, alpha), with P = N * ceil(OH / m) * ceil(OW / m) tiles (each transform's last extent is its second
    pass's reduction). A packed stage counts channels in
    blocks of 4 (the GEMM's reduction in channels) and has the lane extent 4 before its reduction extents. Of a
    tuned config, only the stage's own knobs apply."""
    found = _stage_of(func)
    if found is None:
        return None
    stage, sch, blocks = found
    main = next(b for b in blocks if str(sch.get(b).name_hint) == stage)
    wl = stage, [int(iv.dom.extent) for iv in sch.get(main).iter_vars]
    knobs = STAGE_KNOBS[base_stage(stage)]
    # a record from before `split_t` measured whole tiles per work-item, one from before `cooperative` unstaged GEMMs
    older = {k: 0 for k in OLDER_KNOBS if k in knobs}
    return Matched(wl, stage_key(wl), lambda cfg: _schedule_stage(sch, blocks, base_stage(stage), cfg), knobs, older)


def _schedule_stage(sch, blocks, stage: str, cfg: dict):
    if stage == "winograd_input_transform":
        return _schedule_input(sch, blocks, cfg)
    if stage == "winograd_batch_gemm":
        return _schedule_gemm(sch, blocks, cfg)
    return _schedule_output(sch, blocks, cfg, _tile_of(sch, blocks))


def _launch(wl, cfg: dict) -> occupancy.Launch:
    gemm = base_stage(wl[0]) == "winograd_batch_gemm"
    return _gemm_launch(wl, cfg) if gemm else _transform_launch(wl, cfg)


# The feature row's columns for the layout and stage knobs, with their value when absent (`Family.row_knobs`).
ROW_KNOBS: dict[str, int] = {"tile": 0, "tile_o": 1, "tile_p": 1, "threads_o": 1, "threads_p": 1, "tile_k": 1,
                             "threads_t": 1, "split_t": 0}


def _gemm_knobs(config: dict, lanes: int = 1) -> dict:
    """The batched GEMM's knobs in the direct conv's names (`lanes` 4: packed blocks of 4 channels)."""
    cfg = {**ROW_KNOBS, **config}
    return {"tile_f": lanes * cfg["tile_o"], "tile_x": cfg["tile_p"], "threads_f": cfg["threads_o"],
            "threads_x": cfg["threads_p"], "tile_rc": lanes * cfg["tile_k"], **shared(config)}


def features(workload, config: dict) -> Seen | None:
    """The cost model's view of a stage task (`(stage, extents)`): the batched GEMM as the 1x1 conv it is, alpha^2
    images of 1 x P pixels (packed: tile_o and tile_k in blocks of 4 channels), its descriptors the GEMM's; None
    for the transforms, which the cost models do not describe."""
    stage, dims = workload
    if "batch_gemm" not in stage:
        return None
    packed = len(dims) == 6  # (alpha, alpha, O/4, P, 4, C): blocks of 4 output channels
    lanes = LANES if packed else 1
    gemm = ConvWorkload(dims[0] * dims[1], dims[-1], 1, dims[3], dims[2] * lanes, 1, 1, 1, dims[3], (1, 1), (1, 1),
                        (0, 0, 0, 0), 1, "float32")
    return Seen(gemm, _gemm_knobs(config, lanes), config, stage_local=False, described=gemm)


def layout_features(conv, config: dict) -> Seen:
    """The cost model's view of the conv `conv` rewritten with F(m x m, 3 x 3), m = `config["tile"]`: its batched
    GEMM as the 1x1 conv it is (alpha^2 images of 1 x P pixels), with work_reduction = direct MACs / GEMM MACs."""
    _, (alpha, _, o, p, c) = stage_workloads(conv, int(config["tile"]))[1]
    gemm = replace(conv, n=alpha * alpha, c=c, h=1, w=p, o=o, kh=1, kw=1, oh=1, ow=p, stride=(1, 1),
                   dilation=(1, 1), padding=(0, 0, 0, 0), groups=1)
    return Seen(gemm, _gemm_knobs(config), config, work_reduction=conv.flops / gemm.flops)


FAMILY = Family("conv2d_winograd", KNOBS, match, default_config, check_config, "Conv2dWinograd", features=features,
                row_knobs=ROW_KNOBS, launch=_launch)


def layout_config_in_space(key: str, config: dict) -> bool:
    """False for a layout record (under a `layout_key`) whose knobs are not a point of today's layout space, as the
    tuner's `LayoutTask.space` defines it (a tile or knob of an older version, a value outside its choices, a missing
    knob of the chosen layout): compile skips it as the tuner does. True for any other key (its family checks the
    knobs where it applies them)."""
    if layout_workload(key) is None:
        return True
    direct = conv2d_texture.KNOBS if key_memory(key) is Memory.TEXTURE else conv2d_direct.KNOBS
    stage = {k: v for k, v in KNOBS.items() if k != "tile"}
    choices = {"tile": KNOBS["tile"], **direct, **stage}
    if config.get("tile") not in KNOBS["tile"]:
        return False
    active = direct if config["tile"] == 0 else stage
    # a record from before `cooperative` or `threads_k`: unstaged, unsplit
    required = set(active) - set(staging.OLDER_RECORDS) - set(splitk.OLDER_RECORDS)
    return required <= set(config) and all(k in choices and v in choices[k] for k, v in config.items())


def kernel_configs(configs: dict) -> dict:
    """`configs` (workload key -> tuned knobs, as `adreno compile --records` reads them) plus the knobs of every
    layout record (under a conv's `layout_key`: `tile` and the knobs of that layout) under the keys the schedules look
    up: the direct conv's key (`direct_key`) when `tile` is 0, each Winograd stage's key otherwise (packed stages for
    a texture layout key). A layout record overrides a direct-conv record of the same conv (it was measured as the
    conv's whole pipeline)."""
    out = dict(configs)
    for key, config in configs.items():
        wl = layout_workload(key)
        if wl is None or "tile" not in config:
            continue
        memory, m = key_memory(key), int(config["tile"])
        if m == 0:
            knobs = conv2d_texture.KNOBS if memory is Memory.TEXTURE else conv2d_direct.KNOBS
            out[direct_key(wl, memory)] = {k: v for k, v in config.items() if k in knobs}
            continue
        for stage in stage_workloads(wl, m, packed=memory is Memory.TEXTURE):
            out[stage_key(stage)] = {k: config[k] for k in STAGE_KNOBS[base_stage(stage[0])] if k in config}
    return out
