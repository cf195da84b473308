"""Offline tuning batches on PoCL: export, measure where TVM cannot be imported, import (twice, torn, foreign),
then `compile --records` applies the imported best and `run --check` passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from tests.conftest import single_op_model, without_tvm
from tests.launch import local_size

from adreno.records import Database
from adreno.tune.batch import model_quality

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def measure(batch, no_tvm_path):
    """`python -m adreno.runners.offline` where importing tvm, onnx or onnxruntime fails (in its build workers too),
    as on a machine that has neither."""
    return subprocess.run([sys.executable, "-m", "adreno.runners.offline", str(batch), "--device", "pocl",
                           "--repeat", "3", "--jobs", "2"], capture_output=True, text=True, timeout=600,
                          env=without_tvm(no_tvm_path))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("models")
    paths = []
    for channels in (16, 24):
        path = root / f"conv{channels}.onnx"
        onnx.save(single_op_model("Conv", {"x": [1, channels, 14, 14]},
                                  {"w": rng.standard_normal((channels, channels, 3, 3)) * 0.1}, pads=[1, 1, 1, 1]),
                  path)
        paths.append(path)
    return paths


def test_round_trip(models, no_tvm_path, tmp_path):
    model, other = models
    batch, records = tmp_path / "batch", tmp_path / "r.jsonl"
    done = cli("tune", model, "--memory", "buffer", "--no-layouts", "--export-batch", batch, "--trials", 4, "-q")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((batch / "batch.json").read_text())
    assert len(manifest["tasks"]) == 1 and len(manifest["candidates"]) == 4
    assert [c["source"] for c in manifest["candidates"]][0] == "default"
    # every candidate carries the cost models' scores, for the measuring side's ranking quality
    assert all(set(c["predicted"]) == {"analytical", "learned"} for c in manifest["candidates"])

    done = measure(batch, no_tvm_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["measured"] == 4
    results = Database(batch / "records.jsonl").records
    assert len(results) == 4 and all(r.device.startswith("pocl-cpu|") for r in results)
    assert sum(r.ok for r in results) >= 2, [r.error for r in results]
    quality = model_quality(manifest, results)
    assert set(quality) == {"analytical", "learned"}
    (task,) = quality["analytical"]["tasks"].values()
    assert task["rows"] == 4 and -1 <= task["pearson"] <= 1 and task["top5"] == 1.0  # 4 rows: all in the top 5
    # tools/model_quality.py scores the same records from the model's tasks: the analytical model's Pearson again
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "model_quality.py"), str(batch / "records.jsonl"),
                           "--model", str(model), "--memory", "buffer", "--no-layouts", "--target", "adreno-740",
                           "--json", str(tmp_path / "q.json")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "q.json").read_text())
    assert table["mean"]["pearson"] == pytest.approx(task["pearson"], abs=1e-3) and "mean over 1 tasks" in done.stdout

    # another model's batch and another version's batch are refused with one line and status 2
    refused = cli("tune", other, "--import-batch", batch, "--records", records)
    assert refused.returncode == 2 and "exported for model" in refused.stderr and "Traceback" not in refused.stderr
    (tmp_path / "old").mkdir()
    old = {**manifest, "adreno_version": "0.0.1"}
    (tmp_path / "old" / "batch.json").write_text(json.dumps(old))
    refused = cli("tune", model, "--import-batch", tmp_path / "old", "--records", records)
    assert refused.returncode == 2 and "adreno 0.0.1" in refused.stderr

    # a torn results file (killed mid-line) loses only its unfinished candidate
    torn = tmp_path / "torn"
    subprocess.run(["cp", "-r", str(batch), str(torn)], check=True)
    raw = (torn / "records.jsonl").read_bytes()
    (torn / "records.jsonl").write_bytes(raw[: raw.rstrip(b"\n").rfind(b"\n") + 40])
    done = cli("tune", model, "--import-batch", torn, "--records", tmp_path / "t.jsonl")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["imported"] == 3 and summary["unmeasured"] == 1 and summary["torn_lines"] == 1

    for expected in (4, 0):  # importing twice changes nothing
        done = cli("tune", model, "--import-batch", batch, "--records", records)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["imported"] == expected
    merged = Database(records)
    assert len(merged.records) == 4
    best = min((r for r in merged.records if r.ok), key=lambda r: r.median)

    artifact = tmp_path / "tuned"
    done = cli("compile", model, "-o", artifact, "--records", records)
    assert done.returncode == 0, done.stderr
    plan = json.loads((artifact / "plan.json").read_text())
    manifest_art = json.loads((artifact / "manifest.json").read_text())
    assert manifest_art["tuned_kernels"] == 1
    conv = [k for s in plan["steps"] for k in s["kernels"] if "conv" in s["func"]]
    threads = local_size(*(best.config.get(knob, 1) for knob in ("threads_x", "threads_y", "threads_f", "threads_k")))
    assert any(k["local_size"] == threads for k in conv), (conv, best.config)
    done = cli("run", artifact, "--check")
    assert done.returncode == 0, done.stderr + done.stdout


def test_measure_refuses_a_non_batch(no_tvm_path, tmp_path):
    done = measure(tmp_path, no_tvm_path)
    assert done.returncode == 2 and "not a batch" in done.stderr


def test_export_never_replaces_a_directory_of_other_files(tmp_path, capsys):
    from adreno.cli.main import main

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["tune", "tiny", "--export-batch", str(mine), "--trials", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "other files in it" in err and len(err.splitlines()) == 1, err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"


def test_export_replaces_only_an_unmeasured_batch_of_its_own(tmp_path, capsys):
    """An earlier, unmeasured batch is replaced; a stray batch.json among a user's files, an earlier batch with
    other files in it, and one holding measured records are refused in one line, nothing deleted."""
    from adreno.cli.main import main

    def refused(batch, message):
        before = sorted(p.name for p in batch.iterdir())
        assert main(["tune", "tiny", "-q", "--export-batch", str(batch), "--trials", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {batch}") and message in err and len(err.splitlines()) == 1, err
        assert sorted(p.name for p in batch.iterdir()) == before

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "batch.json").write_text('{"hello": 1}')
    (foreign / "data.txt").write_text("keep me")
    refused(foreign, "not an earlier batch")
    (foreign / "batch.json").write_text("not json")
    refused(foreign, "not an earlier batch")
    batch = tmp_path / "batch"
    for _ in range(2):  # the second export replaces the first
        assert main(["tune", "tiny", "-q", "--export-batch", str(batch), "--trials", "1"]) == 0
    (batch / "notes.txt").write_text("keep me")
    refused(batch, "other files in it (notes.txt)")
    (batch / "notes.txt").unlink()
    (batch / "records.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    refused(batch, "holds 2 measured record(s)")
    assert (batch / "records.jsonl").read_text() == '{"a": 1}\n{"b": 2}\n'


@pytest.mark.parametrize("manifest", ["[1]", '{"format": 1, "tasks": [], "candidates": [{"id": "T0-0", "task": 0}]}',
                                      '{"format": 1, "tasks": [[1]], "candidates": []}',
                                      '{"format": 1, "tasks": "x", "candidates": []}', "directory", "file"])
def test_a_corrupt_batch_is_one_line(manifest, tmp_path, capsys):
    """A manifest that is no object, tasks that are no list of objects, a candidate of a task that is not there,
    a batch.json that is a directory, a batch that is a file: one line wherever a batch is read."""
    from adreno.cli.main import main

    batch = tmp_path / "batch"
    if manifest == "file":
        batch.write_text("x")
    else:
        batch.mkdir()
        if manifest == "directory":
            (batch / "batch.json").mkdir()
        else:
            (batch / "batch.json").write_text(manifest)
    for args in (["tune", "tiny", "--import-batch", str(batch), "--records", str(tmp_path / "r.jsonl")],
                 ["orchestrate", "tiny", "--report", "--batch", str(batch)],
                 ["compile", "tiny", "--orchestrate", "--measure-batch", str(batch), "-o", str(tmp_path / "a")]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and str(batch) in err and len(err.splitlines()) == 1, err
