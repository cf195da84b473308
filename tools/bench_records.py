"""Time loading a synthetic records file of the real format (issue 22: loading 100,000 records must add <= 2 s).

    python tools/bench_records.py [N]     # N records (default 100000) over 50 workloads, 10 % failed
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

from adreno.records import Database, TunedConfigs


def write(path: Path, count: int) -> None:
    rng = random.Random(0)
    keys = [f"conv2d_direct|n1c{16 * (i + 1)}h32w32|o16k3x3|s1x1|p1x1x1x1|d1x1|g1|float32" for i in range(50)]
    with open(path, "w") as f:
        for trial in range(count):
            config = {"tile_f": rng.choice([1, 2, 4]), "tile_x": rng.choice([1, 2, 4]),
                      "threads_x": rng.choice([4, 8, 16]), "threads_y": rng.choice([1, 2, 4]), "unroll_k": 1}
            failed = rng.random() < 0.1
            f.write(json.dumps({"workload": keys[trial % 50], "device": "adreno-740|Adreno (TM) 740|0676.32",
                                "config": config, "seconds": None if failed else [rng.uniform(1e-4, 1e-3)] * 3,
                                "error": "CL_OUT_OF_RESOURCES" if failed else None, "stage": "run" if failed else None,
                                "trial": trial // 50 + 1, "strategy": "model", "timestamp": 1.7e9 + trial,
                                "extra": {"max_error": 1e-6, "build_seconds": 0.5}}, sort_keys=True) + "\n")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        write(path, count)
        started = time.perf_counter()
        database = Database(path)
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        tuned = TunedConfigs.load(path, "fp32", dict, lambda key, config: True, "adreno-740")
        compiled = time.perf_counter() - started
        print(f"{count} records ({path.stat().st_size / 1e6:.1f} MB): Database {loaded:.2f} s "
              f"({len(database.records)} kept), compile's TunedConfigs.load {compiled:.2f} s ({len(tuned)} keys)")


if __name__ == "__main__":
    main()
