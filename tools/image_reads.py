#!/usr/bin/env python3
"""Image reads of the texture conv kernels, unstaged (`cooperative=0`) against staged in local memory (1), counted by
Oclgrind (Debian `oclgrind`; its instruction counts give every kernel's `read_imagef` calls).

Each layer is compiled for a target (default adreno-740) with the family's default knobs for it, once with
`cooperative` 0 and once with 1 (the same tiles and work-groups), run once on Oclgrind's simulated device, and its
conv kernel's reads are reported in all and per work-group (plan.json's launch). Oclgrind simulates every work-item,
so the layers are ResNet-18's spatial shapes with fewer channels (the counts scale with the channels).

    tools/image_reads.py [--target adreno-740] [--json out.json] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

# ResNet-18's layer shapes (conv, stride, map) at 16 or 32 channels: (label, Layer arguments, winograd mode)
SMOKE_LAYERS = [("conv3x3/s1 8->8 @8x8", (1, 8, 8, 8, 8, 3, 1, (1, 1, 1, 1)), "off")]  # --smoke: seconds
LAYERS = [
    ("conv3x3/s1 16->16 @56x56", (1, 16, 56, 56, 16, 3, 1, (1, 1, 1, 1)), "off"),
    ("conv3x3/s2 16->32 @56x56", (1, 16, 56, 56, 32, 3, 2, (1, 1, 1, 1)), "off"),
    ("conv1x1/s2 16->32 @56x56", (1, 16, 56, 56, 32, 1, 2, (0, 0, 0, 0)), "off"),
    ("conv3x3/s1 32->32 @28x28, F(4x4) GEMM", (1, 32, 28, 28, 32, 3, 1, (1, 1, 1, 1)), "f4"),
]

RUNNER = r"""
import sys
import numpy as np
from adreno.opencl.device import select_device
from adreno.opencl.executor import Executor

device = select_device("oclgrind")
for artifact in sys.argv[1:]:
    ex = Executor(artifact, device=device)
    rng = np.random.default_rng(0)
    print("RUN " + artifact, flush=True)
    ex.run([rng.standard_normal(s.shape).astype(s.dtype) for s in ex.artifact.input_specs()])
"""


def compile_layer(layer, winograd: str, cooperative: int, target: str, out: Path) -> tuple[str, dict]:
    """Compile `layer` for `target` with the conv's family defaults and `cooperative` forced; (kernel, knobs)."""
    from adreno.compile import compile_model
    from adreno.conv_layers import layer_model, layer_params
    from adreno.options import CompileOptions
    from adreno.schedules import FAMILIES

    used = {}
    originals = {family: family.apply for family in FAMILIES}

    def forcing(family):
        def apply(func, ctx):
            matched = family.matched(func)
            if matched is None or "cooperative" not in family.default_config(matched.workload, ctx):
                return originals[family](func, ctx)
            knobs = {**family.default_config(matched.workload, ctx), "cooperative": cooperative}
            used[matched.key] = knobs
            return originals[family](func, ctx.candidate({matched.key: knobs}))
        return apply

    for family in FAMILIES:
        family.apply = forcing(family)
    try:
        compile_model(layer_model(layer, layer_params(layer)), out,
                      CompileOptions(target=target, memory="texture", winograd=winograd, host="native"))
    finally:
        for family, apply in originals.items():
            family.apply = apply
    (key, knobs), = [(k, v) for k, v in used.items() if "gemm" in k or "conv2d" in k]
    return key, knobs


def kernel_launch(artifact: Path, key: str) -> tuple[str, int]:
    """(kernel name, work-groups) of the artifact's conv (or Winograd GEMM) kernel."""
    plan = json.loads((artifact / "plan.json").read_text())
    word = "gemm" if "gemm" in key else "conv2d"
    (kernel,) = [k for step in plan["steps"] for k in step["kernels"] if word in k["name"]]
    groups = math.prod(g // n for g, n in zip(kernel["global_size"], kernel["local_size"]))
    return kernel["name"], groups


def count_reads(artifacts: list[Path]) -> dict[str, dict[str, int]]:
    """artifact -> kernel -> read_imagef calls, one Oclgrind run of every artifact."""
    from adreno.opencl import oclgrind

    with tempfile.TemporaryDirectory() as workdir:
        env = oclgrind.environment(Path(workdir), inst_counts=True)
        run = subprocess.run([sys.executable, "-c", RUNNER, *map(str, artifacts)], env=env, capture_output=True,
                             text=True, check=True)
    reads: dict[str, dict[str, int]] = {}
    for part in run.stdout.split("RUN ")[1:]:  # the runner names each artifact before Oclgrind's counts for it
        artifact, report = part.split("\n", 1)
        per = {kernel: n for kernel, n in oclgrind.image_reads(report).items() if n}
        if per:
            reads[artifact] = per
    return reads


def main(argv=None) -> int:
    from adreno.conv_layers import Layer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="adreno-740")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: one small layer")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        built = []
        for label, dims, winograd in SMOKE_LAYERS if args.smoke else LAYERS:
            for cooperative in (0, 1):
                out = Path(tmp) / f"{len(built)}"
                key, knobs = compile_layer(Layer(*dims, epilogue="bn_relu"), winograd, cooperative, args.target, out)
                built.append((label, cooperative, out, key, knobs))
        reads = count_reads([b[2] for b in built])
        for (label, _, plain, key, knobs), (_, _, staged, _, _) in zip(built[::2], built[1::2]):
            name, groups = kernel_launch(plain, key)
            total = [reads[str(a)][kernel_launch(a, key)[0]] for a in (plain, staged)]
            rows.append({"layer": label, "key": key, "knobs": {k: v for k, v in knobs.items() if k != "cooperative"},
                         "kernel": name, "groups": groups, "reads": total,
                         "per_group": [round(t / groups, 1) for t in total]})
    print(f"| layer ({args.target} defaults) | work-groups | reads per group, cooperative 0 / 1 | "
          "reads in all, 0 / 1 | fewer |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layer']} | {r['groups']:,} | {r['per_group'][0]:,} / {r['per_group'][1]:,} | "
              f"{r['reads'][0]:,} / {r['reads'][1]:,} | {r['reads'][0] / r['reads'][1]:.1f}x |")
    for r in rows:
        print(f"  {r['layer']}: {r['knobs']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
