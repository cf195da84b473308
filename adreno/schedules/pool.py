"""Pooling: windowed max/avg pool2d (any kernel, stride, padding, dilation) and global pooling (a sum or max over the
trailing axes: GlobalAveragePool, GlobalMaxPool, ReduceMean over H,W, adaptive average pooling to 1x1), with their
fused epilogues (the average's divide, ReLU, a residual add, ...).

How they arrive after TVM's legalization and fusion (static shapes, NCHW):

- windowed: an optional padding block (`pad_temp`, -FLT_MAX for max, 0 for avg), one reduction block `pool_max` or
  `pool_sum` over (n, c, y, x, ky, kx) reading `data[n, c, y*sh + ky*dh, x*sw + kx*dw]`, then elementwise blocks
  (`pool_avg` divides by the window count; whatever FuseOps appended after the pool).
- global: one sum/max reduction block whose spatial iterators index the leading axes of the input and whose reduce
  iterators index the trailing ones (`<x>_red`, unit axes allowed for keepdims), then elementwise blocks (`T_divide`
  for a mean, ...).

Windowed schedule: one work-item computes `tile_x` adjacent outputs of one output row in registers (adjacent, not
`threads_x` apart: the epilogue is placed per work-item, and TVM covers a strided tile by its bounding box, i.e. by
other work-items' columns); the workgroup is `threads_y` rows (of the fused n, c, oh axis) x `threads_x` columns; the
padding is a guarded load (the pad block is inlined), the window loop is unrolled when `unroll`, and the epilogue is
applied to the registers before the single store per output.

Global schedule: `threads_x` work-items cooperate on each output (`threads_x` = 1: one work-item sums its H*W
elements serially; more: each lane accumulates every `threads_x`-th element, neighbouring lanes reading neighbouring
addresses, then a cross-lane reduction in local memory), `threads_y` outputs per workgroup, `tile_x` outputs per
work-item (serial only); the epilogue (the mean's divide, ...) follows in the same kernel.

Knobs: `threads_x threads_y tile_x unroll` (`unroll` is the window loop for windowed pools, the per-lane loop for
global ones). The workload looks like a depthwise conv to the tuner's analytical features (o = groups = c).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import _conv, occupancy
from .family import Family, Matched
from .feature_view import direct_view

KNOBS: dict[str, list] = {
    "threads_x": [1, 2, 4, 8, 16, 32, 64, 128],
    "threads_y": [1, 2, 4, 8, 16, 32, 64, 128],
    "tile_x": [1, 2, 4],
    "unroll": [0, 1],
}
# Above this many elements per output, global pooling defaults to a cooperative (cross-lane) reduction.
SERIAL_LIMIT = 64
# `unroll` fully unrolls a global pool's per-lane loop: allowed up to this many iterations.
UNROLL_LIMIT = 64
_WINDOWED = ("max_pool2d", "avg_pool2d")
# operations per element of adreno/schedules/reduce.py's row normalizations: softmax's max, exp and divide;
# LayerNorm's sum, squared difference, and scale and shift
_ROW_OPS = {"softmax": 3, "layer_norm": 5}
# SINGLE_ROW: both schedules bind the fused row axis (n, c and, windowed, oh) to threads; when that axis has one
# element, TVM 0.27 drops the guard of the store but keeps it on the reduction, so every idle work-item stores its
# uninitialised accumulator over the result (a 1-element global pool, a 1x1xWx1 map). Such pools are refused and
# left to dlight's reduction rules.


@dataclass(frozen=True)
class PoolWorkload:
    """A pooling or reduction as it arrives in a fused primitive function.

    op: "max_pool2d" | "avg_pool2d" (windowed, NCHW) | "global_sum" | "global_max" (over the trailing axes) |
    "softmax" | "layer_norm" (see adreno/schedules/reduce.py). Global ones and the row normalizations are described
    as rows x length: (n, c) are the leading axes (all but the first folded into c), (h, w) the reduced ones (all
    but the last folded into h), and the "window" is the whole h x w. `shape`/`axes` keep the exact tensor shape
    and reduced axes for the key."""

    op: str
    n: int
    c: int
    h: int
    w: int
    oh: int
    ow: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dtype: str = "float32"
    shape: tuple[int, ...] = ()
    axes: tuple[int, ...] = ()
    epilogue: tuple[str, ...] = field(default=(), compare=False)

    # The attributes a depthwise conv has, so the tuner's features describe a pool as one.
    @property
    def o(self) -> int:
        return self.c

    @property
    def groups(self) -> int:
        return self.c

    @property
    def windowed(self) -> bool:
        return self.op in _WINDOWED

    @property
    def length(self) -> int:
        """Elements reduced per output."""
        return self.kh * self.kw

    @property
    def flops(self) -> int:
        """One operation per element of every window; more per element for the row normalizations (`_ROW_OPS`)."""
        return self.n * self.c * self.oh * self.ow * self.length * _ROW_OPS.get(self.op, 1)

    def key(self) -> str:
        """A stable text key: op, shapes, window, strides, padding, dilation, dtype (no epilogue)."""
        if self.windowed:
            return (f"{self.op}|n{self.n}c{self.c}h{self.h}w{self.w}|k{self.kh}x{self.kw}|"
                    f"s{self.stride[0]}x{self.stride[1]}|p{'x'.join(map(str, self.padding))}|"
                    f"d{self.dilation[0]}x{self.dilation[1]}|{self.dtype}")
        return f"{self.op}|x{'x'.join(map(str, self.shape))}|axes{'.'.join(map(str, self.axes))}|{self.dtype}"


@dataclass
class PoolMatch:
    sch: object  # the s_tir.Schedule the block handles below belong to
    workload: PoolWorkload
    pad: object | None  # SBlockRV of the padding block (windowed only)
    reduce: object  # SBlockRV of the reduction
    epilogue: list  # SBlockRVs of the elementwise blocks after it, in order


def rows_and_length(shape: list[int], axes: list[int]) -> tuple[int, int, int, int]:
    """(n, c, h, w) of a reduction of `shape` over its trailing `axes` (see PoolWorkload)."""
    lead, trail = shape[: len(shape) - len(axes)], shape[len(shape) - len(axes):]
    n, c = (lead[0], math.prod(lead[1:])) if len(lead) > 1 else (1, math.prod(lead))
    h, w = math.prod(trail[:-1]), trail[-1]
    return n, c, h, w


def combiner(stmt) -> str | None:
    """"sum" or "max" for a reduction block `acc = acc + x` / `acc = max(acc, x)`, else None."""
    from tvm import tirx

    body = stmt.body
    if not isinstance(body, tirx.BufferStore):
        return None
    if isinstance(body.value, tirx.Add):
        return "sum"
    if isinstance(body.value, tirx.Max):
        return "max"
    return None


def _epilogue_ok(sch, epilogue, infos, out_shape) -> bool:
    return all(info.is_injective() and _conv._ints(sch.get(b).writes[0].source.shape) == out_shape
               for b, info in zip(epilogue, infos))


def _match_windowed(sch, blocks, infos, ri) -> PoolMatch | None:
    from tvm.sym.pattern import detect_linear_equation

    stmt = sch.get(blocks[ri])
    name = str(stmt.name_hint)
    ivs = list(stmt.iter_vars)
    if _conv.iter_kinds(stmt) != "SSSSRR" or len(stmt.reads) != 1 or len(stmt.writes) != 1:
        return None
    if combiner(stmt) != ("max" if name == "pool_max" else "sum"):
        return None
    data = stmt.reads[0]
    out_shape = _conv._ints(stmt.writes[0].source.shape)
    dom = _conv._ints(iv.dom.extent for iv in ivs)
    mins = [r.min for r in data.region]
    if out_shape is None or dom is None or len(out_shape) != 4 or len(mins) != 4:
        return None
    if not all(mins[i].same_as(ivs[i].var) for i in (0, 1)):
        return None
    coef_y = detect_linear_equation(mins[2], [ivs[2].var, ivs[4].var])
    coef_x = detect_linear_equation(mins[3], [ivs[3].var, ivs[5].var])
    if len(coef_y) != 3 or len(coef_x) != 3 or int(coef_y[2]) or int(coef_x[2]):
        return None
    (sh, dh), (sw, dw) = (int(v) for v in coef_y[:2]), (int(v) for v in coef_x[:2])
    before = blocks[:ri]
    if len(before) > 1:
        return None
    padded = _conv._ints(data.source.shape)
    padding, pad = (0, 0, 0, 0), None
    if before:
        found = _conv.pad_of(sch, before[0], infos[0], data.source)
        if found is None:
            return None
        (padding, in_shape), pad = found, before[0]
    else:
        in_shape = padded
        if in_shape is None:
            return None
    epilogue = blocks[ri + 1:]
    if not _epilogue_ok(sch, epilogue, infos[ri + 1:], out_shape):
        return None
    n, c, oh, ow = out_shape
    if n * c * oh == 1:  # see SINGLE_ROW
        return None
    op = "max_pool2d" if name == "pool_max" else "avg_pool2d"
    wl = PoolWorkload(op, n, c, in_shape[2], in_shape[3], oh, ow, dom[4], dom[5], (sh, sw), (dh, dw), padding,
                      str(stmt.writes[0].source.dtype), tuple(in_shape), (2, 3),
                      tuple(str(sch.get(b).name_hint) for b in epilogue))
    return PoolMatch(sch, wl, pad, blocks[ri], list(epilogue))


def _match_global(sch, blocks, infos, ri) -> PoolMatch | None:
    stmt = sch.get(blocks[ri])
    kinds = _conv.iter_kinds(stmt)
    n_s = len(kinds.rstrip("R"))
    if "?" in kinds or kinds[:n_s] != "S" * n_s or n_s == len(kinds) or len(stmt.reads) != 1:
        return None
    op = {"sum": "global_sum", "max": "global_max"}.get(combiner(stmt))
    data = stmt.reads[0]
    shape = _conv._ints(data.source.shape)
    dom = _conv._ints(iv.dom.extent for iv in stmt.iter_vars)
    if op is None or shape is None or dom is None:
        return None
    # the input is read as x[<spatial iterators, in order>, <reduce iterators, in order>]; the spatial iterators
    # it does not use have extent 1 (keepdims)
    spatial = [iv.var for iv in stmt.iter_vars[:n_s]]
    n_r = len(kinds) - n_s
    mins = [r.min for r in data.region]
    if len(mins) != len(shape) or len(mins) < n_r \
            or not all(m.same_as(iv.var) for m, iv in zip(mins[-n_r:], stmt.iter_vars[n_s:])):
        return None
    used = [next((i for i, v in enumerate(spatial) if m.same_as(v)), None) for m in mins[:-n_r]]
    if None in used or used != sorted(set(used)) \
            or any(dom[i] != 1 for i in range(n_s) if i not in used):
        return None
    out_shape = _conv._ints(stmt.writes[0].source.shape)
    epilogue = blocks[ri + 1:]
    if not _epilogue_ok(sch, epilogue, infos[ri + 1:], out_shape):
        return None
    if math.prod(dom[:n_s]) == 1:  # see SINGLE_ROW
        return None
    axes = tuple(range(len(shape) - (len(kinds) - n_s), len(shape)))
    n, c, h, w = rows_and_length(shape, list(axes))
    wl = PoolWorkload(op, n, c, h, w, 1, 1, h, w, dtype=str(stmt.writes[0].source.dtype), shape=tuple(shape),
                      axes=axes, epilogue=tuple(str(sch.get(b).name_hint) for b in epilogue))
    return PoolMatch(sch, wl, None, blocks[ri], list(epilogue))


def match_pool(func) -> PoolMatch | None:
    """Recognise a windowed or global pool with its fused pad and epilogue (float32, static shapes); else None."""
    found = _conv.one_reduction(func)
    if found is None:
        return None
    sch, blocks, infos, ri = found
    stmt = sch.get(blocks[ri])
    if len(stmt.writes) != 1 or str(stmt.writes[0].source.dtype) != "float32":
        return None
    if str(stmt.name_hint) in ("pool_max", "pool_sum"):
        return _match_windowed(sch, blocks, infos, ri)
    return _match_global(sch, blocks, infos, ri) if ri == 0 else None


def default_config(wl: PoolWorkload, ctx) -> dict:
    """Windowed: 4 outputs per work-item along W when the row is long (2 from 8 columns), fewer until the launch
    fills the device (`occupancy`), the smallest power-of-two row of work-items covering the output width (up to
    32), 64-work-item workgroups, window unrolled up to 7x7. Global: serial per output up to SERIAL_LIMIT elements
    (64 outputs per workgroup, loop unrolled), else (or when too few outputs fill the device) 32 lanes per output
    (64 from 1024 elements)."""
    limit = min(ctx.max_threads, 64)
    if wl.windowed:
        start = 4 if wl.ow >= 32 else 2 if wl.ow >= 8 else 1
        candidates = []
        for tile_x in [t for t in (4, 2, 1) if t <= start]:
            threads_x = min(32, 1 << (-(-wl.ow // tile_x) - 1).bit_length())
            candidates.append({"threads_x": threads_x, "threads_y": max(1, limit // threads_x), "tile_x": tile_x,
                               "unroll": int(wl.kh * wl.kw <= 49)})
    else:
        lanes = min(64 if wl.length >= 1024 else 32, 1 << (wl.length.bit_length() - 1))  # at most one per element
        cooperative = {"threads_x": lanes, "threads_y": max(1, limit // lanes), "tile_x": 1,
                       "unroll": int(-(-wl.length // lanes) <= UNROLL_LIMIT)}
        serial = {"threads_x": 1, "threads_y": limit, "tile_x": 1, "unroll": 1}
        candidates = [serial, cooperative] if wl.length <= SERIAL_LIMIT else [cooperative]
    return occupancy.choose(ctx.device, candidates, lambda c: _launch(wl, c))


def _launch(wl: PoolWorkload, cfg: dict) -> occupancy.Launch:
    """Rows (n x c x oh) over threads_y, columns over tile_x x threads_x (global: lanes per output); registers: the
    outputs a work-item holds plus a load."""
    return occupancy.grid((wl.n * wl.c * wl.oh, 1, cfg["threads_y"]), (wl.ow, cfg["tile_x"], cfg["threads_x"])
                          if wl.windowed else (cfg["threads_x"], 1, cfg["threads_x"]), registers=cfg["tile_x"] + 1)


def check_config(wl: PoolWorkload, config: dict, ctx) -> dict:
    """Raise ValueError when `config` is not a valid point of the space for `wl` on `target`."""
    _conv.validate(config, KNOBS, ctx)
    if not wl.windowed and config.get("threads_x", 1) > 1 and config.get("tile_x", 1) > 1:
        raise ValueError("a cooperative global reduction computes one output per work-item (tile_x must be 1)")
    if not wl.windowed and config.get("threads_x", 1) > wl.length:
        raise ValueError(f"threads_x={config['threads_x']} lanes for {wl.length} elements per output")
    if not wl.windowed and config.get("unroll", 0) and -(-wl.length // config.get("threads_x", 1)) > UNROLL_LIMIT:
        raise ValueError(f"unroll: {wl.length} elements per output, more than {UNROLL_LIMIT} per lane")
    return config


def _store_of(sch, match):
    """Inline all but the last epilogue block; the block that stores the result (the reduction itself is then kept in
    registers)."""
    for block in match.epilogue[:-1]:
        sch.compute_inline(block)
    if match.epilogue:
        sch.set_scope(match.reduce, 0, "local")
        return match.epilogue[-1]
    return sch.cache_write(match.reduce, 0, "local")


def _unroll(sch, loops):
    for loop in loops:
        sch.unroll(loop)


def schedule_windowed(sch, match: PoolMatch, cfg: dict):
    """The windowed schedule (see the module doc). Mutates and returns `sch`."""
    tx, ty, vx = cfg["threads_x"], cfg["threads_y"], cfg["tile_x"]
    if match.pad is not None:
        sch.compute_inline(match.pad)
    out = _store_of(sch, match)
    n, c, y, x, ky, kx = sch.get_loops(match.reduce)
    ro, rt = sch.split(sch.fuse(n, c, y), [None, ty], preserve_unit_iters=True)
    xo, xt, xi = sch.split(x, [None, tx, vx], preserve_unit_iters=True)
    sch.reorder(ro, xo, rt, xt, ky, kx, xi)
    sch.bind(sch.fuse(ro, xo), "blockIdx.x")
    sch.bind(rt, "threadIdx.y")
    sch.bind(xt, "threadIdx.x")
    sch.reverse_compute_at(out, xt, preserve_unit_loops=True)
    init = sch.decompose_reduction(match.reduce, ky)
    _unroll(sch, [xi, *sch.get_loops(init)[-1:], *sch.get_loops(out)[-4:]])
    if cfg["unroll"]:
        _unroll(sch, [ky, kx])
    return sch


def schedule_global(sch, match: PoolMatch, cfg: dict):
    """The global schedule (see the module doc). Mutates and returns `sch`."""
    tx, ty, vx = cfg["threads_x"], cfg["threads_y"], cfg["tile_x"]
    out = _store_of(sch, match)
    loops = sch.get_loops(match.reduce)
    n_s = len(loops) - len(match.workload.axes)
    rows = sch.fuse(*loops[:n_s], preserve_unit_iters=True)
    r = sch.fuse(*loops[n_s:], preserve_unit_iters=True)
    if tx == 1:
        ro, rt, ri = sch.split(rows, [None, ty, vx], preserve_unit_iters=True)
        sch.bind(ro, "blockIdx.x")
        sch.bind(rt, "threadIdx.x")
        sch.reorder(ro, rt, r, ri)
        sch.reverse_compute_at(out, rt, preserve_unit_loops=True)
        init = sch.decompose_reduction(match.reduce, r)
        _unroll(sch, [ri, *sch.get_loops(init)[-1:], *sch.get_loops(out)[-1:]])
        if cfg["unroll"]:
            sch.unroll(r)
        return sch
    ro, rt = sch.split(rows, [None, ty], preserve_unit_iters=True)
    r_o, lane = sch.split(r, [None, tx], preserve_unit_iters=True)
    sch.bind(ro, "blockIdx.x")
    sch.bind(rt, "threadIdx.y")
    sch.bind(lane, "threadIdx.x")
    # after the cross-lane reduction every lane holds the result: all of them store the same value
    sch.reverse_compute_at(out, rt, preserve_unit_loops=True)
    if cfg["unroll"]:
        sch.unroll(r_o)
    return sch


def match(func) -> Matched | None:
    """A pool this family handles, with its fused pad and epilogue."""
    found = match_pool(func)
    if found is None:
        return None
    schedule = schedule_windowed if found.workload.windowed else schedule_global
    return Matched(found.workload, found.workload.key(), lambda cfg: schedule(found.sch, found, cfg))


FAMILY = Family("pool", KNOBS, match, default_config, check_config, "Pool",
                features=direct_view)  # as a depthwise conv
