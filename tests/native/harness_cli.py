"""Running the app harness (adreno-harness, built by `make native`) from tests."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np

from adreno.native.plugin import HARNESS_PATH


def run_harness(artifact, inputs: dict[str, np.ndarray], out_dir, *extra, env=None) -> subprocess.CompletedProcess:
    """Save `inputs` beside `out_dir` and run the harness on them; returns the finished process."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = []
    for name, array in inputs.items():
        path = out_dir.parent / f"{out_dir.name}-{name.replace('/', '_')}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    return subprocess.run([str(HARNESS_PATH), str(artifact), *args, "--output-dir", str(out_dir), *map(str, extra)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})


def report(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The harness's refusal: exit 2 and one line on stderr, returned."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]

