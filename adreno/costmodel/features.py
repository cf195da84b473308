"""Woodpecker-style analytical metrics of a direct-convolution candidate, and the feature rows cost models read.

`conv_metrics(workload, config, target_limits)` describes one candidate of the register-tiled direct convolution
(`adreno/schedules/_conv.py`): every work-item computes `tile_f x tile_y x tile_x` outputs (channels x rows x columns),
the workgroup is `threads_f x threads_y x threads_x` work-items, the reduction over input channels is split by
`tile_rc`, `unroll_k` unrolls kh/kw and `stage=1` caches the input patch of `tile_rc` channels before computing
(modelled here as the workgroup's patch in local memory). Every metric is a positive float; all but `registers` are
"higher is better" and lie in (0, 1] except the two reuse ratios (>= some small positive value, unbounded above).

Notation (per workload: output N x O x OH x OW, kernel KH x KW, stride SH, SW, dilation DH, DW, Cg input channels
per group; per config: vf, vy, vx = tile_f, tile_y, tile_x; tf, ty, tx = threads_f, threads_y, threads_x;
rc = tile_rc; wg = tf*ty*tx; per target: CU compute units, T max threads, W wave size, S transaction elements =
transaction_bytes / dtype bytes, B local-memory banks):

    blocks_f = ceil(O / (tf*vf)), blocks_y = ceil(OH / (ty*vy)), blocks_x = ceil(OW / (tx*vx))
    n_wg = N * blocks_f * blocks_y * blocks_x                 workgroups launched
    work_items = n_wg * wg

    parallelism       = min(1, work_items / F)                 fraction of the device filled: F = the target's
                        `fill_work_items` (`occupancy.required_work_items`: CU x waves in flight x W) where
                        known, else CU * T (T: the workgroup limit)
    occupancy         = wave_fill * cu_balance
                        wave_fill  = wg / (ceil(wg / W) * W)   lanes of the workgroup's waves doing work
                        cu_balance = n_wg / (ceil(n_wg / CU) * CU)   last round of workgroups over the CUs
    memory_efficiency = (coal(tx', vx*SW) * coal(tx', vx) * coal(r, SW) * coal(r, 1)) ** 1/4
                        coal(w, d) = w / (min(w, ceil(((w-1)*d + 1) / S)) * S): the fraction of fetched elements
                        used when w neighbouring work-items touch elements d apart (S-element transactions);
                        tx' = min(tx, OW, W): one instruction of a wave row (work-item x is vx columns from its
                        neighbour: loads d = vx*SW, stores d = vx); r = min(tx*vx, OW): the columns a wave row
                        touches over its whole tile (cache-line use once the tile's loads are done)
    register_reuse    = MACs / values loaded into registers, per reduction step
                        stage 0 (per ci, kh, kw): vf*vy*vx / (vf + vy*vx)
                        stage 1 (per rc channels): rc*KH*KW*vf*vy*vx / (rc * (py*px + vf*KH*KW))
                        py = (vy-1)*SH + (KH-1)*DH + 1, px = (vx-1)*SW + (KW-1)*DW + 1 (a work-item's input patch)
    local_reuse       = stage 1: (wg * py * px) / (Py * Px)    reads of the staged patch per value staged,
                        Py = (ty*vy-1)*SH + (KH-1)*DH + 1, Px = (tx*vx-1)*SW + (KW-1)*DW + 1 (the workgroup patch;
                        threads_f groups share it, neighbouring work-items share halos); 1.0 when stage = 0
    bank_conflict     = stage 1: 1 / ceil(w / min(w, B / gcd(vx*SW, B))), w = min(tx, W): the serialisation of a
                        wave row reading the staged patch vx*SW words apart; 1.0 when stage = 0
    branch_efficiency = useful / computed outputs and reduction steps:
                        (O*OH*OW*Cg) / (blocks_f*tf*vf * blocks_y*ty*vy * blocks_x*tx*vx * ceil(Cg/rc)*rc)
    local_fit         = stage 1: min(1, local_memory_bytes / (rc * Py * Px * dtype bytes)); 1.0 when stage = 0
    registers         = live values per work-item (pressure; higher is worse)
                        vf*vy*vx accumulators + stage 0: vf + vy*vx; stage 1: rc * (py*px + vf*KH*KW)
    work_reduction    = direct-conv MACs / MACs of the main reduction: 1 for a direct conv

A layout task's candidate (`tile` 2 or 4: Winograd F(m x m, 3 x 3), alpha = m + 2) is described by its batched GEMM,
the bulk of its work, as the 1x1 conv it is: alpha^2 images of 1 x P pixels (P tiles), C input and O output
channels, with tile_f, tile_x, threads_f, threads_x, tile_rc = tile_o, tile_p, threads_o, threads_p, tile_k;
work_reduction = KH*KW*OH*OW*N / (alpha^2 * P) (2.25 and 4 on maps divisible by m). The transforms are seen through
their knob `threads_t` and the layout through `tile`.

Split-K (`threads_k` > 1: `conv2d_1x1`, `conv2d_texture`, `conv2d_direct`; each view passes it as it is):
threads_k work-items of a workgroup each reduce a slice of the input channels, then sum their partials in local
memory: wg and the launch grow by threads_k, every work-item runs ceil(Cg / (rc * threads_k)) reduction steps
(branch_efficiency counts the ragged slice), and the final sum costs sync_efficiency (below). Cooperative staging
(`cooperative` = 1): the workgroup loads its input patch and its weight tile (rc channels per step) into local
memory once and every work-item reads them from there:
    local_reuse   = wg * (py*px + vf*KH*KW) / (Py*Px + tf*vf*KH*KW)   global loads saved by sharing
    local_fit     = min(1, L / (rc * (Py*Px + tf*vf*KH*KW) * dtype bytes))
    occupancy    *= min(1, floor(L / that) * wg / (F / CU))            local memory limits resident workgroups
    sync_efficiency = MACs / (MACs + barrier cost): 2 barriers per reduction step (cooperative), log2(threads_k)+1
                      local-memory rounds of the partial sums (split-K); a barrier costs SYNC_COST MACs (estimate)

Features per family. Which conv a candidate describes and how its knobs map onto the direct conv's is the family's
feature view (`Family.features`, written beside its schedule; `adreno.schedules.feature_view` says what a view
returns), never guessed from knob names:
- the direct conv, depthwise, pools and softmax (as depthwise convs): the config as it is; `stage=1` modelled as the
  workgroup's patch in local memory (`feature_view.direct_view`);
- `conv2d_texture`: blocks of 4 output channels, pixel reads, `stage=1` in registers;
- `conv2d_1x1`: the direct conv on one row of OH*OW pixels;
- `conv2d_winograd` stage tasks: the batched GEMM as a 1x1 conv (the transforms: not described);
- layout tasks (`adreno.tune.layout_task.layout_features`): `tile` 0: the direct (or texture) view; `tile` 2 or 4:
  the Winograd GEMM, with work_reduction = direct MACs / GEMM MACs.

`featurize(workload, configs, target_limits, view)` turns candidates into model rows: log of each metric, then the
raw knob values (the direct conv's, then split-K and cooperative, then every family's `row_knobs`: the layout and
Winograd knobs), then a few log2 workload descriptors (so a model trained across tasks can learn interactions).
"""

