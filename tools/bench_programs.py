#!/usr/bin/env python3
"""An artifact's start on a local OpenCL driver: how its programs are best built, and what a start costs an app.

    python tools/bench_programs.py [resnet18 ...] [--memory texture] [--json bench_programs.json] [--smoke]

For each model (compiled once, not timed), each measurement in a fresh process with an empty PoCL kernel cache
(`POCL_CACHE_DIR` a new directory, so every number is the driver's real work):
* builds: clBuildProgram of the artifact's kernel files one by one, all at once from parallel threads, and as one
  program (`adreno.opencl.programs.Grouping.MODEL`), then the cost of asking the driver for the one program's
  binary right after the build (what a program cache stores);
* starts, each from the executor's construction to its first run's outputs (the cold start an app waits): with an
  empty program cache and no helper process (cold alone), with an empty program cache and the processes that
  compile the first launches beside it (`adreno.opencl.first_launches`; cold), and with the cache the cold one
  filled (warm). The program cache write that a cold start's first run starts in the background, and a second
  run, are timed after.
A table is printed and everything is written to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def builds(artifact_path: str) -> dict:
    import pyopencl as cl

    from adreno.artifact.format import Artifact
    from adreno.opencl.device import select_device
    from adreno.opencl.programs import Grouping, group_source, groups
    from adreno.opencl.signature import program_options

    artifact = Artifact.load(artifact_path)
    device = select_device("pocl")
    context, options = cl.Context([device]), program_options("")
    salt = f"// {time.time()}\n"  # a source the driver has never seen
    sources = [salt + artifact.kernel_source(name) for name in artifact.plan.programs]

    def build(source):
        return cl.Program(context, source).build(options=options, cache_dir=False)

    out = {"programs": len(sources), "source_bytes": sum(map(len, sources))}
    started = time.perf_counter()
    for source in sources:
        build(source)
    out["one_by_one_s"] = time.perf_counter() - started
    sources = [s.replace(salt, salt + "// threads\n") for s in sources]
    threads = [threading.Thread(target=build, args=(s,)) for s in sources]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out["threads_s"] = time.perf_counter() - started
    (members,) = groups(artifact, Grouping.MODEL)
    started = time.perf_counter()
    program = build(salt + "// one\n" + group_source(artifact, members))
    out["one_program_s"] = time.perf_counter() - started
    started = time.perf_counter()
    program.get_info(cl.program_info.BINARIES)
    out["binary_after_build_s"] = time.perf_counter() - started
    return out


def start(artifact_path: str, cache_dir: str, workers: str) -> dict:
    """One start as an app makes it, from its process: the executor (build, weights, and the first launches compiled
    with `workers` more processes, "auto" for the executor's default), its first run, then the program cache write
    the first run started in the background, and a second run."""
    import numpy as np

    from adreno.artifact.format import Artifact
    from adreno.cache import ProgramCache
    from adreno.opencl.executor import CacheWrite, Executor

    artifact = Artifact.load(artifact_path)
    inputs = [np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype) for s in artifact.input_specs()]
    started = time.perf_counter()
    executor = Executor(artifact, "pocl", cache=ProgramCache(Path(cache_dir)),
                        compile_workers=None if workers == "auto" else int(workers), cache_write=CacheWrite.BACKGROUND)
    start_s = time.perf_counter() - started
    started = time.perf_counter()
    executor.run(inputs)
    first = time.perf_counter() - started
    store = executor.wait_stored()
    started = time.perf_counter()
    executor.run(inputs)
    helped = executor.first_launches
    return {"start_s": start_s, "build_s": executor.build_seconds, "how": [b.how for b in executor.builds],
            "first_launch_workers": helped.workers if helped else 0, "first_run_s": first,
            "cold_start_s": start_s + first, "cache_write_s": store, "second_run_s": time.perf_counter() - started}


def fresh(*args: str) -> dict:
    """Run a worker in a process of its own with an empty PoCL kernel cache (the driver's real work, shared with the
    processes the executor starts)."""
    with tempfile.TemporaryDirectory(prefix="pocl-") as pocl_cache:
        env = {**os.environ, "PYTHONPATH": str(REPO), "POCL_CACHE_DIR": pocl_cache}
        env.pop("POCL_KERNEL_CACHE", None)
        proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{args[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, *rest = sys.argv[2:]
        print(json.dumps(builds(*rest) if kind == "builds" else start(*rest)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18"])
    parser.add_argument("--memory", default="texture", choices=["texture", "buffer"])
    parser.add_argument("--json", default="bench_programs.json")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny")
    args = parser.parse_args()
    if args.smoke:
        args.models = ["tiny"]
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    report: dict = {"memory": args.memory, "load_average": os.getloadavg(), "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            path = str(compile_model(model, Path(tmp) / model, CompileOptions(memory=args.memory)))
            alone, cache = str(Path(tmp) / f"{model}-alone"), str(Path(tmp) / f"{model}-cache")
            report["models"][model] = {"builds": fresh("builds", path), "cold_alone": fresh("start", path, alone, "0"),
                                       "cold": fresh("start", path, cache, "auto"),
                                       "warm": fresh("start", path, cache, "auto")}
    print(f"{'model':<12} {'files':>5} {'1 by 1 s':>9} {'threads s':>10} {'1 prog s':>9} {'binary s':>9} | "
          f"{'cold alone':>10} | {'cold start':>10} {'procs':>5} {'build':>6} {'1st run':>8} {'write':>6} | "
          f"{'warm start':>10} {'build':>6} {'1st run':>8} {'2nd run':>8}")
    for model, row in report["models"].items():
        b, alone, cold, warm = row["builds"], row["cold_alone"], row["cold"], row["warm"]
        print(f"{model:<12} {b['programs']:>5} {b['one_by_one_s']:>9.2f} {b['threads_s']:>10.2f} "
              f"{b['one_program_s']:>9.2f} {b['binary_after_build_s']:>9.2f} | {alone['cold_start_s']:>10.2f} | "
              f"{cold['cold_start_s']:>10.2f} {cold['first_launch_workers'] + 1:>5} {cold['build_s']:>6.2f} "
              f"{cold['first_run_s']:>8.2f} {cold['cache_write_s']:>6.2f} | {warm['cold_start_s']:>10.2f} "
              f"{warm['build_s']:>6.2f} {warm['first_run_s']:>8.2f} {warm['second_run_s']:>8.2f}")
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
