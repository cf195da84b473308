"""Whether a process still runs: how a writer tells what a killed one left behind (temporary artifact siblings,
a tuner's claims on configs) from what a live one is using."""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Whether `pid` names a running process on this host (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
