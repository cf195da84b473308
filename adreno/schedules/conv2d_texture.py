"""Packed (NCHW4c activations, OIHW4o weights) 2-D convolution for texture memory, register-tiled.

Handles the functions `adreno.texture` emits for `--memory texture`: an optional `pad_nchw4c` block, one
`conv2d_NCHW4c` (groups 1) or `dwconv2d_NCHW4c` (depthwise) reduction and a chain of elementwise epilogue blocks
(folded BatchNorm, bias, ReLU/Clip, residual add), all on 5-D tensors whose last axis is the 4 channels of a pixel.

Each work-item computes `tile_cb` channel blocks (of 4 channels) x `tile_y` rows x `tile_x` columns of output
pixels in float4 registers; the reduction over input channel blocks (and kh, kw) runs inside the work-item with the
4 input channels of a block innermost, so every input and weight read is one whole pixel (`read_imagef`); the
epilogue is applied to the registers and every output pixel is one float4 `write_imagef` (the rule
`texture.check_texture_stores` enforces). `stage=0` reads each input pixel right before its taps (exactly
`tile_y x tile_x` pixels per tap, any stride); `stage=1` reads the work-item's whole input patch once per input
channel block and reuses it across kh x kw taps (fewer reads for stride 1, more registers). The workgroup is
`threads_cb x threads_y x threads_x` work-items (threadIdx.z/y/x), the tile's columns are contiguous.
`cooperative=1` (groups-1 convs; `staging`): per input channel block the work-group first copies its input patch
and its weights into local memory, each pixel read once by one of its work-items, and the register caches read
local memory instead of the images. Split-K (`threads_k` > 1, groups-1 convs; `splitk`): `threads_k` work-items
(threadIdx.z; the channel blocks then share threadIdx.y with the rows) each sum a slice of the input channel blocks,
then a cross-thread sum in local memory adds them; the defaults split only where no unsplit config fills the device
and a split one does (ResNet-18's 256 and 512 channel convs on 14x14 and 7x7 maps for nvidia-h200).

Workload keys (`conv2d_nchw4c|...`, `depthwise_nchw4c|...`) count channels padded to multiples of 4, so they never
collide with the NCHW buffer families' keys, and the buffer path never produces a function this family handles.
"""

from __future__ import annotations

from dataclasses import replace

from ..targets.layout import LANES
from ..options import Memory
from ..workload import memory_op
from . import _conv, occupancy, splitk, staging
from .family import Family
from .feature_view import Seen

# the texture planner's function name -> the op of its keys (conv2d_nchw4c, depthwise_nchw4c)
OPS = {"conv2d_NCHW4c": memory_op("conv2d", Memory.TEXTURE), "dwconv2d_NCHW4c": memory_op("depthwise", Memory.TEXTURE)}

KNOBS: dict[str, list] = {
    "tile_cb": [1, 2, 4, 8],
    "tile_y": [1, 2, 4],
    "tile_x": [1, 2, 4, 7, 8],
    "threads_cb": [1, 2, 4, 8, 16],
    "threads_y": [1, 2, 4, 7, 8, 14, 16],
    "threads_x": [1, 2, 4, 7, 8, 14, 16, 28, 32],
    "unroll_k": [0, 1],
    "stage": [0, 1],
    splitk.KNOB: splitk.CHOICES,
    staging.KNOB: staging.CHOICES,
}

# Output pixels x channel blocks a work-item may hold: 32 float4 accumulators (128 registers).
MAX_TILE = 32


