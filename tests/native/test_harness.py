"""The app harness: an app's start through TVM's C++ API, with the program-binary blob of the previous start
taken only when it is for this device and these kernels and intact; bad input is one line and exit 2."""

from __future__ import annotations

import os

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.opencl.executor import Executor

from .harness_cli import one_line_error, report, run_harness


@pytest.fixture()
def texture(native_tiny):
    artifact = Artifact.load(native_tiny["texture"])
    x = np.random.default_rng(3).standard_normal(artifact.input_specs()[0].shape).astype("float32")
    return artifact, {"input": x}, Executor(artifact).run([x])[0]


def outputs_match(result: dict, expected: np.ndarray) -> bool:
    return np.array_equal(np.load(result["outputs"]["probs"]), expected)


def test_second_start_takes_the_blob_and_builds_nothing(texture, tmp_path):
    artifact, inputs, expected = texture
    blob = tmp_path / "programs.bin"
    first = report(run_harness(artifact.path, inputs, tmp_path / "a", "--blob", blob))
    assert first["blob"] == "absent; written" and first["programs"].startswith("from_source=1 ")
    second = report(run_harness(artifact.path, inputs, tmp_path / "b", "--blob", blob))
    assert second["blob"] == "loaded" and second["programs"] == "from_source=0 from_binary=1 rejected=0"
    assert outputs_match(first, expected) and outputs_match(second, expected)


def damaged(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[: len(data) - 100]
    if how == "flipped":
        return data[:-50] + bytes([data[-50] ^ 0x10]) + data[-49:]
    if how == "other device":
        return data.replace(b"Portable Computing Language|", b"Portable Computing Languagf|", 1)
    raise ValueError(how)


@pytest.mark.parametrize("how, reason", [("truncated", "truncated"), ("flipped", "SHA-256 mismatch"),
                                         ("other device", "for another device or kernels")])
def test_a_damaged_or_foreign_blob_is_rejected_and_rebuilt(texture, tmp_path, how, reason):
    artifact, inputs, expected = texture
    blob = tmp_path / "programs.bin"
    report(run_harness(artifact.path, inputs, tmp_path / "a", "--blob", blob))
    blob.write_bytes(damaged(blob.read_bytes(), how))
    again = report(run_harness(artifact.path, inputs, tmp_path / "b", "--blob", blob))
    assert again["blob"] == f"rejected: {reason}; written" and again["programs"].startswith("from_source=1 ")
    assert outputs_match(again, expected)
    assert report(run_harness(artifact.path, inputs, tmp_path / "c", "--blob", blob))["blob"] == "loaded"


def test_a_blob_for_other_kernels_is_rejected(native_tiny, texture, tmp_path):
    artifact, inputs, expected = texture
    blob = tmp_path / "programs.bin"
    report(run_harness(native_tiny["buffer"], inputs, tmp_path / "buffer", "--blob", blob))
    again = report(run_harness(artifact.path, inputs, tmp_path / "texture", "--blob", blob))
    assert again["blob"] == "rejected: for another device or kernels; written" and outputs_match(again, expected)


def test_bad_input_is_one_line(texture, tmp_path):
    artifact, inputs, _ = texture
    assert "no --input input=" in one_line_error(run_harness(artifact.path, {}, tmp_path / "a"))
    wrong = {"input": inputs["input"][:, :2]}
    assert "no shape set of this artifact takes input 1x2x32x32; it was compiled for input 1x3x32x32" in \
        one_line_error(run_harness(artifact.path, wrong, tmp_path / "b"))
    wrong = {"input": inputs["input"].astype(np.float16)}
    assert "must be float32 1x3x32x32" in one_line_error(run_harness(artifact.path, wrong, tmp_path / "b"))
    assert "has no input" in one_line_error(run_harness(artifact.path, {**inputs, "nope": inputs["input"]},
                                                        tmp_path / "c"))
    assert "cannot open" in one_line_error(run_harness(tmp_path / "nowhere", inputs, tmp_path / "d"))
    no_device = run_harness(artifact.path, inputs, tmp_path / "e", env={"OCL_ICD_VENDORS": str(tmp_path / "none"),
                                                                           "OPENCL_VENDOR_PATH": str(tmp_path)})
    assert "no OpenCL device" in one_line_error(no_device)
    plugin = run_harness(artifact.path, inputs, tmp_path / "f", "--plugin", tmp_path / "missing.so")
    assert "cannot load TVM's OpenCL plugin" in one_line_error(plugin)


def test_an_artifact_without_a_loadable_library_is_refused(tmp_path):
    from adreno.compile import compile_model

    android = compile_model("tiny", tmp_path / "android")  # lib.tar: objects to link with the NDK
    x = {"input": np.zeros((1, 3, 32, 32), "float32")}
    assert "compile with --host native" in one_line_error(run_harness(android, x, tmp_path / "out"))
    assert os.path.exists(android / "lib.tar")
