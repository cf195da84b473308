"""Real tuning on PoCL: extraction, improvement over the default schedule, kill -9 and resume, --records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from adreno.records import Database
from adreno.tune.extract import extract_tasks
from tests.conftest import save_conv3x3


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    return save_conv3x3(tmp_path_factory.mktemp("models") / "conv32.onnx", 32, 32, 28)


def tune(*args, timeout=600):
    """`adreno tune` of the NCHW buffer kernels (texture tuning: tests/tune/test_texture_tuning.py)."""
    return subprocess.run([sys.executable, "-m", "adreno.cli", "tune", "--memory", "buffer", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_extract_tasks_weights_and_families():
    tasks = extract_tasks("resnet18_block")
    assert len(tasks) == 1 and tasks[0].weight == 2 and tasks[0].family == "conv2d_direct"
    tasks = extract_tasks("tiny")
    assert {t.family for t in tasks} == {"conv2d_direct", "depthwise", "pool", "reduce"}
    assert all(t.flops > 0 for t in tasks)
    assert tasks == sorted(tasks, key=lambda t: t.weight * t.flops, reverse=True)


def test_tuning_improves_a_conv_over_its_default(conv_model, tmp_path):
    records = tmp_path / "r.jsonl"
    # On one CI machine the default was the fastest of the first 16 candidates. A user who sees no gain yet runs the
    # same command again, which resumes the search: so up to two runs of 32 trials.
    for runs in (1, 2):
        proc = tune(conv_model, "--trials", 32, "--batch", 8, "--records", records, "--report", tmp_path / "rep.json")
        assert proc.returncode == 0, proc.stderr
        row = json.loads((tmp_path / "rep.json").read_text())["tasks"][0]
        if row["default_ms"] and row["best_ms"] < row["default_ms"]:
            break
    db = Database(records)
    assert row["default_ms"] and row["best_ms"] < row["default_ms"], row
    assert row["best_ms"] == pytest.approx(min(r.median for r in db.records if r.ok) * 1e3, abs=1e-3)
    assert row["trials"] == len(db.records) == 32 * runs and all(r.ok or r.error for r in db.records)
    assert all(r.extra.get("max_error") is not None for r in db.records if r.ok), "timings only after a check"
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "[####################" in proc.stderr and "best" in proc.stderr


def test_sigkill_and_resume_loses_and_duplicates_nothing(conv_model, tmp_path):
    records = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "adreno.cli", "tune", "--memory", "buffer", str(conv_model),
                             "--trials", "64", "--batch", "4", "--records", str(records), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and (not records.exists() or len(records.read_text().splitlines()) < 8):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = Database(records)
    assert len(before.records) >= 8
    done = tune(conv_model, "--trials", 8, "--batch", 4, "--records", records, "-q")
    assert done.returncode == 0, done.stderr
    after = Database(records)
    configs = [json.dumps(r.config, sort_keys=True) for r in after.records]
    assert len(after.records) == len(before.records) + 8, "the resumed run adds exactly its own trials"
    assert len(set(configs)) == len(configs), "no candidate measured twice"
    assert [r.trial for r in after.records] == list(range(1, len(after.records) + 1))
    assert after.skipped == before.skipped


def test_compile_with_records_applies_best_config(conv_model, tmp_path):
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.records import Record

    key = extract_tasks(conv_model)[0].key
    config = {"tile_f": 2, "tile_y": 1, "tile_x": 2, "threads_f": 4, "threads_y": 2, "threads_x": 7,
              "tile_rc": 1, "unroll_k": 0, "stage": 0}
    records = tmp_path / "r.jsonl"
    Database(records).append([Record(key, "dev", config, [1e-3], trial=1),
                              Record(key, "dev", {**config, "tile_f": 4}, [2e-3], trial=2)])
    default = Artifact.load(compile_model(conv_model, tmp_path / "default", CompileOptions(memory="buffer")))
    tuned = Artifact.load(compile_model(conv_model, tmp_path / "tuned", CompileOptions(records=str(records))))
    local = [k.local_size for s in tuned.plan.steps for k in s.kernels]
    assert [7, 2, 4] in local and local != [k.local_size for s in default.plan.steps for k in s.kernels]
    assert tuned.manifest["tuned_kernels"] == 1 and default.manifest["tuned_kernels"] == 0


def test_plot_reports_the_file_it_wrote(tmp_path):
    """matplotlib adds .png to a name without an extension: `plot_history` returns that name (tune prints it), and
    a directory named without one is not written into."""
    from types import SimpleNamespace

    from adreno.tune.tuner import plot_file, plot_history

    (tmp_path / "bad").mkdir()
    report = SimpleNamespace(tasks=[{"task": "t", "weight": 1, "history": [(1, 2e-3), (2, 1e-3)]}])
    assert plot_file(tmp_path / "p.png") == tmp_path / "p.png"
    assert plot_history(report, tmp_path / "bad") == str(tmp_path / "bad.png")
    assert (tmp_path / "bad.png").is_file() and not list((tmp_path / "bad").iterdir())


def test_plottable_refuses_a_format_before_the_tuning(tmp_path):
    """The plot is written after the tuning: an extension matplotlib cannot write (or pgf, which needs LaTeX) is
    refused by name first; any case of a supported one, or none (a PNG), passes."""
    from types import SimpleNamespace

    from adreno.errors import AdrenoError
    from adreno.tune.tuner import plot_history, plottable

    assert plottable(tmp_path / "p") == tmp_path / "p.png"
    report = SimpleNamespace(tasks=[{"task": "t", "weight": 1, "history": [(1, 2e-3)]}])
    assert plot_history(report, plottable(tmp_path / "p.SVG")).endswith("p.SVG")
    assert (tmp_path / "p.SVG").read_text().lstrip().startswith("<?xml")
    for name in ("x.foo", "x.pgf"):
        with pytest.raises(AdrenoError, match=r"cannot write a \.\w+ plot; .*\.png, .*\.svg"):
            plottable(tmp_path / name)
