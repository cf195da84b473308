"""The harness proves an artifact whole before it runs it (issue 46), as `Artifact.load` does: a changed file or
manifest field is one line and exit 2 before any launch; a file consistent with a rewritten manifest ("resigned":
sizes, SHA-256 and run_sha256 recomputed, as one who edits the manifest would) still meets the readers' bounds, each
refusal one line naming the file and the field. The blob is a cache: a start that cannot write it runs without it."""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest


from ..resign import resign
from .harness_cli import one_line_error, report, run_harness


@pytest.fixture()
def copy(native_tiny, tmp_path):
    root = shutil.copytree(native_tiny["texture"], tmp_path / "artifact")
    return root, {"input": np.ones((1, 3, 32, 32), "float32")}


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def swap_host_params(m):
    m["host_params"][0], m["host_params"][1] = m["host_params"][1], m["host_params"][0]


def switch_scope(plan):
    plan["tensors"]["param0"]["scope"] = "global"


def flip_weight_byte(root):
    data = bytearray((root / "params.npz").read_bytes())
    data[300] ^= 1
    (root / "params.npz").write_bytes(bytes(data))


@pytest.mark.parametrize("tamper, message", [
    (flip_weight_byte, "params.npz: its SHA-256 differs from the manifest's"),
    (lambda r: edit_json(r / "manifest.json", swap_host_params), "differ from their run_sha256"),
    (lambda r: edit_json(r / "plan.json", switch_scope), "error: plan.json: "),
    (lambda r: edit_json(r / "manifest.json", lambda m: m.pop("run_sha256")), "written by an older adreno"),
])
def test_a_changed_file_or_field_is_refused_before_any_launch(copy, tmp_path, tamper, message):
    root, inputs = copy
    tamper(root)
    assert message in one_line_error(run_harness(root, inputs, tmp_path / "out"))
    assert not list((tmp_path / "out").iterdir())  # nothing ran


def local_offset_near_2_32(root):
    data = bytearray((root / "params.npz").read_bytes())
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<I", data, struct.unpack_from("<I", data, end + 16)[0] + 42, 0xFFFFFFF0)
    (root / "params.npz").write_bytes(bytes(data))


def minus_in_shape(root):
    data = (root / "params.npz").read_bytes()
    at = data.index(b"'shape': (") + len(b"'shape': (")
    (root / "params.npz").write_bytes(data[:at] + b"-" + data[at + 1:])  # same length: the zip stays whole


@pytest.mark.parametrize("tamper, message", [
    (local_offset_near_2_32, "local header offset reaches byte 4294967280 + 30, past the end"),
    (minus_in_shape, ".npy header has a shape that is not a tuple of non-negative integers"),
    (lambda r: edit_json(r / "plan.json", switch_scope), "scope global with an image"),
    (lambda r: edit_json(r / "plan.json", lambda p: p["tensors"]["param0"].update(scope="global", image=None)),
     "argument 1 is tensor param0 float32 [4,4,3,3,4] global, its kernel was lowered for float32 [4,4,3,3,4] "
     "global.texture-weight"),
    (lambda r: edit_json(r / "plan.json", lambda p: p["tensors"]["gv"].update(shape=[1 << 40, 4])),
     "shape has more than 2^40 elements"),
])
def test_a_resigned_file_meets_the_readers_bounds(copy, tmp_path, tamper, message):
    root, inputs = copy
    tamper(root)
    resign(root)
    assert message in one_line_error(run_harness(root, inputs, tmp_path / "out"))


def test_a_blob_that_cannot_be_written_leaves_the_start_whole(copy, tmp_path):
    root, inputs = copy
    blob = tmp_path / "no-such-dir" / "programs.bin"
    result = report(run_harness(root, inputs, tmp_path / "out", "--blob", blob))
    assert result["blob"].startswith("absent; not written: ") and "programs.bin" in result["blob"]
    assert np.load(result["outputs"]["probs"]).shape == (1, 10) and not blob.exists()
