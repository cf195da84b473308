"""What a large records file costs (issue 22: 100,000 records must add at most 2 s to a compile; a resumed tune must
not hold every record).

    python tools/bench_records.py [N]            # the loads alone: N records (default 100000), 50 workloads
    python tools/bench_records.py [N] --whole    # also whole commands on N records of `tiny`'s own tasks
    python tools/bench_records.py --smoke        # CI's smoke run: 1000 records, --whole, tunes of 1 trial

The loads: `Database` (what a tuner reads) and compile's `TunedConfigs.load`, time and peak memory (tracemalloc).
--whole writes N records of `tiny`'s tasks, measured on this machine's PoCL device (so a tune resumes them, as a
long tuning run leaves them), 10 % failed, and times in fresh processes, with each process's peak RSS:
`adreno compile tiny` without and with `--records`, and `adreno tune tiny --trials 4` resuming the file.
Everything printed is also written to --json (default bench_records.json).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from adreno.options import Precision
from adreno.records import Database, TunedConfigs

DEVICE = "adreno-740|Adreno (TM) 740|0676.32"


def _line(rng: random.Random, workload: str, device: str, config: dict, trial: int) -> str:
    failed = rng.random() < 0.1
    return json.dumps({"workload": workload, "device": device, "config": config,
                       "seconds": None if failed else [rng.uniform(1e-4, 1e-3)] * 3,
                       "error": "CL_OUT_OF_RESOURCES" if failed else None, "stage": "run" if failed else None,
                       "trial": trial, "strategy": "model", "timestamp": 1.7e9 + trial,
                       "extra": {"max_error": 1e-6, "build_seconds": 0.5}}, sort_keys=True) + "\n"


def write(path: Path, count: int) -> None:
    """`count` records over 50 synthetic direct-conv workloads."""
    rng = random.Random(0)
    keys = [f"conv2d_direct|n1c{16 * (i + 1)}h32w32|o16k3x3|s1x1|p1x1x1x1|d1x1|g1|float32" for i in range(50)]
    with open(path, "w") as f:
        for trial in range(count):
            config = {"tile_f": rng.choice([1, 2, 4]), "tile_x": rng.choice([1, 2, 4]),
                      "threads_x": rng.choice([4, 8, 16]), "threads_y": rng.choice([1, 2, 4]), "unroll_k": 1}
            f.write(_line(rng, keys[trial % 50], DEVICE, config, trial // 50 + 1))


def write_tiny(path: Path, count: int) -> None:
    """`count` records of `tiny`'s texture tasks, with valid configs of their spaces, on the local PoCL device."""
    import numpy as np

    from adreno.opencl.device import DeviceIdentity, select_device
    from adreno.options import CompileOptions
    from adreno.tune.extract import extract_tasks

    tasks = extract_tasks("tiny", CompileOptions(target="adreno-740", memory="texture"))
    device = DeviceIdentity.from_cl_device(select_device(None)).fingerprint
    rng, np_rng = random.Random(0), np.random.default_rng(0)
    pools = []
    for task in tasks:
        space = task.space()
        pools.append([space.config(c) for c in (space.random(np_rng) for _ in range(200)) if c is not None])
    with open(path, "w") as f:
        for trial in range(count):
            index = trial % len(tasks)
            f.write(_line(rng, tasks[index].key, device, rng.choice(pools[index]), trial // len(tasks) + 1))


def _loads(path: Path) -> dict:
    """Each load timed untraced, then run again under tracemalloc for its peak (tracing slows it tenfold)."""
    def database():
        return len(Database(path).records)

    def compile_load():
        return len(TunedConfigs.load(path, Precision.FP32, dict, lambda key, config: True, "adreno-740"))

    parts = {}
    for name, load, unit in (("Database", database, "records held"), ("compile's TunedConfigs.load", compile_load,
                                                                         "keys")):
        started = time.perf_counter()
        kept = load()
        seconds = time.perf_counter() - started
        tracemalloc.start()
        load()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        parts[name] = {"seconds": seconds, "peak_mb": peak / 1e6, "kept": kept, "unit": unit}
    return parts


def _loads_line(loads: dict) -> str:
    return "; ".join(f"{name} {r['seconds']:.2f} s, peak {r['peak_mb']:.0f} MB ({r['kept']} {r['unit']})"
                     for name, r in loads.items())


def _timed(command: list[str]) -> tuple[float, float]:
    """Seconds and the peak RSS (MB) of one command in a fresh process (GNU time's %M: a child forked from this
    process would count this process's pages)."""
    with tempfile.NamedTemporaryFile("r") as report:
        proc = subprocess.run(["/usr/bin/time", "-o", report.name, "-f", "%e %M", sys.executable, "-m", "adreno.cli",
                               *command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {proc.stderr[-500:]}")
        seconds, kilobytes = report.read().split()[-2:]
    return float(seconds), int(kilobytes) / 1024


def _commands(path: Path, tmp: Path, trials: int) -> list[dict]:
    """`adreno compile tiny` without and with the records, and tunes of a new file and of the records (resumed), each
    timed in a fresh process."""
    rows = [("compile tiny", ["compile", "tiny", "-o", f"{tmp}/a", "-q"]),
            ("compile tiny --records", ["compile", "tiny", "-o", f"{tmp}/b", "-q", "--records", str(path)])]
    shutil.copy(path, f"{tmp}/tune.jsonl")
    tune = ["tune", "tiny", "--trials", str(trials), "-q", "--plot", f"{tmp}/p.png", "--records"]
    rows.append((f"tune tiny --trials {trials} (new file)", [*tune, f"{tmp}/new.jsonl"]))
    rows.append((f"tune tiny --trials {trials} (resume)", [*tune, f"{tmp}/tune.jsonl"]))
    timed = []
    for name, command in rows:
        seconds, peak = _timed(command)
        timed.append({"command": name, "seconds": seconds, "peak_rss_mb": peak})
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=100_000, help="records (default 100000)")
    parser.add_argument("--whole", action="store_true", help="also whole commands on records of tiny's tasks")
    parser.add_argument("--trials", type=int, default=4, help="trials of the --whole tunes (default 4)")
    parser.add_argument("--json", default="bench_records.json")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: 1000 records, --whole, 1 trial")
    args = parser.parse_args()
    if args.smoke:
        args.count, args.whole, args.trials = 1000, True, 1
    report: dict = {"count": args.count}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        write(path, args.count)
        report["synthetic"] = {"megabytes": path.stat().st_size / 1e6, "loads": _loads(path)}
        print(f"{args.count} records ({report['synthetic']['megabytes']:.1f} MB): "
              f"{_loads_line(report['synthetic']['loads'])}")
        if args.whole:
            write_tiny(path, args.count)
            report["tiny"] = {"megabytes": path.stat().st_size / 1e6, "loads": _loads(path)}
            print(f"{args.count} records of tiny's tasks ({report['tiny']['megabytes']:.1f} MB): "
                  f"{_loads_line(report['tiny']['loads'])}")
            report["tiny"]["commands"] = _commands(path, Path(tmp), args.trials)
            for row in report["tiny"]["commands"]:
                print(f"  {row['command']:<32} {row['seconds']:6.1f} s, peak RSS {row['peak_rss_mb']:6.0f} MB")
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
