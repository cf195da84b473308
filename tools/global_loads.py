#!/usr/bin/env python3
"""Global-memory loads of the buffer conv kernels with and without cooperative staging (`cooperative` 0 / 1),
counted by Oclgrind (its instruction counts: `adreno.opencl.oclgrind.global_load_bytes`), on ResNet-18-like layers
cut down so that the simulator finishes in minutes: 3x3 convs (stride 1 and 2), 1x1 convs (stride 1, and the
stride-2 shortcut; all `conv2d_direct`) and
the batched GEMM of the 3x3 conv rewritten to Winograd F(4x4) (`conv2d_winograd`), each with the target's default
knobs, only `cooperative` changed. Every output is checked against onnxruntime first.

    tools/global_loads.py [--target adreno-740] [--channels 32] [--size 14] [--json out.json] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adreno.conv_layers import Layer, layer_model, layer_params  # noqa: E402


def layers(c: int, size: int) -> list[tuple[str, Layer, str, str, str]]:
    """(row name, layer, winograd mode, family, kernel name part)."""
    return [
        (f"3x3 {c}->{c} @{size}", Layer(1, c, size, size, c, 3, 1, (1, 1, 1, 1), epilogue="none"), "off",
         "conv2d_direct", "conv2d"),
        (f"3x3 s2 {c}->{2 * c} @{size}", Layer(1, c, size, size, 2 * c, 3, 2, (1, 1, 1, 1), epilogue="none"), "off",
         "conv2d_direct", "conv2d"),
        (f"1x1 {c}->{2 * c} @{size}", Layer(1, c, size, size, 2 * c, 1, 1, epilogue="none"), "off",
         "conv2d_direct", "conv2d"),
        (f"1x1 s2 {c}->{2 * c} @{size}", Layer(1, c, size, size, 2 * c, 1, 2, epilogue="none"), "off",
         "conv2d_direct", "conv2d"),
        (f"Winograd F4 GEMM {c}->{c} @{size}", Layer(1, c, size, size, c, 3, 1, (1, 1, 1, 1), epilogue="none"), "f4",
         "conv2d_winograd", "batch_gemm"),
    ]


def compile_layer(layer: Layer, winograd: str, family_name: str, cooperative: int, target: str, out: Path) -> dict:
    """Compile `layer` for buffers with the target's defaults and `cooperative`; save its inputs and reference."""
    from adreno.reference import onnxruntime_session

    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.schedules import family as schedule_family

    family = schedule_family(family_name)
    default = family.default_config
    family.default_config = lambda wl, ctx: {**default(wl, ctx), **({"cooperative": cooperative}
                                                                     if "cooperative" in default(wl, ctx) else {})}
    try:
        model = layer_model(layer, layer_params(layer, 0))
        compile_model(model, out, CompileOptions(target=target, memory="buffer", winograd=winograd, host="native"))
    finally:
        family.default_config = default
    rng = np.random.default_rng(1)
    inputs = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input}
    ref = onnxruntime_session(model.SerializeToString()).run(None, inputs)[0]
    np.savez(out / "check.npz", reference=ref, **inputs)
    return {"artifact": str(out), "data": str(out / "check.npz")}


def main() -> int:
    from adreno.opencl import oclgrind

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="adreno-740")
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--size", type=int, default=14)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: 8 channels at 4x4")
    args = parser.parse_args()
    if args.smoke:
        args.channels, args.size = 8, 4
    if not oclgrind.available():
        print("error: needs Debian's oclgrind (tools/install_system_deps.sh)", file=sys.stderr)
        return 2
    rows = layers(args.channels, args.size)
    with tempfile.TemporaryDirectory() as tmp:
        cases = [compile_layer(layer, winograd, family, coop, args.target, Path(tmp) / f"{i}-{coop}")
                 for i, (_, layer, winograd, family, _) in enumerate(rows) for coop in (0, 1)]
        run = oclgrind.run_artifacts(cases, Path(tmp), inst_counts=True, timeout=3600)
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            return 1
        errors = {r["artifact"]: r["error"] for r in oclgrind.errors(run.stdout)}
        reports = oclgrind.sections(run.stdout)
        table = []
        for i, (name, _, _, family, kernel) in enumerate(rows):
            loads, ok = [], True
            for case in cases[2 * i: 2 * i + 2]:
                per_kernel = oclgrind.global_load_bytes(reports[case["artifact"]])
                loads.append(sum(b for k, b in per_kernel.items() if kernel in k) // oclgrind.FLOAT_BYTES)
                ok = ok and errors[case["artifact"]] <= 1e-3
            table.append({"layer": name, "family": family, "target": args.target, "loads_cooperative_0": loads[0],
                          "loads_cooperative_1": loads[1], "ratio": round(loads[0] / max(1, loads[1]), 2),
                          "outputs_match": ok})
    print(f"{'layer':34} {'family':16} {'cooperative=0':>14} {'cooperative=1':>14} {'ratio':>7}  outputs")
    for row in table:
        print(f"{row['layer']:34} {row['family']:16} {row['loads_cooperative_0']:>14,} "
              f"{row['loads_cooperative_1']:>14,} {row['ratio']:>7}  {'match' if row['outputs_match'] else 'WRONG'}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    return 0 if all(row["outputs_match"] for row in table) else 1


if __name__ == "__main__":
    sys.exit(main())