from __future__ import annotations

import math

import numpy as np

from ..schedules import FAMILIES
from ..schedules.feature_view import DIRECT_KNOBS, SHARED_KNOBS, Seen, direct_view
from ..schedules.occupancy import required_work_items

METRIC_NAMES: list[str] = ["parallelism", "occupancy", "memory_efficiency", "register_reuse", "local_reuse",
                           "bank_conflict", "branch_efficiency", "local_fit", "registers", "work_reduction",
                           "sync_efficiency"]

WORKLOAD_NAMES: list[str] = ["log2_out_channels", "log2_in_channels", "log2_out_pixels", "log2_kernel", "stride"]
# The knob columns of a row, with the value a missing knob takes: the direct conv's vocabulary, then the knobs
# families add (`Family.row_knobs`), in `FAMILIES` order.
ROW_KNOBS: dict[str, int] = {**DIRECT_KNOBS, **SHARED_KNOBS,
                             **{k: v for family in FAMILIES for k, v in family.row_knobs.items()}}

FEATURE_NAMES: list[str] = [f"log_{m}" for m in METRIC_NAMES] + list(ROW_KNOBS) + WORKLOAD_NAMES
METRIC_COLUMNS: list[int] = list(range(len(METRIC_NAMES)))  # where the log metrics sit in a feature row

