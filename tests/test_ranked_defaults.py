"""Model-ranked compile defaults (`adreno/costmodel/ranked_defaults.py`, `adreno compile --defaults model`): every
pick is in its family's space and meets the occupancy rule as the rule default does (on adreno-740 every conv and
Winograd GEMM launch keeps >= 2,048 work-items), ranking a kernel stays far under a second, a compile with model
defaults runs and matches onnxruntime in both memories, and tuning records still win over the model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import pytest

from adreno.targets import devices
from adreno.costmodel.ranked_defaults import RankedDefaults
from adreno.records import Database, Record
from adreno.schedules import conv2d_winograd, occupancy
from adreno.schedules.family import Matched
from tests.schedules.test_occupancy import CASES, FLOOR
from tests.schedules.sched_helpers import context
from tests.kernel_files import kernel_sources


def _matched(family, wl):
    gemm_or_transform = conv2d_winograd.STAGE_KNOBS.get(conv2d_winograd.base_stage(wl[0])) \
        if family is conv2d_winograd.FAMILY else None
    return Matched(wl, f"{family.name}|{wl!r}", None, gemm_or_transform)


@pytest.mark.parametrize("name", ["adreno-740", "nvidia-h200", "pocl-cpu"])
def test_ranked_defaults_are_legal_and_fill_the_device(name):
    device, target = devices.get_device(name), context(name)
    ranker, slowest = RankedDefaults(), 0.0
    for _, wl, module, launch, _ in CASES:
        family, rule = module.FAMILY, module.default_config(wl, target)
        started = time.perf_counter()
        config = ranker(family, _matched(family, wl), rule, target)
        slowest = max(slowest, time.perf_counter() - started)
        family.check_config(wl, config, target)
        found, by_rule = launch(wl, config), launch(wl, rule)
        assert occupancy.fills(device, found) or found.work_items >= by_rule.work_items, (wl, config, found)
        if name == "adreno-740":
            assert found.work_items >= FLOOR, (wl, config, found)
    summary = ranker.summary()
    # the transforms are not described by the model; every conv and GEMM is, and the model moves some of them
    assert summary["ranked"] > len(CASES) // 2 and summary["changed"] > 0, summary
    assert all(k["score"] >= k["rule_score"] for k in summary["kernels"].values())
    assert slowest < 5.0, slowest  # about 0.1 s per kernel on a quiet core (docs/guide.md)


def _cli(*args, timeout=600):
    done = subprocess.run([sys.executable, "-m", "adreno.cli", *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _compile_and_check(out, memory):
    _cli("compile", "resnet18_block", "--host", "native", "--memory", memory, "-o", str(out), "-q",
         "--defaults", "model")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["defaults"] == "model"
    ranked = manifest["model_defaults"]
    assert ranked["changed"] >= 1 and ranked["max_seconds"] < 5.0, ranked  # the Winograd GEMM of the 3x3 convs
    plan = json.loads((out / "plan.json").read_text())
    sizes = [k["global_size"] for s in plan["steps"] for k in s["kernels"] if "winograd" in s["func"]]
    assert sizes and all(math.prod(size) >= FLOOR for size in sizes), sizes
    assert "OK" in _cli("run", str(out), "--check", "--repeat", "1").stdout
    return ranked["kernels"]


def test_model_defaults_compile_and_check_with_textures(tmp_path):
    _compile_and_check(tmp_path / "blk", "texture")


def test_model_defaults_compile_and_check_on_buffers_and_records_win(tmp_path):
    model_out, tuned_out, rule_out = tmp_path / "model", tmp_path / "tuned", tmp_path / "rule"
    ranked = _compile_and_check(model_out, "buffer")
    key, choice = next((k, v) for k, v in ranked.items() if v["config"] != v["rule"])
    Database(tmp_path / "r.jsonl").append([Record(key, "test-device", choice["rule"], seconds=[1e-3])])
    _cli("compile", "resnet18_block", "--host", "native", "--memory", "buffer", "-o", str(tuned_out), "-q",
         "--records", str(tmp_path / "r.jsonl"), "--defaults", "model")
    manifest = json.loads((tuned_out / "manifest.json").read_text())
    assert manifest["tuned_kernels"] == 1 and key not in manifest["model_defaults"]["kernels"]
    _cli("compile", "resnet18_block", "--host", "native", "--memory", "buffer", "-o", str(rule_out), "-q")
    manifest = json.loads((rule_out / "manifest.json").read_text())
    assert manifest["defaults"] == "rule" and manifest["model_defaults"] is None  # the default
    # the tuned knobs (the rule's) give the rule's kernels, not the model's
    sources = [kernel_sources(out) for out in (tuned_out, rule_out, model_out)]
    assert sources[0] == sources[1] != sources[2]
