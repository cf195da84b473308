"""How a family's candidate looks to the cost model: as the register-tiled direct convolution it amounts to.

The cost model (`adreno.costmodel.features`) measures one thing, the direct convolution of `_conv.py` with its
knobs (`DIRECT_KNOBS`, plus the split-K and cooperative-staging knobs several families share, `SHARED_KNOBS`). A
family describes each of its candidates in that vocabulary with its own feature view, `Family.features(workload,
config) -> Seen | None`, written beside its schedule: the texture conv's blocks of 4 channels are `tile_f = 4 *
tile_cb`, the 1x1 GEMM is the direct conv on one row of pixels, a Winograd stage is its batched GEMM. A knob the
vocabulary has no name for is still a column of the feature row when its family lists it in `Family.row_knobs`
and its view puts it in `Seen.row`; that is how a new knob reaches the learned models from its family's file
alone.

This module imports nothing of ours: the families import it, the cost model reads what they return.
"""

from __future__ import annotations

from dataclasses import dataclass

# The direct conv's knobs, in feature-row order, with the value a missing knob takes (as `_conv.schedule_tiled`).
DIRECT_KNOBS: dict[str, int] = {"tile_f": 1, "tile_y": 1, "tile_x": 1, "threads_f": 1, "threads_y": 1,
                                "threads_x": 1, "tile_rc": 1, "unroll_k": 1, "stage": 0}
# Knobs several families share, with their value when absent: split-K work-items, cooperative local staging.
SHARED_KNOBS: dict[str, int] = {"threads_k": 1, "cooperative": 0}


@dataclass(frozen=True)
class Seen:
    """A candidate as the metrics see it: the conv (`workload`), its knobs in the direct conv's names plus the shared
    ones (`knobs`), the knob values of its feature row (`row`), whether `stage=1` stages in local memory, the
    direct-conv MACs per MAC of its main reduction, and the workload the row's descriptors describe (`described`;
    None: the task's own)."""

    workload: object
    knobs: dict
    row: dict
    stage_local: bool = True
    work_reduction: float = 1.0
    described: object = None


def shared(config: dict) -> dict:
    """The shared knobs `config` sets."""
    return {k: config[k] for k in SHARED_KNOBS if k in config}


def direct_view(workload, config: dict) -> Seen:
    """The direct conv's own view (and that of the pools and softmax, seen as depthwise convs): the config as it is;
    `stage=1` stages the workgroup's patch in local memory."""
    return Seen(workload, config, config)
