"""1x1 convolution on textures as a GEMM: output pixels x input channels x output channels.

A packed (NCHW4c activations, OIHW4o weights) 1x1 conv without padding, any stride, is the GEMM
Y[p, o] = sum_c X[p, c] W[c, o] with p the output pixel (rows flattened: P = OH * OW), the reduction in blocks of
4 input channels (one `read_imagef` of X per pixel and block) and the output in blocks of 4 channels (one float4 of
W per input channel, one `write_imagef` of Y per pixel). Each work-item holds a `tile_p` x `tile_cb` tile of float4
accumulators (pixels x output channel blocks); the K loop runs over input channel blocks, `tile_k` of them unrolled
per step; the workgroup is `threads_cb` x `threads_p` work-items along the flattened pixel axis, so a workgroup may
span several rows and a 7x7 or 14x14 map is covered without the ragged tiles a 2-D (rows x columns) tiling needs.
A work-item's pixels are contiguous within one output row (`tile_p` divides OW), so its reads and its stores stay
whole, unguarded pixels. The epilogue (bias, folded BatchNorm, ReLU/Clip, residual add) is applied to the registers.
Split-K (`threads_k` > 1, for deep layers on maps too small to fill a GPU: MobileNetV2's ->160 convs on 7x7 have
40 x 49 pixel blocks in all): `threads_k` work-items of a workgroup (threadIdx.z) each sum a contiguous slice of the
input channel blocks into their registers (an rfactor block), then a cross-thread reduction in local memory adds
the slices, and the epilogue and store follow. `cooperative=1` (`staging`; not with split-K): per step the
work-group copies the input box under its pixels (whole output rows, or a part of one) and its weights into local
memory once, and the register caches read them there.

Claims the packed 1x1 convs before `conv2d_texture` (whose 2-D tiling handles any kernel); a config this family
refuses leaves the function to `conv2d_texture`. Buffer (NCHW) 1x1 convs stay with `conv2d_direct`, whose
register tiling is already this GEMM over (rows, columns). Workload keys: `conv2d_1x1_nchw4c|...`.
"""

from __future__ import annotations

from dataclasses import replace

from ..options import Memory
from ..workload import memory_op
from . import _conv, occupancy, splitk, staging
from .family import Family
from .feature_view import Seen, shared
from .conv2d_texture import LANES, OPS, match_packed

OP = memory_op("conv2d_1x1", Memory.TEXTURE)  # conv2d_1x1_nchw4c

KNOBS: dict[str, list] = {
    "tile_cb": [1, 2, 4, 8],
    "tile_p": [1, 2, 4, 7, 8, 14, 16],
    "tile_k": [1, 2, 4],
    "threads_cb": [1, 2, 4, 8, 16],
    "threads_p": [1, 2, 4, 7, 8, 14, 16, 28, 32, 49, 64],
    splitk.KNOB: splitk.CHOICES,
    staging.KNOB: staging.CHOICES,
}

# float4 accumulators a work-item may hold (tile_p x tile_cb), as in conv2d_texture.
MAX_TILE = 32


def _match(func, sch=None):
    """(OP, ConvMatch) for a packed groups-1 1x1 conv without padding; else None."""
    found = match_packed(func, sch)
    if found is None or found[0] != OPS["conv2d_NCHW4c"]:
        return None
    wl = found[1].workload
    if (wl.kh, wl.kw) != (1, 1) or any(wl.padding) or found[1].pad is not None:
        return None
    return OP, found[1]


