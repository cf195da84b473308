"""Host-side deadlines of the farm's remote calls: per-stage timeouts, a call that waits at most that long, and how
a failed call reads in one line. Shared by the RPC runners (`adreno/runners/rpc.py`, `native.py`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class Timeouts:
    """Host-side deadlines in seconds, one per stage."""

    request: float = 30.0  # waiting for a free device at the tracker, connecting and the first handshake
    upload: float = 60.0
    build: float = 120.0
    run: float = 60.0
    download: float = 30.0
    watchdog_grace: float = 2.0  # the agent kills its own session this long after the host gave up on a run
    outage: float = 120.0  # how long infrastructure failures (tracker, no device) are retried with back-off


class StageTimeout(Exception):
    def __init__(self, stage: str, seconds: float):
        super().__init__(f"{stage} did not finish within {seconds:g} s")
        self.stage, self.seconds = stage, seconds


class RemoteError(Exception):
    """A call failed; `alive` says whether the device still answered afterwards."""

    def __init__(self, stage: str, message: str, alive: bool):
        super().__init__(message)
        self.stage, self.alive = stage, alive


def call_with_deadline(fn, timeout: float, stage: str):
    """Run `fn()` in a daemon thread and wait at most `timeout` s. A call that overruns is abandoned (its thread
    stays blocked until the remote side closes the connection) and `StageTimeout` is raised here."""
    box: dict = {}
    done = threading.Event()

    def _target():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = err
        finally:
            done.set()

    threading.Thread(target=_target, name=f"rpc-{stage}", daemon=True).start()
    if not done.wait(timeout):
        raise StageTimeout(stage, timeout)
    if "error" in box:
        raise box["error"]
    return box["value"]


def short_error(err: BaseException) -> str:
    """The message of an error in one line (a TVM error's last line: its C++ traceback comes first)."""
    text = str(err).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else type(err).__name__)[:500]
