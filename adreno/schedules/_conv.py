"""Shared machinery of the convolution families (`conv2d_direct`, `depthwise`, `conv2d_texture`, `conv2d_1x1`).

`match_conv(func)` recognises a fused primitive function made of an optional zero-padding block, one NCHW/OIHW
convolution reduction block (`conv2d_nchw` or `group_conv2d_nchw`, as TVM's legalization emits them) and a chain of
elementwise epilogue blocks (folded BatchNorm, bias, ReLU/Clip, residual add, ...), and describes it as a
`ConvWorkload`. `schedule_tiled(sch, match, cfg, target)` applies the register-tiled direct schedule shared by the
direct and depthwise families: every work-item computes `tile_f` output channels x `tile_y` rows x `tile_x` columns in
registers, the reduction (ci, kh, kw) runs serially inside the work-item (ci split by `tile_rc` and the inner part
unrolled together with kh/kw), the padding is read through a guarded load (inlined pad block) and the whole epilogue
is applied to the registers before the single store. The workgroup is `threads_f x threads_y x threads_x`
(threadIdx.z/y/x); along x, the `tile_x` columns of a work-item are `threads_x` apart so that neighbouring work-items
touch neighbouring addresses (coalesced on GPUs, vectorisable across work-items on PoCL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import TVM_ERRORS
from ..workload import ConvWorkload
from . import splitk, staging
from .family import Family, Matched
from .feature_view import direct_view
from .occupancy import grid

SCHEDULE_KNOBS = ("tile_f", "tile_y", "tile_x", "threads_f", "threads_y", "threads_x", "tile_rc", "unroll_k", "stage",
                  "cooperative")


@dataclass
class ConvMatch:
    workload: ConvWorkload
    pad: object | None  # SBlockRV of the zero-padding block, if any
    conv: object  # SBlockRV of the reduction
    epilogue: list  # SBlockRVs of the elementwise blocks after the conv, in order


def _ints(values) -> list[int] | None:
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        return None


def iter_kinds(stmt) -> str:
    """A block's iteration variables as a string: "S" spatial, "R" reduction (a `CommReduce` IterVar), "?" any
    other kind, so a matcher states the shape it expects ("SSSSRR") in one comparison."""
    names = {0: "S", 2: "R"}  # tvm.tir.IterVar.DataPar, CommReduce
    return "".join(names.get(int(iv.iter_type), "?") for iv in stmt.iter_vars)


def match_conv(func, sch=None) -> ConvMatch | None:
    """Recognise `pad? -> conv2d_nchw|group_conv2d_nchw -> elementwise*` (static shapes); None otherwise."""
    from tvm.sym.pattern import detect_linear_equation

    found = one_reduction(func, sch)
    if found is None:
        return None
    sch, blocks, infos, ci = found
    conv = blocks[ci]
    stmt = sch.get(conv)
    name = str(stmt.name_hint)
    if name not in ("conv2d_nchw", "group_conv2d_nchw"):
        return None
    ivs = list(stmt.iter_vars)
    if iter_kinds(stmt) != "SSSSRRR":
        return None
    if len(stmt.reads) != 2 or len(stmt.writes) != 1:
        return None
    data_region, weight_region = stmt.reads
    out_buf = stmt.writes[0].source
    dtype = str(out_buf.dtype)
    if dtype != "float32" or str(data_region.source.dtype) != dtype or str(weight_region.source.dtype) != dtype:
        return None
    out_shape = _ints(out_buf.shape)
    w_shape = _ints(weight_region.source.shape)
    dom = _ints(iv.dom.extent for iv in ivs)
    if out_shape is None or w_shape is None or dom is None or len(out_shape) != 4 or len(w_shape) != 4:
        return None
    n, o, oh, ow = out_shape
    cig, kh, kw = dom[4:]
    if w_shape != [o, cig, kh, kw]:
        return None
    # stride and dilation: data[n, c, y*sh + ry*dh - pad?, x*sw + rx*dw]
    vy, vx, vry, vrx = ivs[2].var, ivs[3].var, ivs[5].var, ivs[6].var
    mins = [r.min for r in data_region.region]
    if len(mins) != 4:
        return None
    coef_y = detect_linear_equation(mins[2], [vy, vry])
    coef_x = detect_linear_equation(mins[3], [vx, vrx])
    if len(coef_y) != 3 or len(coef_x) != 3:
        return None
    sh, dh, offy = (int(v) for v in coef_y)
    sw, dw, offx = (int(v) for v in coef_x)

    pad_block = None
    before = blocks[:ci]
    if len(before) > 1:
        return None
    if before:
        found = pad_of(sch, before[0], infos[0], data_region.source)
        if found is None:
            return None
        padding, in_shape = found
        pad_block = before[0]
    else:
        in_shape = _ints(data_region.source.shape)
        if in_shape is None:
            return None
        padding = (0, 0, 0, 0)
    if offy != 0 or offx != 0:
        return None
    c = in_shape[1]
    if c % cig or o % (c // cig):
        return None
    groups = c // cig

    epilogue = blocks[ci + 1:]
    for b, info in zip(epilogue, infos[ci + 1:]):
        if not info.is_injective():
            return None
        if b is not epilogue[-1] and _scalar_block(sch, b):  # inlined into the blocks that read it
            continue
        if len(sch.get_loops(b)) != 4 or _ints(sch.get(b).writes[0].source.shape) != out_shape:
            return None
    workload = ConvWorkload(n, c, in_shape[2], in_shape[3], o, kh, kw, oh, ow, (sh, sw), (dh, dw), padding, groups,
                            dtype, tuple(str(sch.get(b).name_hint) for b in epilogue))
    return ConvMatch(workload, pad_block, conv, list(epilogue))


def _scalar_block(sch, block) -> bool:
    """A block without loops that writes a 0-d buffer from 0-d buffers: a quantized operator's scale product
    (`x_scale * w_scale`), which FuseOps puts after the conv it rescales."""
    stmt = sch.get(block)
    return (not sch.get_loops(block) and len(stmt.writes) == 1 and not stmt.writes[0].source.shape
            and all(not r.source.shape for r in stmt.reads))


def schedulable_blocks(func, sch=None):
    """(schedule, the root block's children, their dlight infos) for a PrimFunc (or for `sch`, a schedule of it), or
    None when it cannot be scheduled or has no single root block."""
    from tvm import s_tir, tirx
    from tvm.s_tir.dlight import analysis

    if sch is None:
        if not isinstance(func, tirx.PrimFunc):
            return None
        try:
            sch = s_tir.Schedule(func)
        except TVM_ERRORS:  # not a schedulable function
            return None
    try:
        blocks = list(sch.get_child_blocks(analysis.get_root_block(sch)))
    except TVM_ERRORS:  # no single root block
        return None
    return sch, blocks, [analysis.get_sblock_info(sch, b) for b in blocks]


def one_reduction(func, sch=None):
    """`schedulable_blocks` plus the index of the only reduction block among them; None when there is not exactly
    one."""
    found = schedulable_blocks(func, sch)
    if found is None:
        return None
    sch, blocks, infos = found
    reductions = [i for i, info in enumerate(infos) if info.is_reduction()]
    return (sch, blocks, infos, reductions[0]) if len(reductions) == 1 else None


def pad_of(sch, block, info, padded_buffer):
    """What a zero-padding block adds to dims 2 and 3 (H, W) of `padded_buffer`, which it must write from one
    buffer: ((top, left, bottom, right), the unpadded shape), or None when `block` is not such a block."""
    from tvm.sym.pattern import detect_linear_equation

    stmt = sch.get(block)
    if not info.is_injective() or len(stmt.reads) != 1 or len(stmt.writes) != 1 \
            or not stmt.writes[0].source.same_as(padded_buffer):
        return None
    in_shape, padded = _ints(stmt.reads[0].source.shape), _ints(padded_buffer.shape)
    ivs, mins = list(stmt.iter_vars), [r.min for r in stmt.reads[0].region]
    try:
        top = -int(detect_linear_equation(mins[2], [ivs[2].var])[1])
        left = -int(detect_linear_equation(mins[3], [ivs[3].var])[1])
    except (IndexError, TypeError, ValueError):
        return None
    if in_shape is None or padded is None or len(in_shape) < 4:
        return None
    return (top, left, padded[2] - in_shape[2] - top, padded[3] - in_shape[3] - left), in_shape


def pick_tile(extent: int, choices: list[int], prefer: int) -> int:
    """The largest choice <= prefer that divides `extent`; else the one wasting the fewest lanes."""
    fitting = [c for c in choices if c <= prefer and extent % c == 0]
    if fitting:
        return max(fitting)
    small = [c for c in choices if c <= max(prefer, 1)]
    return min(small, key=lambda c: (math.ceil(extent / c) * c - extent, -c)) if small else 1


def validate(cfg: dict, knobs: dict, ctx, thread_knobs=None) -> dict:
    """Check a config against a knob table and the workgroup limit (the product of `thread_knobs`, by default of
    every `threads_*` knob in `cfg`); raises ValueError."""
    for name, value in cfg.items():
        if name not in knobs:
            raise ValueError(f"unknown knob {name!r}; knobs: {sorted(knobs)}")
        if value not in knobs[name]:
            raise ValueError(f"knob {name}={value!r} not among {knobs[name]}")
    threads = math.prod(cfg.get(k, 1) for k in (thread_knobs or [k for k in cfg if k.startswith("threads_")]))
    if threads > ctx.max_threads:
        raise ValueError(f"workgroup of {threads} work-items exceeds the target's {ctx.max_threads}")
    return cfg


def registers(sch, loops, vectorize_last: bool = False) -> None:
    """Keep a block's own `loops` in registers: unroll them, the last vectorised instead when `vectorize_last` (the
    4 lanes of a packed pixel: one float4 texture access)."""
    for loop in loops[:-1] if vectorize_last else loops:
        sch.unroll(loop)
    if vectorize_last and loops:
        sch.vectorize(loops[-1])


def output_from_registers(sch, match: ConvMatch):
    """Keep the conv's accumulators in registers and inline the epilogue into its last block (or a new cache-write
    block), which alone stores to memory; returns that block."""
    for block in match.epilogue[:-1]:
        sch.compute_inline(block)
    if not match.epilogue:
        return sch.cache_write(match.conv, 0, "local")
    sch.set_scope(match.conv, 0, "local")
    return match.epilogue[-1]


def schedule_tiled(sch, match: ConvMatch, cfg: dict):
    """The register-tiled direct convolution schedule (see the module doc). Mutates and returns `sch`."""
    tf, ty, tx = cfg["threads_f"], cfg["threads_y"], cfg["threads_x"]
    vf, vy, vx = cfg["tile_f"], cfg["tile_y"], cfg["tile_x"]
    vrc, unroll_k = cfg.get("tile_rc", 1), cfg.get("unroll_k", 1)

    conv = match.conv
    out = output_from_registers(sch, match)
    main = splitk.partial_sums(sch, conv, 4, cfg)  # split-K: partial sums per work-item, then a cross-thread sum
    cooperative = staging.staged(cfg)
    # register caches of the input tile (the padded read, guarded) and of the weights
    if match.pad is not None and not cooperative:
        data = match.pad
        sch.set_scope(data, 0, "local")
    else:
        data = sch.cache_read(main, 0, "local")
    weight = sch.cache_read(main, 1, "local")

    n, f, y, x, *kt, rc, ry, rx = sch.get_loops(main)
    fo, ft, fi = sch.split(f, [None, tf, vf], preserve_unit_iters=True)
    yo, yt, yi = sch.split(y, [None, ty, vy], preserve_unit_iters=True)
    xo, xt, xi = sch.split(x, [None, tx, vx], preserve_unit_iters=True)
    rco, rci = sch.split(rc, [None, vrc], preserve_unit_iters=True)
    sch.reorder(n, fo, yo, xo, ft, yt, xt, *kt, rco, rci, ry, rx, fi, yi, xi)
    grid = sch.fuse(n, fo, yo, xo, preserve_unit_iters=True)
    sch.bind(grid, "blockIdx.x")
    bind_threads(sch, ft, yt, xt, kt)
    # stage 0: load vy*vx inputs and vf weights per (ci, kh, kw); 1: the whole input patch and vf*kh*kw weights
    # per tile_rc input channels, reused across kh/kw
    at, depth = (rx, 8) if cfg.get("stage", 0) == 0 else (rco, 5)
    for cache in (data, weight):
        sch.compute_at(cache, at, preserve_unit_loops=True)
        registers(sch, sch.get_loops(cache)[depth:])
    if cooperative:  # the work-group's input patch (+ halo; padding guarded) and weights per tile_rc channels
        threads = [("threadIdx.z", tf), ("threadIdx.y", ty), ("threadIdx.x", tx)]
        staging.stage_in_local(sch, data, 0, rco, threads, producer=match.pad)
        staging.stage_in_local(sch, weight, 0, rco, threads)
    registers(sch, [fi, yi, xi])
    if vrc > 1:
        sch.unroll(rci)
    if unroll_k:
        sch.unroll(ry)
        sch.unroll(rx)

    splitk.sum_partials(sch, conv, main, xt, 3)
    sch.reverse_compute_at(out, xt, preserve_unit_loops=True)
    init = sch.decompose_reduction(main, rco)
    registers(sch, sch.get_loops(init)[-3:])
    registers(sch, sch.get_loops(out)[-4:])
    return sch


def bind_threads(sch, ft, yt, xt, kt: list) -> None:
    """Bind a tiled conv's work-item loops (channels, rows, columns) to threadIdx.z/y/x; with split-K (`kt`, the
    loop over the `threads_k` slices) the slices take threadIdx.z and the channels share threadIdx.y with the rows."""
    if kt:
        sch.bind(kt[0], "threadIdx.z")
        sch.bind(sch.fuse(ft, yt, preserve_unit_iters=True), "threadIdx.y")
    else:
        sch.bind(ft, "threadIdx.z")
        sch.bind(yt, "threadIdx.y")
    sch.bind(xt, "threadIdx.x")


def conv_match(find, schedule, older_records: dict | None = None):
    """A family's `match` from a conv matcher `find(func, sch) -> (op, ConvMatch) | None` and its
    `schedule(sch, match, cfg)`: the workload is keyed by the op `find` names (`older_records`: see `Matched`)."""
    def match(func) -> Matched | None:
        from tvm import s_tir

        try:
            sch = s_tir.Schedule(func)
        except TVM_ERRORS:  # not a schedulable function
            return None
        found = find(func, sch)
        if found is None:
            return None
        op, conv = found
        return Matched(conv.workload, conv.workload.key(op), lambda cfg: schedule(sch, conv, cfg),
                       older_records=older_records or {})

    return match


def tiled_family(name: str, op: str, knobs: dict, handles, default_config, rule_name: str,
                 older_records: dict | None = None) -> Family:
    """A family of NCHW convs that `handles` accepts, scheduled by the register-tiled `schedule_tiled`
    (`older_records`: see `Matched`)."""
    def find(func, sch):
        found = match_conv(func, sch)
        return (op, found) if found is not None and handles(found.workload) else None

    def check_config(wl, config, ctx):
        validate(config, knobs, ctx)
        threads = config["threads_f"] * config["threads_y"] * config["threads_x"]
        if splitk.threads(config) > 1 and wl.groups != 1:
            raise ValueError(f"threads_k={splitk.threads(config)} splits groups-1 convs only ({wl.groups} groups)")
        splitk.check(config, wl.cin_per_group, config.get("tile_rc", 1), "input channels", staging.staged(config))
        if staging.staged(config):
            staging.check(threads, staging.local_bytes(*staged_tiles(wl, config)), ctx)
        return config

    return Family(name, knobs, conv_match(find, schedule_tiled, older_records), default_config, check_config,
                  rule_name, features=direct_view, launch=tiled_launch)


def staged_tiles(wl: ConvWorkload, cfg: dict) -> list[tuple[int, ...]]:
    """The local tiles of `schedule_tiled` with `cooperative` 1 (an upper bound): the work-group's input patch with
    its halo for `tile_rc` input channels (of every group its output channels reach), and its weights for them."""
    rc, f = cfg.get("tile_rc", 1), cfg["tile_f"] * cfg["threads_f"]
    per_group = wl.o // wl.groups
    channels = rc if wl.groups == 1 else min(wl.c, (-(-f // per_group) + 1) * wl.cin_per_group)
    py = (cfg["tile_y"] * cfg["threads_y"] - 1) * wl.stride[0] + (wl.kh - 1) * wl.dilation[0] + 1
    px = (cfg["tile_x"] * cfg["threads_x"] - 1) * wl.stride[1] + (wl.kw - 1) * wl.dilation[1] + 1
    return [(channels, py, px), (f, rc, wl.kh, wl.kw)]


def tile_registers(wl: ConvWorkload, cfg: dict, lanes: int = 1) -> int:
    """Registers a work-item of a register-tiled conv holds (an estimate: its accumulators plus the loads staged
    for one step). `stage` 0: tile_y x tile_x inputs and tile_f weights per tap; 1: the whole input patch and
    tile_f x kh x kw weights per `tile_rc` input channels. `lanes`: registers per element (4 for packed pixels)."""
    vf, vy, vx = cfg["tile_f"], cfg["tile_y"], cfg["tile_x"]
    if cfg.get("stage", 0) == 0:
        staged = vy * vx + vf
    else:
        py = (vy - 1) * wl.stride[0] + (wl.kh - 1) * wl.dilation[0] + 1
        px = (vx - 1) * wl.stride[1] + (wl.kw - 1) * wl.dilation[1] + 1
        staged = cfg.get("tile_rc", 1) * (py * px + vf * wl.kh * wl.kw)
    return lanes * (vf * vy * vx + staged)


def tiled_launch(wl: ConvWorkload, cfg: dict):
    """The launch of `schedule_tiled` with `cfg` (see `occupancy.grid`)."""
    k = splitk.threads(cfg)
    return grid((wl.o, cfg["tile_f"], cfg["threads_f"]), (wl.oh, cfg["tile_y"], cfg["threads_y"]),
                (wl.ow, cfg["tile_x"], cfg["threads_x"]), (k, 1, k), registers=tile_registers(wl, cfg), batch=wl.n)


def tiled_threads(wl: ConvWorkload, tiles: dict, knobs: dict, ctx, threads_k: int = 1) -> dict:
    """The workgroup of `schedule_tiled` for register tiles `tiles`: up to 64 work-items (at most the target's limit),
    x first (about 16, a divisor of the tiled row when one fits), then y, then output channels; with split-K
    (`threads_k` work-items per output) up to 64 / threads_k outputs, so that more work-groups share the device."""
    limit = min(ctx.max_threads, 64) // threads_k
    threads_x = pick_tile(-(-wl.ow // tiles["tile_x"]), knobs["threads_x"], 16)
    threads_y = pick_tile(-(-wl.oh // tiles["tile_y"]), knobs["threads_y"], max(1, limit // threads_x))
    threads_f = pick_tile(-(-wl.o // tiles["tile_f"]), knobs["threads_f"], max(1, limit // (threads_x * threads_y)))
    return {"threads_f": threads_f, "threads_y": threads_y, "threads_x": threads_x}
