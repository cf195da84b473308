"""The GPU bundle (tools/gpu_bundle.py, tools/gpu_check.sh) in its quick form: prepare is complete (every artifact
loads once its params are drawn again, every checksum matches) and small, and the dry run on PoCL writes the conv
table, whole-model rows, tuning records that `adreno compile --records` takes, orchestration's costs that
`adreno orchestrate --batch` reads back, and the summary."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tests.conftest import without_tvm

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "b"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_bundle.py"), "prepare", str(out), "--quick"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_prepare_is_small_and_complete(bundle, tmp_path):
    from adreno.artifact.format import Artifact
    from adreno.runners.batch_dir import read_manifest
    from adreno.runners.offline import (PARAM_SEEDS, candidate_artifact, load_reference, restore_params,
                                        task_inputs_checked)

    meta = json.loads((bundle / "bundle.json").read_text())
    payload = bundle / "payload.tar.xz"
    assert sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) < 60 * 2**20
    assert hashlib.sha256(payload.read_bytes()).hexdigest() == meta["payload_sha256"]
    with tarfile.open(payload) as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / "payload"
    travelling = sorted(p.parent for p in root.rglob(PARAM_SEEDS))
    assert not list(root.rglob("params.npz")), "params must travel as seeds"
    assert not list(root.rglob("lib.so")) and not list(root.rglob("lib.tar"))
    # conv columns of the quick layer (3x3 stride 1: Winograd columns too) and three whole-model variants
    assert {p.name for p in travelling if p.parent.parent.parent.name == "conv"} == {
        "adreno", "texture", "unstaged", "unstaged_tex", "model", "model_tex", "f2", "f4", "f2_tex", "f4_tex", "tvm"}
    assert {p.name for p in travelling if p.parent.name == "whole"} == {"tiny-buffer", "tiny-texture", "tiny-fp16"}
    for artifact in travelling:
        restore_params(artifact)
        Artifact.load(artifact).params()
        assert load_reference(artifact / "ref.npz")
    for entry in meta["batches"]:
        batch = root / "batches" / entry["name"]
        manifest = read_manifest(batch)
        assert len(manifest["candidates"]) == entry["candidates"] >= entry["tasks"] > 0
        for task in manifest["tasks"]:
            assert task_inputs_checked(batch, task) and load_reference(batch / task["reference"])
        for candidate in manifest["candidates"]:
            if not candidate.get("error"):
                Artifact.load(candidate_artifact(batch, candidate))
    # orchestration's candidate kernels of the quick model in both memories, the launch-cost artifacts among them
    assert [o["name"] for o in meta["orchestrations"]] == ["tiny-texture", "tiny-buffer"]
    for entry in meta["orchestrations"]:
        batch = root / "orchestrate" / entry["name"]
        manifest = read_manifest(batch)
        assert manifest["kind"] == "orchestrate" and manifest["id"] == entry["id"]
        assert manifest["memory"] == entry["memory"] and len(manifest["candidates"]) == entry["candidates"] > 2
        assert sum("|launch|" in t["key"] for t in manifest["tasks"]) == 2
        for task, candidate in zip(manifest["tasks"], manifest["candidates"]):
            assert not candidate.get("error") and task_inputs_checked(batch, task)
            Artifact.load(candidate_artifact(batch, candidate))


def test_dry_run_on_pocl(bundle, no_tvm_path, tmp_path):
    out = tmp_path / "out"
    env = {**without_tvm(no_tvm_path), "OUT": str(out), "PYTHON": sys.executable}  # as there: no TVM, no onnx
    done = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh"), "run", str(bundle), "--device", "pocl",
                           "--repeat", "2"], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    conv = summary["conv"]["resnet18_block"]
    for ratio in ("adreno/naive", "texture/adreno", "adreno/unstaged", "texture/unstaged_tex", "model/adreno",
                  "f2/adreno", "f4/adreno", "f2_tex/texture", "f4_tex/texture"):
        assert conv["ratios"][ratio] > 0, ratio
    assert "adreno/unstaged" in (out / "summary.txt").read_text()
    whole = summary["whole"]["tiny"]["variants"]
    assert set(whole) == {"buffer", "texture", "fp16"}
    for row in whole.values():
        assert row["device_ms"] > 0 and row["cold_build_s"] > 0 and row["warm_start_s"] > 0, row
    tuning = summary["tuning"]
    assert set(tuning) == {"tiny-texture", "tiny-buffer"}
    assert all(t["ok"] >= t["tasks"] for t in tuning.values()), tuning
    # the cost models' scores stored at export, against the measured times: Pearson and top-5 per task
    for t in tuning.values():
        assert set(t["model_quality"]) == {"analytical", "learned"}, t["model_quality"]
        for quality in t["model_quality"].values():
            assert quality["tasks"] and -1 <= quality["mean"]["pearson"] <= 1, quality
            assert all(0 <= q["top5"] <= 1 and q["rows"] >= 2 for q in quality["tasks"].values()), quality
    assert any(t["model_default_tasks"] for t in tuning.values()), tuning  # the model's compile default ran too
    assert "Pearson" in (out / "summary.txt").read_text()
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert records and all(r["device"].startswith("pocl-cpu|") for r in records)
    assert not [p for p in out.rglob("*") if p.name.endswith((".clbin", ".npz"))], "only results come back"

    # orchestration's costs come back and read into a report: the same export at this commit, the records beside it
    batches = []
    for meta in json.loads((bundle / "bundle.json").read_text())["orchestrations"]:
        orchestrated = summary["orchestration"][meta["name"]]
        assert orchestrated["unmeasured"] == 0 and orchestrated["ok"] == orchestrated["candidates"], orchestrated
        again = tmp_path / f"orchestrate-{meta['name']}"
        exported = subprocess.run([sys.executable, "-m", "adreno.cli", "orchestrate", "tiny", "--export-batch",
                                   str(again), "--max-size", str(meta["max_size"]), "--target", "nvidia-h200",
                                   "--memory", meta["memory"]], capture_output=True, text=True, timeout=600)
        assert exported.returncode == 0, exported.stderr
        assert json.loads((again / "batch.json").read_text())["id"] == meta["id"]  # the export is deterministic
        (again / "records.jsonl").write_text((out / f"orchestrate_{meta['name']}.records.jsonl").read_text())
        report = subprocess.run([sys.executable, "-m", "adreno.cli", "orchestrate", "tiny", "--report", "--batch",
                                 str(again), "--max-size", str(meta["max_size"]), "--target", "nvidia-h200",
                                 "--memory", meta["memory"], "--json", str(tmp_path / "report.json")],
                                capture_output=True, text=True, timeout=600)
        assert report.returncode == 0, report.stderr
        data = json.loads((tmp_path / "report.json").read_text())
        assert data["complete"] and data["measured_now"] == 0 and data["device"].startswith("pocl-cpu|")
        batches += ["--measure-batch", str(again)]
    # both memories' costs: the compile chooses between them, measuring nothing
    chosen = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "-o", str(tmp_path / "chosen"),
                             "--orchestrate", *batches, "--max-size", str(meta["max_size"]), "--target",
                             "nvidia-h200", "--records", str(tmp_path / "costs.jsonl"), "--no-build-check"],
                            capture_output=True, text=True, timeout=600)
    assert chosen.returncode == 0, chosen.stderr
    orchestration = json.loads((tmp_path / "chosen" / "manifest.json").read_text())["orchestration"]
    assert orchestration["measured_now"] == 0 and set(orchestration["memories"]) == {"texture", "buffer"}
    assert orchestration["memory"] == min(orchestration["memories"], key=orchestration["memories"].get)

    compiled = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "-o", str(tmp_path / "tuned"),
                               "--records", str(out / "records.jsonl"), "--json"],
                              capture_output=True, text=True, timeout=600)
    assert compiled.returncode == 0, compiled.stderr
    assert json.loads((tmp_path / "tuned" / "manifest.json").read_text())["tuned_kernels"] > 0
