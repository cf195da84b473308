"""The RPC path for real: TVM's tracker, two device agents (PoCL) and the RPCRunner, all on loopback."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

from adreno.farm.common import TrackerUnreachable, free_port, warn_if_exposed
from adreno.farm.deadline import Timeouts
from adreno.runners.rpc import RPCRunner
from adreno.farm.tracker import farm_status, format_status
from adreno.runners.interface import RunInput
from tests.farm.conftest import wait_for


def test_tuning_batch_over_two_agents(farm2, tiny_artifact, tiny_reference):
    runner = RPCRunner(farm2.tracker, farm2.key, timeouts=Timeouts(request=20, run=30))
    try:
        inputs = [RunInput(str(tiny_artifact), reference=tiny_reference, repeat=2, warmup=0, tag=f"c{i}")
                  for i in range(12)]
        results = runner.run_batch(inputs)
    finally:
        runner.close()
    assert [r.tag for r in results] == [f"c{i}" for i in range(12)]
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert all(r.max_error is not None and r.max_error < 1e-3 for r in results)
    assert len({r.device for r in results}) == 2  # both agents measured
    assert all(len(r.seconds) == 2 and min(r.seconds) > 0 for r in results)


def test_cold_run_evicts_on_the_agent(farm2, tiny_artifact, tiny_reference):
    """A cold candidate (as orchestration measures them) has the agent fill a scratch buffer before each timed run."""
    runner = RPCRunner(farm2.tracker, farm2.key, timeouts=Timeouts(request=20, run=30))
    try:
        warm, cold = runner.run_batch([RunInput(str(tiny_artifact), reference=tiny_reference, repeat=2, warmup=0,
                                                tag=tag, cold=tag == "cold") for tag in ("warm", "cold")])
    finally:
        runner.close()
    assert warm.ok and cold.ok, (warm.error, cold.error)
    assert warm.extra["evicted_bytes"] == 0 and cold.extra["evicted_bytes"] >= 8 << 20
    assert len(cold.seconds) == 2 and min(cold.seconds) > 0 and cold.max_error < 1e-3


def test_devices_shows_queue_and_health(farm2):
    farm2.wait_registered(2, timeout=30, free=True)
    status = farm_status(farm2.tracker)
    assert [(q.key, q.total, q.free) for q in status.queues] == [("pocl-cpu", 2, 2)]
    assert [d.state for d in status.devices] == ["idle", "idle"]
    text = format_status(status)
    assert "pocl-cpu" in text and "idle" in text and farm2.tracker in text


def test_hanging_kernel_is_a_timeout_and_the_next_candidate_succeeds(farm2, tiny_artifact):
    """FAULT INJECTION (test-only agent flag): candidate 'hang' sleeps forever inside the agent's measure call,
    as a kernel that never returns would. The host's run deadline must catch it."""
    farm2.wait_registered(2, timeout=30, free=True)
    runner = RPCRunner(farm2.tracker, farm2.key, max_parallel=1, timeouts=Timeouts(request=20, run=2.0),
                       fault={"hang": "hang"})
    try:
        started = time.monotonic()
        results = runner.run_batch([RunInput(str(tiny_artifact), repeat=1, warmup=0, tag=t)
                                    for t in ("before", "hang", "after")])
        elapsed = time.monotonic() - started
    finally:
        runner.close()
    before, hang, after = results
    assert before.ok and after.ok, (before.error, after.error)
    assert hang.stage == "timeout" and hang.extra["stage"] == "run" and "within 2 s" in hang.error
    assert elapsed < 20
    assert any("dropped" in e for e in runner.events)
    # The agent's watchdog ended the hung session; its supervisor restarted it: both devices are free again.
    farm2.wait_registered(2, timeout=30, free=True)


def test_sigkill_agents_ten_times_during_100_measurements(farm2, tiny_artifact):
    farm2.wait_registered(2, timeout=30, free=True)
    runner = RPCRunner(farm2.tracker, farm2.key, timeouts=Timeouts(request=30, run=20, build=30))
    futures = [runner.submit(RunInput(str(tiny_artifact), repeat=100, warmup=1, tag=f"m{i}")) for i in range(100)]
    kills: list[int] = []

    def _killer():
        for n in range(10):
            target_done = 5 * (n + 1)  # a kill after every 5 results: the tenth lands mid-batch
            deadline = time.monotonic() + 60
            while sum(f.done() for f in futures) < target_done and time.monotonic() < deadline:
                time.sleep(0.01)
            # alternate agents, but take whichever has a worker up (the other may still be restarting)
            order = [n % 2, 1 - n % 2]
            wait_for(lambda: any(farm2.worker_pids(i) for i in order), timeout=15, interval=0.01)
            for index in order:
                if farm2.kill_worker(index):
                    kills.append(sum(f.done() for f in futures))
                    break

    killer = threading.Thread(target=_killer, daemon=True)
    killer.start()
    try:
        results = [f.result(timeout=180) for f in futures]
    finally:
        killer.join(timeout=70)
        runner.close()
    tags = [r.tag for r in results]
    assert sorted(tags) == sorted(f"m{i}" for i in range(100)) and len(set(tags)) == 100  # none lost or duplicated
    assert len(kills) == 10 and kills[-1] < 100, kills  # all ten kills hit while measurements were running
    failed = [r for r in results if not r.ok]
    assert all(r.stage in ("device", "request", "timeout") for r in failed), [(r.stage, r.error) for r in failed]
    assert len(failed) <= 10, [(r.tag, r.error) for r in failed]
    assert all(r.seconds and r.seconds[0] > 0 for r in results if r.ok)


