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
generation time follows), each the next one no other has taken: the executor writes the kernels' positions into a
pipe, largest first, and each worker reads the next one (a read of a few bytes from a pipe is atomic: one reader gets
each). Nothing of it is on disk, so nothing is left behind however the processes end. Every worker dies with its
executor (`adreno.support.processes`: the parent-death signal; a deadline of its own besides), so a run stopped by its
`--timeout`, Ctrl-C or SIGKILL leaves no worker spinning on a kernel. A worker that fails, crashes or is
late costs no correctness: the first run generates whatever is missing, and the failure is kept as a value
(`FirstLaunches.failures`).
"""

from __future__ import annotations

import fcntl
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..support.processes import popen_child_setup
from .programs import program_kernels

MIN_KERNELS = 8  # below this a process start costs more than it saves (a candidate kernel measured alone)
WORKER_TIMEOUT_S = 600.0  # the executor's wait for each worker, and each worker's own deadline
CLAIM = 4  # bytes of one claim in the pipe: a kernel's position in `launch_order`, little-endian
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


def write_claims(order: list[str], names: list[str]) -> int:
    """A pipe holding the position in `names` of each kernel of `order`, in that order, its write end closed: the
    read end, for the workers (`read_claims`). A pipe holds what the kernel lets it (at least 64 KiB here); kernels
    past that are left to the first run, the smallest ones, since `order` is largest first."""
    read_end, write_end = os.pipe()
    try:
        capacity = fcntl.fcntl(write_end, getattr(fcntl, "F_GETPIPE_SZ", 1032))
        position = {name: k for k, name in enumerate(names)}
        claims = b"".join(position[name].to_bytes(CLAIM, "little") for name in order)
        os.write(write_end, claims[:capacity - capacity % CLAIM])
    finally:
        os.close(write_end)
    return read_end


def read_claims(claims_fd: int, names: list[str]):
    """The kernels this process claims, one at a time, until the pipe is empty."""
    while len(claim := os.read(claims_fd, CLAIM)) == CLAIM:
        yield names[int.from_bytes(claim, "little")]


def launch_claimed(queue, launches, claims) -> int:
    """Launch, one at a time and waiting for each, every kernel named by `claims` (`read_claims`). Returns how many
    this process launched."""
    import pyopencl as cl

    first = {}
    for bound in launches:
        first.setdefault(bound.name, bound)
    launched = 0
    for name in claims:
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
    and binds its kernels; `finish` waits for them. Start, finish and stop them from one thread: the workers' parent-
    death signal follows the thread that started them."""

    def __init__(self, artifact, device_index: int, workers: int):
        self.started = time.perf_counter()
        claims = write_claims(compile_order(artifact), launch_order(artifact))
        # the worker imports this package from where this process did, whatever put it on sys.path
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            self.procs = [subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(artifact.path), "--device",
                                            str(device_index), "--claims-fd", str(claims),
                                            "--deadline", str(WORKER_TIMEOUT_S), "--shape-set",
                                            str(artifact.shape_set)],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE, text=True, env=env, pass_fds=(claims,),
                                           preexec_fn=popen_child_setup())
                          for _ in range(workers)]
        finally:
            os.close(claims)

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
        return FirstLaunches(len(self.procs), time.perf_counter() - self.started, tuple(failures))

    def stop(self) -> None:
        """End every worker still running (the executor failed, or one is past its time)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def start_worker_deadline(seconds: float) -> None:
    """In a worker: end it after `seconds` whatever it is doing, a kernel that never returns included (SIGALRM's
    default action, which needs no Python code to run)."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, math.ceil(seconds)))