def match_packed(func, sch=None):
    """(op, ConvMatch) for `pad? -> conv2d_NCHW4c|dwconv2d_NCHW4c -> elementwise*` on packed tensors; else None.

    The workload counts channels as stored (padded to multiples of 4); depthwise has groups == channels."""
    from tvm.sym.pattern import detect_linear_equation

    found = _conv.schedulable_blocks(func, sch)
    if found is None:
        return None
    sch, blocks, infos = found
    names = [str(sch.get(b).name_hint) for b in blocks]
    convs = [i for i, name in enumerate(names) if name in OPS]
    if len(convs) != 1 or convs[0] > 1:
        return None
    ci = convs[0]
    conv, stmt = blocks[ci], sch.get(blocks[ci])
    depthwise = names[ci].startswith("dw")
    ivs = list(stmt.iter_vars)
    if _conv.iter_kinds(stmt) != "S" * 5 + "R" * (2 if depthwise else 3):
        return None
    data_region, weight_region = stmt.reads
    out_shape = _conv._ints(stmt.writes[0].source.shape)
    w_shape = _conv._ints(weight_region.source.shape)
    padded = _conv._ints(data_region.source.shape)
    if str(stmt.writes[0].source.dtype) != "float32" or None in (out_shape, w_shape, padded) \
            or out_shape[-1] != LANES:
        return None
    n, o4, oh, ow, _ = out_shape
    kh, kw = w_shape[2:4]
    mins = [r.min for r in data_region.region]
    ry, rx = ivs[-2].var, ivs[-1].var
    coef_y = detect_linear_equation(mins[2], [ivs[2].var, ry])
    coef_x = detect_linear_equation(mins[3], [ivs[3].var, rx])
    if len(coef_y) != 3 or len(coef_x) != 3 or int(coef_y[2]) or int(coef_x[2]):
        return None
    (sh, dh), (sw, dw) = (int(v) for v in coef_y[:2]), (int(v) for v in coef_x[:2])
    pad = None
    if ci == 1:
        pad, found = blocks[0], _conv.pad_of(sch, blocks[0], infos[0], data_region.source)
        if found is None:
            return None
        padding, in_shape = found
    else:
        in_shape, padding = padded, (0, 0, 0, 0)
    epilogue = blocks[ci + 1:]
    for block, info in zip(epilogue, infos[ci + 1:]):
        if not info.is_injective() or _conv._ints(sch.get(block).writes[0].source.shape) != out_shape:
            return None
    c = in_shape[1] * LANES
    workload = _conv.ConvWorkload(n, c, in_shape[2], in_shape[3], o4 * LANES, kh, kw, oh, ow, (sh, sw), (dh, dw),
                                  padding, c if depthwise else 1, "float32",
                                  tuple(str(sch.get(b).name_hint) for b in epilogue))
    return OPS[names[ci]], _conv.ConvMatch(workload, pad, conv, epilogue)


def default_config(wl: _conv.ConvWorkload, ctx) -> dict:
    """Knobs without tuning: 8 output pixels (2 x 4, or a row of 7) x 2 channel blocks per work-item for groups-1
    convs (1 block for depthwise: nothing is shared across channels), tiles that divide the output first, shrunk
    (channel blocks, rows, columns) until the launch fills the device (`occupancy`), then (groups 1) the smallest
    tile's reduction split over 2, 4, 8 work-items where that fills it (`splitk`); the workgroup filled up to 64
    work-items (64 / threads_k outputs) along x, then y, then channel blocks; staged in local memory on a GPU where
    the tile fits and staging at least halves the image reads (`staging.default` under the context's policy)."""
    blocks = wl.o // LANES
    tile_x = next((t for t in (4, 2, 7) if wl.ow % t == 0), _conv.pick_tile(wl.ow, KNOBS["tile_x"], 4))
    tile_y = 2 if tile_x <= 4 and wl.oh % 2 == 0 else 1
    tile_cb = 1 if wl.is_depthwise else _conv.pick_tile(blocks, KNOBS["tile_cb"], 2)
    tiles = occupancy.ladder({"tile_f": tile_cb, "tile_y": tile_y, "tile_x": tile_x},
                             [("tile_f", 1, blocks), ("tile_y", 1, wl.oh), ("tile_x", 1, wl.ow)],
                             {**KNOBS, "tile_f": KNOBS["tile_cb"]})
    rest = {"unroll_k": 1 if wl.kh * wl.kw <= 9 else 0, "stage": 0, splitk.KNOB: 1, staging.KNOB: 0}
    in_blocks = replace(wl, o=blocks)  # the output channel axis counted in blocks of 4: the tiled schedule's axis
    knobs = {**KNOBS, "threads_f": KNOBS["threads_cb"]}
    candidates = [_named({**t, **_conv.tiled_threads(in_blocks, t, knobs, ctx), **rest}) for t in tiles]
    device = ctx.device
    if not wl.is_depthwise:  # no unsplit config fills the device: split the reduction over 2, 4, 8 work-items
        candidates += splitk.candidates(tiles[-1], wl.c // LANES, 1, lambda t, k: _named(
            {**t, **_conv.tiled_threads(in_blocks, t, knobs, ctx, k), **rest, splitk.KNOB: k}),
            lambda c: occupancy.fills(device, _launch(in_blocks, c)))
    chosen = occupancy.choose(device, candidates, lambda c: _launch(in_blocks, c))
    return staging.default(chosen, ctx, staging.halves(*_reads(wl, chosen)),
                           lambda c: check_config(wl, c, ctx))


