"""The records database: durable appends, torn lines skipped, duplicates ignored, best configs per workload."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

from adreno.options import Precision
from adreno.records import Database, Record


def rec(workload="w", config=None, seconds=(1.0,), trial=1, **kw):
    return Record(workload, "dev", config or {"a": trial}, list(seconds) if seconds else None, trial=trial, **kw)


def test_append_and_reload(tmp_path):
    path = tmp_path / "r.jsonl"
    db = Database(path)
    db.append([rec(trial=1, seconds=[3.0]), rec(trial=2, seconds=[1.0]), rec(trial=3, seconds=None, error="boom")])
    again = Database(path)
    assert [r.trial for r in again.records] == [1, 2, 3]
    assert again.best("w").trial == 2 and again.best("w", "other-device") is None
    assert again.best_configs() == {"w": {"a": 2}}
    assert again.next_trial("w", "dev") == 4


def test_torn_last_line_is_skipped_with_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    Database(path).append([rec(trial=1), rec(trial=2)])
    with open(path, "ab") as f:
        f.write(b'{"workload": "w", "device": "dev", "conf')  # a writer killed mid-line
    db = Database(path)
    assert [r.trial for r in db.records] == [1, 2] and db.skipped == 1
    assert "torn last line" in db.skipped_summary()
    db.append([rec(trial=3)])
    assert [r.trial for r in Database(path).records] == [1, 2, 3], "the next append starts on a fresh line"


def test_duplicates_are_not_written_or_loaded_twice(tmp_path):
    path = tmp_path / "r.jsonl"
    db = Database(path)
    db.append([rec(trial=1)])
    db.append([rec(trial=1)])
    with open(path, "a") as f:
        f.write(json.dumps(rec(trial=1).__dict__) + "\n")
    assert len(path.read_text().splitlines()) == 2
    assert len(Database(path).records) == 1


def _writer(path, start):
    db = Database(path)
    trial = start
    while True:
        db.append([rec(trial=trial, seconds=[float(trial)])])
        trial += 1


def test_sigkilled_writer_loses_nothing_it_appended(tmp_path):
    path = tmp_path / "r.jsonl"
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_writer, args=(str(path), 1))
    proc.start()
    deadline_lines = 0
    import time

    started = time.time()
    while deadline_lines < 50 and time.time() - started < 30:
        time.sleep(0.05)
        deadline_lines = len(path.read_bytes().split(b"\n")) if path.exists() else 0
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    db = Database(path)
    trials = [r.trial for r in db.records]
    assert len(trials) >= 49 and trials == list(range(1, len(trials) + 1)), "a contiguous prefix survives"


def test_records_of_another_image_precision_are_kept_apart(tmp_path):
    """Knobs measured on half-float images (`extra["precision"] = "fp16"`) never decide an fp32 build, nor the
    reverse; records without the field are fp32 (every record before it existed)."""
    db = Database(tmp_path / "r.jsonl")
    db.append([rec(trial=1, seconds=[2.0]), rec(trial=2, seconds=[1.0], extra={"precision": "fp16"})])
    again = Database(tmp_path / "r.jsonl")
    assert [r.precision for r in again.records] == ["fp32", "fp16"]
    assert again.best_configs(precision=Precision.FP32) == {"w": {"a": 1}}
    assert again.best_configs(precision=Precision.FP16) == {"w": {"a": 2}}
    assert again.best_configs() == {"w": {"a": 2}} and len(again.query("w", "dev", Precision.FP16)) == 1
