"""The crash guard: a binary whose load killed the process is quarantined, and never loaded again after
`BLOCK_AFTER_CRASHES` crashes (the package docstring's "Crash guard" says how markers work).

It owns ``guard/`` (markers of loads in progress) and ``quarantine/`` (one note per crashed entry) under the cache
root; the entry store asks it whether a key may be loaded and loads binaries inside `CrashGuard.loading`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import pathlib
import socket
import time
import uuid
from collections.abc import Iterator

from adreno.opencl.device import DeviceIdentity

from .files import read_regular, unlink
from .format import KEY_PATTERN, canonical_json, device_key, entry_path

BLOCK_AFTER_CRASHES: int = 2  # crashed loads of one key after which it is built from source only
MARKER_SUFFIX = ".loading"

logger = logging.getLogger("adreno.cache")


class CrashGuard:
    """The markers and quarantine notes of the cache at `root`."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.markers_dir = root / "guard"
        self.quarantine_dir = root / "quarantine"
        self._reported: set[str] = set()

    def blocked(self, identity: DeviceIdentity, key: str) -> bool:
        """Whether entry `key` may not be loaded (after quarantining the entries that crashed loads on this device
        and driver left behind)."""
        self.quarantine_crashed(device_key(identity))
        return self.crashes(key) >= BLOCK_AFTER_CRASHES

    def crashes(self, key: str) -> int:
        """How many loads of entry ``key`` crashed (0 for nearly every key: one failed stat)."""
        try:
            note = json.loads(read_regular(self.quarantine_dir / key, 1 << 16))
        except FileNotFoundError:
            return 0
        except (OSError, ValueError):
            return BLOCK_AFTER_CRASHES  # a damaged note: keep the key blocked rather than risk a crash
        return int(note.get("crashes", 1)) if isinstance(note, dict) else BLOCK_AFTER_CRASHES

    @contextlib.contextmanager
    def loading(self, identity: DeviceIdentity, key: str | None) -> Iterator[pathlib.Path]:
        """Hold a crash marker for ``identity``'s device and driver, naming entry ``key``, while the body runs;
        remove it after.

        The marker is created and locked under a temporary name, then renamed into place, so a marker is
        never visible unlocked while its owner lives. If the process dies inside the body, the marker stays
        behind, unlocked, and the next lookup quarantines entry ``key`` (`quarantine_crashed`).
        """
        self.markers_dir.mkdir(parents=True, exist_ok=True)
        token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        marker = self.markers_dir / f"{device_key(identity)}.{token}{MARKER_SUFFIX}"
        tmp = self.markers_dir / f".{token}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            note = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "entry": key}
            note.update(identity.cache_fields)
            os.write(fd, canonical_json(note))
            os.replace(tmp, marker)
            try:
                yield marker
            finally:
                unlink(marker)  # before the lock is released, so a checker never sees it unlocked
        finally:
            unlink(tmp)
            os.close(fd)

    def quarantine_crashed(self, device_key: str = "*") -> None:
        """Quarantine the entry every abandoned marker (of one device key, or all) names, then remove the marker;
        one warning line per crashed load."""
        for marker in self.crash_markers(device_key):
            note = read_marker(marker)
            key = note.get("entry")
            named = isinstance(key, str) and KEY_PATTERN.fullmatch(key)
            try:
                if named:
                    note["crashes"] = self.crashes(key) + 1
                    self.quarantine_dir.mkdir(parents=True, exist_ok=True)
                    (self.quarantine_dir / key).write_bytes(canonical_json(note))
                    unlink(entry_path(self.root, key))
                unlink(marker)
            except OSError as exc:
                if marker.name not in self._reported:
                    self._reported.add(marker.name)
                    logger.warning("a binary load crashed (%s) but cannot be quarantined: %s", marker.name, exc)
                continue
            logger.warning(
                "a binary load crashed earlier (process %s on %s, %s driver %s): %s; the rest of the cache stays in "
                "use", note.get("pid", "?"), note.get("host", "?"), note.get("device_name", "?"),
                note.get("driver_version", "?"),
                (f"removed entry {key[:16]} ({note['crashes']} crashed load(s); "
                 + ("built from source from now on, until `adreno cache clear`)" if note["crashes"] >=
                    BLOCK_AFTER_CRASHES else "rebuilt from source once)"))
                if named else "its marker names no entry, nothing quarantined")

    def crash_markers(self, device_key: str = "*") -> list[pathlib.Path]:
        """Markers (for one device key, or all) left behind by loads whose process is gone."""
        if not self.markers_dir.is_dir():
            return []
        return [m for m in self.markers_dir.glob(f"{device_key}.*{MARKER_SUFFIX}") if _marker_abandoned(m)]

    def notes(self) -> list[dict]:
        """The quarantine notes (one per crashed entry)."""
        return [read_marker(path) for path in sorted(self.quarantine_dir.glob("*"))]

    def clear(self) -> None:
        """Remove abandoned markers and every quarantine note (markers of loads in progress are kept)."""
        for path in [*self.crash_markers(), *self.quarantine_dir.glob("*")]:
            unlink(path)
        self._reported.clear()


def _marker_abandoned(marker: pathlib.Path) -> bool:
    """True if no live process holds the marker's lock and the marker is still in place."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its owner is alive and loading right now
        try:
            st = os.stat(marker)
        except FileNotFoundError:
            return False  # removed by its owner after a clean load
        mine = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
    finally:
        os.close(fd)


def read_marker(marker: pathlib.Path) -> dict:
    """The note a crash marker carries (pid, host, time, device identity), or just its name if unreadable."""
    try:
        note = json.loads(read_regular(marker, 1 << 16))
    except (OSError, ValueError):
        note = {}
    return {"marker": marker.name, **note}
