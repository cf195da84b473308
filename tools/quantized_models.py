#!/usr/bin/env python3
"""Quantized zoo models: each quantized by onnxruntime.quantization (`tests/quantized_models.Recipe`), compiled in
each memory, run on PoCL and compared with onnxruntime's run of the same quantized model; the float model beside
them for the weight size and the device time.

    python tools/quantized_models.py tiny resnet18 [--recipes qdq,dynamic,...] [--memory texture,buffer]
                                     [--repeat 3] [--json quantized_models.json] [--keep DIR] [--smoke]

Per (model, recipe, memory): the largest |difference|, in output quantization steps where the output is a
dequantized tensor, the fraction of output elements equal to onnxruntime's, the weight file's bytes, the artifact
directory's bytes and the median device time of `--repeat` runs (the sum of kernel times, PoCL). `--keep DIR`
keeps each quantized .onnx and its artifacts there (compiled from the file, so `adreno run ART --check` finds
the model again)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adreno.artifact.format import PARAMS_NAME  # noqa: E402
from adreno.compile import compile_model  # noqa: E402
from adreno.opencl.device import select_device  # noqa: E402
from adreno.opencl.executor import Executor  # noqa: E402
from adreno.options import CompileOptions  # noqa: E402
from adreno.reference import onnxruntime_outputs  # noqa: E402
from tests.quantized_models import (Agreement, Recipe, calibration_feeds, float_model, output_steps,  # noqa: E402
                                    quantize)


def measure(model, label: str, memory: str, device, repeat: int, workdir: Path) -> dict:
    feeds = calibration_feeds(model, 1, seed=99)[0]
    source = workdir / f"{label}.onnx"
    source.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, source)
    artifact = compile_model(source, workdir / f"{label}-{memory}", CompileOptions(memory=memory))
    executor = Executor(artifact, device)
    outputs = executor.run(list(feeds.values()))
    reference = onnxruntime_outputs(model, list(feeds.values()))
    steps = output_steps(model)
    agreements = [Agreement.of(o, r, steps.get(v.name)) for o, r, v in zip(outputs, reference, model.graph.output)]
    profile = executor.profile(list(feeds.values()), repeat=repeat)
    return {"model": label, "memory": memory, "max_abs": max(a.max_abs for a in agreements),
            "max_steps": max((a.max_steps for a in agreements if a.max_steps is not None), default=None),
            "exact_fraction": min(a.exact_fraction for a in agreements),
            "weights_bytes": (artifact / PARAMS_NAME).stat().st_size,
            "directory_bytes": sum(f.stat().st_size for f in Path(artifact).rglob("*") if f.is_file()),
            "device_median_ms": round(profile.device_median_ms, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=["tiny", "resnet18"], help="zoo names or ppocr-cls")
    parser.add_argument("--recipes", default=",".join(Recipe), help=f"comma-separated, of {', '.join(Recipe)}")
    parser.add_argument("--memory", default="texture,buffer")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default="quantized_models.json")
    parser.add_argument("--keep", help="a directory to keep the models and artifacts in (default: a temporary one)")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny and one recipe, texture memory, "
                        "one timed run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.models, args.recipes, args.memory, args.repeat = ["tiny"], next(iter(Recipe)).value, "texture", 1
    device, rows = select_device("pocl"), []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        for name in args.models:
            source = float_model(name)
            calibration = calibration_feeds(source, 4)
            variants = [(name, source)] + [(f"{name}/{r}", quantize(source, Recipe(r), calibration))
                                                for r in args.recipes.split(",")]
            for label, model in variants:
                for memory in args.memory.split(","):
                    rows.append(measure(model, label, memory, device, args.repeat, Path(tmp)))
                    row = rows[-1]
                    steps = "-" if row["max_steps"] is None else f"{row['max_steps']:.0f}"
                    print(f"{label:36s} {memory:8s} max|err| {row['max_abs']:.3g} ({steps} steps)  exact "
                          f"{row['exact_fraction']:.4f}  weights {row['weights_bytes'] / 1e6:.2f} MB  directory "
                          f"{row['directory_bytes'] / 1e6:.2f} MB  {row['device_median_ms']:.1f} ms", flush=True)
    Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
