#!/usr/bin/env python3
"""What an artifact weighs next to its model's own weights, and what rebuilding the params at load costs.

    python tools/bench_weights.py [resnet18 mobilenetv2] [--configs texture,buffer,texture-fp16]
                                  [--repeat 3] [--json bench_weights.json] [--smoke]

For each model and configuration (memory, and `-fp16` for `--precision fp16`; Winograd auto, `--host native`),
compiled once (not timed):
* sizes: the model's fp32 initializer bytes (what an .onnx of it weighs) next to params.npz, the kernel sources,
  the host library, the whole directory, and what an app ships with TVM's runtime (params.npz + host library), each
  as a ratio of the model's bytes; the params as the kernels read them (Winograd-transformed, fp32), which is
  what params.npz stored before weights were stored in their source form (adreno.artifact.weights);
* load: medians over --repeat of reading params.npz as stored, and of `Artifact.params()` (reading and rebuilding:
  Winograd transforms, float16 widened), in ms; the harness's `weights_ms` stage (read, rebuild, upload) from one
  run whose outputs must equal the launch-plan executor's (else no figure counts).
A table is printed and everything is written to --json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np


def model_weight_bytes(name: str) -> int:
    from onnx import numpy_helper

    from adreno.frontend import zoo

    return sum(numpy_helper.to_array(i).nbytes for i in zoo.get_model(name).graph.initializer)


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def harness_weights_ms(path: Path, out: Path) -> float:
    from adreno.artifact.format import Artifact
    from adreno.native.plugin import HARNESS_PATH
    from adreno.opencl.executor import Executor

    artifact = Artifact.load(path)
    inputs = [np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype) for s in artifact.input_specs()]
    expected = Executor(artifact).run(inputs)
    (out / "outputs").mkdir(parents=True)
    args = []
    for index, (name, array) in enumerate(zip(artifact.manifest["inputs"], inputs)):
        np.save(out / f"input{index}.npy", array)
        args += ["--input", f"{name}={out / f'input{index}.npy'}"]
    proc = subprocess.run([str(HARNESS_PATH), str(path), *args, "--output-dir", str(out / "outputs")],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"the harness failed on {path}: {proc.stderr.strip()[:300]}")
    result = json.loads(proc.stdout)
    for name, want in zip(artifact.manifest["outputs"], expected, strict=True):
        if not np.array_equal(np.load(result["outputs"][name]), want):
            raise SystemExit(f"the harness's {name} differs from the executor's on {path}: no figure counts")
    return float(result["weights_ms"])


def measure(model: str, config: str, root: Path, repeat: int) -> dict:
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    memory, _, precision = config.partition("-")
    path = compile_model(model, root / f"{model}-{config}", CompileOptions(
        memory=memory, precision=precision or "fp32", winograd="auto", host="native"))
    artifact = Artifact.load(path)
    own = model_weight_bytes(model)
    sizes = artifact.manifest["sizes"]
    directory = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    ships = sizes["weights"] + sizes["host_library"]
    return {
        "model_weight_bytes": own, "params_npz_bytes": sizes["weights"], "kernel_bytes": sizes["kernels"],
        "host_library_bytes": sizes["host_library"], "directory_bytes": directory, "app_ships_bytes": ships,
        "param_bytes_as_read": artifact.manifest["weight_storage"]["param_bytes"],
        "weight_storage": artifact.manifest["weight_storage"],
        "params_npz_over_model": sizes["weights"] / own, "directory_over_model": directory / own,
        "app_ships_over_model": ships / own,
        "read_stored_ms": median_ms(artifact.stored_params, repeat),
        "read_and_rebuild_ms": median_ms(artifact.params, repeat),
        "harness_weights_ms": harness_weights_ms(path, root / f"{model}-{config}-harness"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenetv2"])
    parser.add_argument("--configs", default="texture,buffer,texture-fp16")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default="bench_weights.json")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, texture memory, one timed run")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.configs, args.repeat = ["tiny"], "texture", 1
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for config in args.configs.split(","):
                report[f"{model}/{config}"] = measure(model, config, Path(tmp), args.repeat)
    mb = 1e6
    print(f"{'model/config':<26} {'model MB':>8} {'npz MB':>7} {'kern MB':>7} {'lib MB':>6} {'dir MB':>7} "
          f"{'dir/model':>9} {'app/model':>9} {'as read MB':>10} {'read ms':>8} {'rebuild ms':>10} {'harness ms':>10}")
    for key, r in report.items():
        print(f"{key:<26} {r['model_weight_bytes'] / mb:>8.2f} {r['params_npz_bytes'] / mb:>7.2f} "
              f"{r['kernel_bytes'] / mb:>7.2f} {r['host_library_bytes'] / mb:>6.2f} {r['directory_bytes'] / mb:>7.2f} "
              f"{r['directory_over_model']:>9.2f} {r['app_ships_over_model']:>9.2f} "
              f"{r['param_bytes_as_read'] / mb:>10.2f} {r['read_stored_ms']:>8.0f} {r['read_and_rebuild_ms']:>10.0f} "
              f"{r['harness_weights_ms']:>10.0f}")
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
