"""What a large records file costs (issue 22: 100,000 records must add at most 2 s to a compile; a resumed tune must
not hold every record).

    python tools/bench_records.py [N]            # the loads alone: N records (default 100000), 50 workloads
    python tools/bench_records.py [N] --whole    # also whole commands on N records of `tiny`'s own tasks

The loads: `Database` (what a tuner reads) and compile's `TunedConfigs.load`, time and peak memory (tracemalloc).
--whole writes N records of `tiny`'s tasks, measured on this machine's PoCL device (so a tune resumes them, as a
long tuning run leaves them), 10 % failed, and times in fresh processes, with each process's peak RSS:
`adreno compile tiny` without and with `--records`, and `adreno tune tiny --trials 4` resuming the file.
"""

from __future__ import annotations

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


def _loads(path: Path) -> str:
    """Each load timed untraced, then run again under tracemalloc for its peak (tracing slows it tenfold)."""
    def database():
        return len(Database(path).records)

    def compile_load():
        return len(TunedConfigs.load(path, Precision.FP32, dict, lambda key, config: True, "adreno-740"))

    parts = []
    for name, load, unit in (("Database", database, "records held"), ("compile's TunedConfigs.load", compile_load,
                                                                         "keys")):
        started = time.perf_counter()
        kept = load()
        seconds = time.perf_counter() - started
        tracemalloc.start()
        load()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        parts.append(f"{name} {seconds:.2f} s, peak {peak / 1e6:.0f} MB ({kept} {unit})")
    return "; ".join(parts)


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


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        write(path, count)
        print(f"{count} records ({path.stat().st_size / 1e6:.1f} MB): {_loads(path)}")
        if "--whole" not in sys.argv:
            return
        write_tiny(path, count)
        print(f"{count} records of tiny's tasks ({path.stat().st_size / 1e6:.1f} MB): {_loads(path)}")
        rows = [("compile tiny", ["compile", "tiny", "-o", f"{tmp}/a", "-q"]),
                ("compile tiny --records", ["compile", "tiny", "-o", f"{tmp}/b", "-q", "--records", str(path)])]
        shutil.copy(path, f"{tmp}/tune.jsonl")
        rows.append(("tune tiny --trials 4 (new file)", ["tune", "tiny", "--trials", "4", "-q", "--records",
                                                         f"{tmp}/new.jsonl", "--plot", f"{tmp}/p.png"]))
        rows.append(("tune tiny --trials 4 (resume)", ["tune", "tiny", "--trials", "4", "-q", "--records",
                                                       f"{tmp}/tune.jsonl", "--plot", f"{tmp}/p.png"]))
        for name, command in rows:
            seconds, peak = _timed(command)
            print(f"  {name:<32} {seconds:6.1f} s, peak RSS {peak:6.0f} MB")


if __name__ == "__main__":
    main()
