"""Tuners sharing one records file (issue 22): appends go through a file lock, and each re-reads what the others
wrote before numbering, so no trial number is reused and no (workload, config) is recorded twice."""

from __future__ import annotations

import multiprocessing

from adreno.records import Database, Record

WORKLOAD = "softmax|x1x10|axes1|float32"


def _tune(path: str, seed: int, rounds: int) -> None:
    """A stand-in tuner: each round proposes configs (overlapping the other process's), then appends them."""
    database = Database(path)
    for round_ in range(rounds):
        database.refresh()
        batch = [Record(WORKLOAD, "dev", {"threads_x": (seed + round_ + i) % 24}, [1e-3 * (1 + i)])
                 for i in range(3)]
        database.append_trials([r for r in batch if not database.measured(r)])


def test_two_processes_never_reuse_a_trial_or_record_a_config_twice(tmp_path):
    path = str(tmp_path / "records.jsonl")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_tune, args=(path, seed, 12)) for seed in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    records = Database(path).records
    trials = [r.trial for r in records]
    configs = [r.config["threads_x"] for r in records]
    assert sorted(trials) == list(range(1, len(records) + 1)), "unique trial numbers, none skipped"
    assert len(set(configs)) == len(configs), "no config recorded twice"
    assert set(configs) == set(range(15)), "every proposed config recorded once"


def test_append_trials_drops_what_another_writer_measured(tmp_path):
    path = tmp_path / "records.jsonl"
    ours, theirs = Database(path), Database(path)
    theirs.append_trials([Record(WORKLOAD, "dev", {"threads_x": 2}, [1e-3])])
    written = ours.append_trials([Record(WORKLOAD, "dev", {"threads_x": 2}, [2e-3]),
                                  Record(WORKLOAD, "dev", {"threads_x": 4}, [2e-3])])
    assert [(r.config, r.trial) for r in written] == [({"threads_x": 4}, 2)]
    assert len(Database(path).records) == 2 and len(ours.records) == 2


def test_two_adreno_tune_processes_share_a_records_file(tmp_path):
    """Two real `adreno tune` runs, started together with the same seed (so they propose the same configs), on one
    records file: no config measured by both (none dropped), none recorded twice, no trial number reused."""
    import json
    import subprocess
    import sys
    from collections import Counter

    records = tmp_path / "records.jsonl"
    command = [sys.executable, "-m", "adreno.cli", "tune", "tiny", "--trials", "6", "--batch", "3", "--json",
               "--no-layouts", "--records", str(records)]
    runs = [subprocess.Popen([*command, "--plot", str(tmp_path / f"{i}.png")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for i in range(2)]
    reports = []
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    written = Database(records).records
    configs = Counter((r.workload, json.dumps(r.config, sort_keys=True)) for r in written)
    trials = Counter((r.workload, r.trial) for r in written)
    assert max(configs.values()) == 1 and max(trials.values()) == 1
    assert [r["dropped"] for r in reports] == [0, 0], "neither measured a config the other had measured"
    assert sum(r["trials"] for r in reports) == len(written) >= 6
