"""Adaptive weight layout on a model's Winograd-eligible convs: per layout task (3x3 stride-1 conv), tune with a
fixed budget and report the chosen layout, the best time, the best direct and best Winograd times, and what the
fixed rule of `--winograd auto` would pick (with its untuned time). Table on stdout, JSON with --json FILE.

    python tools/bench_layout.py --model resnet18 --trials 16 --json build/bench_layout.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def bench(model: str, target: str, trials: int, batch: int, device, records: Path) -> list[dict]:
    """Tune each layout task of `model` with `trials` measurements (one Tuner per task: equal budgets)."""
    from adreno.options import CompileOptions
    from adreno.records import Database
    from adreno.runners.local import IsolatedLocalRunner
    from adreno.tune.extract import extract_tasks
    from adreno.tune.layout_task import LAYOUT, layout_name
    from adreno.tune.builder import Builder
    from adreno.tune.session import open_tuner
    from adreno.compiler.winograd import select_tile

    tasks = [t for t in extract_tasks(model, CompileOptions(target=target, memory="buffer"), layouts=True)
             if t.family == LAYOUT]
    runner = IsolatedLocalRunner(device)
    builder = Builder(workdir=Path(tempfile.mkdtemp(prefix="bench-layout-")))
    database = Database(records)
    rows = []
    try:
        for task in tasks:
            started = time.perf_counter()
            tuner = open_tuner([task], database, target=target, device=device, runner=runner, batch=batch,
                               builder=builder)
            row = tuner.tune(trials).tasks[0]
            layouts = row["layouts"]
            winograd = [v["best_ms"] for k, v in layouts.items() if k != "direct" and v["best_ms"] is not None]
            rule = select_tile(task.workload)
            rows.append({"task": task.key, "calls": task.weight, "trials": row["trials"], "layout": row["layout"],
                         "best_ms": row["best_ms"], "direct_ms": layouts["direct"]["best_ms"],
                         "winograd_ms": min(winograd, default=None), "auto_rule": layout_name(rule),
                         "auto_default_ms": row["default_ms"], "layouts": layouts,
                         "default_config": task.default_config(),
                         "seconds": round(time.perf_counter() - started, 1)})
            print(_line(rows[-1]), file=sys.stderr, flush=True)
    finally:
        builder.close()
        runner.close()
    return rows


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _line(row: dict) -> str:
    shape = row["task"].split("|")[1] + " " + row["task"].split("|")[2]
    trials = "/".join(str(v["trials"]) for v in row["layouts"].values())
    return (f"{shape:<26} {row['calls']:>5} {trials:>8} {row['layout'] or '-':>12} {_fmt(row['best_ms']):>8} "
            f"{_fmt(row['direct_ms']):>9} {_fmt(row['winograd_ms']):>11} {row['auto_rule']:>12} "
            f"{_fmt(row['auto_default_ms']):>9}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--target", default="adreno-740")
    parser.add_argument("--trials", type=int, default=16, help="measurements per task (default 16)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", help="pocl (default), gpu, or an index")
    parser.add_argument("--records", help="records file (default: a temporary one)")
    parser.add_argument("--json", help="write the rows as JSON to this file")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, 2 trials per task")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.trials, args.batch = "tiny", 2, 2
    records = Path(args.records) if args.records else Path(tempfile.mkdtemp(prefix="bench-layout-")) / "records.jsonl"
    print(f"{'conv (input | output)':<26} {'calls':>5} {'trials':>8} {'chosen':>12} {'best ms':>8} "
          f"{'direct ms':>9} {'winograd ms':>11} {'auto rule':>12} {'auto ms':>9}\n"
          f"{'':<26} {'':>5} {'d/f2/f4':>8}", file=sys.stderr)
    started = time.perf_counter()
    rows = bench(args.model, args.target, args.trials, args.batch, args.device, records)
    print(f"{len(rows)} tasks, {args.trials} trials each, {time.perf_counter() - started:.0f} s; records {records}",
          file=sys.stderr)
    for row in rows:
        print(_line(row))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"model": args.model, "trials": args.trials, "batch": args.batch,
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
