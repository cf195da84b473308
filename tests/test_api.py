"""The Python API (adreno/api.py, docs/python.md): the documented example runs as printed, a mismatch raises, bad
modes are one-line AdrenoErrors, and `import adreno` does not load the API."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adreno
from adreno.errors import AdrenoError, OutputMismatchError

ROOT = Path(__file__).resolve().parents[1]


def test_the_documented_example_runs_as_printed(tmp_path):
    example = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), re.S).group(1)
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "matches onnxruntime: True" in proc.stdout and "of 10" in proc.stdout, proc.stdout


def test_check_raises_on_a_mismatch_and_run_takes_inputs_three_ways(tiny_artifact):
    with adreno.load(tiny_artifact) as artifact:
        seeded = artifact.run()
        (name,) = artifact.input_names
        from adreno.artifact.format import random_inputs

        arrays = random_inputs(artifact.stored.input_specs(), 0)
        assert np.array_equal(artifact.run(arrays)[0], seeded[0])
        assert np.array_equal(artifact.run({name: arrays[0]})[0], seeded[0])
        assert artifact.check()["ok"]
        artifact._run = lambda stored, inputs: [np.zeros_like(o) for o in seeded]  # outputs gone wrong, ort real
        with pytest.raises(OutputMismatchError, match="does not match onnxruntime"):
            artifact.check()
        with pytest.raises(AdrenoError, match="2 arrays for the 1 inputs"):
            artifact.run([arrays[0], arrays[0]])


def test_modes_are_enums_or_their_values_and_a_bad_one_is_one_line(tmp_path):
    with pytest.raises(AdrenoError, match="--memory must be one of"):
        adreno.compile("tiny", memory="ram", output=tmp_path / "x")
    with pytest.raises(AdrenoError, match="trials and batch must be at least 1"):
        adreno.tune("tiny", trials=0, records=tmp_path / "r.jsonl")
    assert not (tmp_path / "x").exists()


def test_importing_adreno_does_not_load_the_api():
    code = ("import sys, adreno; assert 'adreno.api' not in sys.modules; adreno.compile; "
            "assert 'adreno.api' in sys.modules")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_tune_measures_through_the_runner_given(tmp_path):
    """One measurement on the local PoCL device through the runner given, appended to the records."""
    from adreno.runners.local import LocalRunner

    records = tmp_path / "tiny.jsonl"
    report = adreno.tune("tiny", trials=1, batch=1, records=records, runner=LocalRunner())
    assert report.trials == 1 and len(records.read_text().splitlines()) == 1
