#!/usr/bin/env python3
"""The app's start and a run on x86 and in the phone box (tools/phonebox.sh, AArch64 under qemu-user), side by side.

    python tools/bench_phonebox.py [tiny ...] [--memory texture] [--repeat 5] [--json bench_phonebox.json] [--smoke]

For each model, compiled twice (--host native for x86; --host android --cc aarch64-linux-gnu-gcc for the box; not
timed), on each side:
* import: a fresh python's `import adreno, tvm` (adreno loads the plugin), wall clock inside the process;
* the app harness started once from source writing its blob (not reported: PoCL's cache is off, so it is the
  build), then once from that blob with --repeat runs: its stages plugin, load, blob, weights, first run, and the
  median of the runs. The two sides' outputs must be bit-identical, or no figure counts.
The box must be set up (`make phonebox`). What the box's times mean: docs/native.md ("The phone box").
`--smoke` (CI, tests/phonebox): tiny in buffer memory, one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BOX = [str(REPO / "tools" / "phonebox.sh"), "run"]
IMPORT = "import time; t = time.perf_counter(); import adreno, tvm; print((time.perf_counter() - t) * 1e3)"
STAGES = ("import_ms", "plugin_ms", "load_ms", "blob_ms", "weights_ms", "first_run_ms", "median_ms")


def side_command(side: str, command: list[str]) -> list[str]:
    return BOX + command if side == "box" else command


def import_ms(side: str) -> float:
    python = "python3" if side == "box" else sys.executable
    proc = subprocess.run(side_command(side, [python, "-c", IMPORT]), capture_output=True, text=True, check=True)
    return float(proc.stdout.split()[-1])


def harness(side: str, artifact: Path, inputs: dict, out: Path, blob: Path, repeat: int) -> dict:
    from adreno.native.plugin import HARNESS_PATH

    aarch64 = Path(os.environ.get("NATIVE_AARCH64", REPO / "build" / "native-aarch64"))  # as phonebox.sh reads it
    binary = aarch64 / "adreno-harness" if side == "box" else HARNESS_PATH
    out.mkdir(parents=True)
    args = []
    for index, (name, array) in enumerate(inputs.items()):
        np.save(out / f"input{index}.npy", array)
        args += ["--input", f"{name}={out / f'input{index}.npy'}"]
    command = [str(binary), str(artifact), *args, "--output-dir", str(out), "--blob", str(blob), "--repeat",
               str(repeat)]
    proc = subprocess.run(side_command(side, command), capture_output=True, text=True,
                          env={**os.environ, "POCL_KERNEL_CACHE": "0"})
    if proc.returncode != 0:
        raise SystemExit(f"{side}: the harness failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def side(name: str, artifact: Path, inputs: dict, root: Path, repeat: int) -> tuple[dict, list]:
    blob = root / f"{name}.bin"
    harness(name, artifact, inputs, root / f"{name}-source", blob, 1)
    warm = harness(name, artifact, inputs, root / f"{name}-blob", blob, repeat)
    if warm["blob"] != "loaded":
        raise SystemExit(f"{name}: the second start did not load the blob ({warm['blob']})")
    outputs = [np.load(path) for path in warm["outputs"].values()]
    return {"import_ms": import_ms(name), **{k: warm[k] for k in STAGES[1:]}}, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["tiny"])
    parser.add_argument("--memory", default="texture", choices=["texture", "buffer"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default="bench_phonebox.json")
    parser.add_argument("--smoke", action="store_true", help="tiny, buffer memory, one run (CI: the tool still runs)")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.memory, args.repeat = ["tiny"], "buffer", 1
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    report: dict = {"memory": args.memory, "models": {}}
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        root = Path(tmp)
        for model in args.models:
            x86 = compile_model(model, root / model / "x86", CompileOptions(memory=args.memory, host="native"))
            arm = compile_model(model, root / model / "arm", CompileOptions(memory=args.memory,
                                                                            cc="aarch64-linux-gnu-gcc"))
            specs = Artifact.load(x86).input_specs()
            arrays = [np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype) for s in specs]
            inputs = dict(zip(Artifact.load(x86).manifest["inputs"], arrays))
            host, host_out = side("x86", x86, inputs, root / model, args.repeat)
            box, box_out = side("box", arm, inputs, root / model, args.repeat)
            if not all(np.array_equal(a, b) for a, b in zip(host_out, box_out, strict=True)):
                raise SystemExit(f"{model}: the box's outputs differ from x86's: no figure counts")
            report["models"][model] = {"x86": host, "box": box}
    print(f"{'model':<12} {'stage':<14} {'x86 ms':>10} {'box ms':>10} {'box/x86':>8}")
    for model, row in report["models"].items():
        for stage in STAGES:
            a, b = row["x86"][stage], row["box"][stage]
            print(f"{model:<12} {stage:<14} {a:>10.1f} {b:>10.1f} {b / a if a else float('nan'):>8.1f}")
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
