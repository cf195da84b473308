#!/usr/bin/env python3
"""The shipped library on TVM's runtime, side by side with the launch-plan executor, and the app's start.

    python tools/bench_native.py [resnet18 ...] [--memory texture] [--repeat 10] [--starts 3] [--build]
                                 [--json bench_native.json] [--smoke]

For each model (compiled once with --host native, not timed):
* run:   the launch-plan executor (pyopencl) and the host library through TVM's Relax VM with adreno's plugin
         (`adreno run --runtime tvm`), on one input, outputs compared first (they must agree within 1e-5 of the
         output's scale); then --repeat runs of each, interleaved, wall-clock medians and their ratio;
* library: a run through the app library (libadreno_rt.so's adreno_rt_run, loaded here with ctypes: inputs copied
         from host memory, outputs into it) against TVM's VM called directly on the same device (the input copied
         into its tensor, `main`, the output read back), --repeat of each interleaved after one untimed run,
         outputs compared first; medians and their ratio;
* start: the app harness (a command line over the library: each start is the library's adreno_rt_open and first
         run) started --starts times from source (no blob) and --starts times with the blob its first start wrote,
         each in a new process with the driver's cache off (POCL_KERNEL_CACHE=0); a start counts only when its
         outputs equal the executor's. Medians of start_ms and their ratio, and of verify_ms: the part of every
         start spent proving the artifact whole (the manifest's run_sha256, the SHA-256 of plan.json, lib.so and
         params.npz: native/harness/integrity.h), included in start_ms; the largest peak resident memory of a start
         from source and from the blob (the harness's peak_rss_mb, its VmHWM: wait4's ru_maxrss carries the parent
         Python's across exec) next to the size of the stored weights (params.npz).
--build also rebuilds the plugin and the harness into a temporary directory and reports the build's wall time
and their sizes. A table is printed and everything is written to --json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def run_side_by_side(artifact, inputs: list, repeat: int) -> dict:
    from adreno.native.vm_executor import VmExecutor
    from adreno.opencl.executor import Executor

    plan, tvm = Executor(artifact), VmExecutor(artifact)
    for a, b in zip(plan.run(inputs), tvm.run(inputs), strict=True):
        error = float(np.abs(a - b).max())
        if error > 1e-5 * max(float(np.abs(a).max()), 1.0):
            raise SystemExit(f"outputs differ by {error}: no timing counts")
    times: dict[str, list[float]] = {"plan": [], "tvm": []}
    for _ in range(repeat):
        for name, executor in (("plan", plan), ("tvm", tvm)):
            times[name].append(executor.profile(inputs, repeat=1, warmup=0).median_ms)
    plan_ms, tvm_ms = statistics.median(times["plan"]), statistics.median(times["tvm"])
    return {"plan_ms": plan_ms, "tvm_ms": tvm_ms, "tvm_over_plan": tvm_ms / plan_ms, "runs": times}


class _View(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


class _Status(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char_p)]


def _library_run(artifact, inputs: list, expected: list):
    """adreno_rt_open on the artifact (in this process: the plugin `import adreno` loaded is the one it uses) and
    a function running it once through adreno_rt_run into preallocated outputs (adreno_rt.h)."""
    from adreno.native.plugin import LIB_DIR

    lib = ctypes.CDLL(str(LIB_DIR / "libadreno_rt.so"))
    for name in ("adreno_rt_open", "adreno_rt_run", "adreno_rt_close"):
        getattr(lib, name).restype = _Status
    lib.adreno_rt_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.adreno_rt_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(_View), ctypes.c_size_t, ctypes.POINTER(_View),
                                  ctypes.c_size_t]
    lib.adreno_rt_close.argtypes = [ctypes.c_void_p]
    model = ctypes.c_void_p()
    status = lib.adreno_rt_open(str(artifact).encode(), None, ctypes.byref(model))
    if status.code:
        raise SystemExit(f"adreno_rt_open: {status.message.decode()}")
    arrays = [np.ascontiguousarray(x) for x in inputs]
    outputs = [np.empty_like(e) for e in expected]
    views = (_View * len(arrays))(*[_View(a.ctypes.data, a.nbytes) for a in arrays])
    buffers = (_View * len(outputs))(*[_View(o.ctypes.data, o.nbytes) for o in outputs])

    def run() -> list:
        status = lib.adreno_rt_run(model, views, len(arrays), buffers, len(outputs))
        if status.code:
            raise SystemExit(f"adreno_rt_run: {status.message.decode()}")
        return outputs

    return run, lambda: lib.adreno_rt_close(model)


def library_vs_vm(artifact, inputs: list, repeat: int) -> dict:
    from adreno.native.vm_executor import VmExecutor

    vm = VmExecutor(artifact)
    expected = vm.run(inputs)
    args = vm._arguments(inputs)  # the input tensors on the device, then the weights
    main = vm.vm["main"]

    def direct() -> list:
        for tensor, x in zip(args, inputs):
            tensor.copyfrom(np.ascontiguousarray(x))
        result = main(*args)
        return [item.numpy() for item in ([result] if hasattr(result, "numpy") else list(result))]

    run, close = _library_run(artifact.path, inputs, expected)
    try:
        for got, want in zip(run(), direct(), strict=True):  # the library's first run builds its programs
            if not np.array_equal(got, want):
                raise SystemExit("the library's outputs differ from TVM's VM's: no timing counts")
        times: dict[str, list[float]] = {"library": [], "vm": []}
        for _ in range(repeat):
            for name, once in (("library", run), ("vm", direct)):
                started = time.perf_counter()
                once()
                times[name].append((time.perf_counter() - started) * 1e3)
    finally:
        close()
    library_ms, vm_ms = statistics.median(times["library"]), statistics.median(times["vm"])
    return {"library_ms": library_ms, "vm_ms": vm_ms, "library_over_vm": library_ms / vm_ms, "runs": times}


def harness_start(artifact, inputs: dict, out: Path, blob: Path | None, expected: list) -> dict:
    from adreno.native.plugin import HARNESS_PATH

    out.mkdir(parents=True, exist_ok=True)
    args = []
    for index, (name, array) in enumerate(inputs.items()):
        np.save(out / f"input{index}.npy", array)
        args += ["--input", f"{name}={out / f'input{index}.npy'}"]
    command = [str(HARNESS_PATH), str(artifact), *args, "--output-dir", str(out)] + (["--blob", str(blob)] if blob
                                                                                      else [])
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "POCL_KERNEL_CACHE": "0"})
    if proc.returncode != 0:
        raise SystemExit(f"harness failed: {proc.stderr.strip()}")
    result = json.loads(proc.stdout)
    got = [np.load(path) for path in result["outputs"].values()]
    if not all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True)):
        raise SystemExit("the harness's outputs differ from the executor's: no timing counts")
    return result


def starts(artifact, starts_n: int) -> dict:
    from adreno.artifact.format import Artifact
    from adreno.opencl.executor import Executor

    loaded = Artifact.load(artifact)
    arrays = [np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype) for s in loaded.input_specs()]
    expected = Executor(loaded).run(arrays)
    inputs = dict(zip(loaded.manifest["inputs"], arrays))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cold = [harness_start(artifact, inputs, root / f"cold{i}", None, expected) for i in range(starts_n)]
        blob = root / "programs.bin"
        harness_start(artifact, inputs, root / "fill", blob, expected)
        warm = [harness_start(artifact, inputs, root / f"warm{i}", blob, expected) for i in range(starts_n)]
    if any(w["blob"] != "loaded" for w in warm):
        raise SystemExit(f"a start did not load the blob: {[w['blob'] for w in warm]}")
    cold_ms = statistics.median(r["start_ms"] for r in cold)
    warm_ms = statistics.median(r["start_ms"] for r in warm)
    verify_ms = statistics.median(r["verify_ms"] for r in cold + warm)
    return {"source_start_ms": cold_ms, "blob_start_ms": warm_ms, "speedup": cold_ms / warm_ms,
            "verify_ms": verify_ms, "source_peak_rss_mb": max(r["peak_rss_mb"] for r in cold),
            "blob_peak_rss_mb": max(r["peak_rss_mb"] for r in warm),
            "weights_mb": (Path(artifact) / "params.npz").stat().st_size / 1e6, "source": cold, "blob": warm}


def build_native() -> dict:
    from adreno.native.versions import wheel_versions

    site = next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "tvm").is_dir())
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run(["make", "-C", str(REPO / "native"), "-j2", f"OUT={out}", f"SITE={site}",
                        f"VERSIONS={wheel_versions()}"], check=True, capture_output=True)
        seconds = time.perf_counter() - started
        return {"build_seconds": seconds, "plugin_bytes": (Path(out) / "libtvm_runtime_opencl.so").stat().st_size,
                "library_bytes": (Path(out) / "libadreno_rt.so").stat().st_size,
                "harness_bytes": (Path(out) / "adreno-harness").stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18"])
    parser.add_argument("--memory", default="texture", choices=["texture", "buffer"])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--build", action="store_true")
    parser.add_argument("--json", default="bench_native.json")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, one timed run, one start each")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.repeat, args.starts, args.build = ["tiny"], 1, 1, False
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    report: dict = {"memory": args.memory, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            path = compile_model(model, Path(tmp) / model, CompileOptions(memory=args.memory, host="native"))
            artifact = Artifact.load(path)
            inputs = [np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype)
                      for s in artifact.input_specs()]
            report["models"][model] = {"run": run_side_by_side(artifact, inputs, args.repeat),
                                       "library": library_vs_vm(artifact, inputs, args.repeat),
                                       "start": starts(path, args.starts),
                                       "host_library_bytes": (path / "lib.so").stat().st_size}
    if args.build:
        report["native_build"] = build_native()
    print(f"{'model':<16} {'plan ms':>9} {'tvm ms':>9} {'tvm/plan':>9} {'lib ms':>8} {'vm ms':>8} {'lib/vm':>7} "
          f"{'start src ms':>13} {'start blob ms':>14} {'speedup':>8} {'verify ms':>10} {'RSS src MB':>11} "
          f"{'RSS blob MB':>12} {'weights MB':>11} {'lib.so MB':>10}")
    for model, row in report["models"].items():
        run, library, start = row["run"], row["library"], row["start"]
        print(f"{model:<16} {run['plan_ms']:>9.1f} {run['tvm_ms']:>9.1f} {run['tvm_over_plan']:>9.2f} "
              f"{library['library_ms']:>8.1f} {library['vm_ms']:>8.1f} {library['library_over_vm']:>7.3f} "
              f"{start['source_start_ms']:>13.0f} {start['blob_start_ms']:>14.0f} {start['speedup']:>8.1f} "
              f"{start['verify_ms']:>10.0f} {start['source_peak_rss_mb']:>11.0f} {start['blob_peak_rss_mb']:>12.0f} "
              f"{start['weights_mb']:>11.1f} "
              f"{row['host_library_bytes'] / 1e6:>10.2f}")
    if "native_build" in report:
        b = report["native_build"]
        print(f"native build {b['build_seconds']:.1f} s (make -j2), plugin {b['plugin_bytes'] / 1e3:.0f} KB, "
              f"library {b['library_bytes'] / 1e3:.0f} KB, harness {b['harness_bytes'] / 1e3:.0f} KB (stripped)")
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
