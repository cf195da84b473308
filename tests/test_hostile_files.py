"""Files `adreno run` and `adreno compile` are handed that numpy, onnx's checker or a driver's compiler let through
badly: each is one `error:` line and exit status 2 (or, for a big-endian input, the same outputs), never a traceback,
a silent exit or an artifact that computes nothing."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper


@pytest.fixture(scope="module")
def native_tiny(tmp_path_factory) -> Path:
    """`tiny` with a host library for this machine: it runs through both runtimes."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    return compile_model("tiny", tmp_path_factory.mktemp("hostile") / "tiny", CompileOptions(memory="buffer",
                                                                                              host="native"))


def adreno(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def assert_one_error_line(proc, message: str) -> None:
    """Exit 2 and exactly one `error:` line containing `message` (an --unchecked warning may precede it)."""
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("warning: --unchecked")]
    assert proc.returncode == 2 and len(errors) == 1 and errors[0].startswith("error:"), proc.stderr[-3000:]
    assert message in errors[0], errors[0]


def _npy_bytes(header: str, data: bytes = b"") -> bytes:
    """A version 1.0 .npy member with `header` (padded as numpy pads it) followed by `data`."""
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data


def _one_member_npz(path: Path, name: str, content: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(name, content)
    return path


def _with_params_member(artifact: Path, work: Path, member: str, header: str) -> Path:
    """A copy of `artifact` whose params.npz member `member` has `header` in front of its original data."""
    copy = shutil.copytree(artifact, work / f"params-{member}")
    with zipfile.ZipFile(artifact / "params.npz") as source, zipfile.ZipFile(copy / "params.npz", "w") as out:
        for name in source.namelist():
            data = source.read(name)
            if name == member:
                data = _npy_bytes(header, data[10 + int.from_bytes(data[8:10], "little"):])
            out.writestr(name, data)
    return copy


INPUT_HEADER = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 32, 32), }"
CASES = {  # name: (make the --input file or artifact from (artifact, work dir), runtime, message)
    "input member is an empty file": (
        lambda art, work: ("--input", _one_member_npz(work / "empty.npz", "input.npy", b"")),
        "plan", "member 'input.npy' has no valid .npy header"),
    "input header nested 2,000 deep": (
        lambda art, work: ("--input", _one_member_npz(work / "nested.npz", "input.npy", _npy_bytes(
            INPUT_HEADER.replace("(1, 3, 32, 32)", "(" * 2000 + ")" * 2000)))),
        "tvm", "member 'input.npy' has no valid .npy header"),
    "input declares more than it holds": (
        lambda art, work: ("--input", _one_member_npz(work / "short.npz", "input.npy", _npy_bytes(INPUT_HEADER,
                                                                                                 bytes(64)))),
        "plan", "(12288 bytes) but 64 bytes follow it"),
    "params member of shape (10^23,)": (
        lambda art, work: ("--unchecked", _with_params_member(art, work, "param7.npy", INPUT_HEADER.replace(
            "(1, 3, 32, 32)", "(99999999999999999999999,)"))),
        "tvm", "its header declares shape (99999999999999999999999,) of float32"),
}


@pytest.mark.parametrize("case", CASES)
def test_damaged_npz_files_are_one_line(native_tiny, tmp_path, case):
    make, runtime, message = CASES[case]
    option, path = make(native_tiny, tmp_path)
    args = [option, path, native_tiny] if option == "--input" else [option, path]
    assert_one_error_line(adreno("run", *args, "--runtime", runtime, "--repeat", "1", "-q"), message)


def test_a_big_endian_input_runs_as_its_values(native_tiny, tmp_path):
    """`>f4` (TVM's runtime knows no big-endian dtype) is read as the same values in this machine's order."""
    x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.savez(tmp_path / "little.npz", input=x)
    np.savez(tmp_path / "big.npz", input=x.astype(">f4"))
    outputs = {}
    for order in ("little", "big"):
        proc = adreno("run", native_tiny, "--runtime", "tvm", "--input", tmp_path / f"{order}.npz", "--output",
                      tmp_path / f"out-{order}.npz", "--repeat", "1", "-q")
        assert proc.returncode == 0, proc.stderr[-3000:]
        with np.load(tmp_path / f"out-{order}.npz") as npz:
            outputs[order] = [npz[k] for k in npz.files]
    assert len(outputs["big"]) == len(outputs["little"]) > 0
    assert all(np.array_equal(b, s) for b, s in zip(outputs["big"], outputs["little"]))


def test_a_kernel_including_a_fifo_stops_at_the_timeout_in_one_line(native_tiny, tmp_path):
    """The driver's compiler blocks opening the FIFO while file descriptor 2 is redirected to capture its log: the
    deadline's line still reaches the terminal's stderr."""
    copy = shutil.copytree(native_tiny, tmp_path / "fifo")
    os.mkfifo(tmp_path / "the.fifo")
    kernel = sorted((copy / "kernels").iterdir())[0]
    contract, rest = gzip.decompress(kernel.read_bytes()).decode().split("\n", 1)
    kernel.write_bytes(gzip.compress(f'{contract}\n#include "{tmp_path / "the.fifo"}"\n{rest}'.encode()))
    proc = adreno("run", copy, "--unchecked", "--no-cache", "--timeout", "3", "-q")
    assert_one_error_line(proc, "did not finish within --timeout 3 s")


def _relu_model(path: Path, outputs: bool = True, opset: int = 17) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y] if outputs else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("outputs, opset, message", [
    (False, 17, "its graph declares no outputs"),
    (True, 99, "imports opset 99 of the ONNX domain; the ONNX releases this adreno reads define opsets 1.."),
])
def test_models_that_mean_nothing_are_refused(tmp_path, outputs, opset, message):
    from adreno.errors import ModelError
    from adreno.frontend.importer import load_model

    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_model(_relu_model(tmp_path / "m.onnx", outputs, opset))


def test_an_artifact_without_outputs_is_refused(native_tiny, tmp_path):
    """An artifact compiled before the refusal above computes nothing: its load says so (run used to exit 0)."""
    import json

    from adreno.artifact.format import Artifact
    from adreno.errors import ArtifactError

    copy = shutil.copytree(native_tiny, tmp_path / "no-outputs")
    plan = json.loads((copy / "plan.json").read_text())
    plan["outputs"] = []
    (copy / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(ArtifactError, match="it has no outputs"):
        Artifact.load(copy, checked=False)
