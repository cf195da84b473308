#!/usr/bin/env python3
"""Where an artifact's first run goes on a driver that compiles lazily: each kernel's first launch timed alone.

PoCL builds a program's front end in `clBuildProgram` and compiles each kernel's work-group function at its first
launch, so a cold start's first run is mostly those compiles (docs/compile.md). This launches the plan's kernels
one at a time, waiting for each, with an empty PoCL kernel cache (`POCL_CACHE_DIR` a fresh directory unless set)
and no program cache, and prints each kernel's first launch and its later launches, slowest first, with the
total. Timings only: the outputs are not checked (`adreno run --check` does that).

    tools/first_launch.py ARTIFACT [--device pocl] [--kernel NAME_PART] [--json out.json]
    tools/first_launch.py --smoke [--json out.json]    # compiles tiny into a temporary directory first

--kernel launches only the kernels whose name holds NAME_PART (one kernel's compile alone: the PoCL crash under
qemu in docs/native.md was found so).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact", nargs="?")
    ap.add_argument("--device", default="pocl", help="OpenCL device: pocl | gpu | cpu | index | name substring")
    ap.add_argument("--kernel", default="", help="launch only the kernels whose name holds this")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, compiled first, no ARTIFACT")
    args = ap.parse_args(argv)
    if args.smoke:
        from adreno.compile import compile_model

        scratch = tempfile.TemporaryDirectory(prefix="first-launch-")  # removed when main returns
        args.artifact = str(compile_model("tiny", Path(scratch.name) / "tiny"))
    elif args.artifact is None:
        ap.error("ARTIFACT is required without --smoke")
    os.environ.setdefault("POCL_CACHE_DIR", tempfile.mkdtemp(prefix="pocl-"))

    import pyopencl as cl

    from adreno.artifact.format import random_inputs
    from adreno.opencl.executor import Executor

    started = time.perf_counter()
    executor = Executor(args.artifact, args.device, compile_workers=0)  # each first launch here, timed alone
    build_s = time.perf_counter() - started
    executor.set_inputs(random_inputs(executor.artifact.input_specs(), 0, executor.artifact.value_ranges()))
    launches: dict[str, list[float]] = {}
    for bound in (b for b in executor.launches if args.kernel in b.name):
        started = time.perf_counter()
        cl.enqueue_nd_range_kernel(executor.queue, bound.kernel, bound.global_size, bound.local_size).wait()
        launches.setdefault(bound.name, []).append(time.perf_counter() - started)
    rows = sorted(({"kernel": name, "first_ms": times[0] * 1e3, "later_ms": [t * 1e3 for t in times[1:]]}
                   for name, times in launches.items()), key=lambda r: -r["first_ms"])
    print(f"{args.artifact} on {executor.device.name.strip()}: build {build_s:.2f} s, {len(rows)} kernels, "
          f"{len(executor.launches)} launches")
    print(f"{'first ms':>9}  {'later ms':<18}kernel")
    for row in rows:
        later = ", ".join(f"{t:.0f}" for t in row["later_ms"][:4]) + (" ..." if len(row["later_ms"]) > 4 else "")
        print(f"{row['first_ms']:>9.0f}  {later:<18}{row['kernel']}")
    first = sum(r["first_ms"] for r in rows)
    print(f"first launches {first / 1e3:.2f} s (median {sorted(r['first_ms'] for r in rows)[len(rows) // 2]:.0f} ms"
          " a kernel)")
    if args.json:
        Path(args.json).write_text(json.dumps({"artifact": args.artifact, "device": executor.device.name.strip(),
                                               "build_s": build_s, "kernels": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
