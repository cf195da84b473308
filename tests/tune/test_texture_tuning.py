"""Tuning texture-memory convs on PoCL: task extraction from the texture-lowered model, candidates measured on
images (the conv kernel alone, checked), records that `adreno compile` applies in texture memory."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.options import CompileOptions
from adreno.records import Database
from adreno.tune.extract import extract_tasks
from tests.conftest import save_conv3x3
from tests.launch import local_size
from tests.schedules.sched_helpers import context

TARGET = context("adreno-740")


def _cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One real `adreno tune` (texture memory by default) of a 16->32 channel 3x3 conv: 8 trials in one batch, the
    conv tuned as a direct texture kernel (`--no-layouts`; its layout choice is tests/tune/test_layout.py's).
    Its candidate artifacts are kept in build/tune (`--keep-candidates`) to be inspected."""
    work = tmp_path_factory.mktemp("texture-tune")
    model = save_conv3x3(work / "conv16.onnx", 16, 32, 16)
    proc = _cli("tune", model, "--trials", 8, "--batch", 8, "--no-layouts", "--records", work / "r.jsonl",
                "--report", work / "rep.json", "--keep-candidates", work / "build" / "tune", cwd=work)
    assert proc.returncode == 0, proc.stderr
    return work, model, Database(work / "r.jsonl"), json.loads((work / "rep.json").read_text())


def test_texture_tasks_are_the_packed_convs_weighted_by_calls():
    tasks = extract_tasks("tiny", CompileOptions(memory="texture"))
    assert {t.family for t in tasks} == {"conv2d_texture", "conv2d_1x1", "reduce"}
    convs = [t for t in tasks if t.family.startswith("conv2d")]
    assert sorted(t.key.split("|")[0] for t in convs) == ["conv2d_1x1_nchw4c", "conv2d_nchw4c", "depthwise_nchw4c"]
    assert all(("k1x1" in t.key) == (t.family == "conv2d_1x1") for t in convs)  # 1x1 convs are GEMM tasks
    assert all(t.weight == 1 and t.flops > 0 for t in tasks)
    for task in convs:  # packed activations in activation images, constants in weight images, output last
        scopes = task.scopes
        assert scopes[0] == scopes[-1] == "global.texture" and scopes[1] == "global.texture-weight", scopes
    assert next(t for t in tasks if t.family == "reduce").scopes is None  # the softmax stays a buffer kernel
    (block,) = extract_tasks("resnet18_block", CompileOptions(memory="texture"))  # two 3x3 convs of one workload
    assert block.weight == 2 and len(block.names) == 2 and block.key.startswith("conv2d_nchw4c|n1c64h56w56|o64")
    assert extract_tasks("resnet18_block")[0].family == "conv2d_direct"  # the API's default stays buffer


def test_tuning_measures_checked_texture_candidates_of_the_conv_kernel_alone(tuned):
    work, _, db, report = tuned
    (row,) = report["tasks"]
    assert row["family"] == "conv2d_texture" and row["key"].startswith("conv2d_nchw4c|n1c16h16w16|o32k3x3")
    assert row["trials"] == 8 and len(db.records) == 8
    ok = [r for r in db.records if r.ok]
    assert len(ok) >= 6, [r.error for r in db.records]
    assert all(r.extra["max_error"] is not None and r.extra["max_error"] < 1e-3 for r in ok), "checked first"
    assert row["default_ms"] is not None and row["best_ms"] <= row["default_ms"]
    assert row["best_ms"] == pytest.approx(min(r.median for r in ok) * 1e3, abs=1e-3)
    plans = [Artifact.load(p.parent).plan for p in (work / "build" / "tune").glob("*/manifest.json")]
    assert len(plans) == 8
    for plan in plans:  # one conv step on images: no pack/unpack kernel in the time
        assert len(plan.steps) == 1 and plan.steps[0].op == "conv2d_texture"
        assert {t.scope for t in plan.tensors.values()} == {"global.texture", "global.texture-weight"}


def test_compile_keeps_texture_memory_and_applies_the_records(tuned):
    work, model, db, report = tuned
    best = db.best(report["tasks"][0]["key"]).config
    built = _cli("compile", model, "--records", work / "r.jsonl", "--host", "native", "-o", work / "tuned")
    assert built.returncode == 0, built.stderr
    artifact = Artifact.load(work / "tuned")
    assert artifact.manifest["memory"] == "texture" and artifact.manifest["tuned_kernels"] == 1
    (conv,) = [s for s in artifact.plan.steps if s.op == "conv2d"]
    assert conv.kernels[0].local_size == local_size(best["threads_x"], best["threads_y"], best["threads_cb"],
                                                    best.get("threads_k", 1))
    checked = _cli("run", work / "tuned", "--check", "--repeat", 1)
    assert checked.returncode == 0 and ": OK" in checked.stdout, checked.stdout + checked.stderr


