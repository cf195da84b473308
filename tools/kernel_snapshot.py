"""Snapshot of compiled kernels, the proof that a refactor left the behaviour unchanged (issue 23).

Compiles the zoo's ResNet-18 and MobileNetV2 for pocl-cpu, adreno-740 and nvidia-h200 in both memories and writes
a JSON of the sha256 of every kernel source and every launch's sizes from plan.json. `--diff A B` compares two
snapshots and exits 1 when they differ. Slow (12 compiles): run it in the background.

    python tools/kernel_snapshot.py snapshot.json
    python tools/kernel_snapshot.py --diff before.json after.json
"""

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

MODELS = ("resnet18", "mobilenetv2")
TARGETS = ("pocl-cpu", "adreno-740", "nvidia-h200")
MEMORIES = ("texture", "buffer")


def _launches(plan: dict) -> list:
    """Every kernel launch's name and sizes (its args are the plan's tensors, digested with the plan's steps)."""
    return [[step["func"], {k: v for k, v in kernel.items() if k != "args"}]
            for step in plan["steps"] for kernel in step["kernels"]]


def snapshot_one(model: str, target: str, memory: str) -> dict:
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model
    from adreno.options import CompileOptions, Memory

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "artifact"
        compile_model(model, out, CompileOptions(target=target, memory=Memory(memory)))
        # the sources' hashes keyed by the plain .cl name, so a snapshot compares with one of an older commit
        artifact = Artifact.load(out)
        kernels = {Path(rel).name.removesuffix(".gz"): hashlib.sha256(artifact.kernel_source(name).encode()).hexdigest()
                   for name, rel in sorted(artifact.plan.programs.items())}
        return {"kernels": kernels, "launches": _launches(json.loads((out / "plan.json").read_text()))}


def diff(a: dict, b: dict) -> list[str]:
    lines = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            lines.append(f"{key}: only in {'B' if key not in a else 'A'}")
        elif a[key] != b[key]:
            ka, kb = a[key]["kernels"], b[key]["kernels"]
            changed = sorted(n for n in set(ka) | set(kb) if ka.get(n) != kb.get(n))
            lines.append(f"{key}: {len(changed)} kernel sources differ {changed[:5]}"
                         + ("; launch sizes differ" if a[key]["launches"] != b[key]["launches"] else ""))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", help="the snapshot JSON to write")
    parser.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two snapshots")
    args = parser.parse_args()
    if args.diff:
        a, b = (json.loads(Path(p).read_text()) for p in args.diff)
        lines = diff(a, b)
        print("\n".join(lines) if lines else f"identical: {len(a)} compiles, "
              f"{sum(len(v['kernels']) for v in a.values())} kernel sources, same launch sizes")
        return 1 if lines else 0
    if not args.output:
        parser.error("give an output path or --diff A B")
    result = {}
    for model in MODELS:
        for target in TARGETS:
            for memory in MEMORIES:
                key = f"{model}/{target}/{memory}"
                result[key] = snapshot_one(model, target, memory)
                print(f"{key}: {len(result[key]['kernels'])} kernels", flush=True)
                Path(args.output).write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
