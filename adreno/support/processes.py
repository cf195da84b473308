"""A process's lifetime: whether one still runs, and children that end when the process that started them ends.

Every helper process we start (first-launch workers, build pools, the isolated measuring process, the farm's
servers) must end with its parent however the parent ends: its own deadline (`os._exit` from the watchdog), Ctrl-C,
an exception, SIGTERM, or SIGKILL, after which nothing of the parent runs to stop it. A worker re-parented to init
would otherwise spin on a tampered kernel for hours, taking a core from everything else on the machine. Two
mechanisms, because each misses a case the other covers:
- the kernel's parent-death signal (`PR_SET_PDEATHSIG`, Linux): delivered even while the child is blocked inside
  native code (a driver call, LLVM), where no Python code of its own runs. But it is tied to the *thread* that
  started the child, not the process: a child started from a thread that ends gets it early;
- a watch thread in the child that polls its parent's pid: process-wide, immune to the thread rule, but it needs the
  interpreter (a native call that holds the GIL delays it until the call returns).
A child started by `subprocess.Popen` from a thread that waits for it takes the signal (`popen_child_setup`);
a pool worker, whose starting thread the pool chooses, takes both (`die_with_parent` as the pool's initializer).
Both check at once whether the parent is already gone: it may die before the child sets either up.

A temporary folder cannot be removed by a process killed with SIGKILL, nor by its children (they die with it): one
named for its owner's pid (`owned_temp_dir`) is removed by the next process that makes one of its kind.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

PARENT_POLL_S = 0.25  # how often a watch thread looks for its parent: well inside a test's 5 s


def process_alive(pid: int) -> bool:
    """Whether `pid` names a running process on this host (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def set_parent_death_signal(sig: int = signal.SIGKILL, parent_pid: int | None = None) -> None:
    """Linux: get `sig` when the thread that started this process ends. With `parent_pid`, exit now if that
    parent is already gone (it died before this call: the signal would never come)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def popen_child_setup(sig: int = signal.SIGKILL):
    """A `preexec_fn` for `subprocess.Popen`: the child gets `sig` when the calling thread ends (it must be the
    thread that waits for the child) and exits at once if this process died while it was being started."""
    parent_pid = os.getpid()
    return lambda: set_parent_death_signal(sig, parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """In a pool worker or a `multiprocessing` child (an initializer, or the target's first line): the parent-death
    signal, and a daemon thread that ends this process within `PARENT_POLL_S` of `parent_pid` ending."""
    set_parent_death_signal(signal.SIGKILL, parent_pid)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="adreno-parent-watch", daemon=True).start()


def owned_temp_dir(prefix: str) -> Path:
    """A new temporary folder `{prefix}{pid}-...` of this process, made after removing every folder of that prefix
    whose process is gone (a SIGKILLed owner cannot remove its own)."""
    root = Path(tempfile.gettempdir())
    for folder in root.glob(f"{prefix}*-*"):
        owner = folder.name[len(prefix):].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not process_alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))


def spawn_pool(workers: int):
    """A `concurrent.futures.ProcessPoolExecutor` of `workers` processes started fresh (spawn: nothing of this
    process's threads or TVM state is forked into them), each of which ends with this process (`die_with_parent`).
    End it with `stop_pool` where jobs may still run; `shutdown` where none can."""
    import multiprocessing
    from concurrent import futures

    return futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=die_with_parent, initargs=(os.getpid(),))


def stop_pool(pool) -> None:
    """Shut the `concurrent.futures.ProcessPoolExecutor` `pool` down and end the jobs still running in it (builds
    past their deadline, the other shape sets of a compile that failed or was interrupted). Left running, they would
    load the CPU under what follows and write into folders the caller removes. Python 3.11 has no public way to end
    a pool's workers (3.14's `terminate_workers`), so they are read from the pool before it forgets them."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(timeout=5)
        if worker.is_alive():  # SIGTERM can be ignored (an inherited SIG_IGN) or slow under load; SIGKILL cannot
            worker.kill()
            worker.join()
    # Only now, and waiting: the pool's manager thread reaps the workers too, and a worker it reaped while this
    # thread waited for it still reads as alive here until that thread is done (waitpid: no child to wait for).
    pool.shutdown(wait=True, cancel_futures=True)
