#!/usr/bin/env python3
"""How well the analytical cost model (prior weights, nothing trained) ranks measured configs, per task.

    python tools/model_quality.py RECORDS.jsonl --model resnet18 [--memory buffer] [--target pocl-cpu] [--json OUT]
    python tools/model_quality.py --smoke [--json OUT]    # records of a 4-trial tune of tiny, made first

The tasks of MODEL (as `adreno tune MODEL --memory ...` extracts them; `--no-layouts` as tuned with it) give each
record's feature view; the scores are the model's on the device facts of `--target` (the device the records were
measured on: pocl-cpu for PoCL). Per task with at least two records: Pearson of score vs -log(seconds), Spearman,
top-1 and top-5 recall (`adreno.costmodel.base.quality_per_task`; failed candidates count as the task's
slowest x2), beside a random ranking's Pearson. A fresh PoCL batch to feed it:

    adreno tune resnet18 --memory buffer --no-layouts --target pocl-cpu --export-batch B --trials 16
    python -m adreno.runners.offline B --device pocl
    python tools/model_quality.py B/records.jsonl --model resnet18 --memory buffer --no-layouts
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="?")
    ap.add_argument("--model", help="the model whose tasks the records measured")
    ap.add_argument("--memory", default="texture", choices=["texture", "buffer"])
    ap.add_argument("--target", default="pocl-cpu", help="the measuring device's entry (its facts feed the model)")
    ap.add_argument("--no-layouts", action="store_true", help="the records' tasks were tuned with --no-layouts")
    ap.add_argument("--json", help="also write the table as JSON here")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke run: records of `adreno tune tiny --trials 4` "
                    "on PoCL, made first in a temporary directory")
    args = ap.parse_args(argv)
    if args.smoke:
        scratch = tempfile.TemporaryDirectory(prefix="model-quality-")  # removed when main returns
        args.records, args.model = str(Path(scratch.name) / "records.jsonl"), "tiny"
        subprocess.run([sys.executable, "-m", "adreno.cli", "tune", "tiny", "--trials", "4", "--memory", args.memory,
                        "--target", args.target, "--records", args.records, "--plot", str(Path(scratch.name) / "p.png"),
                        "-q"], check=True)
    elif args.records is None or args.model is None:
        ap.error("RECORDS and --model are required without --smoke")

    from adreno.options import CompileOptions
    from adreno.records import Database
    from adreno.targets.devices import get_device
    from adreno.costmodel import AnalyticalModel, RandomModel
    from adreno.costmodel.base import quality_per_task
    from adreno.tune.extract import extract_tasks
    from adreno.costmodel.features import device_limits

    database = Database(args.records)
    tasks = extract_tasks(args.model, CompileOptions(target=args.target, memory=args.memory),
                          layouts=not args.no_layouts)
    limits = device_limits(get_device(args.target))
    rows = {}
    for task in tasks:
        records = [r for r in database.query(task.key) if not r.infrastructure]
        if len(records) < 2:
            continue
        features = task.featurize([r.config for r in records], limits)
        seconds = [r.median for r in records]
        analytical = quality_per_task(AnalyticalModel().predict(features), seconds, [task.key] * len(records))
        random = quality_per_task(RandomModel().predict(features), seconds, [task.key] * len(records))
        rows[task.key] = {"name": task.func_name, "family": task.family, "ok": sum(r.ok for r in records),
                          **analytical[task.key], "random_pearson": random[task.key]["pearson"]}
    if not rows:
        print(f"{args.records}: no task of {args.model} has two records", file=sys.stderr)
        return 2
    means = {k: round(float(np.mean([r[k] for r in rows.values()])), 3)
             for k in ("pearson", "spearman", "top1", "top5", "random_pearson")}
    print(f"{'task':<28} {'family':<16} {'rows':>4} {'ok':>4} {'Pearson':>8} {'Spearman':>8} {'top-1':>6} "
          f"{'top-5':>6} {'random':>7}")
    for row in rows.values():
        print(f"{row['name'][:28]:<28} {row['family']:<16} {row['rows']:>4} {row['ok']:>4} {row['pearson']:>+8.3f} "
              f"{row['spearman']:>+8.3f} {row['top1']:>6.2f} {row['top5']:>6.2f} {row['random_pearson']:>+7.3f}")
    print(f"{'mean over ' + str(len(rows)) + ' tasks':<50} {means['pearson']:>+8.3f} {means['spearman']:>+8.3f} "
          f"{means['top1']:>6.2f} {means['top5']:>6.2f} {means['random_pearson']:>+7.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"records": args.records, "model": args.model, "target": args.target,
                                               "tasks": rows, "mean": means}, indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
