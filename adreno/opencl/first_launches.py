"""A lazy driver's first launches, compiled in parallel processes before a cold start's first run.

PoCL parses a program's source in `clBuildProgram` and generates each kernel's code at its first launch, one kernel
after the other (a compiler lock serialises the threads of one process): on a cold start, ResNet-18's first run is
5-6 s of it on this machine's 2 cores, one of them idle. PoCL keeps what it generates in its kernel cache on disk,
keyed by the program's source and the launch's sizes, where another process building the same source finds it. So
an executor that built a program from source on such a driver (`DeviceIdentity.compiles_at_first_launch`) starts
`workers` processes (`python -m adreno.opencl.first_launch_worker`) that each build the same source and launch
kernels once, on storage of their own without the weights (the code does not depend on the values), and waits for
them while it uploads the weights and binds its kernels: its first run then finds every kernel generated. The
executor launches none itself: a launch on storage no run has written can read an index out of its tensor (a
Gather's), which only a worker may survive. Every worker takes the kernels largest first (source size, what code
generation time follows), each the next one no other has claimed (a file created exclusively in a shared
directory), so the work balances itself whatever each process's start costs. A worker that fails, crashes or is
late costs no correctness: the first run generates whatever is missing, and the failure is kept as a value
(`FirstLaunches.failures`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .programs import program_kernels

MIN_KERNELS = 8  # below this a process start costs more than it saves (a candidate kernel measured alone)
WORKER_TIMEOUT_S = 600.0
WORKER_MODULE = "adreno.opencl.first_launch_worker"


@dataclass(frozen=True)
class FirstLaunches:
    """What the parallel first launches did: the processes that helped, the seconds from their start to the last
    one's end (the executor's weights upload and binding overlap them), and one line per worker that failed."""

    workers: int
    seconds: float
    failures: tuple[str, ...] = ()


def worker_count(identity, kernels: int, built_from_source: bool) -> int:
    """How many helper processes a start should use: none unless the driver compiles at first launch, keeps a disk
    cache other processes read (PoCL's, unless `POCL_KERNEL_CACHE=0`), something was built from source, the model
    has `MIN_KERNELS` kernels or more; one per core (the executor waits), at most one per `MIN_KERNELS` kernels."""
    if not (identity.compiles_at_first_launch and built_from_source and kernels >= MIN_KERNELS):
        return 0
    if getattr(sys, "frozen", False):  # a bundled app: sys.executable is the app, not a Python to run a worker
        return 0
    if os.environ.get("POCL_KERNEL_CACHE", "1") == "0":
        return 0
    return min(os.cpu_count() or 1, kernels // MIN_KERNELS)


def kernel_sizes(artifact) -> dict[str, int]:
    """Each kernel's share of its program file's source length: the proxy for its code generation time."""
    sizes = {}
    for program, kernels in program_kernels(artifact).items():
        length = len(artifact.kernel_source(program))
        sizes.update({name: length // max(1, len(kernels)) for name in kernels})
    return sizes


def compile_order(artifact) -> list[str]:
    """The plan's kernels, largest first (launch order among equals): each process takes the next unclaimed one, so
    the last to finish is a small one."""
    sizes = kernel_sizes(artifact)
    return [name for _, _, name in sorted((-sizes[name], position, name)
                                          for position, name in enumerate(launch_order(artifact)))]


def launch_claimed(queue, launches, order: list[str], claims: str) -> int:
    """Launch, one at a time and waiting for each, every kernel of `order` this process claims first: a claim is a
    file of the kernel's name created in the directory `claims` (exclusive creation: one process wins). Returns how
    many this process launched."""
    import pyopencl as cl

    first = {}
    for bound in launches:
        first.setdefault(bound.name, bound)
    launched = 0
    for name in order:
        try:
            os.close(os.open(os.path.join(claims, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        bound = first[name]
        cl.enqueue_nd_range_kernel(queue, bound.kernel, bound.global_size, bound.local_size).wait()
        launched += 1
    return launched


def launch_order(artifact) -> list[str]:
    """The plan's kernels in the order of their first launch."""
    return list(dict.fromkeys(launch.name for step in artifact.plan.steps for launch in step.kernels))


class Helpers:
    """`workers` processes launching the kernels they claim, started as soon as the executor built its programs
    (they build the same source, which the driver's disk cache now holds), so they run while it uploads the weights
    and binds its kernels; `finish` waits for them."""

    def __init__(self, artifact, device_index: int, workers: int):
        self.started = time.perf_counter()
        self.claims = tempfile.mkdtemp(prefix="adreno-first-launches-")
        # the worker imports this package from where this process did, whatever put it on sys.path
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        self.procs = [subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(artifact.path), "--device",
                                        str(device_index), "--claims", self.claims],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True, env=env)
                      for _ in range(workers)]

    def finish(self) -> FirstLaunches:
        failures = []
        for k, proc in enumerate(self.procs, start=1):
            try:
                _, err = proc.communicate(timeout=WORKER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.stop()
                failures.append(f"worker {k}: stopped after {WORKER_TIMEOUT_S:.0f} s")
                continue
            if proc.returncode != 0:
                last = (err or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
                failures.append(f"worker {k}: {last[0][:200]}")
        shutil.rmtree(self.claims, ignore_errors=True)
        return FirstLaunches(len(self.procs), time.perf_counter() - self.started, tuple(failures))

    def stop(self) -> None:
        """End every worker still running (the executor failed, or one is past its time)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        shutil.rmtree(self.claims, ignore_errors=True)