# Target values used when target_limits does not give them (compute_units is None where not public).
DEFAULT_LIMITS = {"compute_units": 4, "max_threads": 256, "local_memory_bytes": 32768, "wave_size": 64,
                  "transaction_bytes": 64, "local_banks": 32}
# What a workgroup barrier (or one local-memory round of a cross-thread sum) costs, in multiply-adds (an estimate:
# tens of cycles of a wave waiting for the slowest).
SYNC_COST = 64

_DTYPE_BYTES = {"float32": 4, "float16": 2, "int8": 1, "uint8": 1, "int32": 4}


def device_limits(spec) -> dict:
    """The limits these metrics read, from an `adreno.targets.devices.AdrenoDevice`; `fill_work_items` is what the
    occupancy rule asks of a launch."""
    return {"compute_units": spec.compute_units, "max_threads": spec.schedule_threads,
            "local_memory_bytes": spec.local_memory_bytes, "wave_size": spec.wave_size,
            "fill_work_items": required_work_items(spec)}


def _limits(target_limits: dict | None) -> dict:
    limits = dict(DEFAULT_LIMITS)
    for key, value in (target_limits or {}).items():
        if value is not None:
            limits[key] = value
    return limits


def _coalescing(width: int, spacing: int, segment: int) -> float:
    """Fraction of fetched elements used when `width` work-items read elements `spacing` apart."""
    width = max(1, width)
    span = (width - 1) * spacing + 1
    segments = min(width, math.ceil(span / segment))
    return width / (segments * segment)


