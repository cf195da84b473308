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

A texture candidate (`adreno/schedules/conv2d_texture.py`, knobs `tile_cb threads_cb ...`) is the same register-tiled
conv on images: `tile_cb` blocks of 4 output channels are tile_f = 4 * tile_cb, threads_cb is threads_f, and every
read is a pixel of 4 input channels, so tile_rc = 4 (1 for depthwise, whose blocks reduce over no channel).
Its `stage=1` keeps the input patch in registers, not local memory: local_reuse, bank_conflict and local_fit are 1.
A 1x1 texture GEMM candidate (`adreno/schedules/conv2d_1x1.py`, knobs `tile_cb tile_p tile_k threads_cb threads_p`) is
that conv on one row of OH*OW pixels (`pixel_row`): tile_x, threads_x = tile_p, threads_p, tile_y = threads_y = 1,
tile_rc = 4 * tile_k.

`featurize(workload, configs, target_limits)` turns candidates into model rows: log of each metric, then the raw
knob values (direct, then layout and Winograd knobs), then a few log2 workload descriptors (so a model trained
across tasks can learn interactions).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

METRIC_NAMES: list[str] = ["parallelism", "occupancy", "memory_efficiency", "register_reuse", "local_reuse",
                           "bank_conflict", "branch_efficiency", "local_fit", "registers", "work_reduction"]

# The direct-conv knobs, in feature order, with the value a missing knob takes (as in `_conv.schedule_tiled`).
KNOB_DEFAULTS: dict[str, int] = {"tile_f": 1, "tile_y": 1, "tile_x": 1, "threads_f": 1, "threads_y": 1,
                                 "threads_x": 1, "tile_rc": 1, "unroll_k": 1, "stage": 0}
# The layout knob and the Winograd stage knobs (`adreno/schedules/conv2d_winograd.py`), with their value when absent.
LAYOUT_KNOB_DEFAULTS: dict[str, int] = {"tile": 0, "tile_o": 1, "tile_p": 1, "threads_o": 1, "threads_p": 1,
                                        "tile_k": 1, "threads_t": 1, "split_t": 0}
WORKLOAD_NAMES: list[str] = ["log2_out_channels", "log2_in_channels", "log2_out_pixels", "log2_kernel", "stride"]

FEATURE_NAMES: list[str] = ([f"log_{m}" for m in METRIC_NAMES] + list(KNOB_DEFAULTS) + list(LAYOUT_KNOB_DEFAULTS)
                            + WORKLOAD_NAMES)
METRIC_COLUMNS: list[int] = list(range(len(METRIC_NAMES)))  # where the log metrics sit in a feature row

# Target values used when target_limits does not give them (compute_units is None where not public).
DEFAULT_LIMITS = {"compute_units": 4, "max_threads": 256, "local_memory_bytes": 32768, "wave_size": 64,
                  "transaction_bytes": 64, "local_banks": 32}

_DTYPE_BYTES = {"float32": 4, "float16": 2, "int8": 1, "uint8": 1, "int32": 4}


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


