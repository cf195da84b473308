#!/usr/bin/env python3
"""End to end: `adreno compile --orchestrate` next to the default compiles, side by side in one run.

    python tools/bench_orchestrate.py [mobilevit_xs mobilenetv3_small ...] [--records R] [--max-size 3]
        [--repeat 30] [--rounds 5] [--device pocl] [--json out.json] [--smoke]

Per model, five artifacts, each compiled by the CLI as a user would (host native):
- `default`: `adreno compile MODEL` (texture memory, Winograd auto: what a user gets);
- `buffer`: `--memory buffer` (Winograd auto);
- `orchestrated_buffer`: `--orchestrate --memory buffer --max-size N --records R` (its candidates measured on
  --device, kept in R): compare it with `buffer`;
- `orchestrated_texture`: the same with `--memory texture` (candidates measured reading images): compare it with
  `default`;
- `orchestrated`: `--orchestrate` without `--memory`, what a user gets: both memories' choices (their costs already
  in R, so nothing is measured again) and the one predicted faster compiled: compare it with `default`.
The column "vs its memory" compares each artifact with the default compile in the memory it was compiled in.

Each is run with `adreno run --check` (outputs against onnxruntime; a timing counts only after its check passed),
in `--rounds` interleaved rounds of `--repeat` runs, and the median of the rounds' median wall times is reported,
with the kernels' device time; the JSON keeps every round's median (`round_wall_ms`), since on a busy 2-core machine
one slow spell can move a 2 ms model's median of three rounds by a quarter (session 19: docs/orchestrate.md).
The orchestrated row also shows its predicted wall time (the manifest's `predicted_run_s`: the device's per-run
cost plus the chosen kernels' measured costs), the candidates, the measurements made by this run and the BLP's
solve time.

Noise is part of the result. Each round runs every variant once, so a round gives paired ratios against the
default compile and against the default in the row's memory; both ratio columns are the median of a row's
per-round ratios, not the ratio of the medians (on a busy machine the two differ: session 26, mobilenetv3_small
`orchestrated` 2.53x against 2.04x). "vs its memory" also shows the rounds' lowest and highest ratio and a
verdict: `faster` or `slower` only when every round agrees, `level` otherwise (within this machine's noise). The
prediction's error is given against the median wall time and as the rounds' range.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ADRENO = [sys.executable, "-m", "adreno.cli"]
MODELS = ["mobilevit_xs", "mobilenetv3_small", "mobilenetv2", "resnet18"]
VARIANTS = ("default", "buffer", "orchestrated_buffer", "orchestrated_texture", "orchestrated")


def compile_variant(model: str, variant: str, out: Path, args) -> dict:
    orchestrate = ["--orchestrate", "--max-size", str(args.max_size), "--records", args.records,
                   "--measure-device", args.device]
    flags = {"default": [], "buffer": ["--memory", "buffer"],
             "orchestrated_buffer": [*orchestrate, "--memory", "buffer"],
             "orchestrated_texture": [*orchestrate, "--memory", "texture"], "orchestrated": orchestrate}[variant]
    started = time.perf_counter()
    subprocess.run([*ADRENO, "compile", model, "-o", str(out), "--host", "native", "-q", *flags], check=True,
                   stdout=subprocess.DEVNULL)
    manifest = json.loads((out / "manifest.json").read_text())
    return {"variant": variant, "compile_s": round(time.perf_counter() - started, 1), "kernels": manifest["kernels"],
            "memory": manifest["memory"], "orchestration": manifest.get("orchestration")}


def run_once(artifact: Path, args) -> dict:
    done = subprocess.run([*ADRENO, "run", str(artifact), "--check", "--repeat", str(args.repeat), "--device",
                           args.device, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{artifact}: adreno run --check failed (exit {done.returncode}): "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    result = json.loads(done.stdout)
    return {"wall_ms": result["median_ms"], "kernel_ms": result["device_median_ms"],
            "max_error": max(o["max_abs_error"] for o in result["check"]["outputs"])}


def bench_model(model: str, work: Path, args) -> list[dict]:
    rows = [compile_variant(model, v, work / f"{model}-{v}", args) for v in args.variants]
    rounds = {row["variant"]: [] for row in rows}
    for _ in range(args.rounds):  # interleaved, so a slow spell of the machine falls on every variant
        for row in rows:
            rounds[row["variant"]].append(run_once(work / f"{model}-{row['variant']}", args))
    for row in rows:
        runs = rounds[row["variant"]]
        row.update(model=model, wall_ms=statistics.median(r["wall_ms"] for r in runs),
                   round_wall_ms=[r["wall_ms"] for r in runs],
                   kernel_ms=statistics.median(r["kernel_ms"] for r in runs),
                   max_error=max(r["max_error"] for r in runs))
    return rows


def paired(row: dict, baseline: dict) -> dict:
    """`baseline`'s wall time over `row`'s, round by round (the rounds are interleaved, so a round's pair shared
    the machine's state): the median, the range and the verdict."""
    ratios = [b / r for b, r in zip(baseline["round_wall_ms"], row["round_wall_ms"])]
    verdict = "faster" if min(ratios) > 1 else "slower" if max(ratios) < 1 else "level"
    return {"median": statistics.median(ratios), "low": min(ratios), "high": max(ratios),
            "verdict": "" if row is baseline else verdict}


def prediction_error(row: dict) -> dict | None:
    """The predicted wall time's error against the median wall time and each round's (fractions)."""
    predicted = (row["orchestration"] or {}).get("predicted_run_s")
    if predicted is None:
        return None
    errors = [predicted * 1e3 / w - 1 for w in row["round_wall_ms"]]
    return {"predicted_ms": predicted * 1e3, "error": predicted * 1e3 / row["wall_ms"] - 1, "low": min(errors),
            "high": max(errors)}


def annotate(rows: list[dict]) -> None:
    """Each row's paired ratios against the default compile and against the default in its memory, and its
    prediction's error."""
    by_model = {}
    for row in rows:
        by_model.setdefault(row["model"], {})[row["variant"]] = row
    for variants in by_model.values():
        for row in variants.values():
            row["vs_default"] = paired(row, variants["default"])
            row["vs_memory"] = paired(row, variants["buffer" if row["memory"] == "buffer" else "default"])
            row["prediction"] = prediction_error(row)


def ratio_cell(r: dict) -> str:
    return f"{r['median']:.2f}x ({r['low']:.2f}-{r['high']:.2f}){' ' + r['verdict'] if r['verdict'] else ''}"


def predicted_cell(p: dict | None) -> str:
    if p is None:
        return ""
    return f"{p['predicted_ms']:.3f} ({p['error']:+.0%}; {p['low']:+.0%} to {p['high']:+.0%})"


def table(rows: list[dict]) -> str:
    lines = ["| model | variant | memory | kernels | wall ms (rounds) | kernel ms | vs default | vs its memory "
             "(rounds) | predicted ms (error; rounds) | candidates | measured now | solve s | compile s |",
             "|" + "---|" * 13]
    for row in rows:
        o, walls = row["orchestration"] or {}, row["round_wall_ms"]
        lines.append(
            f"| {row['model']} | {row['variant']} | {row['memory']} | {row['kernels']} | {row['wall_ms']:.3f} "
            f"({min(walls):.3f}-{max(walls):.3f}) | {row['kernel_ms']:.3f} | {row['vs_default']['median']:.2f}x | "
            f"{ratio_cell(row['vs_memory'])} | {predicted_cell(row['prediction'])} | {o.get('candidates', '')} | "
            f"{o.get('measured_now', '')} | {o.get('solve_s', '')} | {row['compile_s']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=MODELS[:2], help=f"zoo models (default {MODELS[:2]})")
    parser.add_argument("--records", help="records file of the candidates' costs (default: a temporary one)")
    parser.add_argument("--max-size", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="pocl")
    parser.add_argument("--json", help="write the rows as JSON here")
    parser.add_argument("--variants", type=lambda text: text.split(","), default=list(VARIANTS),
                        help=f"comma-separated, of {','.join(VARIANTS)} (default all; default and buffer are the "
                        "baselines the ratios need)")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny's default, buffer and "
                        "orchestrated_buffer compiles, single-primitive candidates, one round of 2 runs")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.max_size, args.repeat, args.rounds = ["tiny"], 1, 2, 1
        args.variants = ["default", "buffer", "orchestrated_buffer"]
    if not {"default", "buffer"} <= set(args.variants) <= set(VARIANTS):
        parser.error(f"--variants: of {', '.join(VARIANTS)}, with default and buffer")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-orchestrate-") as scratch:
        args.records = args.records or str(Path(scratch) / "records.jsonl")
        for model in args.models:
            print(f"{model} ...", file=sys.stderr, flush=True)
            rows += bench_model(model, Path(scratch), args)
    annotate(rows)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
