"""`--staging auto|off` (`CompileOptions.staging`): off leaves every conv kernel without a tuned config unstaged on
any target, auto stages where it pays on a GPU target; both run correctly on PoCL (`adreno run --check`), the
manifest records the choice, tuned records still win, and `adreno tune --staging off` seeds and searches unstaged
configs only. (The staging policy itself: tests/schedules/test_staging.py and test_cooperative.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import onnx
import pytest

from adreno.options import Memory, Staging
from tests.schedules.sched_helpers import check_against_onnxruntime, context, conv_model, ConvCase
from tests.kernel_files import kernel_sources

# a 3x3 conv whose adreno-740 default stages (buffers: overlapping windows; images: 8x fewer reads); 28x28: it fills
# the device unsplit (at 14x14 its texture default splits K, which does not stage)
LAYER = ConvCase(1, 16, 28, 28, 16, 3, 1, (1, 1, 1, 1), epilogue="bias_relu")


def adreno(*args, rc=0):
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == rc, f"rc {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def _conv_sources(artifact) -> list[str]:
    sources = list(kernel_sources(artifact, "*conv2d*").values())
    assert sources, sorted(kernel_sources(artifact))
    return sources


@pytest.mark.parametrize("staging", ["off", "auto"])
def test_compile_staging_on_the_command_line(staging, tmp_path):
    model = tmp_path / "conv.onnx"
    onnx.save(conv_model(LAYER), model)
    out = tmp_path / staging
    adreno("compile", model, "--target", "adreno-740", "--memory", "texture", "--winograd", "off",
           "--staging", staging, "-o", out, "-q")
    staged = ["__local" in source for source in _conv_sources(out)]
    assert staged == [staging == "auto"] * len(staged)
    assert json.loads((out / "manifest.json").read_text())["staging"] == staging
    assert ": OK" in adreno("run", out, "--check", "--repeat", "1").stdout


def test_a_bad_staging_value_is_a_usage_error(tmp_path):
    proc = adreno("compile", "tiny", "--staging", "on", "-o", tmp_path / "x", rc=2)
    assert "--staging" in proc.stderr and "invalid choice" in proc.stderr
    assert "invalid choice" in adreno("tune", "tiny", "--staging", "on", rc=2).stderr


@pytest.mark.parametrize("memory", [Memory.BUFFER, Memory.TEXTURE])
def test_off_is_unstaged_and_records_still_win(memory, tmp_path):
    """Buffers (conv2d_direct) too, on a GPU target; a tuned record with `cooperative` 1 is still staged under off."""
    from adreno.records import Database, Record
    from adreno.schedules import conv2d_direct, conv2d_texture
    from tests.schedules.sched_helpers import primitive_function

    model = conv_model(LAYER)
    off = check_against_onnxruntime(model, tmp_path / "off", memory, winograd="off", staging="off")
    assert not any("__local" in source for source in _conv_sources(off))
    family = conv2d_texture.FAMILY if memory is Memory.TEXTURE else conv2d_direct.FAMILY
    func, target = primitive_function(model, "fused_conv2d", memory=memory)
    wl = family.workload(func)
    staged = family.default_config(wl, target)
    unstaged = family.default_config(wl, replace(target, staging=Staging.OFF))
    assert staged["cooperative"] == 1 and unstaged["cooperative"] == 0
    records = tmp_path / "records.jsonl"
    Database(records).append([Record(family.workload_key(func), "test-device", staged, seconds=[1e-3])])
    tuned = check_against_onnxruntime(model, tmp_path / "tuned", memory, winograd="off", staging="off",
                                      records=str(records))
    assert all("__local" in source for source in _conv_sources(tuned))


def test_tune_and_model_defaults_under_off_stay_unstaged():
    """`adreno tune --staging off`: the task's seed is unstaged and its space holds only unstaged configs (a layout
    task's too); `--defaults model --staging off` never ranks a staged config first."""
    from adreno.costmodel.ranked_defaults import RankedDefaults
    from adreno.schedules.family import Matched
    from adreno.tune.extract import extract_tasks
    from adreno.options import CompileOptions

    model = conv_model(ConvCase(1, 64, 14, 14, 64, 3, 1, (1, 1, 1, 1)))
    for staging, seeds in (("auto", {1}), ("off", {0})):
        for task in extract_tasks(model, CompileOptions(target="adreno-740", memory="buffer", staging=staging),
                                  layouts=True):
            assert {c["cooperative"] for c in task.seed_configs()} == seeds, (staging, task.key)
            assert task.space().knobs["cooperative"] == ([0] if staging == "off" else [0, 1])
    (task,) = extract_tasks(model, CompileOptions(target="adreno-740", memory="texture", staging="off"))
    ranker = RankedDefaults(samples=200)
    picked = ranker(task.schedule_family, Matched(task.workload, task.key, None), task.default_config(),
                    context("adreno-740", staging=Staging.OFF))
    assert picked["cooperative"] == 0
