"""Farm throughput: measurements per minute through 1, 2 and 4 local agents against the local runner on the
same kernels, and the RPC overhead per measurement, in one run.

    .venv/bin/python tools/bench_farm.py [--model tiny] [--measurements 40] [--repeat 3] [--agents 1,2,4]
                                         [--json bench_farm.json] [--smoke]

Every agent here shares this machine's CPUs (PoCL), so more agents only help up to the core count; on a real
farm each agent is its own GPU. "overhead" is the host's wall time per measurement minus the agent's own
time for it (the device runs + its wall time in the profile), i.e. what RPC, scheduling and transfer add.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--measurements", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--agents", default="1,2,4")
    parser.add_argument("--json", default="bench_farm.json", help="where to write the rows")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, 2 measurements of one run, "
                        "one agent (a LocalFarm on loopback, PoCL)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.measurements, args.repeat, args.agents = "tiny", 2, 1, "1"

    from adreno.compile import compile_model
    from adreno.farm.local import LocalFarm
    from adreno.farm.deadline import Timeouts
    from adreno.runners.rpc import RPCRunner
    from adreno.runners.interface import RunInput
    from adreno.runners.local import LocalRunner

    work = tempfile.mkdtemp(prefix="bench-farm-")
    artifact = str(compile_model(args.model, os.path.join(work, args.model)))
    inputs = [RunInput(artifact, repeat=args.repeat, warmup=1, seed=i % 4, tag=f"m{i}")
              for i in range(args.measurements)]
    rows = []

    local = LocalRunner()
    started = time.perf_counter()
    results = local.run_batch(inputs)
    wall = time.perf_counter() - started
    local.close()
    ok = sum(r.ok for r in results)
    rows.append(("local (pyopencl, in process)", ok, wall, None))

    for count in [int(x) for x in args.agents.split(",") if x]:
        with LocalFarm(agents=count, log_dir=os.path.join(work, f"farm{count}")) as farm:
            farm.wait_registered(count, free=True)
            runner = RPCRunner(farm.tracker, farm.key, timeouts=Timeouts(request=60, run=60))
            # one warm-up candidate per device (session, upload, program build), as a tuner's first batch pays
            runner.run_batch([RunInput(artifact, repeat=1, warmup=0, tag=f"w{i}") for i in range(count)])
            started = time.perf_counter()
            results = runner.run_batch(inputs)
            wall = time.perf_counter() - started
            runner.close()
        ok = sum(r.ok for r in results)
        overheads = [r.extra["stage_seconds"].get("run", 0) - sum(r.extra.get("wall_ms") or []) * 1e-3
                     for r in results if r.ok]
        rows.append((f"rpc, {count} agent{'s' if count > 1 else ''}", ok, wall,
                     float(np.median(overheads)) if overheads else None))

    print(f"model {args.model}, {args.measurements} measurements of {args.repeat} timed runs each, "
          f"{os.cpu_count()} CPUs")
    print(f"{'runner':<30} {'ok':>4} {'wall s':>8} {'meas/min':>9} {'RPC overhead/meas':>18}")
    for name, ok, wall, overhead in rows:
        over = f"{overhead * 1e3:.1f} ms" if overhead is not None else "-"
        print(f"{name:<30} {ok:>4} {wall:>8.2f} {args.measurements / wall * 60:>9.0f} {over:>18}")
    print("local builds the programs for every measurement (LocalRunner has no executor cache); agents build once "
          "per session")
    Path(args.json).write_text(json.dumps({
        "model": args.model, "measurements": args.measurements, "repeat": args.repeat, "cpus": os.cpu_count(),
        "rows": [{"runner": name, "ok": ok, "wall_s": wall, "measurements_per_minute": args.measurements / wall * 60,
                  "rpc_overhead_s": overhead} for name, ok, wall, overhead in rows]}, indent=1))
    return 0 if all(ok == args.measurements for _, ok, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