def check_config(wl: _conv.ConvWorkload, config: dict, ctx) -> dict:
    """Raise ValueError when `config` is not a valid point of this family's space for `wl` on `target`."""
    _conv.validate(config, KNOBS, ctx)
    if wl.ow % config["tile_p"]:
        raise ValueError(f"tile_p={config['tile_p']} does not divide the output row of {wl.ow} pixels")
    if (wl.c // LANES) % config["tile_k"]:
        raise ValueError(f"tile_k={config['tile_k']} does not divide the {wl.c // LANES} input channel blocks")
    splitk.check(config, wl.c // LANES, config["tile_k"], "input channel blocks", staging.staged(config))
    if wl.oh * wl.ow == 1 and config["threads_p"] > 1:  # TVM 0.27 drops the guard of its pixel loop
        raise ValueError(f"threads_p={config['threads_p']} on a one-pixel map: the extra work-items would write "
                         "past the output (TVM drops their guard)")
    if config["tile_cb"] * config["tile_p"] > MAX_TILE:
        raise ValueError(f"register tile of {config['tile_p']}x{config['tile_cb']} float4 exceeds {MAX_TILE}")
    if staging.staged(config):
        run = config["threads_p"] * config["tile_p"]
        if run % wl.ow and wl.ow % run:
            raise ValueError(f"cooperative=1 needs a work-group's {run} pixels to be whole output rows or to divide "
                             f"a row of {wl.ow} (else its input tile has no fixed size)")
        staging.check(config["threads_cb"] * config["threads_p"], local_pixels(wl, config) * staging.PIXEL_BYTES,
                      ctx)
    return config


def local_pixels(wl: _conv.ConvWorkload, cfg: dict, padded: bool = True) -> int:
    """Pixels `cooperative=1` stages per step of `tile_k` input channel blocks: the input box under the work-group's
    pixels (whole output rows, or a part of one; with the stride's skipped rows and columns: TVM copies a box; rows
    padded to `staging.pitch` unless not `padded`) and the weights of its output channel blocks (4 pixels per input
    channel block)."""
    run = cfg["threads_p"] * cfg["tile_p"]
    rows, cols = (run // wl.ow, wl.ow) if run >= wl.ow else (1, run)
    cols = (cols - 1) * wl.stride[1] + 1
    box = ((rows - 1) * wl.stride[0] + 1) * (staging.pitch(cols) if padded else cols)
    return cfg["tile_k"] * (box + cfg["threads_cb"] * cfg["tile_cb"] * LANES)


def _reads(wl: _conv.ConvWorkload, cfg: dict) -> tuple[int, int]:
    """Image pixels a work-group reads per step: unstaged (each work-item its tile_p input pixels and 4 weight
    pixels per channel block, per input block) and staged (`local_pixels`)."""
    threads = cfg["threads_cb"] * cfg["threads_p"]
    return (threads * cfg["tile_k"] * (cfg["tile_p"] + LANES * cfg["tile_cb"]),
            local_pixels(wl, cfg, padded=False))


def _largest_divisor(n: int, choices: list[int], cap: int) -> int:
    return max(c for c in choices if c <= cap and n % c == 0) if n else 1


def default_config(wl: _conv.ConvWorkload, ctx) -> dict:
    """Knobs without tuning: 8 (else 7, 4, 2, 1) pixels of a row x 4 channel blocks per work-item, shrunk (channel
    blocks, then pixels) until the launch fills the device (`occupancy`); workgroups of up to 64 work-items, up to
    16 along the pixels (a divisor of the map's tiles), the rest over channel blocks; no K unrolling beyond the 4
    channels of a block (how these were chosen: docs/benchmarks.md, "1x1 GEMM defaults"); staged in local memory on
    a GPU where the config allows it and staging at least halves the image reads (`staging.default` under
    the context's policy)."""
    blocks = wl.o // LANES
    tile_p = next(t for t in (8, 7, 4, 2, 1) if wl.ow % t == 0)
    tiles = occupancy.ladder({"tile_cb": _conv.pick_tile(blocks, KNOBS["tile_cb"], 4), "tile_p": tile_p},
                             [("tile_cb", 1, blocks), ("tile_p", 1, wl.ow)],
                             {**KNOBS, "tile_p": [t for t in KNOBS["tile_p"] if wl.ow % t == 0]})
    candidates = [_config(wl, t["tile_cb"], t["tile_p"], 1, ctx) for t in tiles]
    # a map too small for even one pixel block per work-item: split the reduction over 2, 4, 8 work-items
    candidates += splitk.candidates(tiles[-1], wl.c // LANES, 1,
                                    lambda t, k: _config(wl, t["tile_cb"], t["tile_p"], k, ctx))
    chosen = occupancy.choose(ctx.device, candidates, lambda c: _launch(wl, c))
    return staging.default(chosen, ctx, staging.halves(*_reads(wl, chosen)),
                           lambda c: check_config(wl, c, ctx))


def _config(wl: _conv.ConvWorkload, tile_cb: int, tile_p: int, threads_k: int, ctx) -> dict:
    limit = min(ctx.max_threads, 64)
    threads_p = _largest_divisor(wl.oh * wl.ow // tile_p, KNOBS["threads_p"], min(16, limit // threads_k))
    threads_cb = _conv.pick_tile(-(-(wl.o // LANES) // tile_cb), KNOBS["threads_cb"],
                                 max(1, limit // (threads_p * threads_k)))
    return {"tile_cb": tile_cb, "tile_p": tile_p, "tile_k": 1, "threads_cb": threads_cb, "threads_p": threads_p,
            "threads_k": threads_k, staging.KNOB: 0}


def _launch(wl: _conv.ConvWorkload, cfg: dict) -> occupancy.Launch:
    """Accumulators (tile_p x tile_cb float4) plus one step's loads (tile_k blocks: 4 weight pixels per channel
    block, one input pixel), 4 registers per pixel."""
    registers = LANES * (cfg["tile_p"] * cfg["tile_cb"] + cfg["tile_k"] * (LANES * cfg["tile_cb"] + 1))
    return occupancy.grid((wl.o // LANES, cfg["tile_cb"], cfg["threads_cb"]),
                          (wl.oh * wl.ow, cfg["tile_p"], cfg["threads_p"]),
                          (splitk.threads(cfg), 1, splitk.threads(cfg)), registers=registers, batch=wl.n)


def _pixel_loops(sch, y, x, ow: int, cfg: dict):
    """(work-group, work-item, tile) loops over the output pixels. A work-group whose `threads_p` x `tile_p` pixels
    divide a row (fewer than a row) splits the row itself, so that a work-item's pixel is `x = (group's run) +
    tile_p * item + i` exactly like in the epilogue that `reverse_compute_at` derives. Splitting the fused (y, x) axis
    there gives the accumulators `(y * ow + x) // ow`-style indices that TVM 0.27's CompactBufferAllocation cannot
    unite with the epilogue's simplified ones: it then sizes the register tile over the whole map (1.5M floats per
    work-item for 24x160 with tile_p 8 x threads_p 4), which PoCL places on its stack and segfaults on at large maps.
    Other runs (whole rows, ragged across rows) keep the fused axis, whose accumulators compact to the tile."""
    run = cfg["threads_p"] * cfg["tile_p"]
    if run < ow and ow % run == 0:
        xo, pt, pi = sch.split(x, [None, cfg["threads_p"], cfg["tile_p"]], preserve_unit_iters=True)
        return sch.fuse(y, xo, preserve_unit_iters=True), pt, pi
    return sch.split(sch.fuse(y, x), [None, cfg["threads_p"], cfg["tile_p"]], preserve_unit_iters=True)


def schedule(sch, match: _conv.ConvMatch, cfg: dict):
    """The GEMM schedule (see the module doc). Mutates and returns `sch`."""
    conv = match.conv
    out = _conv.output_from_registers(sch, match)
    main = splitk.partial_sums(sch, conv, 5, cfg)  # split-K: partial sums per work-item, then a cross-thread sum
    # cooperative: local-memory copies of the step's input pixels and weights, which the register caches read
    staged = [staging.stage_image(sch, main, i) for i in (0, 1)] if staging.staged(cfg) else []
    data = sch.cache_read(main, 0, "local")
    weight = sch.cache_read(main, 1, "local")
    n, f, y, x, lane, *kt, rc, ry, rx = sch.get_loops(main)
    fo, ft, fi = sch.split(f, [None, cfg["threads_cb"], cfg["tile_cb"]], preserve_unit_iters=True)
    po, pt, pi = _pixel_loops(sch, y, x, match.workload.ow, cfg)
    rko, rki, rl = sch.split(rc, [None, cfg["tile_k"], LANES], preserve_unit_iters=True)
    sch.reorder(n, fo, po, ft, pt, *kt, rko, rki, ry, rx, pi, rl, fi, lane)
    sch.bind(sch.fuse(n, fo, po, preserve_unit_iters=True), "blockIdx.x")
    sch.bind(ft, "threadIdx.y")
    sch.bind(pt, "threadIdx.x")
    for loop in kt:
        sch.bind(loop, "threadIdx.z")
    sch.compute_at(weight, rx, preserve_unit_loops=True)  # tile_cb x 4 weight pixels per input channel block
    sch.compute_at(data, pi, preserve_unit_loops=True)  # one input pixel (4 channels) per output pixel and block
    for copy, row_axis in zip(staged, (2, None)):  # after their readers: these must precede them in the step
        sch.compute_at(copy, rko, preserve_unit_loops=True)
        staging.fetch_image(sch, copy, (cfg["threads_cb"], cfg["threads_p"]), row_axis)
    for loop in (rki, pi, rl, fi):
        sch.unroll(loop)
    sch.vectorize(lane)
    splitk.sum_partials(sch, conv, main, pt, 3)
    sch.reverse_compute_at(out, pt, preserve_unit_loops=True)
    init = sch.decompose_reduction(main, rko)
    # the blocks' own loops (the accumulators': pixel x channel block x lane), unrolled, the lanes vectorised
    for block, own in ((data, 5), (weight, 5), (init, 3), (out, 4)):
        _conv.registers(sch, sch.get_loops(block)[-own:], vectorize_last=True)
    return sch


def pixel_row(workload):
    """A 1x1 conv's output pixels as one row (the GEMM this family computes)."""
    return replace(workload, h=1, w=workload.h * workload.w, oh=1, ow=workload.oh * workload.ow)


def features(workload, config: dict) -> Seen:
    """The cost model's view: the direct conv on one row of OH*OW pixels, tile_x, threads_x = tile_p, threads_p,
    tile_y = threads_y = 1, its K step tile_rc = 4 * tile_k, threads_k as it is."""
    knobs = {"tile_f": 4 * config["tile_cb"], "threads_f": config["threads_cb"], "tile_y": 1, "threads_y": 1,
             "tile_x": config["tile_p"], "threads_x": config["threads_p"], "tile_rc": 4 * config["tile_k"],
             **shared(config)}
    return Seen(pixel_row(workload), knobs, knobs, stage_local=False)


# records from before split-K or `cooperative` measured the unsplit, unstaged GEMM
OLDER_RECORDS = {**splitk.OLDER_RECORDS, **staging.OLDER_RECORDS}
FAMILY = Family("conv2d_1x1", KNOBS, _conv.conv_match(_match, schedule, OLDER_RECORDS), default_config, check_config,
                "Conv2d1x1Gemm", features=features, launch=_launch)
