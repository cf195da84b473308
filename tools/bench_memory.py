#!/usr/bin/env python3
"""Texture vs buffer memory, side by side in one run: the same models and single layers compiled with
`--memory texture` and `--memory buffer` (and optionally texture with fp16 storage), checked against onnxruntime,
then timed on the chosen OpenCL device.

    python tools/bench_memory.py [resnet18 mobilenetv2] [--layers] [--fp16] [--device pocl] [--repeat 5]
                                 [--json out.json]

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
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact import Artifact
from adreno.compile import CompileOptions, compile_model
from adreno.opencl.device import select_device
from adreno.opencl.executor import Executor
from adreno.reference import compare, onnxruntime_outputs
from adreno.runner import random_inputs

# Single layers (name -> cin, cout, size, kernel, stride, groups) taken from ResNet-18 and MobileNetV2.
LAYERS = {
    "conv3x3_64_56": (64, 64, 56, 3, 1, 1),
    "conv3x3_128_28_s2": (64, 128, 56, 3, 2, 1),
    "conv1x1_96_56": (16, 96, 56, 1, 1, 1),
    "dwconv3x3_144_56": (144, 144, 56, 3, 1, 144),
}


def layer_model(name: str) -> onnx.ModelProto:
    cin, cout, size, k, stride, groups = LAYERS[name]
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cout, cin // groups, k, k)) / np.sqrt(cin // groups * k * k)).astype(np.float32)
    out = (size + 2 * (k // 2) - k) // stride + 1
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4, strides=[stride] * 2, group=groups)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, out, out])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def bench_one(label: str, model, memory: str, precision: str, device, repeat: int, workdir: Path) -> dict:
    from adreno import frontend

    proto, _ = frontend.load_model(model)
    started = time.perf_counter()
    artifact = Artifact.load(compile_model(proto, workdir / f"{label}-{memory}-{precision}",
                                           CompileOptions(memory=memory, precision=precision, host="native")))
    compile_s = time.perf_counter() - started
    executor = Executor(artifact, device)
    inputs = random_inputs(artifact.input_specs(), seed=0)
    outputs = executor.run(inputs)
    row = compare(outputs, onnxruntime_outputs(proto, inputs))[0]
    if precision == "fp16":
        matched = row["max_rel_error"] <= 0.05
    else:
        matched = row["max_abs_error"] <= 1e-4 + 1e-3 * row["max_abs_ref"]
    result = {"model": label, "memory": memory, "precision": precision, "compile_s": round(compile_s, 2),
              "max_abs_error": row["max_abs_error"], "max_rel_error": row["max_rel_error"], "matched": matched,
              "kernels": artifact.plan.kernel_count(), "textures": artifact.manifest.get("textures")}
    if matched:
        profile = executor.profile(inputs, repeat=repeat)
        result.update(median_ms=profile.median_ms, device_median_ms=profile.device_median_ms)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenetv2"])
    parser.add_argument("--layers", action="store_true", help="also the single conv layers in LAYERS")
    parser.add_argument("--fp16", action="store_true", help="also texture memory with fp16 image storage")
    parser.add_argument("--device", default=None, help="pocl | gpu | index (default: first working device)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    device = select_device(args.device)
    device_name = f"{device.name.strip()} ({device.platform.name.strip()})"
    subjects = [(m, m) for m in args.models] + ([(n, layer_model(n)) for n in LAYERS] if args.layers else [])
    variants = [("buffer", "fp32"), ("texture", "fp32")] + ([("texture", "fp16")] if args.fp16 else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, model in subjects:
            for memory, precision in variants:
                row = bench_one(label, model, memory, precision, device, args.repeat, Path(tmp))
                rows.append(row)
                print(f"  {label:20s} {memory:7s} {precision}: err {row['max_abs_error']:.2e} "
                      f"{'ok' if row['matched'] else 'MISMATCH'} "
                      f"{row.get('median_ms', float('nan')):9.2f} ms", file=sys.stderr)

    print(f"device: {device_name}")
    if "Portable Computing Language" in device_name:
        print("note: PoCL emulates images in software on the CPU; texture/buffer here is not an Adreno number")
    header = f"{'model':20s} {'buffer ms':>10s} {'texture ms':>11s} {'tex/buf':>8s}"
    header += f" {'tex fp16 ms':>12s} {'fp16 rel err':>13s}" if args.fp16 else ""
    print(header)
    for label, _ in subjects:
        by = {(r["memory"], r["precision"]): r for r in rows if r["model"] == label}
        buf, tex = by[("buffer", "fp32")], by[("texture", "fp32")]
        b, t = buf.get("median_ms"), tex.get("median_ms")
        line = (f"{label:20s} {b if b is not None else float('nan'):10.2f} {t if t is not None else float('nan'):11.2f} "
                f"{(t / b) if b and t else float('nan'):8.2f}")
        if args.fp16:
            half = by[("texture", "fp16")]
            line += f" {half.get('median_ms', float('nan')):12.2f} {half['max_rel_error']:13.2e}"
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device_name, "rows": rows}, indent=1))
    return 0 if all(r["matched"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