def test_stopped_tracker_is_a_clear_error_naming_the_address(tiny_artifact):
    port = free_port()
    runner = RPCRunner(f"127.0.0.1:{port}", "pocl-cpu", timeouts=Timeouts(request=3, outage=1))
    try:
        result = runner.run(RunInput(str(tiny_artifact), tag="x"))
    finally:
        runner.close()
    assert not result.ok and result.stage == "request" and result.infrastructure and result.tag == "x"
    assert f"127.0.0.1:{port}" in result.error and "tracker" in result.error
    with pytest.raises(TrackerUnreachable, match=f"127.0.0.1:{port}"):
        farm_status(f"127.0.0.1:{port}")


def test_no_device_of_a_key_fails_the_batch_quickly(farm2, tiny_artifact):
    runner = RPCRunner(farm2.tracker, "adreno-999", timeouts=Timeouts(request=1.0, outage=1))
    try:
        results = runner.run_batch([RunInput(str(tiny_artifact), tag=f"n{i}") for i in range(5)])
    finally:
        runner.close()
    assert all(r.stage == "request" and r.infrastructure and "adreno-999" in r.error for r in results)


def test_non_loopback_bind_prints_the_warning():
    stream = io.StringIO()
    assert not warn_if_exposed("127.0.0.1", "tracker", stream)
    assert warn_if_exposed("0.0.0.0", "tracker", stream)
    assert "no authentication" in stream.getvalue() and "0.0.0.0" in stream.getvalue()


def test_cli_registers_the_farm_group_and_prints_status(farm2, capsys):
    import argparse
    from dataclasses import asdict

    from adreno.cli.farm import register

    farm2.wait_registered(2, timeout=30)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["farm", "status", "--tracker", farm2.tracker])
    assert args.func(args) == 0
    assert "pocl-cpu" in capsys.readouterr().out
    data = asdict(farm_status(farm2.tracker))
    assert [q["total"] for q in data["queues"] if q["key"] == "pocl-cpu"] == [2]
    for sub in (["farm", "tracker", "--port", "9999"], ["farm", "agent", "--tracker", "127.0.0.1:1"],
                ["farm", "ssh", "me@host", "--accept-new-host-key"], ["farm", "android", "--list"]):
        assert callable(parser.parse_args(sub).func)


def test_adreno_tune_through_the_farm(farm2, tmp_path):
    """`adreno tune --tracker` measures every candidate on the farm's agents, checked, recorded, resumable."""
    import json
    import subprocess
    import sys

    from adreno.records import Database

    records = tmp_path / "farm.jsonl"
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "tune", "tiny", "--tracker", farm2.tracker,
                           "--key", farm2.key, "--trials", "6", "--batch", "3", "--records", str(records),
                           "--report", str(tmp_path / "rep.json")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    db = Database(records)
    assert len(db.records) == 6 and all(r.device == f"{farm2.key}|rpc" for r in db.records)
    assert sum(r.ok for r in db.records) >= 5, [r.error for r in db.records]
    assert json.loads((tmp_path / "rep.json").read_text())["trials"] == 6


def test_adreno_devices_tracker_json_and_dead_tracker(farm2):
    import json
    import subprocess
    import sys

    farm2.wait_registered(2, timeout=30, free=True)
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "devices", "--tracker", farm2.tracker, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["tracker"]
    queues = {q["key"]: q["total"] for q in data["queues"]}  # other tests may have queued other keys here
    assert queues[farm2.key] == 2 and len(data["devices"]) >= 2
    dead = f"127.0.0.1:{free_port()}"
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "devices", "--tracker", dead], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and dead in proc.stderr and "Traceback" not in proc.stderr


def test_cache_warm_builds_on_a_farm_device_and_bundles_the_binaries(farm2, tiny_artifact, tmp_path):
    import json
    import shutil
    import subprocess
    import sys

    from adreno.cache import ProgramCache
    from adreno.opencl.executor import Executor
    from adreno.artifact.format import random_inputs

    artifact = shutil.copytree(tiny_artifact, tmp_path / "tiny")
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "cache", "warm", str(artifact), "--tracker",
                           farm2.tracker, "--key", farm2.key, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    bundle = tmp_path / "tiny" / "binaries"
    assert summary["path"].startswith(str(bundle))
    assert (bundle / summary["path"].rsplit("/", 1)[1] / "index.json").is_file()
    cache = ProgramCache(tmp_path / "empty-cache")  # the agents run PoCL here too: the bundle fits this device
    executor = Executor(artifact, "pocl", cache=cache)
    outputs = executor.run(random_inputs(executor.artifact.input_specs(), seed=0))
    assert cache.stats["bundled"] == len(executor.artifact.plan.programs) and cache.stats["misses"] == 0
    np.testing.assert_allclose(outputs[0], Executor(tiny_artifact, "pocl").run(
        random_inputs(executor.artifact.input_specs(), seed=0))[0], atol=1e-6)
