"""The app library on an artifact of several shape sets (adreno/artifact/shape_sets.py), from a C program compiled
against native/rt/adreno_rt.h (rt_shapes.c): each set's outputs are TVM's runtime's through Python (VmExecutor, what
`adreno run --runtime tvm` runs) bit for bit while the program switches between the sets back and forth in one
model; a shape of no set is INVALID_ARGUMENT listing the sets; the blob holds the programs of every set that ran, so
a second start builds none from source; a set whose lib.so was changed is BAD_ARTIFACT when it is selected, and the
other set keeps running."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.native.vm_executor import VmExecutor

from .rt_programs import HERE, build_c

LISTING = "it was compiled for x 1x3x8x8; x 1x3x8x16 (pad the input to one of them"


@pytest.fixture(scope="module")
def shapes_run(native_shape_sets, tmp_path_factory):
    """(run, the artifact, VmExecutor's outputs of each set): run(artifact, blob, *steps) -> (report, {step:
    outputs}), with refused=True the open's failure line."""
    path, inputs = native_shape_sets
    program = build_c(HERE / "rt_shapes.c", tmp_path_factory.mktemp("rt-shapes") / "rt_shapes")
    io = tmp_path_factory.mktemp("rt-shapes-io")
    for index, x in enumerate(inputs):
        x.tofile(io / f"set{index}_in0.bin")
    expected = [VmExecutor(Artifact.load(path, shape_set=i)).run([x]) for i, x in enumerate(inputs)]

    def run(artifact, blob, *steps, refused=False):
        proc = subprocess.run([str(program), str(artifact), str(io), str(blob or "-"), *map(str, steps)],
                              capture_output=True, text=True, timeout=300)
        if refused:  # the open failed: its status line
            assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
            return proc.stderr
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        outputs = {}
        for position, (step, status) in enumerate(zip(steps, report["steps"])):
            if status["code"] == 0 and isinstance(step, int):
                want = expected[step][0]
                outputs[position] = np.fromfile(io / f"step{position}_out0.bin", np.float32).reshape(want.shape)
        return report, outputs

    return run, path, expected


def test_each_set_gives_tvm_runtime_outputs_back_and_forth_and_the_blob_holds_both(shapes_run, tmp_path):
    run, path, expected = shapes_run
    blob = tmp_path / "programs.bin"
    report, outputs = run(path, blob, 0, 1, 0, 1, "shape:1x3x8x20", 1)
    assert report["sets"] == [[[1, 3, 8, 8]], [[1, 3, 8, 16]]]
    assert [s["selected"] for s in report["steps"]] == [0, 1, 0, 1, 1, 1]
    refused = report["steps"][4]
    assert refused["code"] == 1 and refused["message"].startswith("no shape set of this artifact takes x 1x3x8x20; ")
    assert LISTING in refused["message"]
    steps = [0, 1, 0, 1, None, 1]
    assert sorted(outputs) == [0, 1, 2, 3, 5]
    for position, got in outputs.items():
        assert np.array_equal(got, expected[steps[position]][0]), position
    assert np.abs(outputs[0]).max() > 0 and outputs[0].shape != outputs[1].shape
    assert (report["blob"], report["written"]) == ("absent", 1) and report["from_source"] >= 2
    again, outputs = run(path, blob, 1, 0)
    assert (again["blob"], again["written"], again["from_source"]) == ("loaded", 0, 0)
    assert again["from_binary"] == report["from_source"], "every program of both sets from the blob"
    assert np.array_equal(outputs[0], expected[1][0]) and np.array_equal(outputs[1], expected[0][0])


def _with_a_changed_library(path, tmp_path, index: int):
    """A copy of the artifact at `path` with one byte of set `index`'s lib.so flipped (its manifest as it was)."""
    copy = shutil.copytree(path, tmp_path / "art")
    library = copy / "shapes" / str(index) / "lib.so"
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0x01
    library.write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("changed, kept", [(1, 0), (0, 1)])
def test_a_set_whose_library_changed_is_refused_only_when_used(shapes_run, tmp_path, changed, kept):
    """A set's code is proved and loaded at its first use, set 0 (selected at open) included: an app whose inputs
    take the other set never reads the changed library, and selecting the changed set is BAD_ARTIFACT with the
    selection kept."""
    run, path, expected = shapes_run
    report, outputs = run(_with_a_changed_library(path, tmp_path, changed), None, kept, changed, kept)
    codes = [(s["code"], s["selected"]) for s in report["steps"]]
    assert codes == [(0, kept), (2, kept), (0, kept)], report["steps"]
    assert report["steps"][1]["message"].startswith(f"shapes/{changed}/lib.so: its SHA-256 differs from the manifest's")
    assert np.array_equal(outputs[0], expected[kept][0]) and np.array_equal(outputs[2], expected[kept][0])


def test_an_edited_set_of_the_manifest_is_refused_at_open(shapes_run, tmp_path):
    """run_sha256 covers each set's fields: set 1's weights swapped in the manifest refuse the whole artifact."""
    run, path, _ = shapes_run
    copy = shutil.copytree(path, tmp_path / "art")
    manifest = json.loads((copy / "manifest.json").read_text())
    params = manifest["shape_sets"][1]["manifest"]["host_params"]
    params[0], params[1] = params[1], params[0]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    line = run(copy, None, 0, refused=True)
    assert line.startswith("open: status 2: manifest.json: the fields that decide what runs"), line
