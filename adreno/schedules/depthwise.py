"""Depthwise 2-D convolution (groups == input channels, one input channel per group; channel multiplier allowed).

Same register-tiled structure as `conv2d_direct` (see `_conv.schedule_tiled`), with knobs and defaults for a
reduction of only kh*kw taps: nothing is reused across output channels, so the register tile is spatial
(`tile_y` x `tile_x` outputs of `tile_f` channels) and `stage=1` loads the whole input patch of the tile once
and reuses it for every tap; the fused epilogue (BN, ReLU6, ...) is applied before the single store.
"""

from __future__ import annotations

from . import _conv, occupancy

OP = "depthwise_conv2d"

KNOBS: dict[str, list] = {
    "tile_f": [1, 2, 4],
    "tile_y": [1, 2, 4, 7],
    "tile_x": [1, 2, 4, 7, 8],
    "threads_f": [1, 2, 4, 8, 16, 32],
    "threads_y": [1, 2, 4, 7, 8, 14, 16],
    "threads_x": [1, 2, 4, 7, 8, 14, 16, 28, 32],
    "unroll_k": [0, 1],
    "stage": [0, 1],
}


def _handles(wl: _conv.ConvWorkload) -> bool:
    return wl.is_depthwise


def default_config(wl: _conv.ConvWorkload, ctx) -> dict:
    """Spatial register tile of 4-8 outputs per channel, shrunk (rows, then columns) until the launch fills the device
    (`occupancy`); 64-work-item workgroups (x, then y, then channels)."""
    tile_x = next((t for t in (4, 2, 7) if wl.ow % t == 0), _conv.pick_tile(wl.ow, KNOBS["tile_x"], 4))
    tile_y = 2 if tile_x <= 4 and wl.oh % 2 == 0 else 1
    tiles = occupancy.ladder({"tile_f": 1, "tile_y": tile_y, "tile_x": tile_x},
                             [("tile_y", 1, wl.oh), ("tile_x", 1, wl.ow)], KNOBS)
    rest = {"unroll_k": 1 if wl.kh * wl.kw <= 25 else 0, "stage": 1}
    candidates = [{**t, **_conv.tiled_threads(wl, t, KNOBS, ctx), **rest} for t in tiles]
    return occupancy.choose(ctx.device, candidates, lambda c: _conv.tiled_launch(wl, c))


FAMILY = _conv.tiled_family("depthwise", OP, KNOBS, _handles, default_config, "DepthwiseConv2d")
