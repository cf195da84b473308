"""Infrastructure failures are not candidate results: a tracker outage (with every device's server killed) is
waited out with back-off and every candidate gets a real measurement; past the outage deadline candidates are
left pending, unrecorded, and a resumed `adreno tune` measures them (and records of such failures written by
older versions) again. All on loopback: TVM's tracker, two PoCL agents."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from adreno.farm.common import free_port
from adreno.farm.deadline import Timeouts
from adreno.runners.rpc import RPCRunner
from adreno.runners.interface import RunInput
from adreno.records import Database

from tests.farm.conftest import wait_for


def test_tracker_outage_mid_run_costs_no_candidate(farm2, tiny_artifact, tiny_reference):
    """100 checked candidates on two devices; after 8 results both agents' servers are SIGKILLed (their sessions
    lost) and the tracker goes down for 10 s: every candidate still ends with a real, checked measurement, and no
    infrastructure failure is a result."""
    farm2.wait_registered(2, timeout=30)
    runner = RPCRunner(farm2.tracker, farm2.key, timeouts=Timeouts(outage=60))
    outage, finished = {}, threading.Event()

    def outage_mid_run(futures):
        wait_for(lambda: sum(f.done() for f in futures) >= 8, 120)
        outage["killed"] = farm2.kill_worker(0) + farm2.kill_worker(1)
        farm2.stop_tracker()
        outage["at"] = sum(f.done() for f in futures)
        time.sleep(10)
        farm2.start_tracker()
        finished.wait(120)  # the tracker dies with the thread that spawned it (parent-death signal): outlive the run

    try:
        futures = [runner.submit(RunInput(str(tiny_artifact), None, tiny_reference, repeat=100, tag=f"c{i}"))
                   for i in range(100)]
        thread = threading.Thread(target=outage_mid_run, args=([f._future for f in futures],), daemon=True)
        thread.start()
        results = [f.result() for f in futures]
    finally:
        finished.set()
        runner.close()
        thread.join(30)
        farm2.stop_tracker()  # and start it from this thread, which outlives the test, for the next test
        farm2.start_tracker()
    assert outage["at"] < 100 and len(outage["killed"]) == 2, outage
    assert [r.tag for r in results] == [f"c{i}" for i in range(100)]
    failed = [(r.tag, r.stage, r.error) for r in results if not r.ok]
    assert failed == [], failed
    assert any(e.startswith("infrastructure:") for e in runner.events), runner.events
    print(f"tracker outage of 10 s after {outage['at']} of 100 results, both servers killed: "
          f"{sum(r.ok for r in results)}/100 measured, "
          f"{sum(e.startswith('infrastructure:') for e in runner.events)} back-offs")
    farm2.wait_registered(2, timeout=30)


def _tune(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "adreno.cli", "tune", "tiny", "--trials", "3", "--batch", "3",
                           "--memory", "buffer", "--no-layouts", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_tune_leaves_infrastructure_failures_pending_and_measures_them_on_resume(farm2, tmp_path):
    from adreno.records import Record
    from adreno.tune.extract import extract_tasks

    records = tmp_path / "r.jsonl"
    dead = _tune("--tracker", f"127.0.0.1:{free_port()}", "--key", farm2.key, "--outage", "1", "--records", records,
                 cwd=tmp_path)
    assert dead.returncode == 2, dead.stderr  # measuring nothing is a failed run
    assert "measured nothing: the farm failed all 3 candidates" in dead.stderr and "Traceback" not in dead.stderr
    assert not records.exists() or Database(records).records == [], "nothing recorded for the unreachable farm"

    # an older version recorded an infrastructure failure as the result of the first task's default config
    task = extract_tasks("tiny", layouts=False)[0]
    default = task.default_config()
    Database(records).append([Record(task.key, f"{farm2.key}|rpc", default, error="cannot reach the tracker",
                                     stage="request", trial=1)])
    done = _tune("--tracker", farm2.tracker, "--key", farm2.key, "--records", records, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    measured = Database(records).records[1:]
    assert len(measured) == 3 and all(r.ok for r in measured), [r.error for r in measured]
    assert [r.config for r in measured if r.workload == task.key][0] == default, "measured again, first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "r.jsonl.lock", "r.png"], \
        "no candidate directory left behind (the lock file is the records file's, adreno.records)"
