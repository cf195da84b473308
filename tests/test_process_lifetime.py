"""A stopped command stops everything it started: whatever ends `adreno run` (its --timeout, Ctrl-C, SIGKILL) or
`adreno compile` (SIGKILL), within 5 s no process it started remains and nothing is left in its TMPDIR.

The artifact is the bundled `tiny` (9 kernels: one first-launch worker on a cold start) with every kernel made to
spin, as a tampered kernel or one that hangs a driver would: the worker spins on the first kernel it launches, and
the run waits for it. Processes are found by the session each command is started in (`setsid`), not by name."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .resign import resign

SETTLE_S = 5.0  # what the issue allows between a command's end and the last of its processes
SPIN = "{ volatile int adreno_spin = 1; while (adreno_spin) { } }"


def session_processes(sid: int) -> list[str]:
    """The command lines of the live processes of session `sid` (zombies count: a process not yet reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        if int(fields[3]) == sid:
            found.append(f"{entry.name} {fields[0]} {cmdline or stat[:stat.rindex(')') + 1]}")
    return found


def settled(sid: int) -> list[str]:
    """Wait up to `SETTLE_S` for session `sid` to have no process; what is still there then."""
    ends = time.monotonic() + SETTLE_S
    while (left := session_processes(sid)) and time.monotonic() < ends:
        time.sleep(0.1)
    return left


def spinning_copy(artifact: Path, into: Path) -> Path:
    """A copy of `artifact` whose every kernel spins before its first statement, the manifest's hashes rewritten
    as one who edits a kernel file would (so that loading accepts it)."""
    shutil.copytree(artifact, into)
    manifest = json.loads((into / "manifest.json").read_text())
    for rel in manifest["files"]:
        if rel.startswith("kernels/") and rel.endswith(".cl.gz"):
            path = into / rel
            source = gzip.decompress(path.read_bytes()).decode()
            spun, count = re.subn(r"(__kernel void \w+\([^;{]*\)\s*\{)", r"\1 " + SPIN, source)
            assert count, rel
            path.write_bytes(gzip.compress(spun.encode()))
    resign(into)
    return into


@pytest.fixture
def isolated(tmp_path):
    """The environment of a command under test: its own TMPDIR, program cache and PoCL kernel cache (cold, so the
    run starts its first-launch worker)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return tmp, {**os.environ, "TMPDIR": str(tmp), "ADRENO_CACHE_DIR": str(tmp_path / "cache"),
                 "POCL_CACHE_DIR": str(tmp_path / "pocl"), "PYTHONUNBUFFERED": "1"}


def start(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "adreno.cli", *map(str, args)], env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_for_worker(proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until a first-launch worker runs in `proc`'s session."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if any("first_launch_worker" in p for p in session_processes(proc.pid)):
            time.sleep(1.0)  # let it build and reach its spinning launch
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"no first-launch worker started: {session_processes(proc.pid)}")


@pytest.fixture(scope="module")
def spinning(tiny_artifact, tmp_path_factory):
    return spinning_copy(Path(tiny_artifact), tmp_path_factory.mktemp("spin") / "tiny")


def test_run_past_its_timeout_leaves_no_worker(spinning, isolated):
    tmp, env = isolated
    proc = start(["run", spinning, "--timeout", "10", "--repeat", "1", "--no-cache"], env)
    wait_for_worker(proc)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "did not finish within --timeout 10 s" in err, err
    assert settled(proc.pid) == []
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_run_stopped_during_its_first_launches_leaves_no_worker(spinning, isolated, sig):
    tmp, env = isolated
    proc = start(["run", spinning, "--repeat", "1", "--no-cache"], env)
    wait_for_worker(proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if sig == signal.SIGINT else -signal.SIGKILL), err
    assert settled(proc.pid) == []
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("after_s", [1.0, 3.0])
def test_compile_killed_leaves_nothing(isolated, tmp_path, after_s):
    """SIGKILL at two points of a compile of `tiny` with a cold program cache (its build check builds every
    program): no process of it remains, nothing in its TMPDIR, and `-o` was never made."""
    tmp, env = isolated
    out = tmp_path / "out" / "tiny"
    out.parent.mkdir()
    proc = start(["compile", "tiny", "-o", out], env)
    time.sleep(after_s)
    proc.kill()
    proc.communicate(timeout=60)
    assert settled(proc.pid) == []
    assert list(tmp.iterdir()) == []
    assert not out.exists()


def test_a_compile_of_shape_sets_killed_leaves_no_worker(isolated, tmp_path):
    """SIGKILL while two shape sets compile side by side, each in a pool worker: the workers end with the compile,
    nothing is left in its TMPDIR (the sets' scratch is inside the artifact's staging folder) and `-o` was never
    made."""
    import onnx

    from tests.dynamic_models import ocr_like

    tmp, env = isolated
    onnx.save(ocr_like(), tmp_path / "ocr.onnx")
    out = tmp_path / "out"
    proc = start(["compile", tmp_path / "ocr.onnx", "-o", out, "--memory", "buffer", "--jobs", "2",
                  "--input-shape", "x:1,3,8,8", "--input-shape", "x:1,3,8,16"], env)
    ends = time.monotonic() + 120
    while sum("spawn_main" in p for p in session_processes(proc.pid)) < 2 and time.monotonic() < ends:
        time.sleep(0.2)
    time.sleep(1.0)  # the workers import and start lowering
    proc.kill()
    proc.communicate(timeout=60)
    assert settled(proc.pid) == []
    assert list(tmp.iterdir()) == []
    assert not out.exists()


def test_a_pool_worker_ends_when_its_parent_is_killed(tmp_path):
    """A build pool's worker (`die_with_parent` as its initializer) outlives no SIGKILLed parent, even while busy."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import concurrent.futures as f, multiprocessing, os, time\n"
        "from adreno.support.processes import die_with_parent\n"
        "if __name__ == '__main__':\n"
        "    pool = f.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'),\n"
        "                                 initializer=die_with_parent, initargs=(os.getpid(),))\n"
        "    pool.submit(time.sleep, 600)\n"
        "    print('started', flush=True)\n"
        "    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert proc.stdout.readline().strip() == "started"
    ends = time.monotonic() + 60
    while len(session_processes(proc.pid)) < 2 and time.monotonic() < ends:  # the parent and its worker
        time.sleep(0.1)
    assert len(session_processes(proc.pid)) >= 2
    proc.kill()
    proc.wait(timeout=10)
    assert settled(proc.pid) == []


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (its children, theirs, ...), whatever session each started."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def gone(pids: set[int]) -> set[int]:
    """Wait up to `SETTLE_S` for every process of `pids` to end; those still there then."""
    ends = time.monotonic() + SETTLE_S
    while (left := {p for p in pids if Path(f"/proc/{p}").exists()}) and time.monotonic() < ends:
        time.sleep(0.1)
    return left


def test_a_killed_farm_agent_and_tracker_leave_no_process(tmp_path):
    """`adreno farm tracker` and `adreno farm agent` (a supervisor, its worker, TVM's RPC server process),
    SIGKILLed once the agent has registered: every process each started ends within 5 s."""
    from adreno.farm.common import FarmError, free_port
    from adreno.farm.tracker import TrackerClient, count_servers

    env = {**os.environ, "TMPDIR": str(tmp_path), "ADRENO_FARM_TOKEN": "lifetime-test-token"}  # docs/farm.md
    port = free_port()
    agent_port = free_port(span=20)
    cli = [sys.executable, "-m", "adreno.cli", "farm"]
    tracker = subprocess.Popen([*cli, "tracker", "--port", str(port)], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    agent = subprocess.Popen([*cli, "agent", "--tracker", f"127.0.0.1:{port}", "--key", "lifetime-test", "--port",
                              str(agent_port), "--port-end", str(agent_port + 20)], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ends = time.monotonic() + 120
        registered = 0
        while registered < 1 and time.monotonic() < ends:
            time.sleep(0.5)
            try:
                with TrackerClient(f"127.0.0.1:{port}") as client:
                    registered = count_servers(client.summary(), "lifetime-test")
            except (OSError, FarmError):  # the tracker is not up yet
                continue
        assert registered == 1, (tracker.poll(), agent.poll())
        started = descendants(agent.pid)
        assert started, "the agent started no process of its own"
        agent.kill()
        agent.wait(timeout=10)
        assert gone(started) == set()
        started = descendants(tracker.pid)
        tracker.kill()
        tracker.wait(timeout=10)
        assert gone(started) == set()
    finally:
        for proc in (agent, tracker):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_killed_tune_leaves_no_builder_or_measuring_process(isolated, tmp_path, monkeypatch):
    """`adreno tune` starts a build pool and an isolated measuring process; SIGKILLed once they run, none
    remains 5 s later, and the next tuner removes the candidates' folder it left."""
    tmp, env = isolated
    proc = start(["tune", "tiny", "--trials", "64", "--records", tmp_path / "records.jsonl", "-q"], env)
    ends = time.monotonic() + 180
    while len(session_processes(proc.pid)) < 3 and time.monotonic() < ends:  # the tuner, a builder, the measurer
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    assert len(session_processes(proc.pid)) >= 3, session_processes(proc.pid)
    proc.kill()
    proc.communicate(timeout=60)
    assert settled(proc.pid) == []
    left = list(tmp.iterdir())  # its candidates' folder: no process of it is left to remove it ...
    assert [p.name.startswith(f"adreno-tune-{proc.pid}-") for p in left] == [True]
    from adreno.tune.builder import Builder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    Builder(workers=1).close()  # ... so the next tuner does
    assert list(tmp.iterdir()) == []