def conv_metrics(workload, config: dict, target_limits: dict | None) -> dict[str, float]:
    """The analytical metrics of one direct-conv candidate (see the module doc for the formulas)."""
    lim = _limits(target_limits)
    cfg = {**KNOB_DEFAULTS, **config}
    vf, vy, vx = int(cfg["tile_f"]), int(cfg["tile_y"]), int(cfg["tile_x"])
    tf, ty, tx = int(cfg["threads_f"]), int(cfg["threads_y"]), int(cfg["threads_x"])
    rc, stage = int(cfg["tile_rc"]), int(cfg["stage"])
    wl = workload
    sh, sw = (int(s) for s in wl.stride)
    dh, dw = (int(d) for d in wl.dilation)
    cg = wl.c // wl.groups
    cu, max_threads = int(lim["compute_units"]), int(lim["max_threads"])
    wave = int(lim["wave_size"])
    dbytes = _DTYPE_BYTES.get(str(wl.dtype), 4)
    segment = max(1, int(lim["transaction_bytes"]) // dbytes)
    banks = int(lim["local_banks"])

    wg = tf * ty * tx
    blocks_f = math.ceil(wl.o / (tf * vf))
    blocks_y = math.ceil(wl.oh / (ty * vy))
    blocks_x = math.ceil(wl.ow / (tx * vx))
    n_wg = wl.n * blocks_f * blocks_y * blocks_x
    work_items = n_wg * wg

    parallelism = min(1.0, work_items / (lim.get("fill_work_items") or cu * max_threads))
    wave_fill = wg / (math.ceil(wg / wave) * wave)
    cu_balance = n_wg / (math.ceil(n_wg / cu) * cu)
    occupancy = wave_fill * cu_balance

    lane = min(tx, wl.ow, wave)
    row = min(tx * vx, wl.ow)
    memory = (_coalescing(lane, vx * sw, segment) * _coalescing(lane, vx, segment)
              * _coalescing(row, sw, segment) * _coalescing(row, 1, segment)) ** 0.25

    py = (vy - 1) * sh + (wl.kh - 1) * dh + 1
    px = (vx - 1) * sw + (wl.kw - 1) * dw + 1
    taps = wl.kh * wl.kw
    outputs = vf * vy * vx
    if stage:
        register_reuse = (rc * taps * outputs) / (rc * (py * px + vf * taps))
        registers = outputs + rc * (py * px + vf * taps)
        big_py = (ty * vy - 1) * sh + (wl.kh - 1) * dh + 1
        big_px = (tx * vx - 1) * sw + (wl.kw - 1) * dw + 1
        local_reuse = (wg * py * px) / (big_py * big_px)
        lane_row = min(tx, wave)
        distinct = min(lane_row, banks // math.gcd(vx * sw, banks))
        bank_conflict = 1.0 / math.ceil(lane_row / distinct)
        local_fit = min(1.0, float(lim["local_memory_bytes"]) / (rc * big_py * big_px * dbytes))
    else:
        register_reuse = outputs / (vf + vy * vx)
        registers = outputs + vf + vy * vx
        local_reuse = bank_conflict = local_fit = 1.0

    computed = (blocks_f * tf * vf) * (blocks_y * ty * vy) * (blocks_x * tx * vx) * (math.ceil(cg / rc) * rc)
    branch = (wl.o * wl.oh * wl.ow * cg) / computed

    return {"parallelism": max(parallelism, 1e-9), "occupancy": occupancy, "memory_efficiency": memory,
            "register_reuse": register_reuse, "local_reuse": local_reuse, "bank_conflict": bank_conflict,
            "branch_efficiency": branch, "local_fit": local_fit, "registers": float(registers), "work_reduction": 1.0}


def texture_knobs(workload, config: dict) -> dict:
    """A `conv2d_texture` or `conv2d_1x1` config in the direct conv's knobs (see the module doc); other configs
    unchanged."""
    if "tile_cb" not in config:
        return config
    if "tile_p" in config:  # conv2d_1x1, seen on `pixel_row(workload)`
        return {"tile_f": 4 * config["tile_cb"], "threads_f": config["threads_cb"], "tile_y": 1, "threads_y": 1,
                "tile_x": config["tile_p"], "threads_x": config["threads_p"], "tile_rc": 4 * config["tile_k"]}
    cfg = {k: v for k, v in config.items() if k not in ("tile_cb", "threads_cb")}
    return {**cfg, "tile_f": 4 * config["tile_cb"], "threads_f": config["threads_cb"],
            "tile_rc": 1 if workload.is_depthwise else 4}


def pixel_row(workload):
    """A 1x1 conv's output pixels as one row (the GEMM view of `conv2d_1x1`)."""
    return replace(workload, h=1, w=workload.h * workload.w, oh=1, ow=workload.oh * workload.ow)


def layout_metrics(workload, config: dict, target_limits: dict | None) -> dict[str, float]:
    """The metrics of a candidate of any layout: `conv_metrics` for a direct conv (`tile` 0 or absent) or a texture
    conv, those of the Winograd GEMM seen as a 1x1 conv otherwise (see the module doc)."""
    if "tile_cb" in config:
        seen = pixel_row(workload) if "tile_p" in config else workload
        return {**conv_metrics(seen, texture_knobs(workload, config), target_limits),
                "local_reuse": 1.0, "bank_conflict": 1.0, "local_fit": 1.0}
    m = int(config.get("tile", 0))
    if m == 0:
        return conv_metrics(workload, config, target_limits)
    from ..schedules import conv2d_winograd

    _, (alpha, _, o, p, c) = conv2d_winograd.stage_workloads(workload, m)[1]
    gemm = replace(workload, n=alpha * alpha, c=c, h=1, w=p, o=o, kh=1, kw=1, oh=1, ow=p, stride=(1, 1),
                   dilation=(1, 1), padding=(0, 0, 0, 0), groups=1)
    cfg = {**LAYOUT_KNOB_DEFAULTS, **config}
    metrics = conv_metrics(gemm, {"tile_f": cfg["tile_o"], "tile_x": cfg["tile_p"], "threads_f": cfg["threads_o"],
                                  "threads_x": cfg["threads_p"], "tile_rc": cfg["tile_k"]}, target_limits)
    metrics["work_reduction"] = workload.flops / gemm.flops
    return metrics


def workload_descriptors(workload) -> list[float]:
    wl = workload
    return [math.log2(wl.o), math.log2(max(1, wl.c // wl.groups)), math.log2(wl.oh * wl.ow),
            math.log2(wl.kh * wl.kw), float(max(wl.stride))]


def featurize(workload, configs: list[dict], target_limits: dict | None) -> np.ndarray:
    """One row per config: log metrics (METRIC_NAMES order), raw knob values, workload descriptors
    (FEATURE_NAMES gives the column names)."""
    described = workload_descriptors(workload)
    rows = []
    for config in configs:
        metrics = layout_metrics(workload, config, target_limits)
        cfg = {**KNOB_DEFAULTS, **LAYOUT_KNOB_DEFAULTS, **texture_knobs(workload, config)}
        rows.append([math.log(metrics[m]) for m in METRIC_NAMES]
                    + [float(cfg[k]) for k in (*KNOB_DEFAULTS, *LAYOUT_KNOB_DEFAULTS)] + described)
    return np.asarray(rows, dtype=np.float64).reshape(len(configs), len(FEATURE_NAMES))
