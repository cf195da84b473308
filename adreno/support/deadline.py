"""A wall-clock deadline and a prompt Ctrl-C for work that may block inside native code.

A spinning OpenCL kernel keeps the main thread inside `clFinish`/`clWaitForEvents`; Python runs neither a
signal handler nor a timer there, so neither `KeyboardInterrupt` nor `signal.alarm` can stop it. The OS still
delivers SIGINT to Python's C-level handler, which writes the signal number to the wakeup fd: a watchdog
thread waiting on that fd (with the deadline as its timeout) is the one thing that still runs, and it ends the
whole process with `os._exit` after printing one line. One process, nothing to pickle, nothing left running.
That line goes to the stderr the block started with: the main thread may be stopped inside a redirect of file
descriptor 2 (`adreno.support.native_log`, around every OpenCL build: a kernel source that `#include`s a FIFO blocks the
driver's compiler there), whose capture the process would take with it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Callable

TIMEOUT_EXIT = 2  # a run over its deadline is a user-facing error, as every AdrenoError
INTERRUPT_EXIT = 130  # 128 + SIGINT, as the shell reports a process ended by Ctrl-C


@contextlib.contextmanager
def deadline(seconds: float, what: str, error_line: Callable[[str], None]):
    """Within the block, end the process after `seconds` (one `error:` line, exit 2) or at Ctrl-C (one
    `interrupted` line, exit 130), however deeply the main thread is blocked. Call it from the main thread.
    `error_line` prints that line on stderr, on a line of its own (the caller knows whether a progress line is
    open)."""
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    # The watchdog alone answers Ctrl-C: a KeyboardInterrupt in the main thread as well would print twice.
    previous_handler = signal.signal(signal.SIGINT, lambda signum, frame: None)
    done = threading.Event()
    ends = time.monotonic() + seconds
    stderr_fd = os.dup(2)

    def watch() -> None:
        while not done.is_set():
            readable, _, _ = select.select([reader], [], [], max(0.0, ends - time.monotonic()))
            if done.is_set():
                return
            if not readable:
                _end(TIMEOUT_EXIT, f"error: {what} did not finish within --timeout {seconds:g} s; stopped it "
                                   "(raise --timeout for a slow device or a large --repeat)", error_line, stderr_fd)
            if signal.SIGINT in reader.recv(64):
                _end(INTERRUPT_EXIT, "interrupted", error_line, stderr_fd)

    watchdog = threading.Thread(target=watch, name="adreno-deadline", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        writer.send(b"\0")  # wake the watchdog so that it returns instead of ending the process
        watchdog.join()
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        reader.close()
        writer.close()
        os.close(stderr_fd)


def _end(status: int, line: str, error_line: Callable[[str], None], stderr_fd: int) -> None:
    """Print `line` on `stderr_fd` (file descriptor 2 as the block began) and end the process now: the main thread
    may be stuck in a driver call no exception reaches."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os.dup2(stderr_fd, 2)
    error_line(line)
    os._exit(status)