def _named(cfg: dict) -> dict:
    """A tiled config in this family's knob names (channel blocks: tile_cb, threads_cb)."""
    names = {"tile_cb": "tile_f", "threads_cb": "threads_f"}
    return {knob: cfg[names.get(knob, knob)] for knob in KNOBS}


def _launch(in_blocks: _conv.ConvWorkload, cfg: dict) -> occupancy.Launch:
    """The launch of `cfg` on `in_blocks` (channels counted in blocks), 4 registers per accumulated pixel."""
    tiled = {**cfg, "tile_f": cfg["tile_cb"], "threads_f": cfg["threads_cb"]}
    return replace(_conv.tiled_launch(in_blocks, tiled), registers=_conv.tile_registers(in_blocks, tiled, LANES))


def check_config(wl: _conv.ConvWorkload, config: dict, ctx) -> dict:
    """Raise ValueError when `config` is not a valid point of this family's space for `wl` on `target`."""
    _conv.validate(config, KNOBS, ctx)
    if splitk.threads(config) > 1 and wl.is_depthwise:
        raise ValueError(f"threads_k={splitk.threads(config)}: a depthwise block reduces over no channels to split")
    splitk.check(config, wl.c // LANES, 1, "input channel blocks", staging.staged(config))
    if config["tile_cb"] * config["tile_y"] * config["tile_x"] > MAX_TILE:
        raise ValueError(f"register tile of {config['tile_cb']}x{config['tile_y']}x{config['tile_x']} float4 "
                         f"exceeds {MAX_TILE}")
    if staging.staged(config):
        if wl.is_depthwise:
            raise ValueError("cooperative=1 is for groups-1 convs (a depthwise block shares no weights or channels)")
        staging.check(config["threads_cb"] * config["threads_y"] * config["threads_x"],
                      local_pixels(wl, config) * staging.PIXEL_BYTES, ctx)
    return config


def local_pixels(wl: _conv.ConvWorkload, cfg: dict, padded: bool = True) -> int:
    """Pixels `cooperative=1` stages per input channel block: the work-group's input patch (rows padded to
    `staging.pitch` unless not `padded`: the pixels it reads) and the weights of its output channel blocks (4 input
    channels x kh x kw pixels each)."""
    rows, cols = (_patch(cfg[f"threads_{a}"] * cfg[f"tile_{a}"], k, s, d)
                  for a, k, s, d in (("y", wl.kh, *wl.stride[:1], *wl.dilation[:1]),
                                     ("x", wl.kw, *wl.stride[1:], *wl.dilation[1:])))
    return rows * (staging.pitch(cols) if padded else cols) + _weights(wl, cfg) * cfg["threads_cb"]


def _patch(outputs: int, k: int, stride: int, dilation: int) -> int:
    """Input pixels along one axis under `outputs` consecutive outputs."""
    return (outputs - 1) * stride + (k - 1) * dilation + 1


def _weights(wl: _conv.ConvWorkload, cfg: dict) -> int:
    """Weight pixels a work-item's `tile_cb` channel blocks take per input channel block."""
    return cfg["tile_cb"] * LANES * wl.kh * wl.kw


def _reads(wl: _conv.ConvWorkload, cfg: dict) -> tuple[int, int]:
    """Image pixels a work-group reads per input channel block: unstaged (each work-item its input pixels per tap,
    or its patch with `stage=1`, and its weights) and staged (`local_pixels`)."""
    inputs = (wl.kh * wl.kw * cfg["tile_y"] * cfg["tile_x"] if cfg["stage"] == 0 else
              _patch(cfg["tile_y"], wl.kh, wl.stride[0], wl.dilation[0])
              * _patch(cfg["tile_x"], wl.kw, wl.stride[1], wl.dilation[1]))
    threads = cfg["threads_cb"] * cfg["threads_y"] * cfg["threads_x"]
    return threads * (inputs + _weights(wl, cfg)), local_pixels(wl, cfg, padded=False)


def schedule(sch, match: _conv.ConvMatch, cfg: dict):
    """The register-tiled packed convolution (see the module doc); `cooperative=1` adds the local-memory tiles of
    `staging` per input channel block, which the register caches then read. Mutates and returns `sch`."""
    depthwise = match.workload.is_depthwise
    conv = match.conv
    out = _conv.output_from_registers(sch, match)
    main = splitk.partial_sums(sch, conv, 5, cfg)  # split-K: partial sums per work-item, then a cross-thread sum
    staged = []  # cooperative: the local-memory copies of the input (the guarded padded read) and the weights
    if staging.staged(cfg):
        if match.pad is not None:
            sch.set_scope(match.pad, 0, "shared")
        staged = [staging.stage_image(sch, main, 0) if match.pad is None else match.pad,
                  staging.stage_image(sch, main, 1)]
    if match.pad is not None and not staged:  # the guarded read of the unpadded input becomes the register cache
        data = match.pad
        sch.set_scope(data, 0, "local")
    else:
        data = sch.cache_read(main, 0, "local")
    weight = sch.cache_read(main, 1, "local")

    loops = sch.get_loops(main)
    n, f, y, x, lane, *kt = loops[:len(loops) - (2 if depthwise else 3)]
    fo, ft, fi = sch.split(f, [None, cfg["threads_cb"], cfg["tile_cb"]], preserve_unit_iters=True)
    yo, yt, yi = sch.split(y, [None, cfg["threads_y"], cfg["tile_y"]], preserve_unit_iters=True)
    xo, xt, xi = sch.split(x, [None, cfg["threads_x"], cfg["tile_x"]], preserve_unit_iters=True)
    if depthwise:
        ry, rx = loops[-2:]
        # per channel block: its taps, then the pixels; weights are per block, inputs per block and pixel
        reduction, inner = [fi, ry, rx, yi, xi], []
        weight_at, patch_at = rx, fi
    else:
        rc, ry, rx = loops[-3:]
        rco, rci = sch.split(rc, [None, LANES], preserve_unit_iters=True)
        reduction, inner = [rco, ry, rx, yi, xi], [rci, fi]
        weight_at, patch_at = rx, rco
    sch.reorder(n, fo, yo, xo, ft, yt, xt, *kt, *reduction, *inner, lane)
    sch.bind(sch.fuse(n, fo, yo, xo, preserve_unit_iters=True), "blockIdx.x")
    _conv.bind_threads(sch, ft, yt, xt, kt)
    sch.compute_at(weight, weight_at, preserve_unit_loops=True)
    sch.compute_at(data, xi if cfg["stage"] == 0 else patch_at, preserve_unit_loops=True)
    for copy, row_axis in zip(staged, (2, None)):  # after their readers: these must precede them in the step
        sch.compute_at(copy, patch_at, preserve_unit_loops=True)
        staging.fetch_image(sch, copy, (cfg["threads_cb"], cfg["threads_y"], cfg["threads_x"]), row_axis)
    for loop in (yi, xi, *inner) + ((fi,) if depthwise else ()):
        sch.unroll(loop)
    if cfg["unroll_k"]:
        sch.unroll(ry)
        sch.unroll(rx)
    sch.vectorize(lane)
    splitk.sum_partials(sch, conv, main, xt, 3)
    sch.reverse_compute_at(out, xt, preserve_unit_loops=True)
    init = sch.decompose_reduction(main, reduction[0])
    # the block's own loops (5 per cached tensor, channel block x row x column x lane for the accumulators):
    # unrolled into registers, the 4 lanes vectorised (one float4 texture access per pixel)
    for block, own in ((data, 5), (weight, 5), (init, 4), (out, 4)):
        _conv.registers(sch, sch.get_loops(block)[-own:], vectorize_last=True)
    return sch


def features(workload, config: dict) -> Seen:
    """The cost model's view: the register-tiled direct conv on images, `tile_cb` blocks of 4 output channels are
    tile_f = 4 * tile_cb (threads_cb is threads_f), every read is a pixel of 4 input channels (tile_rc = 4; 1 for
    depthwise, whose blocks reduce over no channel), and `stage=1` keeps the patch in registers, not local memory."""
    knobs = {**{k: v for k, v in config.items() if k not in ("tile_cb", "threads_cb")},
             "tile_f": 4 * config["tile_cb"], "threads_f": config["threads_cb"],
             "tile_rc": 1 if workload.is_depthwise else 4}
    return Seen(workload, knobs, knobs, stage_local=False)


# records from before split-K or `cooperative` measured the unsplit, unstaged kernel
FAMILY = Family("conv2d_texture", KNOBS, _conv.conv_match(match_packed, schedule,
                                                          {**splitk.OLDER_RECORDS, **staging.OLDER_RECORDS}),
                default_config, check_config, "Conv2dTexture", features=features,
                launch=lambda wl, cfg: _launch(replace(wl, o=wl.o // LANES), cfg))