def conv_metrics(workload, config: dict, target_limits: dict | None, stage_local: bool = True) -> dict[str, float]:
    """The analytical metrics of one direct-conv candidate (see the module doc for the formulas). `stage_local`:
    `stage=1` stages the patch in local memory (the direct view), else in registers (the texture view)."""
    lim = _limits(target_limits)
    cfg = {**DIRECT_KNOBS, **SHARED_KNOBS, **config}
    vf, vy, vx = int(cfg["tile_f"]), int(cfg["tile_y"]), int(cfg["tile_x"])
    tf, ty, tx = int(cfg["threads_f"]), int(cfg["threads_y"]), int(cfg["threads_x"])
    rc, stage, tk, coop = int(cfg["tile_rc"]), int(cfg["stage"]), int(cfg["threads_k"]), int(cfg["cooperative"])
    wl = workload
    sh, sw = (int(s) for s in wl.stride)
    dh, dw = (int(d) for d in wl.dilation)
    cg = wl.c // wl.groups
    cu, max_threads = int(lim["compute_units"]), int(lim["max_threads"])
    wave = int(lim["wave_size"])
    dbytes = _DTYPE_BYTES.get(str(wl.dtype), 4)
    segment = max(1, int(lim["transaction_bytes"]) // dbytes)
    banks = int(lim["local_banks"])
    fill = lim.get("fill_work_items") or cu * max_threads

    wg = tf * ty * tx * tk
    blocks_f = math.ceil(wl.o / (tf * vf))
    blocks_y = math.ceil(wl.oh / (ty * vy))
    blocks_x = math.ceil(wl.ow / (tx * vx))
    n_wg = wl.n * blocks_f * blocks_y * blocks_x
    work_items = n_wg * wg

    parallelism = min(1.0, work_items / fill)
    wave_fill = wg / (math.ceil(wg / wave) * wave)
    cu_balance = n_wg / (math.ceil(n_wg / cu) * cu)
    occupancy = wave_fill * cu_balance

    lane = min(tx, wl.ow, wave)
    row = min(tx * vx, wl.ow)
    memory = (_coalescing(lane, vx * sw, segment) * _coalescing(lane, vx, segment)
              * _coalescing(row, sw, segment) * _coalescing(row, 1, segment)) ** 0.25

    py = (vy - 1) * sh + (wl.kh - 1) * dh + 1
    px = (vx - 1) * sw + (wl.kw - 1) * dw + 1
    big_py = (ty * vy - 1) * sh + (wl.kh - 1) * dh + 1
    big_px = (tx * vx - 1) * sw + (wl.kw - 1) * dw + 1
    taps = wl.kh * wl.kw
    outputs = vf * vy * vx
    if stage:
        register_reuse = (rc * taps * outputs) / (rc * (py * px + vf * taps))
        registers = outputs + rc * (py * px + vf * taps)
    else:
        register_reuse = outputs / (vf + vy * vx)
        registers = outputs + vf + vy * vx
    local_reuse = bank_conflict = local_fit = 1.0
    if coop or (stage and stage_local):
        lane_row = min(tx, wave)
        distinct = min(lane_row, banks // math.gcd(vx * sw, banks))
        bank_conflict = 1.0 / math.ceil(lane_row / distinct)
        if coop:  # the workgroup's input patch and weight tile, loaded once per step into local memory
            staged = big_py * big_px + tf * vf * taps
            local_reuse = (wg * (py * px + vf * taps)) / staged
        else:
            staged = big_py * big_px
            local_reuse = (wg * py * px) / staged
        local_bytes = rc * staged * dbytes
        local_fit = min(1.0, float(lim["local_memory_bytes"]) / local_bytes)
        if coop:
            resident = max(1, int(lim["local_memory_bytes"]) // local_bytes) * wg
            occupancy *= min(1.0, resident / (fill / cu))

    steps = math.ceil(cg / (rc * tk))
    computed = (blocks_f * tf * vf) * (blocks_y * ty * vy) * (blocks_x * tx * vx) * (steps * rc * tk)
    branch = (wl.o * wl.oh * wl.ow * cg) / computed

    work = steps * rc * taps * outputs  # multiply-adds of one work-item
    sync = (2 * steps if coop else 0) + ((math.log2(tk) + 1) * outputs / 4 if tk > 1 else 0)
    sync_efficiency = work / (work + SYNC_COST * sync)

    return {"parallelism": max(parallelism, 1e-9), "occupancy": occupancy, "memory_efficiency": memory,
            "register_reuse": register_reuse, "local_reuse": local_reuse, "bank_conflict": bank_conflict,
            "branch_efficiency": branch, "local_fit": local_fit, "registers": float(registers), "work_reduction": 1.0,
            "sync_efficiency": sync_efficiency}


def metrics_of(found: Seen, target_limits: dict | None) -> dict[str, float]:
    metrics = conv_metrics(found.workload, found.knobs, target_limits, found.stage_local)
    metrics["work_reduction"] = found.work_reduction
    return metrics


def layout_metrics(workload, config: dict, target_limits: dict | None, view=direct_view) -> dict[str, float]:
    """The metrics of a candidate through its family's view (`Family.features`)."""
    return metrics_of(view(workload, config), target_limits)


def workload_descriptors(workload) -> list[float]:
    wl = workload
    return [math.log2(wl.o), math.log2(max(1, wl.c // wl.groups)), math.log2(wl.oh * wl.ow),
            math.log2(wl.kh * wl.kw), float(max(wl.stride))]


def featurize(workload, configs: list[dict], target_limits: dict | None, view=direct_view) -> np.ndarray:
    """One row per config, seen through the family's `view` (`Family.features`): log metrics (METRIC_NAMES order),
    raw knob values, workload descriptors (FEATURE_NAMES gives the column names)."""
    rows = []
    for config in configs:
        found = view(workload, config)
        metrics = metrics_of(found, target_limits)
        cfg = {**ROW_KNOBS, **found.row}
        rows.append([math.log(metrics[m]) for m in METRIC_NAMES] + [float(cfg[k]) for k in ROW_KNOBS]
                    + workload_descriptors(workload if found.described is None else found.described))
    return np.asarray(rows, dtype=np.float64).reshape(len(configs), len(FEATURE_NAMES))
