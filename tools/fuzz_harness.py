#!/usr/bin/env python3
"""The app harness against damaged files, end to end: issue 46's campaign, rerunnable.

    python tools/fuzz_harness.py [--cases 100] [--seed 1] [--kinds params.npz,input.npy,blob,manifest.json,plan.json]
                                 [--keep DIR] [--json fuzz_harness.json]

`tiny` is compiled once (texture memory, --host native) and run once for its reference output and its program
blob. Then, for each of the five files an app's harness reads (params.npz, the input .npy, the blob, manifest.json,
plan.json), --cases copies each get that file mutated 1 to 8 times (seeded: byte flips, interesting integers over
1-8 bytes, inserted and removed bytes, tokens such as -1, 2^62 or brackets), and the harness runs on it. Each case
is one of: refused (exit 2, one line on stderr), handled (exit 0, outputs equal to the reference's for the input
the harness was given: for a mutated .npy, the array numpy reads from it, run by the launch-plan executor), or a
finding: a crash or sanitizer report (any other exit), a hang (60 s), or a wrong output accepted (exit 0 with other
outputs, NaN equal to NaN, or an input numpy refuses); --keep copies each finding's case there. Prints a table per
file and writes everything to --json. The harness is the
one `make native` built (adreno/native/lib); for sanitizer reports build it with -fsanitize=address,undefined.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

TOKENS = [b"-1", b"0", b"99999999999999999999999", b"4611686018427387904", b"[", b"{", b"]", b'"', b",", b"false",
          b"null", b"1e400", b"(", b")", b"$", b"'descr'"]
KINDS = ("params.npz", "input.npy", "blob", "manifest.json", "plan.json")
INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFF0, 0xFFFFFFFF,
               (1 << 63) - 1, (1 << 64) - 1]


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        kind = rng.randrange(5)
        if kind == 0 and out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            width = rng.choice((1, 2, 4, 8))
            if len(out) >= width:
                at = rng.randrange(len(out) - width + 1)
                out[at:at + width] = (rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        elif kind == 2:
            at = rng.randrange(len(out) + 1)
            out[at:at] = bytes([rng.randrange(256)]) * rng.randint(1, 4)
        elif kind == 3 and out:
            at = rng.randrange(len(out))
            del out[at:at + rng.randint(1, 16)]
        elif out:
            at = rng.randrange(len(out))
            out[at:at + rng.randrange(3)] = rng.choice(TOKENS)
    return bytes(out)


def run_harness(harness: Path, artifact: Path, npy: Path, out: Path, blob: Path) -> subprocess.CompletedProcess:
    out.mkdir()
    try:
        return subprocess.run([str(harness), str(artifact), "--input", f"input={npy}", "--output-dir", str(out),
                               "--blob", str(blob)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess([], -999, "", "hang")


def verdict(proc, out: Path, expected) -> str:
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        return "refused" if len(lines) == 1 and lines[0].startswith("error: ") else "finding: refused, many lines"
    if proc.returncode != 0:
        return f"finding: exit {proc.returncode}"
    if expected is None:
        return "finding: wrong output accepted (an input numpy refuses)"
    got = np.load(out / "probs.npy")
    return "handled" if np.array_equal(got, expected, equal_nan=True) else "finding: wrong output accepted"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--keep", type=Path, help="a directory to copy each finding's case into")
    parser.add_argument("--json", default="fuzz_harness.json")
    args = parser.parse_args()
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model
    from adreno.native.plugin import HARNESS_PATH
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    rng = random.Random(args.seed)
    counts: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clean = compile_model("tiny", root / "clean", CompileOptions(memory="texture", host="native"))
        executor = Executor(Artifact.load(clean))
        x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype("float32")
        np.save(root / "input.npy", x)
        blob = root / "programs.bin"
        first = run_harness(HARNESS_PATH, clean, root / "input.npy", root / "first", blob)
        assert first.returncode == 0, first.stderr
        reference = np.load(root / "first" / "probs.npy")
        for kind in args.kinds.split(","):
            tally = counts.setdefault(kind, {})
            for case in range(args.cases):
                work = root / f"{kind}-{case}"
                artifact, npy, case_blob = work / "artifact", work / "input.npy", work / "programs.bin"
                shutil.copytree(clean, artifact)
                shutil.copy(root / "input.npy", npy)
                shutil.copy(blob, case_blob)
                target = {"input.npy": npy, "blob": case_blob}.get(kind, artifact / kind)
                target.write_bytes(mutate(target.read_bytes(), rng))
                expected = reference
                if kind == "input.npy":
                    try:
                        given = np.load(io.BytesIO(npy.read_bytes()), allow_pickle=False)
                        expected = executor.run([given])[0] if given.shape == x.shape and given.dtype == x.dtype \
                            else None
                    except Exception:  # noqa: BLE001 - numpy refuses it: the harness must too
                        expected = None
                result = verdict(run_harness(HARNESS_PATH, artifact, npy, work / "out", case_blob), work / "out",
                                 expected)
                tally[result] = tally.get(result, 0) + 1
                if result.startswith("finding") and args.keep:
                    shutil.copytree(work, args.keep / work.name)
                shutil.rmtree(work)
    print(f"{'file':<14} {'cases':>6} {'refused':>8} {'handled':>8} {'findings':>9}")
    for kind, tally in counts.items():
        findings = sum(n for v, n in tally.items() if v.startswith("finding"))
        print(f"{kind:<14} {sum(tally.values()):>6} {tally.get('refused', 0):>8} {tally.get('handled', 0):>8} "
              f"{findings:>9}")
    Path(args.json).write_text(json.dumps({"cases_per_file": args.cases, "seed": args.seed, "verdicts": counts},
                                          indent=1))


if __name__ == "__main__":
    main()
