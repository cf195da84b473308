#!/usr/bin/env python3
"""Texture vs buffer memory, side by side in one run: the same models and single conv layers compiled with
`--memory buffer`, with `--memory texture` and the one-pixel-per-work-item texture conv schedule
(`adreno.schedules.packed`, the schedule before `adreno/schedules/conv2d_texture.py`), with `--memory texture` and the
register-tiled texture conv schedule (the default), and optionally the tiled one with fp16 image storage; each
checked against onnxruntime, then timed on the chosen OpenCL device.

    python tools/bench_memory.py [MODEL ...] [--layers resnet18] [--fp16] [--device pocl]
                                 [--repeat 5] [--json out.json] [--smoke]

Models are timed end to end (median device time: the sum of every kernel's profiling-event time per run); a layer
(`--layers MODEL`: every distinct conv + BN + activation of that zoo model, as `adreno.conv_layers` builds them) is
timed by its conv kernels only, so the pack/unpack of its input and output does not count.
A timing is reported only after that variant's output matched onnxruntime (fp32: |err| <= 1e-4 + 1e-3 max|ref|;
fp16 storage: max relative error <= 5%). On PoCL (CPU) images are emulated in software, so the texture/buffer
ratio there says nothing about an Adreno GPU, where images go through the texture cache: it is reported as
measured, labelled with the device."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

from adreno import schedules
from adreno.artifact.format import Artifact
from adreno.compile import compile_model
from adreno.errors import TVM_ERRORS
from adreno.conv_layers import conv_layers, layer_model, layer_params
from adreno.opencl.device import select_device
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import compare, onnxruntime_outputs
from adreno.artifact.format import random_inputs

# variant -> (memory, precision, tiled texture convs)
VARIANTS = {"buffer": ("buffer", "fp32", True), "tex-1px": ("texture", "fp32", False),
            "texture": ("texture", "fp32", True), "tex-fp16": ("texture", "fp16", True)}


@contextmanager
def one_pixel_texture_convs():
    """Compile with the tiled texture conv family left out, so `adreno.schedules.packed` schedules the convs."""
    saved = list(schedules.FAMILIES)
    schedules.FAMILIES.remove(schedules.family("conv2d_texture"))
    try:
        yield
    finally:
        schedules.FAMILIES[:] = saved


def bench_one(label: str, model, variant: str, device, repeat: int, workdir: Path, conv_only: bool) -> dict:
    from adreno.frontend import importer as frontend

    memory, precision, tiled = VARIANTS[variant]
    proto, _ = frontend.load_model(model)
    started = time.perf_counter()
    try:
        with nullcontext() if tiled else one_pixel_texture_convs():
            path = compile_model(proto, workdir / f"{label}-{variant}",
                                 CompileOptions(memory=memory, precision=precision, host="native"))
    except TVM_ERRORS as err:  # one variant's failed compile is its row (and the exit status), not the whole run's
        return {"model": label, "variant": variant, "memory": memory, "precision": precision, "matched": False,
                "max_abs_error": float("nan"), "max_rel_error": float("nan"),
                "error": f"compile failed: {type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}"}
    artifact = Artifact.load(path)
    compile_s = time.perf_counter() - started
    executor = Executor(artifact, device)
    inputs = random_inputs(artifact.input_specs(), 0, artifact.value_ranges())
    row = compare(executor.run(inputs), onnxruntime_outputs(proto, inputs))[0]
    if precision == "fp16":
        matched = row["max_rel_error"] <= 0.05
    else:
        matched = row["max_abs_error"] <= 1e-4 + 1e-3 * row["max_abs_ref"]
    result = {"model": label, "variant": variant, "memory": memory, "precision": precision,
              "compile_s": round(compile_s, 2), "max_abs_error": row["max_abs_error"],
              "max_rel_error": row["max_rel_error"], "matched": matched, "kernels": artifact.plan.kernel_count(),
              "textures": artifact.manifest.get("textures")}
    if matched:
        profile = executor.profile(inputs, repeat=repeat)
        conv_ms = sum(k.median_ms for k in profile.kernels if k.op == "conv2d")
        result.update(ms=conv_ms if conv_only else profile.device_median_ms, wall_median_ms=profile.median_ms)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="zoo models or .onnx files (default: resnet18 mobilenetv2 unless "
                        "--layers is given)")
    parser.add_argument("--layers", metavar="MODEL", default=None,
                        help="also every distinct conv layer of this zoo model (e.g. resnet18), conv kernels timed")
    parser.add_argument("--fp16", action="store_true", help="also texture memory with fp16 image storage")
    parser.add_argument("--device", default=None, help="pocl | gpu | index (default: first working device)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, one timed run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.models, args.layers, args.repeat = ["tiny"], None, 1

    device = select_device(args.device)
    device_name = f"{device.name.strip()} ({device.platform.name.strip()})"
    models = args.models or ([] if args.layers else ["resnet18", "mobilenetv2"])
    subjects = [(m, m, False) for m in models]
    for layer in conv_layers(args.layers) if args.layers else []:
        subjects.append((f"{layer.name} {layer.label()}", layer_model(layer, layer_params(layer)), True))
    variants = ["buffer", "tex-1px", "texture"] + (["tex-fp16"] if args.fp16 else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, (label, model, conv_only) in enumerate(subjects):
            for variant in variants:
                row = bench_one(f"s{index}", model, variant, device, args.repeat, Path(tmp), conv_only)
                row["model"] = label
                rows.append(row)
                print(f"  {label:34s} {variant:8s}: err {row['max_abs_error']:.2e} "
                      f"{'ok' if row['matched'] else row.get('error', 'MISMATCH')} "
                      f"{row.get('ms', float('nan')):9.2f} ms",
                      file=sys.stderr)

    print(f"device: {device_name}")
    if "Portable Computing Language" in device_name:
        print("note: PoCL emulates images in software on the CPU; texture/buffer here is not an Adreno number")
    print("ms: median device time of the whole model, or of the conv kernels only for a single layer")
    names = {"buffer": "buffer ms", "tex-1px": "tex 1px ms", "texture": "tex tiled ms", "tex-fp16": "tex fp16 ms"}
    print(f"{'model / layer':34s} " + " ".join(f"{names[v]:>12s}" for v in variants)
          + f" {'tiled/1px':>9s} {'tiled/buf':>9s}" + (f" {'fp16 rel err':>12s}" if args.fp16 else ""))
    nan = float("nan")
    for label, _, _ in subjects:
        by = {r["variant"]: r for r in rows if r["model"] == label}
        ms = {v: by[v].get("ms", nan) for v in variants}
        line = f"{label:34s} " + " ".join(f"{ms[v]:12.2f}" for v in variants)
        line += f" {ms['texture'] / ms['tex-1px']:9.2f} {ms['texture'] / ms['buffer']:9.2f}"
        if args.fp16:
            line += f" {by['tex-fp16']['max_rel_error']:12.2e}"
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device_name, "rows": rows}, indent=1))
    return 0 if all(r["matched"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
