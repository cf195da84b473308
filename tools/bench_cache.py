#!/usr/bin/env python3
"""Cold vs warm start: what the OpenCL program-binary cache saves at start-up.

    python tools/bench_cache.py [resnet18 mobilenetv2] [--device pocl] [--runs 3] [--json bench_cache.json] [--smoke]

For each model (compiled once, not timed) every measurement runs in a fresh Python process, so nothing
in-process helps, with the drivers' own caches off (`POCL_KERNEL_CACHE=0`, `CUDA_CACHE_DISABLE=1`):

* cold:    our cache empty (a new directory): every program is built from source (and stored);
* warm:    a new process on the cache the cold run filled: every program is loaded from its binary;
* bundled: our cache empty, the binaries bundled in the artifact by `adreno cache export` (a copy).

Each process reports the program load time (all `clBuildProgram`s of the artifact, `Executor.build_seconds`)
and the time to first inference (artifact load, context, programs, weights upload and the first run), and
saves its outputs; a time counts only when those outputs matched onnxruntime on the same input. Medians over
--runs processes per mode are printed side by side and written to JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("cold", "warm", "bundled")
EXPECTED = {"cold": "miss", "warm": "hit", "bundled": "bundled"}  # how each mode's programs must have been built
RTOL, ATOL = 1e-3, 1e-4


def child(mode: str, artifact_path: str, cache_dir: str, output: str, device_spec: str | None) -> None:
    """Measure one start in this (fresh) process and print one JSON line."""
    started = time.perf_counter()
    import numpy as np

    from adreno.artifact.format import Artifact
    from adreno.cache import ProgramCache
    from adreno.opencl.device import select_device
    from adreno.opencl.executor import Executor
    from adreno.artifact.format import random_inputs

    imported = time.perf_counter()
    artifact = Artifact.load(artifact_path)
    device = select_device(device_spec)
    selected = time.perf_counter()
    cache = ProgramCache(Path(cache_dir))
    executor = Executor(artifact, device, cache=cache.for_artifact(artifact.path))
    loaded = time.perf_counter()
    inputs = random_inputs(artifact.input_specs(), 0, artifact.value_ranges())
    outputs = executor.run(inputs)
    first = time.perf_counter()
    executor.run(inputs)  # a second inference: what the first one costs beyond steady state (the driver's JIT)
    second = time.perf_counter()
    np.savez(output, *outputs)
    print(json.dumps({"mode": mode, "program_load_s": executor.build_seconds,
                      "time_to_first_inference_s": first - imported, "import_s": imported - started,
                      "artifact_and_device_s": selected - imported, "executor_s": loaded - selected,
                      "first_run_s": first - loaded, "second_run_s": second - first,
                      "programs": len(executor.builds), "kernel_files": len(artifact.plan.programs),
                      "builds": [build.how for build in executor.builds], "stats": cache.stats,
                      "device": executor.device.name.strip(), "platform": executor.device.platform.name.strip()}))


def measure(mode: str, artifact: Path, cache_dir: Path, out: Path, device: str | None, env: dict) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", mode, str(artifact), str(cache_dir), str(out)]
    if device:
        command += ["--device", device]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    process_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{mode} run of {artifact} failed (status {done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = process_s
    return result


def check(out: Path, reference: list) -> tuple[bool, float]:
    import numpy as np

    with np.load(out) as npz:
        outputs = [npz[f"arr_{i}"] for i in range(len(npz.files))]
    worst, ok = 0.0, len(outputs) == len(reference)
    for got, ref in zip(outputs, reference):
        error = float(np.max(np.abs(got.astype(np.float64) - ref))) if got.shape == ref.shape else float("inf")
        worst = max(worst, error)
        ok = ok and error <= ATOL + RTOL * float(np.max(np.abs(ref)))
    return ok, worst


def bench_model(model: str, args, workdir: Path, env: dict) -> dict:
    import pyopencl as cl

    from adreno.artifact.format import Artifact
    from adreno.cache import export_bundle
    from adreno.compile import compile_model
    from adreno.opencl.device import select_device
    from adreno.reference import onnxruntime_outputs, reference_model
    from adreno.artifact.format import random_inputs

    given = Path(args.artifacts) / model if args.artifacts else None
    if given is not None and given.is_dir():
        artifact = Artifact.load(given)
    else:
        artifact = Artifact.load(compile_model(model, given or workdir / model))
    inputs = random_inputs(artifact.input_specs(), 0, artifact.value_ranges())
    reference = onnxruntime_outputs(reference_model(artifact), inputs)
    reference = [r.astype("float64") for r in reference]
    plain = workdir / f"{model}-plain"  # copies without bundled binaries: the artifact given stays as it was
    shutil.copytree(artifact.path, plain, ignore=shutil.ignore_patterns("binaries"))
    bundled = workdir / f"{model}-bundled"
    shutil.copytree(plain, bundled)
    export_bundle(Artifact.load(bundled), cl.Context([select_device(args.device)]), None)

    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for index in range(args.runs):
        cache_dir = workdir / f"cache-{model}-{index}"
        empty_dir = workdir / f"empty-{model}-{index}"
        for mode, path, cache in (("cold", plain, cache_dir), ("warm", plain, cache_dir),
                                  ("bundled", bundled, empty_dir)):
            out = workdir / f"out-{model}-{mode}-{index}.npz"
            result = measure(mode, path, cache, out, args.device, env)
            result["matched"], result["max_abs_error"] = check(out, reference)
            expected = EXPECTED[mode]
            # valid: every program this start built came the mode's way (the executor builds one program per model
            # from its cache, one per kernel file from a bundle: counting kernel files would make no run valid)
            result["all_expected"] = bool(result["builds"]) and all(how == expected for how in result["builds"])
            runs[mode].append(result)
            print(f"  {model} {mode} #{index}: program load {result['program_load_s']:.3f} s, first inference "
                  f"{result['time_to_first_inference_s']:.3f} s "
                  f"(artifact + device {result['artifact_and_device_s']:.3f}"
                  f", executor {result['executor_s']:.3f}, first run {result['first_run_s']:.3f}; second run "
                  f"{result['second_run_s']:.3f}), {expected} {result['builds'].count(expected)}/"
                  f"{result['programs']} programs, output {'OK' if result['matched'] else 'MISMATCH'}", file=sys.stderr)
    row = {"model": model, "programs": runs["cold"][0]["programs"], "kernel_files": len(artifact.plan.programs),
           "kernels": artifact.plan.kernel_count(),
           "device": runs["cold"][0]["device"], "platform": runs["cold"][0]["platform"], "runs": runs}
    for mode in MODES:
        valid = [r for r in runs[mode] if r["matched"] and r["all_expected"]]
        row[mode] = {"valid_runs": len(valid),
                     "program_load_s": statistics.median(r["program_load_s"] for r in valid) if valid else None,
                     **{what: statistics.median(r[what] for r in valid) if valid else None
                        for what in ("time_to_first_inference_s", "artifact_and_device_s", "executor_s",
                                     "first_run_s", "second_run_s")},
                     "max_abs_error": max((r["max_abs_error"] for r in runs[mode]), default=None)}
    for mode in ("warm", "bundled"):
        for what in ("program_load_s", "time_to_first_inference_s"):
            cold, warm = row["cold"][what], row[mode][what]
            row[mode][f"{what.removesuffix('_s')}_speedup"] = cold / warm if cold and warm else None
    return row


def table(rows: list[dict]) -> str:
    lines = [f"{'model':<12} {'progs':>5} {'':<8} {'program load s':>14} {'speed-up':>9} "
             f"{'first inference s':>18} {'speed-up':>9} {'(1st run s':>10} {'2nd run s)':>10} {'valid':>6}"]
    for row in rows:
        for mode in MODES:
            m = row[mode]
            load, first = m["program_load_s"], m["time_to_first_inference_s"]
            load_x, first_x = m.get("program_load_speedup"), m.get("time_to_first_inference_speedup")
            lines.append(f"{row['model'] if mode == 'cold' else '':<12} {row['programs'] if mode == 'cold' else '':>5} "
                         f"{mode:<8} {load if load is not None else float('nan'):>14.3f} "
                         f"{f'{load_x:.1f}x' if load_x else '':>9} "
                         f"{first if first is not None else float('nan'):>18.3f} "
                         f"{f'{first_x:.1f}x' if first_x else '':>9} {_num(m['first_run_s']):>10} "
                         f"{_num(m['second_run_s']):>10} {m['valid_runs']:>6}")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenetv2"])
    parser.add_argument("--device", default=None, help="pocl (default), gpu, or an index from `adreno devices`")
    parser.add_argument("--runs", type=int, default=3, help="processes per mode and model (default 3)")
    parser.add_argument("--artifacts", help="directory of compiled artifacts named after the models (compiled "
                        "there when missing; default: a temporary directory)")
    parser.add_argument("--json", default="bench_cache.json", help="where to write the results")
    parser.add_argument("--smoke", action="store_true", help="CI's check that the tool still works: the tiny model, "
                        "one run per mode")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "ARTIFACT", "CACHE_DIR", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child, args.device)
        return 0
    if args.smoke:
        args.models, args.runs = ["tiny"], 1
    env = {**os.environ, "POCL_KERNEL_CACHE": "0", "CUDA_CACHE_DISABLE": "1"}
    os.environ.update(POCL_KERNEL_CACHE="0", CUDA_CACHE_DISABLE="1")  # the export in this process, too
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_cache.") as tmp:
        for model in args.models:
            rows.append(bench_model(model, args, Path(tmp), env))
    print(table(rows))
    result = {"device": rows[0]["device"] if rows else None, "platform": rows[0]["platform"] if rows else None,
              "runs_per_mode": args.runs, "env": {"POCL_KERNEL_CACHE": "0", "CUDA_CACHE_DISABLE": "1"}, "models": rows}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0 if all(row[mode]["valid_runs"] == args.runs for row in rows for mode in MODES) else 1


if __name__ == "__main__":
    sys.exit(main())
