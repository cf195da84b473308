#!/usr/bin/env python3
"""Whole-model benchmark: compile time, first-run time, steady-state latency and max error vs onnxruntime.

    python tools/bench_model.py resnet18 mobilenetv2 [--device pocl] [--repeat 10] [--json out.json] [--smoke]

Every latency is reported only after the model's output matched onnxruntime on the same input."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from adreno.artifact.format import Artifact
from adreno.compile import compile_model
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import compare, onnxruntime_outputs, reference_model
from adreno.artifact.format import random_inputs


def bench(model: str, device, repeat: int, workdir: Path, schedules: str) -> dict:
    started = time.perf_counter()
    options = CompileOptions(schedules=schedules, memory="buffer", winograd="off")
    artifact = Artifact.load(compile_model(model, workdir / f"{model}-{schedules}", options))
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    executor = Executor(artifact, device)
    load_s = time.perf_counter() - started
    inputs = random_inputs(artifact.input_specs(), 0, artifact.value_ranges())
    started = time.perf_counter()
    outputs = executor.run(inputs)
    first_run_s = time.perf_counter() - started
    row = compare(outputs, onnxruntime_outputs(reference_model(artifact), inputs))[0]
    matched = row["max_abs_error"] <= 1e-4 + 1e-3 * row["max_abs_ref"]
    profile = executor.profile(inputs, repeat=repeat) if matched else None
    return {"model": model, "schedules": schedules, "device": executor.device.name.strip(),
            "kernels": artifact.plan.kernel_count(), "compile_s": round(compile_s, 2),
            "program_build_s": round(executor.build_seconds, 2), "load_s": round(load_s, 2),
            "first_run_ms": round(first_run_s * 1e3, 1), "time_to_first_inference_s": round(load_s + first_run_s, 2),
            "median_ms": round(profile.median_ms, 2) if profile else None,
            "device_median_ms": round(profile.device_median_ms, 2) if profile else None,
            "max_abs_error": row["max_abs_error"], "max_abs_ref": row["max_abs_ref"], "matched": matched}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenetv2"])
    parser.add_argument("--device", default=None, help="pocl (default), gpu, or an index from `adreno devices`")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--schedules", default="adreno,tvm", help="comma-separated: adreno (ours), tvm (TVM's)")
    parser.add_argument("--json", default="bench_model.json", help="where to write the results")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, one timed run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.models, args.repeat = ["tiny"], 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for schedules in args.schedules.split(","):
                print(f"{model} ({schedules} schedules) ...", file=sys.stderr, flush=True)
                rows.append(bench(model, args.device, args.repeat, Path(tmp), schedules))
    header = (f"{'model':<14} {'sched':<7} {'kernels':>7} {'compile s':>9} {'build s':>8} {'first ms':>9} "
              f"{'median ms':>10} {'max err':>9} {'ok':>3}")
    print(header)
    for r in rows:
        median = f"{r['median_ms']:.1f}" if r["median_ms"] is not None else "-"
        print(f"{r['model']:<14} {r['schedules']:<7} {r['kernels']:>7} {r['compile_s']:>9.2f} "
              f"{r['program_build_s']:>8.2f} {r['first_run_ms']:>9.1f} {median:>10} {r['max_abs_error']:>9.2e} "
              f"{'yes' if r['matched'] else 'NO':>3}")
    by_model = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["schedules"]] = r
    for model, variants in by_model.items():
        if variants.get("adreno", {}).get("median_ms") and variants.get("tvm", {}).get("median_ms"):
            print(f"{model}: ours vs TVM default schedules: "
                  f"{variants['tvm']['median_ms'] / variants['adreno']['median_ms']:.2f}x faster")
    Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    print(f"wrote {args.json}", file=sys.stderr)
    return 0 if all(r["matched"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
