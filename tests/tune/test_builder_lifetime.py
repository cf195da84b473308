"""The tuner leaves nothing behind: builder processes die with the process that made them (even a SIGKILLed one),
and candidate artifacts live in a temporary directory removed at exit unless kept on purpose."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from adreno.tune.builder import Builder

HOLDER = """
import json, os, time
from adreno.tune.builder import Builder
builder = Builder(2)
for job in [builder._pool.submit(time.sleep, 1.0) for _ in range(4)]:
    job.result()
print(json.dumps(sorted(builder._pool._processes)), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_builder_processes_die_with_a_sigkilled_tuner():
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        workers = json.loads(holder.stdout.readline())
        assert len(workers) == 2 and all(_alive(p) for p in workers)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in workers), "builder processes outlived the tuner"


def test_candidate_directory_is_temporary_unless_kept(tmp_path):
    builder = Builder(1)
    workdir = builder.workdir
    (workdir / "candidate").mkdir()
    builder.close()
    assert not workdir.exists()
    kept = Builder(1, tmp_path / "kept")
    (kept.workdir / "candidate").mkdir()
    kept.close()
    assert (tmp_path / "kept" / "candidate").is_dir()