def test_a_config_the_schedule_refuses_is_an_error_record(tmp_path, pocl_device):
    from adreno.runners.local import LocalRunner
    from adreno.tune.builder import Builder
    from adreno.tune.tuner import Tuner

    task = next(t for t in extract_tasks("tiny", CompileOptions(memory="texture")) if t.key.startswith("depthwise"))
    refused = {**task.default_config(), "tile_cb": 8, "tile_y": 4, "tile_x": 8}  # 256 float4 registers
    assert not task.space().valid(refused)
    result = task.build(refused, str(tmp_path / "direct"))
    assert result.artifact is None and "register tile" in result.error
    runner, database = LocalRunner(pocl_device), Database(tmp_path / "r.jsonl")
    tuner = Tuner([task], runner, database, "pocl", batch=1, builder=Builder(1, tmp_path / "build"))
    try:
        state = tuner.states[0]
        state.space.valid = lambda config: True  # let the tuner build what the space would never propose
        state.seeds = [state.space.candidate(refused)]
        (record,) = tuner.run_round(state)
    finally:
        tuner.builder.close()
        runner.close()
    assert not record.ok and record.stage == "build" and "register tile" in record.error
    assert Database(tmp_path / "r.jsonl").records[0].error == record.error and math.isinf(state.best_seconds)


def test_texture_configs_featurize_as_the_direct_conv_they_tile():
    from adreno.costmodel.features import FEATURE_NAMES

    col = FEATURE_NAMES.index
    for task in [t for t in extract_tasks("tiny", CompileOptions(memory="texture")) if t.family == "conv2d_texture"]:
        space = task.space()
        rng = np.random.default_rng(0)
        configs = [task.default_config()] + [space.config(space.random(rng)) for _ in range(30)]
        rows = task.featurize(configs, None)
        assert np.all(np.isfinite(rows)) and len({tuple(r) for r in rows}) > 20
        for cfg, row in zip(configs, rows):
            assert row[col("tile_f")] == 4 * cfg["tile_cb"] and row[col("threads_f")] == cfg["threads_cb"]
            assert row[col("tile_rc")] == (1 if task.workload.is_depthwise else 4)
            if not cfg.get("cooperative"):  # unstaged: no local memory
                assert row[col("log_local_fit")] == row[col("log_bank_conflict")] == 0.0


def test_fp16_images_are_measured_against_a_reference_of_the_half_inputs(tmp_path, pocl_device):
    from adreno.runners.interface import RunInput
    from adreno.runners.local import LocalRunner

    task = extract_tasks("tiny", CompileOptions(memory="texture", precision="fp16"))[0]
    built = task.build(task.default_config(), str(tmp_path / "c"))
    assert built.error is None
    plan = Artifact.load(built.artifact).plan
    assert {i["channel_type"] for i in plan.images.values()} == {"float16"}
    inputs = task.inputs()
    assert all(np.array_equal(a, a.astype(np.float16)) for a in inputs)
    result = LocalRunner(pocl_device).run(RunInput(built.artifact, inputs, task.reference(inputs), repeat=1))
    assert result.ok, result.error


def test_fp16_tuning_records_say_so_and_fp32_tuning_does_not_resume_from_them(tmp_path, pocl_device):
    from adreno.runners.local import LocalRunner
    from adreno.tune.builder import Builder
    from adreno.tune.tuner import Tuner

    runner, database = LocalRunner(pocl_device), Database(tmp_path / "r.jsonl")
    builder = Builder(1, tmp_path / "build")
    try:
        for precision in ("fp16", "fp32"):
            task = extract_tasks("tiny", CompileOptions(memory="texture", precision=precision))[0]
            assert task.precision == precision
            tuner = Tuner([task], runner, database, "pocl", batch=2, builder=builder)
            assert not tuner.states[0].measured  # nothing of the other precision counts as measured
            tuner.run_round(tuner.states[0])
    finally:
        builder.close()
        runner.close()
    assert [r.precision for r in Database(tmp_path / "r.jsonl").records] == ["fp16"] * 2 + ["fp32"] * 2
