"""Orchestration through an offline batch: exported here, measured by `adreno.runners.offline` (numpy and pyopencl,
PoCL standing in for the device nothing here reaches), its costs read back by `adreno orchestrate --batch` and
`adreno compile --orchestrate --measure-batch`; what does not fit is one line and exit status 2."""

import json

import pyopencl as cl
import pytest

from adreno.cli.main import main
from adreno.support.code_version import code_fingerprint
from adreno.opencl.device import DeviceIdentity, select_device
from adreno.records import Database
from adreno.runners.batch_dir import MANIFEST_NAME
from adreno.runners.offline import measure_batch


@pytest.fixture(scope="module")
def measured_batch(tmp_path_factory):
    """`tiny`'s candidates (max size 1) exported, then measured offline on PoCL; the scratch fills counted."""
    batch = tmp_path_factory.mktemp("batch") / "tiny-batch"
    assert main(["orchestrate", "tiny", "--export-batch", str(batch), "--max-size", "1"]) == 0
    fills, fill = [], cl.enqueue_fill_buffer
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cl, "enqueue_fill_buffer", lambda queue, mem, pattern, offset, size, *a, **k: (
            fills.append(size), fill(queue, mem, pattern, offset, size, *a, **k))[1])
        summary = measure_batch(batch, "pocl", repeat=3, say=lambda line: None)
    return batch, summary, fills


def test_exported_batch_is_measured_cold_and_read_back(measured_batch, tmp_path, capsys):
    batch, summary, fills = measured_batch
    manifest = json.loads((batch / MANIFEST_NAME).read_text())
    assert manifest["kind"] == "orchestrate" and manifest["cold"] and manifest["code"] == code_fingerprint()
    assert not any(c.get("error") for c in manifest["candidates"])
    assert sum("|launch|" in t["key"] for t in manifest["tasks"]) == 2
    assert all(t["inputs"] and all(s["uniform"] == [0.5, 1.5] for s in t["inputs"])
               for t in manifest["tasks"])
    assert summary["measured"] == len(manifest["candidates"]) and summary["unmeasured"] == 0
    assert len(fills) >= 3 * len(manifest["candidates"]) and min(fills) >= 8 << 20  # each timed run evicted

    records, report = tmp_path / "r.jsonl", tmp_path / "report.json"
    args = ["orchestrate", "tiny", "--report", "--max-size", "1", "--batch", str(batch), "--records", str(records),
            "--json", str(report)]
    assert main(args) == 0
    assert "measured 1/" not in capsys.readouterr().err  # nothing measured here
    data = json.loads(report.read_text())
    device = DeviceIdentity.from_cl_device(select_device("pocl")).fingerprint
    assert data["complete"] and data["measured_now"] == 0 and data["device"] == device
    imported = Database(records).records
    assert len(imported) == len(manifest["tasks"]) and all(r.ok and r.device == device for r in imported)
    assert all(r.extra["kernels"] >= 1 for r in imported)
    assert all("wall_s" in r.extra for r in imported if "|launch|" in r.workload)
    assert main(args) == 0 and len(Database(records).records) == len(imported)  # importing twice adds nothing

    out = tmp_path / "artifact"
    assert main(["compile", "tiny", "--orchestrate", "--max-size", "1", "--measure-batch", str(batch),
                 "--records", str(records), "--host", "native", "-o", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["orchestration"]["measured_now"] == 0
    assert main(["run", str(out), "--check", "--repeat", "2"]) == 0


def test_what_a_batch_cannot_answer_is_one_line(measured_batch, tmp_path, capsys):
    batch, _, _ = measured_batch

    def refused(args, message):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()  # progress lines, then the one line of the error
        assert err.splitlines()[-1].startswith("error: ") and message in err.splitlines()[-1], err

    # candidates the batch did not export (a larger --max-size)
    refused(["orchestrate", "tiny", "--report", "--max-size", "2", "--batch", str(batch)], "holds no cost of it")
    refused(["orchestrate", "tiny", "--report", "--batch", str(tmp_path / "none")], "no such directory")
    refused(["orchestrate", "tiny", "--report", "--batch", str(batch), "--tracker", "127.0.0.1:9190"], "give one")
    # a memory the batch has no costs of, and two batches of one memory (one batch per memory)
    refused(["orchestrate", "tiny", "--report", "--batch", str(batch), "--memory", "texture"],
            "--memory texture: the batches hold costs of buffer memory only")
    refused(["compile", "tiny", "--orchestrate", "--measure-batch", str(batch), "--measure-batch", str(batch),
             "-o", str(tmp_path / "a")], "give one batch per memory")
    assert not (tmp_path / "a").exists()
    refused(["tune", "tiny", "--import-batch", str(batch), "--records", str(tmp_path / "t.jsonl")],
            "orchestration batch")
    # exported by other code: its kernels may not be today's
    other = tmp_path / "other"
    other.mkdir()
    manifest = json.loads((batch / MANIFEST_NAME).read_text())
    (other / MANIFEST_NAME).write_text(json.dumps({**manifest, "code": "0" * 12}))
    refused(["orchestrate", "tiny", "--report", "--max-size", "1", "--batch", str(other)], "other adreno code")
    # not measured yet
    (other / MANIFEST_NAME).write_text(json.dumps(manifest))
    refused(["orchestrate", "tiny", "--report", "--max-size", "1", "--batch", str(other)], "measure it first")
    # an export never replaces a directory of other files
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused(["orchestrate", "tiny", "--export-batch", str(mine), "--max-size", "1"], "other files in it")
    assert (mine / "notes.txt").read_text() == "keep me" and len(list(mine.iterdir())) == 1
    assert not list(tmp_path.glob(".mine.adreno-tmp.*"))
    # nor a stray batch.json among other files, nor a batch whose measured records were not imported
    (mine / MANIFEST_NAME).write_text("[1]")
    refused(["orchestrate", "tiny", "--export-batch", str(mine), "--max-size", "1"], "not an earlier batch")
    assert (mine / "notes.txt").read_text() == "keep me"
    measured = len((batch / "records.jsonl").read_text().splitlines())
    refused(["orchestrate", "tiny", "--export-batch", str(batch), "--max-size", "1"],
            f"holds {measured} measured record(s)")
    assert len((batch / "records.jsonl").read_text().splitlines()) == measured
