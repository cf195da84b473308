"""Direct 2-D convolution (groups=1 or grouped but not depthwise; any kernel size, stride, padding, dilation),
register-tiled.

Each work-item computes a `tile_f` x `tile_y` x `tile_x` block of outputs (channels x rows x columns) in registers;
the reduction over (ci, kh, kw) is serial inside the work-item, ci split by `tile_rc` with the inner part unrolled,
kh/kw unrolled when `unroll_k`; padding is a guarded load (the pad block is inlined) and the fused epilogue (folded
BatchNorm, bias, ReLU/Clip, residual add) is applied to the registers before the one store per output.
The workgroup is `threads_f x threads_y x threads_x` work-items. 1x1 convolutions are handled here too, and so are
grouped convs (1 < groups < channels), which would otherwise get dlight's cross-thread reduction (it fails to lower
them); their `tile_f` divides the output channels of a group, so a work-item's input channels are one group's.

`cooperative` 1 stages the work-group's input patch (with its halo; padding filled by the guarded loads) and its
weights in local memory once per `tile_rc` input channels (`staging`), and the work-items compute from there. It is
the default on GPU targets for convs whose window overlaps (kernel larger than stride: 3x3, 7x7 stems), where it cut
Oclgrind's global-load count of the default tile of a 64->64 3x3 conv at 14x14 12.2x for adreno-740 (13.7x for
nvidia-h200), 4.1x at stride 2 (`tools/global_loads.py`); 1x1 convs stay unstaged (1.5x at stride 1: only the input
is shared, across output channels; 0.58x at stride 2, where the staged patch holds the skipped pixels too), and so
do CPU targets (PoCL: staging only adds copies and barriers to a core's cache-resident loads).

Split-K (`threads_k` > 1, groups-1 convs, not staged; `splitk`): `threads_k` work-items (threadIdx.z; the output
channels then share threadIdx.y with the rows) each sum a slice of the input channels (whole `tile_rc` steps), then
a cross-thread sum in local memory adds them. The defaults split only where no unsplit config fills the device and
a split one does (MobileNetV2's 1x1 convs on 14x14 and 7x7 maps for nvidia-h200).
"""

from __future__ import annotations

from . import _conv, occupancy, splitk, staging

OP = "conv2d_direct"

# The tunable knobs and their choices (a tuner searches the product, minus what `valid` refuses).
KNOBS: dict[str, list] = {
    "tile_f": [1, 2, 4, 8, 16],
    "tile_y": [1, 2, 4],
    "tile_x": [1, 2, 4, 7, 8],
    "threads_f": [1, 2, 4, 8, 16],
    "threads_y": [1, 2, 4, 7, 8, 14, 16],
    "threads_x": [1, 2, 4, 7, 8, 14, 16, 28, 32],
    "tile_rc": [1, 2, 4, 8],
    "unroll_k": [0, 1],
    "stage": [0, 1],
    splitk.KNOB: splitk.CHOICES,
    staging.KNOB: staging.CHOICES,
}


def _handles(wl: _conv.ConvWorkload) -> bool:
    return not wl.is_depthwise


def default_config(wl: _conv.ConvWorkload, ctx) -> dict:
    """Good knob values without tuning, from the shape and the target's workgroup limit and parallelism.

    Tiles that divide the output exactly come first (a ragged tile costs a guard on every accumulator); the
    register tile starts at 28-64 accumulators (tile_f x tile_y x tile_x) and shrinks (channels, then rows, then
    columns) until the launch fills the device (`occupancy`), then (groups 1) the smallest tile's reduction split
    over 2, 4, 8 work-items where that fills it (`splitk`); the workgroup is filled up to 64 work-items (x first,
    for coalesced / vectorisable loads, then y, then output channels); staged where the window overlaps
    (`staging.default` under the context's policy)."""
    tile_x = next((t for t in (4, 2, 7) if wl.ow % t == 0), _conv.pick_tile(wl.ow, KNOBS["tile_x"], 4))
    tile_y = 2 if tile_x <= 4 and wl.oh % 2 == 0 else 1
    per_group = wl.o // wl.groups  # a grouped conv's tile_f divides a group's output channels
    tile_f = 8 if tile_x * tile_y in (4, 8) and per_group % 8 == 0 else _conv.pick_tile(per_group, KNOBS["tile_f"], 4)
    tiles = occupancy.ladder({"tile_f": tile_f, "tile_y": tile_y, "tile_x": tile_x},
                             [("tile_f", 2, per_group), ("tile_y", 1, wl.oh), ("tile_f", 1, per_group),
                              ("tile_x", 1, wl.ow)], KNOBS)
    rest = {"tile_rc": _conv.pick_tile(wl.cin_per_group, KNOBS["tile_rc"], 4 if wl.kh * wl.kw == 1 else 1),
            "unroll_k": 1 if wl.kh * wl.kw <= 9 else 0, "stage": 0, splitk.KNOB: 1,
            staging.KNOB: 0}
    candidates = [{**t, **_conv.tiled_threads(wl, t, KNOBS, ctx), **rest} for t in tiles]
    device = ctx.device
    if wl.groups == 1:  # no unsplit config fills the device: split the reduction over 2, 4, 8 work-items
        candidates += splitk.candidates(tiles[-1], wl.cin_per_group, rest["tile_rc"], lambda t, k: {
            **t, **_conv.tiled_threads(wl, t, KNOBS, ctx, k), **rest, splitk.KNOB: k},
            lambda c: occupancy.fills(device, _conv.tiled_launch(wl, c)))
    config = occupancy.choose(device, candidates, lambda c: _conv.tiled_launch(wl, c))
    overlapping = wl.kh > wl.stride[0] or wl.kw > wl.stride[1]  # neighbouring outputs share input pixels
    return staging.default(config, ctx, overlapping, lambda c: FAMILY.check_config(wl, c, ctx))


# records from before split-K or `cooperative` measured the unsplit, unstaged kernel
FAMILY = _conv.tiled_family("conv2d_direct", OP, KNOBS, _handles, default_config, "Conv2dDirect",
                            {**splitk.OLDER_RECORDS, **staging.OLDER_RECORDS})
