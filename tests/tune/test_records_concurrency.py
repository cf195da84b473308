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
