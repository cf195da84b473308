"""Artifact loading: an incomplete, altered or foreign-version directory is a clear ArtifactError."""

from __future__ import annotations

import json
import shutil

import pytest

from adreno.artifact.format import Artifact
from adreno.errors import ArtifactError


@pytest.fixture
def artifact_copy(tiny_artifact, tmp_path):
    return shutil.copytree(tiny_artifact, tmp_path / "copy")


def test_loads_complete_artifact(tiny_artifact):
    artifact = Artifact.load(tiny_artifact)
    assert artifact.plan.steps and artifact.params()


def test_missing_directory(tmp_path):
    with pytest.raises(ArtifactError, match="no such artifact directory"):
        Artifact.load(tmp_path / "nothing")


def test_missing_kernel_file(artifact_copy):
    victim = next((artifact_copy / "kernels").iterdir())
    victim.unlink()
    with pytest.raises(ArtifactError, match=f"missing: kernels/{victim.name}"):
        Artifact.load(artifact_copy)


def test_missing_manifest(artifact_copy):
    (artifact_copy / "manifest.json").unlink()
    with pytest.raises(ArtifactError, match="manifest.json is missing"):
        Artifact.load(artifact_copy)


def test_changed_file_is_detected(artifact_copy):
    with open(artifact_copy / "params.npz", "ab") as f:
        f.write(b"junk")
    with pytest.raises(ArtifactError, match="files changed since compile.*params.npz"):
        Artifact.load(artifact_copy)


def test_other_plan_format_version(artifact_copy):
    manifest = json.loads((artifact_copy / "manifest.json").read_text())
    manifest["plan_format"], manifest["adreno_version"] = 99, "9.9"
    (artifact_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="adreno 9.9 with plan format 99.*recompile"):
        Artifact.load(artifact_copy)


def test_corrupt_plan(artifact_copy):
    text = (artifact_copy / "plan.json").read_text()
    (artifact_copy / "plan.json").write_text(text[: len(text) // 2] + " " * (len(text) - len(text) // 2))
    with pytest.raises(ArtifactError, match="SHA-256 differs.*plan.json"):
        Artifact.load(artifact_copy)
    with pytest.raises(ArtifactError, match="plan.json is corrupt"):
        Artifact.load(artifact_copy, checked=False)


@pytest.mark.parametrize("field, value, message", [
    ("inputs", {"input": [1]}, "input 'input' is input"),
    ("inputs", [1], "the manifest records no inputs"),
    ("inputs", "x", "the manifest records no inputs"),
    ("model_source", None, "model_source None is not"),
    ("model_source", {"zoo": "tiny", "seed": "x"}, "is not a bundled model and seed"),
    ("precision", "fp8", "precision 'fp8' is not one of"),
    ("host_params", ["nosuch"], "host_params ['nosuch'] are not params"),
    ("host_params", "x", "host_params x are not params"),
    ("bound", [1], "bound inputs are not a table"),
])
def test_an_edited_manifest_is_one_line(artifact_copy, field, value, message):
    """The manifest is nobody's to hash: a field an executor reads, edited to another type or value, is refused at
    load (the sweep of session 22 found tracebacks in `run`, `run --check` and `run --runtime tvm`)."""
    manifest = json.loads((artifact_copy / "manifest.json").read_text())
    manifest[field] = value
    (artifact_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError) as refused:
        Artifact.load(artifact_copy)
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value


def test_a_consistent_edit_of_what_runs_is_refused_by_the_run_digest(artifact_copy):
    """Two host_params swapped pass every check of the fields' types and plan membership, and the TVM runtime would
    run with each weight in the other's place: the manifest's run_sha256 refuses it (issue 46)."""
    manifest = json.loads((artifact_copy / "manifest.json").read_text())
    assert len(manifest["host_params"]) >= 2
    manifest["host_params"][:2] = manifest["host_params"][1::-1]
    (artifact_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="differ from their run_sha256: edited or damaged"):
        Artifact.load(artifact_copy)
    manifest.pop("run_sha256")
    (artifact_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="run_sha256"):
        Artifact.load(artifact_copy)
