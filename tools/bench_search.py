#!/usr/bin/env python3
"""Search benchmark: how fast each search strategy / cost model finds a good schedule, on real measurements.

On the `--tasks` heaviest distinct conv tasks of `--model` (extract_tasks orders them by calls x flops), with the
same trial budget per task for every arm, each arm tuned through `adreno.tune.tuner.Tuner` one task at a time on
a fresh records file, every candidate built by one shared `Builder`, measured by `runners.local.LocalRunner` on
the chosen OpenCL device (one shared `ProgramCache`) and its output checked against the CPU reference first:

  search      genetic+learned, genetic+learned-regression, genetic+analytical, random, grid: best latency
              against trials, trials to reach 95% of the best found by ANY arm on that task (latency <= best /
              0.95), wall time split into build / run / model (+ other: the task's CPU reference, bookkeeping)
  metaschedule  TVM MetaSchedule's GPU design space (CUDA sketch rules on our OpenCL target), sampled by its
              replay-func strategy, every candidate lowered and measured by the same pipeline as ours (see
              adreno/tune/metaschedule.py for why its evolutionary search cannot run on the 0.27 wheel);
              `--no-metaschedule` skips it
  quality     all records measured in the run (every arm), de-duplicated per (task, config), split 70/30 per
              task (seeded); LearnedModel and AnalyticalModel trained on the 70%, `ranking_quality` on the 30%
              (Pearson, Spearman, top-1, top-5) next to RandomModel and the untrained analytical prior
  transfer    with `--transfer-from DIR` ACROSS DEVICES: a TransferModel pre-trained on the records another
              device measured for the same tasks (DIR: that device's bench_search records, or any records file) tunes
              every task on this device with the genetic strategy, compared with genetic+learned (a fresh
              LearnedModel) of this run, same seed and budget; without it ACROSS WORKLOADS on this device: pre-trained
              on the records of tasks A (all benchmarked tasks but the last, every arm), tuning task B (the last)

Goals checked (the issue's): genetic+learned reaches the 95% target in at most half the trials random needs; the
learned model's held-out Pearson r >= 0.88 (Woodpecker's figure); transfer cuts trials-to-target by >= 2x.

    python tools/bench_search.py [--device pocl] [--model resnet18] [--tasks 3] [--trials 48] [--batch 8]
                                 [--seeds 1] [--json bench_search.json] [--records-dir DIR] [--run-timeout 10]
                                 [--arms genetic+learned,random] [--transfer-from DIR] [--smoke]

A second device on one machine: PoCL's `basic` device (`POCL_DEVICES=basic`: one compute unit, work-groups run
one after another) has its own fingerprint and its own best configs; `--transfer-from` the records of a run on the
default `pthread` device measures transfer between the two.

Writes the JSON (everything, curves included), a PNG of best latency against trials next to it, and the records
files under --records-dir (default: `<json stem>_records/`, emptied first so every arm starts fresh).

Run time: measurement dominates. On PoCL a candidate costs its TVM lowering (0.1-5 s, two build processes) plus
PoCL's program build and its first-launch JIT of the work-group function (0.1 s to over 30 s for heavily unrolled
tiles), plus the runs; a config's second measurement is cheap (ProgramCache + PoCL's kernel cache). So by default
each candidate's measurement is capped at `--run-timeout` seconds: the LocalRunner then lives in a child process,
which is killed and restarted on a timeout, and the candidate is recorded as failed with stage "timeout" (as
TVM's runners do); `--run-timeout 0` measures in-process without a cap, exactly as `adreno tune` does.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np

# label -> (strategy, cost model). The random and grid strategies never consult the model; RandomModel costs
# nothing to "train", so their model time stays ~0.
ARMS: dict[str, tuple[str, str]] = {
    "genetic+learned": ("genetic", "learned"),
    "genetic+learned-regression": ("genetic", "learned-regression"),
    "genetic+analytical": ("genetic", "analytical"),
    "random": ("random", "random"),
    "grid": ("grid", "random"),
}
TARGET_FRACTION = 0.95
METASCHEDULE_NOTE = ("replay-func over MetaSchedule's GPU design space, no cost model: its evolutionary and "
                     "replay-trace strategies segfault on the apache-tvm 0.27 wheel (PrimFunc JSON serialisation)")


# ---------------------------------------------------------------------------------------------- helpers


def finite(x):
    return x if x is not None and isinstance(x, (int, float)) and math.isfinite(x) else None


def curve(history) -> list[tuple[int, float | None]]:
    """(trials so far, best seconds so far; None before the first success)."""
    return [(int(t), finite(float(b))) for t, b in history]


def trials_to_target(history, target_seconds: float) -> int | None:
    for t, b in history:
        if b is not None and b <= target_seconds * (1 + 1e-12):
            return int(t)
    return None


def fmt_tt(value, budget) -> str:
    return str(value) if value is not None else f">{budget}"


def censored(value, budget) -> int:
    """Trials-to-target for sums/ratios: not reached counts as budget + 1 (a lower bound)."""
    return value if value is not None else budget + 1


def record_stats(db) -> dict:
    stats = {"ok": 0, "failed": 0, "timeout": 0, "wrong_output": 0}
    for r in db.records:
        if r.ok:
            stats["ok"] += 1
        else:
            stats["failed"] += 1
            stats["timeout"] += r.stage == "timeout"
            stats["wrong_output"] += r.stage == "check"
    return stats


def print_table(title: str, header: list[str], rows: list[list], widths: list[int] | None = None) -> None:
    widths = widths or [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print(f"\n== {title}")
    print("  ".join(f"{h:>{w}}" if i else f"{h:<{w}}" for i, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        print("  ".join(f"{str(c):>{w}}" if i else f"{str(c):<{w}}" for i, (c, w) in enumerate(zip(row, widths))))


# ------------------------------------------------------------------------------------------------- main


def tune_arm(ctx, label: str, task, task_index: int, seed: int, strategy: str, model) -> dict:
    from adreno.tune.session import open_tuner

    path = ctx["records_dir"] / f"{label.replace('+', '_')}-t{task_index}-s{seed}.jsonl"
    path.unlink(missing_ok=True)
    started = time.perf_counter()

    def progress(spent, total, text):
        print(f"    [{label} t{task_index} s{seed}] {spent}/{total} {text} ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr, flush=True)

    tuner = open_tuner([task], path, target=ctx["args"].target, device=ctx["args"].device, runner=ctx["runner"],
                       strategy=strategy, model=model, batch=ctx["args"].batch, builder=ctx["builder"], seed=seed,
                       repeat=ctx["args"].repeat, progress=progress)
    db = tuner.database
    report = tuner.tune(ctx["args"].trials)  # the shared builder is closed at the end, not per tuner
    wall = time.perf_counter() - started
    row = report.tasks[0]
    timing = {k: round(v, 2) for k, v in tuner.timing.items()}
    timing["other"] = round(wall - sum(tuner.timing.values()), 2)
    timing["total"] = round(wall, 2)
    return {"arm": label, "strategy": strategy, "model": model if isinstance(model, str) else type(model).__name__,
            "task_index": task_index, "task": task.func_name, "key": task.key, "seed": seed,
            "trials": row["trials"], "best_ms": row["best_ms"], "default_ms": row["default_ms"],
            "curve": curve(row["history"]), "seconds": timing, "records": str(path), **record_stats(db)}


def metaschedule_arm(ctx, task, task_index: int, seed: int) -> dict:
    """MetaSchedule's candidates for `task`, measured like ours; a run dict shaped like `tune_arm`'s (no records
    file: its candidates are traces, not our knobs)."""
    from adreno.tune import metaschedule

    started = time.perf_counter()
    workdir = ctx["records_dir"] / "build" / f"metaschedule-t{task_index}-s{seed}"
    workdir.mkdir(parents=True, exist_ok=True)

    def progress(spent, batch):  # noqa: ARG001 - metaschedule.tune's progress(spent, batch) callback
        print(f"    [metaschedule t{task_index} s{seed}] {spent}/{ctx['args'].trials} "
              f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)

    trials = metaschedule.tune(task, ctx["runner"], ctx["args"].trials, batch=ctx["args"].batch, seed=seed,
                               repeat=ctx["args"].repeat, workdir=str(workdir), progress=progress)
    best, history = math.inf, []
    for t in trials:
        best = min(best, float(np.median(t.seconds))) if t.ok else best
        history.append((t.trial, best))
    wall = time.perf_counter() - started
    build = sum(t.build_seconds for t in trials)
    failed = [t for t in trials if not t.ok]
    return {"arm": "metaschedule", "strategy": "replay-func", "model": "none", "task_index": task_index,
            "task": task.func_name, "key": task.key, "seed": seed, "trials": len(trials),
            "best_ms": best * 1e3 if math.isfinite(best) else None, "default_ms": None, "curve": curve(history),
            "seconds": {"build": round(build, 2), "run": round(wall - build, 2), "model": 0.0, "other": 0.0,
                        "total": round(wall, 2)}, "records": None, "ok": len(trials) - len(failed),
            "failed": len(failed), "timeout": sum(t.stage == "timeout" for t in failed),
            "wrong_output": sum(t.stage == "check" for t in failed)}


def load_records(paths, fingerprint):
    from adreno.records import Database

    out = []
    for p in filter(None, paths):  # None: an arm without a records file (metaschedule)
        out += [r for r in Database(p).query(device=fingerprint)]
    return out


def dedupe(records) -> dict:
    """(workload, config json) -> (config, median seconds over repeats of that config; inf if none succeeded)."""
    by = {}
    for r in records:
        key = (r.workload, json.dumps(r.config, sort_keys=True))
        by.setdefault(key, (r.config, []))[1].append(r.median)
    out = {}
    for key, (config, meds) in by.items():
        ok = [m for m in meds if math.isfinite(m)]
        out[key] = (config, float(np.median(ok)) if ok else math.inf)
    return out


def noise_section(tasks, runs, fingerprint) -> list[dict]:
    """Measurement noise: configs measured by several arms (each arm measures the task's default config first),
    and the spread (max / min) of their medians. A spread well over 1/0.95 means the 95% target is partly noise."""
    rows = []
    for task in tasks:
        by = {}
        for run in runs:
            if run["key"] != task.key:
                continue
            for r in load_records([run["records"]], fingerprint):
                if r.ok:
                    by.setdefault(json.dumps(r.config, sort_keys=True), []).append(r.median)
        repeated = {c: m for c, m in by.items() if len(m) >= 2}
        spreads = [max(m) / min(m) for m in repeated.values()]
        default = by.get(json.dumps(task.default_config(), sort_keys=True), [])
        rows.append({"task": task.func_name, "key": task.key, "repeated_configs": len(repeated),
                     "median_spread": round(float(np.median(spreads)), 3) if spreads else None,
                     "max_spread": round(max(spreads), 3) if spreads else None,
                     "default_ms": [round(m * 1e3, 3) for m in default]})
    return rows


def transfer_runs(ctx, tasks, seeds, runs, started) -> dict:
    """The genetic+transfer runs (see the module doc): across devices from `--transfer-from` (every task), else
    across workloads (the last task, from this run's records of the others)."""
    from adreno.records import Database
    from adreno.costmodel import TransferModel

    args, fingerprint = ctx["args"], ctx["fingerprint"]
    if args.transfer_from:
        source = Path(args.transfer_from)
        paths = sorted(source.glob("*.jsonl")) if source.is_dir() else [source]
        pool = [r for p in paths for r in Database(p).records if r.device != fingerprint]
        devices = sorted({r.device for r in pool})
        if not pool:
            raise SystemExit(f"--transfer-from {source}: no records of another device than {fingerprint}")
        out = {"kind": f"across devices: source {', '.join(devices)}", "source_devices": devices,
               "targets": list(range(len(tasks))), "runs": []}
        source_tasks = tasks
    else:
        pool, out = None, {"source_tasks": [t.func_name for t in tasks[:-1]], "targets": [len(tasks) - 1], "runs": []}
        source_tasks = tasks[:-1]
    for seed in seeds:
        records = pool if pool is not None else load_records(
            [r["records"] for r in runs if r["seed"] == seed and r["task_index"] < len(tasks) - 1], fingerprint)
        x, s, g = [], [], []
        for t in source_tasks:
            mine = [r for r in records if r.workload == t.key]
            if mine:
                x.append(t.featurize([r.config for r in mine], ctx["limits"]))
                s += [r.median for r in mine]
                g += [t.key] * len(mine)
        if not x:
            raise SystemExit("transfer: the source records hold none of the benchmarked tasks")
        source = TransferModel.from_records(np.vstack(x), np.array(s), np.array(g, dtype=object)).source
        for bi in out["targets"]:
            model = TransferModel(source)  # a fresh model per target task, from the one pre-trained booster
            print(f"-- genetic+transfer on t{bi} (seed {seed}; source: {len(s)} records of {len(x)} tasks) "
                  f"[{time.perf_counter() - started:.0f} s]", flush=True)
            run = tune_arm(ctx, "genetic+transfer", tasks[bi], bi, seed, "genetic", model)
            run["source_records"] = len(s)
            out["runs"].append(run)
    return out


QUALITY_MODELS = ("learned", "learned-regression", "analytical", "analytical prior (untrained)", "random")


def quality_section(ctx, tasks, record_paths, splits: int = 5) -> dict:
    """Cost models trained on 70% of the distinct (task, config) rows of every task and scored on the other 30%,
    averaged over `splits` random splits (seeds 0..splits-1): one split moves Pearson by several hundredths."""
    from adreno.costmodel import AnalyticalModel, RandomModel, make_model, ranking_quality

    rows = dedupe(load_records(record_paths, ctx["fingerprint"]))
    per_task = {}
    scores = {name: {"ok_only": [], "with_failures": []} for name in QUALITY_MODELS}
    for seed in range(splits):
        rng = np.random.default_rng(seed)
        split = {"train": ([], [], []), "test": ([], [], [])}
        for task in tasks:
            items = [(cfg, s) for (wl, _), (cfg, s) in rows.items() if wl == task.key]
            if not items:
                continue
            order = rng.permutation(len(items))
            n_train = int(round(0.7 * len(items)))
            per_task[task.func_name] = {"distinct_configs": len(items), "train": n_train,
                                        "test": len(items) - n_train, "ok": sum(math.isfinite(s) for _, s in items)}
            for part, idx in (("train", order[:n_train]), ("test", order[n_train:])):
                if len(idx) == 0:
                    continue
                split[part][0].append(task.featurize([items[i][0] for i in idx], ctx["limits"]))
                split[part][1].extend(items[i][1] for i in idx)
                split[part][2].extend([task.key] * len(idx))
        if not split["train"][0] or not split["test"][0]:
            return {"error": "too few records", "per_task": per_task}
        xtr, str_, gtr = np.vstack(split["train"][0]), np.array(split["train"][1]), np.array(split["train"][2], object)
        xte, ste, gte = np.vstack(split["test"][0]), np.array(split["test"][1]), np.array(split["test"][2], object)
        ok = np.isfinite(ste)
        for name in QUALITY_MODELS:
            model = (AnalyticalModel() if name.startswith("analytical prior") else RandomModel(seed)
                     if name == "random" else make_model(name))
            if not name.startswith("analytical prior") and name != "random":
                model.fit(xtr, str_, gtr)
            predicted = model.predict(xte)
            scores[name]["ok_only"].append(ranking_quality(predicted[ok], ste[ok], gte[ok]))
            scores[name]["with_failures"].append(ranking_quality(predicted, ste, gte))
    result = {"per_task": per_task, "splits": splits, "train_rows": len(str_), "test_rows": len(ste),
              "test_ok_rows": int(ok.sum()), "models": {}}
    for name, kinds in scores.items():
        result["models"][name] = {kind: {**{k: float(np.mean([q[k] for q in qs]))
                                            for k in ("pearson", "spearman", "top1", "top5")},
                                         "pearson_min": float(min(q["pearson"] for q in qs)),
                                         "pearson_max": float(max(q["pearson"] for q in qs)),
                                         "groups": qs[0]["groups"]}
                                  for kind, qs in kinds.items()}
    return result


def plot(results: dict, path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = results["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.4), squeeze=False)
    colors = {"genetic+learned": "C0", "genetic+analytical": "C1", "random": "C2", "grid": "C3",
              "genetic+transfer": "C4", "metaschedule": "C5", "genetic+learned-regression": "C6"}
    for ax, task in zip(axes[0], tasks):
        runs = [r for r in results["search"]["runs"] + results["transfer"].get("runs", [])
                if r["task_index"] == task["index"]]
        for i, run in enumerate(runs):
            points = [(t, b * 1e3) for t, b in run["curve"] if b is not None]  # curves are in seconds
            if points:
                ax.step(*zip(*points), where="post", color=colors.get(run["arm"], "k"), alpha=0.9,
                        linestyle="--" if run["arm"] == "genetic+transfer" else "-",
                        label=run["arm"] if run["seed"] == results["seeds"][0] else None)
        if task.get("best_any_ms"):
            ax.axhline(task["best_any_ms"] / TARGET_FRACTION, color="grey", linewidth=0.8, linestyle=":",
                       label="95% of best")
        ax.set_yscale("log")
        ax.set_xlabel("trials")
        ax.set_ylabel("best latency so far (ms)")
        ax.set_title(f"t{task['index']}: {task['key'].split('|', 1)[1][:38]}", fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle(f"bench_search: {results['model']} on {results['device']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="pocl")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--target", default="adreno-740")
    p.add_argument("--tasks", type=int, default=3, help="heaviest distinct conv tasks to tune (default 3)")
    p.add_argument("--trials", type=int, default=48, help="trials per task and arm (default 48)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3, help="timed runs per candidate (default 3)")
    p.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1, every section repeated per seed")
    p.add_argument("--json", default="bench_search.json")
    p.add_argument("--records-dir", help="records files (default: <json stem>_records next to the JSON)")
    p.add_argument("--run-timeout", type=float, default=10.0,
                   help="cap on one candidate's measurement in seconds (0: no cap, in-process LocalRunner)")
    p.add_argument("--no-transfer", action="store_true")
    p.add_argument("--transfer-from", metavar="DIR",
                   help="records measured on another device (a bench_search records directory or a records file): "
                   "transfer across devices instead of across workloads")
    p.add_argument("--arms", help=f"comma-separated subset of the arms ({', '.join(ARMS)}); default all")
    p.add_argument("--no-metaschedule", action="store_true", help="skip the MetaSchedule arm")
    p.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny's heaviest conv task, 2 trials of "
                   "genetic+learned and random measured in-process, no MetaSchedule and no transfer")
    args = p.parse_args(argv)
    if args.smoke:
        args.model, args.tasks, args.trials, args.batch, args.repeat, args.run_timeout = "tiny", 1, 2, 2, 1, 0
        args.arms, args.no_metaschedule, args.no_transfer = "genetic+learned,random", True, True
    arms = {label: ARMS[label] for label in (args.arms.split(",") if args.arms else ARMS)
            if label in ARMS or p.error(f"--arms: unknown arm {label!r}; arms: {', '.join(ARMS)}")}

    from adreno.cache import ProgramCache
    from adreno.opencl.device import DeviceIdentity, select_device
    from adreno.options import CompileOptions
    from adreno.runners.local import IsolatedLocalRunner, LocalRunner
    from adreno.tune.extract import extract_tasks
    from adreno.tune.builder import Builder
    from adreno.tune.tuner import target_limits

    out_json = Path(args.json)
    records_dir = Path(args.records_dir) if args.records_dir else out_json.with_name(out_json.stem + "_records")
    if records_dir.exists():
        shutil.rmtree(records_dir)
    records_dir.mkdir(parents=True)
    device = select_device(args.device)
    fingerprint = DeviceIdentity.from_cl_device(device).fingerprint
    limits = target_limits(args.target, device)
    all_tasks = extract_tasks(args.model, CompileOptions(target=args.target, memory="buffer"))
    tasks = [t for t in all_tasks if t.family.startswith("conv2d")][: args.tasks]
    seeds = list(range(args.seeds))
    print(f"device: {fingerprint}\nmodel {args.model}: {len(all_tasks)} tasks; benchmarking {len(tasks)}, "
          f"{args.trials} trials per task and arm, batch {args.batch}, repeat {args.repeat}, seeds {seeds}, "
          f"run timeout {args.run_timeout or 'none'}", flush=True)
    for i, t in enumerate(tasks):
        print(f"  t{i}: {t.key} (x{t.weight}, {t.flops / 1e6:.0f} MFLOP)")

    runner = (IsolatedLocalRunner(args.device, timeout_s=args.run_timeout) if args.run_timeout > 0
              else LocalRunner(device, cache=ProgramCache()))
    builder = Builder(workdir=records_dir / "build")
    ctx = {"args": args, "runner": runner, "builder": builder, "fingerprint": fingerprint, "limits": limits,
           "records_dir": records_dir}
    results = {"model": args.model, "target": args.target, "device": fingerprint, "trials": args.trials,
               "batch": args.batch, "repeat": args.repeat, "seeds": seeds, "run_timeout_s": args.run_timeout,
               "target_fraction": TARGET_FRACTION,
               "tasks": [{"index": i, "task": t.func_name, "key": t.key, "family": t.family, "weight": t.weight,
                          "mflop": round(t.flops / 1e6, 1)} for i, t in enumerate(tasks)],
               "search": {"runs": []},
               "metaschedule": {"driven": not args.no_metaschedule, "note": METASCHEDULE_NOTE},
               "transfer": {"kind": "across workloads on the same device"}}
    started = time.perf_counter()
    try:
        for seed in seeds:
            for ti, task in enumerate(tasks):
                for label, (strategy, model) in arms.items():
                    print(f"-- {label} on t{ti} (seed {seed}) [{time.perf_counter() - started:.0f} s]", flush=True)
                    results["search"]["runs"].append(tune_arm(ctx, label, task, ti, seed, strategy, model))
                if not args.no_metaschedule:
                    print(f"-- metaschedule on t{ti} (seed {seed}) [{time.perf_counter() - started:.0f} s]", flush=True)
                    results["search"]["runs"].append(metaschedule_arm(ctx, task, ti, seed))
        if not args.no_transfer and (args.transfer_from or len(tasks) >= 2):
            results["transfer"].update(transfer_runs(ctx, tasks, seeds, results["search"]["runs"], started))
    finally:
        runner.close()
        builder.close()
        shutil.rmtree(records_dir / "build", ignore_errors=True)
    results["wall_seconds"] = round(time.perf_counter() - started, 1)
    if isinstance(runner, IsolatedLocalRunner):
        results["runner"] = {"kind": "LocalRunner in a child process, capped", "process_starts": runner.restarts}
    else:
        results["runner"] = {"kind": "LocalRunner in-process"}

    # ---- targets and trials-to-target (the best over every arm, transfer included, per task and seed)
    all_runs = results["search"]["runs"] + results["transfer"].get("runs", [])
    for task in results["tasks"]:
        bests = [r["best_ms"] for r in all_runs if r["task_index"] == task["index"] and r["best_ms"]]
        task["best_any_ms"] = min(bests) if bests else None
    for run in all_runs:
        best = results["tasks"][run["task_index"]]["best_any_ms"]
        run["target_ms"] = best / TARGET_FRACTION if best else None
        run["trials_to_target"] = (trials_to_target([(t, b * 1e3 if b else None) for t, b in run["curve"]],
                                                    run["target_ms"]) if best else None)

    budget = args.trials
    labels = list(arms) + ([] if args.no_metaschedule else ["metaschedule"])
    runs = results["search"]["runs"]

    def pick(label, ti, seed, pool=None):
        return next(r for r in (pool or runs) if r["arm"] == label and r["task_index"] == ti and r["seed"] == seed)

    # ---- section: search
    header = ["task", "best any ms"] + [f"{lab} ms" for lab in labels] + [f"{lab} t95" for lab in labels]
    rows = []
    for task in results["tasks"]:
        for seed in seeds:
            cells = [f"t{task['index']} s{seed}", f"{task['best_any_ms']:.3f}" if task["best_any_ms"] else "-"]
            cells += [f"{pick(lab, task['index'], seed)['best_ms']:.3f}" if pick(lab, task["index"], seed)["best_ms"]
                      else "-" for lab in labels]
            cells += [fmt_tt(pick(lab, task["index"], seed)["trials_to_target"], budget) for lab in labels]
            rows.append(cells)
    print_table(f"best latency (ms) and trials to reach 95% of the best of any arm (t95), budget {budget}/task",
                header, rows)
    summary = {}
    for label in labels:
        mine = [r for r in runs if r["arm"] == label]
        secs = {k: round(sum(r["seconds"][k] for r in mine), 1) for k in ("build", "run", "model", "other", "total")}
        summary[label] = {"trials": sum(r["trials"] for r in mine),
                          "reached": sum(r["trials_to_target"] is not None for r in mine), "runs": len(mine),
                          "t95_sum_censored": sum(censored(r["trials_to_target"], budget) for r in mine),
                          "seconds": secs, **{k: sum(r[k] for r in mine) for k in ("ok", "failed", "timeout",
                                                                                  "wrong_output")}}
    results["search"]["summary"] = summary
    print_table("search wall time (s) per arm, all tasks and seeds; failed = build/run/check/timeout",
                ["arm", "trials", "ok", "failed", "timeout", "build", "run", "model", "other", "total",
                 "reached", "sum t95"],
                [[arm, s["trials"], s["ok"], s["failed"], s["timeout"], s["seconds"]["build"], s["seconds"]["run"],
                  s["seconds"]["model"], s["seconds"]["other"], s["seconds"]["total"],
                  f"{s['reached']}/{s['runs']}", s["t95_sum_censored"]] for arm, s in summary.items()])
    print(f"(sum t95 counts an arm that never reached the target as {budget + 1}: a lower bound)")
    print(f"\n== TVM MetaSchedule: {METASCHEDULE_NOTE if not args.no_metaschedule else 'skipped'}")

    # goal 1: genetic+learned vs random
    if {"genetic+learned", "random"} <= set(arms):
        gl, rnd = summary["genetic+learned"]["t95_sum_censored"], summary["random"]["t95_sum_censored"]
        per_task_ratio = [censored(pick("genetic+learned", t["index"], s)["trials_to_target"], budget)
                          / censored(pick("random", t["index"], s)["trials_to_target"], budget)
                          for t in results["tasks"] for s in seeds]
        random_censored = summary["random"]["reached"] < summary["random"]["runs"]
        goal1 = {"genetic_learned_t95_sum": gl, "random_t95_sum": rnd, "ratio": round(gl / rnd, 3),
                 "per_task_ratio": [round(x, 3) for x in per_task_ratio], "met": gl <= 0.5 * rnd,
                 "random_censored": random_censored}
    else:
        goal1 = {"met": None, "reason": "needs the genetic+learned and random arms"}

    # ---- section: measurement noise
    noise = noise_section(tasks, all_runs, fingerprint)
    results["noise"] = noise
    print_table("measurement noise: configs measured by several arms (same device, different moments)",
                ["task", "repeated configs", "median max/min", "worst max/min", "default config ms (per arm)"],
                [[f"t{i}", n["repeated_configs"], n["median_spread"], n["max_spread"],
                  " ".join(f"{m:.2f}" for m in n["default_ms"])] for i, n in enumerate(noise)])

    # ---- section: cost-model quality
    record_paths = [r["records"] for r in all_runs]
    quality = quality_section(ctx, tasks, record_paths)
    results["quality"] = quality
    if "models" in quality:
        qrows = []
        for name, q in quality["models"].items():
            for kind in ("ok_only", "with_failures"):
                v = q[kind]
                qrows.append([f"{name} [{kind}]", f"{v['pearson']:.3f}",
                              f"{v['pearson_min']:.3f}-{v['pearson_max']:.3f}", f"{v['spearman']:.3f}",
                              f"{v['top1']:.3f}", f"{v['top5']:.3f}", v["groups"]])
        print_table(f"cost-model quality on held-out records (30% per task, mean of {quality['splits']} random "
                    f"splits): train {quality['train_rows']}, test {quality['test_rows']} ({quality['test_ok_rows']} "
                    "ok) distinct (task, config) rows", ["model", "pearson", "range", "spearman", "top1", "top5",
                                                         "tasks"], qrows)
        print("(ok_only: successful held-out records; with_failures: failed ones count as the task's slowest x2)")
        pearson = quality["models"]["learned"]["ok_only"]["pearson"]
        regression = quality["models"]["learned-regression"]["ok_only"]["pearson"]
        goal2 = {"learned_pearson_ok_only": round(pearson, 3),
                 "learned_pearson_with_failures": round(quality["models"]["learned"]["with_failures"]["pearson"], 3),
                 "learned_regression_pearson_ok_only": round(regression, 3),
                 "met": pearson >= 0.88, "met_by_learned_regression": regression >= 0.88}
    else:
        print(f"\n== cost-model quality: {quality.get('error')}")
        goal2 = {"met": False, "reason": quality.get("error")}

    # ---- section: transfer
    goal3 = {"met": None, "reason": "transfer not run (needs --tasks >= 2, or --transfer-from)"}
    if results["transfer"].get("runs") and "genetic+learned" in arms:
        trows, fresh_tt, transfer_tt = [], [], []
        for trans in results["transfer"]["runs"]:
            bi, seed = trans["task_index"], trans["seed"]
            fresh = pick("genetic+learned", bi, seed)
            fresh_tt.append(censored(fresh["trials_to_target"], budget))
            transfer_tt.append(censored(trans["trials_to_target"], budget))
            trows.append([f"t{bi} s{seed}", trans["source_records"], f"{fresh['best_ms']:.3f}",
                          f"{trans['best_ms']:.3f}", fmt_tt(fresh["trials_to_target"], budget),
                          fmt_tt(trans["trials_to_target"], budget), f"{fresh_tt[-1] / transfer_tt[-1]:.2f}x"])
        mean_fresh, mean_trans = float(np.mean(fresh_tt)), float(np.mean(transfer_tt))
        ratio = mean_fresh / mean_trans
        kind = (results["transfer"]["kind"] if args.transfer_from else
                f"ACROSS WORKLOADS, same device: source = records of "
                f"{', '.join(f't{i}' for i in range(len(tasks) - 1))} (all arms), target = t{len(tasks) - 1}")
        print_table(f"transfer {kind}; genetic, same seed/budget",
                    ["task", "src recs", "fresh ms", "transfer ms", "fresh t95", "transfer t95", "cut"], trows)
        print(f"mean trials-to-target: fresh LearnedModel {mean_fresh:.1f}, TransferModel {mean_trans:.1f} "
              f"-> {ratio:.2f}x")
        goal3 = {"kind": "across devices" if args.transfer_from else "across workloads",
                 "fresh_t95_mean": mean_fresh, "transfer_t95_mean": mean_trans, "cut": round(ratio, 3),
                 "met": ratio >= 2.0, "censored": any(r["trials_to_target"] is None for r in
                                                     results["transfer"]["runs"])}

    results["goals"] = {"genetic_learned_half_of_random": goal1, "learned_pearson_ge_0.88": goal2,
                        "transfer_cut_ge_2x": goal3}
    print("\n== goals")
    if goal1["met"] is not None:
        print(f"  genetic+learned t95 <= 0.5 x random: sum {goal1['genetic_learned_t95_sum']} vs "
              f"{goal1['random_t95_sum']} (ratio {goal1['ratio']:.2f}"
              f"{', random censored: a lower bound' if goal1['random_censored'] else ''}) -> "
              f"{'MET' if goal1['met'] else 'MISSED'}")
    if "learned_pearson_ok_only" in goal2:
        print(f"  learned Pearson r >= 0.88 on held-out records: {goal2['learned_pearson_ok_only']:.3f} "
              f"(with failures {goal2['learned_pearson_with_failures']:.3f}) -> {'MET' if goal2['met'] else 'MISSED'}; "
              f"learned-regression {goal2['learned_regression_pearson_ok_only']:.3f} -> "
              f"{'MET' if goal2['met_by_learned_regression'] else 'MISSED'}")
    if goal3.get("cut") is not None:
        print(f"  transfer ({goal3['kind']}) cuts trials-to-target >= 2x: {goal3['cut']:.2f}x -> "
              f"{'MET' if goal3['met'] else 'MISSED'}")
    print(f"wall {results['wall_seconds']:.0f} s; runner: {results['runner']}")

    out_json.parent.mkdir(parents=True, exist_ok=True)
    results["plot"] = plot(results, out_json.with_suffix(".png"))
    out_json.write_text(json.dumps(results, indent=1, default=float))
    print(f"json: {out_json}; plot: {results['plot']}; records: {records_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
