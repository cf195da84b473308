"""OpenCL program-binary cache: build a program from source once, load its binary afterwards.

Building OpenCL programs from source (`clBuildProgram`) dominates the start-up time of mobile GPU apps;
loading a program binary the driver produced earlier is one to two orders of magnitude faster. A binary is
only valid for the exact device, driver, compiler inputs and toolchain that produced it, and a driver may
crash on a bad one, so this cache never hands the driver a binary it cannot vouch for.

This module is longer than most (about 1,000 lines) on purpose: it is one on-disk format, specified below, and its
three users (the entries, the crash guard, the bundles an artifact ships) share that format's keys, headers and
durable-file helpers; split apart, the format's rules would live in three places.

Key
    One entry per program. Its key is the SHA-256 (hex) of the canonical JSON (sorted keys, compact
    separators, ASCII) of these fields: ``cache_format`` (`CACHE_FORMAT_VERSION`), ``adreno``
    (`adreno.__version__`), ``tvm`` (`tvm.__version__`), ``platform_name``, ``platform_version``,
    ``device_name``, ``driver_version`` (`CL_DRIVER_VERSION`), ``opencl_c_version``, ``options`` (build
    options) and ``source_sha256`` (SHA-256 of the UTF-8 kernel source). Changing any of them changes the key.

Directory layout (root: `default_cache_dir()` unless given)
    ``<key>.clbin``                  one entry per program
    ``.<key>.<pid>.<random>.tmp``    an entry being written (renamed over ``<key>.clbin`` when complete)
    ``.lock``                        the write lock (``fcntl.flock``) taken by every writer and by `clear`
    ``guard/<device-key>.<token>.loading``  crash-guard markers (see below)
    ``quarantine/<key>``             entries crashed loads touched, with their count of crashes

Entry file format (integers little-endian)
    ======  ======  ==========================================================================
    offset  size    field
    ======  ======  ==========================================================================
    0       8       magic ``b"ADRCLBIN"``
    8       4       u32 entry format version (`CACHE_FORMAT_VERSION`)
    12      4       u32 H: length of the JSON header that follows
    16      H       header: the canonical JSON of the key fields above (the key is its SHA-256)
    16+H    32      SHA-256 of the binary
    48+H    rest    the program binary as returned by ``CL_PROGRAM_BINARIES``
    ======  ======  ==========================================================================

    On load the magic, the version, the lengths, the checksum of the binary and the header (byte for
    byte against the header the caller's key fields produce) are all checked; any mismatch, a missing or
    unreadable file, or a binary the driver rejects is a *miss*: the program is built from source, the
    entry is replaced and one line is logged on the ``adreno.cache`` logger. Nothing about a bad entry
    raises.

Concurrency
    Writers hold ``.lock`` (an exclusive ``flock``) while they write a temporary file in the same
    directory, ``fsync`` it, ``os.replace`` it over the entry and evict. Readers take no lock: a rename is
    atomic, so a reader sees the old entry, the new one, or none, never a torn one. Entries carry their
    last use in their mtime (set on write and on every hit); past ``max_bytes`` the least recently used
    entries are evicted.

Crash guard
    Drivers have been known to crash on bad binaries. Before handing a binary to the driver the cache
    creates a marker ``guard/<device-key>.<token>.loading`` (device key: hash of platform, device and
    driver identity) holding an exclusive ``flock`` on it, and removes it after the load. A marker whose
    lock can be taken while it is still in place was left by a process that died during a load (the
    kernel releases the lock of a dead process). The marker names the entry that load touched (its key): the
    next process that looks quarantines that entry (removes it, and counts the crash under ``quarantine/``)
    and removes the marker. The rest of the cache stays in use. A key whose loads crashed once is rebuilt from
    source and cached again (a SIGKILL or an OOM kill that happened to land in a load costs one rebuild); one
    whose loads crashed `BLOCK_AFTER_CRASHES` times (a binary the driver cannot take) is never loaded, stored
    or taken from a bundle again: `ProgramCache.build` builds it from source and reports ``"disabled"``.
    `ProgramCache.clear` lifts the quarantine.

Only regular files are read
    Every file the cache reads (entries, markers, bundles) is opened non-blocking and checked with ``fstat``
    before it is read, and read up to a size limit: a FIFO, a device or a huge file in place of an entry is a
    bad entry, never a hang (`_read_regular`).

Binaries bundled in an artifact
    `export_bundle` writes every program of an artifact, built for one device, into
    ``<artifact>/binaries/<device>/`` (entries in the format above, an ``index.json``, and TVM's blob);
    `ProgramCache.build` takes such a bundle (`BundledBinaries`) and loads from it first, verified like a
    cache entry; `ProgramCache.for_artifact` does that for executors. See `BundledBinaries`.

TVM's precompiled-program blob
    `tvm_precompiled_blob` and `read_tvm_precompiled_blob` write and read the blob that TVM's OpenCL
    runtime takes through ``opencl.SetPreCompiledPrograms`` (see `tvm_precompiled_blob` for its layout).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import logging
import os
import pathlib
import re
import shutil
import socket
import stat
import struct
import time
import uuid
from collections.abc import Iterator
from typing import NamedTuple

import pyopencl as cl

import adreno
from adreno.errors import KernelBuildError
from adreno.opencl.device import DeviceIdentity
from adreno.opencl.signature import program_options

CACHE_FORMAT_VERSION: int = 1
BLOCK_AFTER_CRASHES: int = 2  # crashed loads of one key after which it is built from source only

logger = logging.getLogger("adreno.cache")

_MAGIC = b"ADRCLBIN"
_PREFIX = struct.Struct("<8sII")  # magic, format version, header length
_DIGEST_SIZE = hashlib.sha256().digest_size
_ENTRY_SUFFIX = ".clbin"
_MARKER_SUFFIX = ".loading"
_U64 = struct.Struct("<Q")
_KEY = re.compile(r"[0-9a-f]{64}")


def default_cache_dir() -> pathlib.Path:
    """Return the cache root: ``$ADRENO_CACHE_DIR`` if set and not empty, else ``~/.cache/adreno/programs``."""
    env = os.environ.get("ADRENO_CACHE_DIR")
    if env:
        return pathlib.Path(env).expanduser()
    return pathlib.Path.home() / ".cache" / "adreno" / "programs"


@functools.cache
def _tvm_version() -> str:
    """TVM's version: the installed ``apache-tvm`` distribution's, else ``tvm.__version__``.

    The distribution metadata is read first because importing TVM takes over a second, which a warm start
    (a few milliseconds of binary loads) should not pay; which of the two is used depends only on what is
    installed, so keys stay stable within an environment.
    """
    from importlib import metadata

    try:
        return metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        try:
            import tvm
        except ImportError:  # a measuring machine without TVM (`python -m adreno.runners.offline`)
            return "none"
        return tvm.__version__


def _canonical_json(fields: dict) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _key_fields(identity: DeviceIdentity, source: str, options: str) -> dict:
    return {
        "cache_format": CACHE_FORMAT_VERSION,
        "adreno": adreno.__version__,
        "tvm": _tvm_version(),
        **identity.cache_fields,
        "options": options,
        "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
    }


def cache_key(identity: DeviceIdentity, source: str, options: str) -> str:
    """Return the entry key (hex SHA-256) over every key field listed in the module docstring."""
    return hashlib.sha256(_canonical_json(_key_fields(identity, source, options))).hexdigest()


def _device_key(identity: DeviceIdentity) -> str:
    return hashlib.sha256(_canonical_json(identity.cache_fields)).hexdigest()[:32]


class _BadEntry(Exception):
    """An entry file that is not a complete, intact entry; the message is the reason."""


class _Entry(NamedTuple):
    header: bytes
    binary: bytes


def _encode_entry(header: bytes, binary: bytes) -> bytes:
    prefix = _PREFIX.pack(_MAGIC, CACHE_FORMAT_VERSION, len(header))
    return prefix + header + hashlib.sha256(binary).digest() + binary


def _decode_entry(data: bytes) -> _Entry:
    """Split an entry file into header and binary, checking magic, version, lengths and checksum."""
    if len(data) < _PREFIX.size:
        raise _BadEntry(f"truncated ({len(data)} bytes)")
    magic, version, header_len = _PREFIX.unpack_from(data)
    if magic != _MAGIC:
        raise _BadEntry("wrong magic")
    if version != CACHE_FORMAT_VERSION:
        raise _BadEntry(f"format version {version}, expected {CACHE_FORMAT_VERSION}")
    binary_at = _PREFIX.size + header_len + _DIGEST_SIZE
    if len(data) < binary_at:
        raise _BadEntry(f"truncated ({len(data)} bytes)")
    header = data[_PREFIX.size : _PREFIX.size + header_len]
    digest = data[binary_at - _DIGEST_SIZE : binary_at]
    binary = data[binary_at:]
    if hashlib.sha256(binary).digest() != digest:
        raise _BadEntry("checksum mismatch")
    return _Entry(header, binary)


class ProgramCache:
    """A directory of OpenCL program binaries keyed by device, driver, toolchain, options and source.

    `stats` counts, for this object: ``hits`` (binaries served / loaded), ``misses`` (lookups that found
    nothing usable), ``rejected`` (entries that existed but failed verification or that the driver
    refused; each is also a miss), ``evictions``, and two more `build` outcomes: ``bundled`` (programs
    loaded from an artifact's bundled binaries) and ``disabled`` (source builds with the cache off);
    ``bundle_rejected`` counts bundled binaries that failed verification or that the driver refused
    (each falls back to the cache, then to a source build). So after `build` calls,
    ``hits + misses + bundled + disabled`` is the number of programs built.
    """

    def __init__(self, root: pathlib.Path | None = None, max_bytes: int = 256 << 20, enabled: bool = True):
        """Open the cache at ``root`` (default `default_cache_dir()`; created on first write).

        ``max_bytes`` caps the total size of the entries; ``enabled=False`` makes every lookup a miss,
        every store a no-op and every `build` a plain source build.
        """
        self.root = pathlib.Path(root) if root is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self.enabled = enabled
        self.stats = {"hits": 0, "misses": 0, "rejected": 0, "evictions": 0,
                      "bundled": 0, "bundle_rejected": 0, "disabled": 0}
        self._guard_dir = self.root / "guard"
        self._reported_crashes: set[str] = set()

    # -- lookups and stores ---------------------------------------------------------------------------

    def get(self, identity: DeviceIdentity, source: str, options: str) -> bytes | None:
        """Return the verified binary for this program, or None on a miss (never raises on a bad entry).

        Also None while the cache is disabled, or this entry is quarantined after a crashed load.
        """
        header = _canonical_json(_key_fields(identity, source, options))
        if not self._usable(identity, _key_of(header)):
            return None
        binary = self._read(header)
        if binary is None:
            self.stats["misses"] += 1
        else:
            self.stats["hits"] += 1
        return binary

    def put(self, identity: DeviceIdentity, source: str, options: str, binary: bytes) -> None:
        """Store a binary atomically under the write lock and evict least recently used entries past the cap.

        A store that fails (disk full, read-only directory, entry larger than the cap) is logged and
        skipped; the caller's program is unaffected.
        """
        header = _canonical_json(_key_fields(identity, source, options))
        if self._usable(identity, _key_of(header)):
            self._write(header, binary)

    def build(
        self, context: cl.Context, source: str, options: str = "", bundle: BundledBinaries | None = None,
        defer_store: bool = False,
    ) -> tuple[cl.Program, str]:
        """Build a program for the single device of ``context``, through the cache.

        Returns the built program and how it was obtained: ``"bundled"`` (loaded from ``bundle``, an
        artifact's bundled binaries for this device, see `BundledBinaries`), ``"hit"`` (loaded from a
        cached binary), ``"miss"`` (built from source and stored; this includes a missing or bad entry
        and a binary the driver rejected) or ``"disabled"`` (built from source without touching the cache
        or the bundle: disabled by the caller, or this program's entry quarantined after a crashed load). A bundled
        binary that fails verification or that the driver refuses is logged (one line) and the build
        falls back to the cache. Binary loads go through the crash guard. With ``defer_store`` a miss is not
        stored: the caller stores the program later with `store` (after a first run, whose work a driver's binary
        then holds: PoCL's work-group functions). Raises `KernelBuildError`
        (with the build log) when the source itself does not build, and ValueError for a context with
        more than one device.
        """
        if len(context.devices) != 1:
            raise ValueError(f"ProgramCache.build needs a context with one device, got {len(context.devices)}")
        device = context.devices[0]
        identity = DeviceIdentity.from_cl_device(device)
        header = _canonical_json(_key_fields(identity, source, options))
        if not self._usable(identity, _key_of(header)):
            self.stats["disabled"] += 1
            return _build_from_source(context, device, source, options), "disabled"
        if bundle is not None and bundle.identity == identity:
            binary = bundle.get(source, options)
            if binary is not None:
                program = self._load_binary(context, device, identity, binary, options, _key_of(header), "bundled")
                if program is not None:
                    self.stats["bundled"] += 1
                    return program, "bundled"
            self.stats["bundle_rejected"] += 1  # missing, damaged or refused: logged, fall back
        binary = self._read(header)
        if binary is not None:
            program = self._load_binary(context, device, identity, binary, options, _key_of(header))
            if program is not None:
                self.stats["hits"] += 1
                return program, "hit"
        self.stats["misses"] += 1
        program = _build_from_source(context, device, source, options)
        if not defer_store:
            self.store(program, source, options)
        return program, "miss"

    def store(self, program: cl.Program, source: str, options: str = "") -> None:
        """Write the binary of ``program`` (built from ``source`` with ``options`` for one device) as its entry."""
        if not self.enabled:
            return
        identity = DeviceIdentity.from_cl_device(program.devices[0])
        header = _canonical_json(_key_fields(identity, source, options))
        built = program.get_info(cl.program_info.BINARIES)[0]
        if built:
            self._write(header, built)
        else:
            logger.warning("driver returned an empty binary for %s; not cached", _key_of(header)[:16])

    def for_artifact(self, artifact_path: str | os.PathLike) -> ArtifactProgramCache:
        """This cache seen through one artifact: its `build` first tries the binaries the artifact bundles
        for the device being built for (written by `export_bundle`), then this cache, then the source."""
        return ArtifactProgramCache(self, artifact_path)

    # -- maintenance ----------------------------------------------------------------------------------

    def info(self) -> dict:
        """Describe the cache: root, cap, entry count and bytes, quarantined entries and this object's stats."""
        self._quarantine_crashed()
        entries = self._entries()
        return {
            "root": str(self.root),
            "enabled": self.enabled,
            "max_bytes": self.max_bytes,
            "entries": len(entries),
            "bytes": sum(size for _, size, _ in entries),
            "quarantined": [_read_marker(path) for path in sorted(self._quarantine_dir.glob("*"))],
            "stats": dict(self.stats),
        }

    def clear(self) -> int:
        """Remove every entry, leftover temporary file, crash marker and quarantine note; return the number of
        entries removed. Markers of loads in progress in live processes are kept.
        """
        if not self.root.is_dir():
            return 0
        removed = 0
        with self._write_lock():
            for path, _, _ in self._entries():
                removed += _unlink(path)
            for path in self.root.glob(".*.tmp"):
                _unlink(path)
            for path in [*self._crash_markers(), *self._quarantine_dir.glob("*")]:
                _unlink(path)
        self._reported_crashes.clear()
        return removed

    def verify(self) -> dict:
        """Check every entry without loading it into a driver.

        Returns ``{"ok": n_ok, "bad": n_bad, "entries": {file name: {"ok": bool, "reason": str | None,
        "bytes": size}}}``. Reasons: truncated, wrong magic, format version, checksum mismatch, unreadable
        header, key mismatch (header does not hash to the file name) or stale (written by another
        version of adreno or TVM; never served, evicted in time).
        """
        report: dict[str, dict] = {}
        for path, size, _ in self._entries():
            try:
                reason = _entry_problem(_read_regular(path, self.max_bytes), path.name[: -len(_ENTRY_SUFFIX)])
            except FileNotFoundError:
                continue  # evicted or replaced while we listed
            except OSError as exc:
                reason = f"unreadable: {exc.strerror}"
            report[path.name] = {"ok": reason is None, "reason": reason, "bytes": size}
        n_ok = sum(entry["ok"] for entry in report.values())
        return {"ok": n_ok, "bad": len(report) - n_ok, "entries": report}

    # -- internals ------------------------------------------------------------------------------------

    def _usable(self, identity: DeviceIdentity, key: str) -> bool:
        """False when the cache is off, or when entry ``key`` is quarantined (after quarantining the entries that
        crashed loads on this device and driver left behind)."""
        if not self.enabled:
            return False
        self._quarantine_crashed(_device_key(identity))
        return self._crashes(key) < BLOCK_AFTER_CRASHES

    def _crashes(self, key: str) -> int:
        """How many loads of entry ``key`` crashed (0 for nearly every key: one failed stat)."""
        try:
            note = json.loads(_read_regular(self._quarantine_dir / key, 1 << 16))
        except FileNotFoundError:
            return 0
        except (OSError, ValueError):
            return BLOCK_AFTER_CRASHES  # a damaged note: keep the key blocked rather than risk a crash
        return int(note.get("crashes", 1)) if isinstance(note, dict) else BLOCK_AFTER_CRASHES

    def _entry_path(self, key: str) -> pathlib.Path:
        return self.root / (key + _ENTRY_SUFFIX)

    def _read(self, header: bytes) -> bytes | None:
        """Return the binary of the entry for ``header`` if it is intact and matches; log bad entries."""
        key = _key_of(header)
        path = self._entry_path(key)
        try:
            data = _read_regular(path, self.max_bytes)
        except FileNotFoundError:
            logger.debug("miss %s: no entry", key[:16])
            return None
        except OSError as exc:
            self.stats["rejected"] += 1
            logger.warning("cache miss %s: entry unreadable (%s); rebuilding from source", key[:16], exc)
            return None
        try:
            entry = _decode_entry(data)
            if entry.header != header:
                raise _BadEntry("key mismatch")
        except _BadEntry as bad:
            self.stats["rejected"] += 1
            logger.warning("cache miss %s: bad entry (%s); rebuilding from source", key[:16], bad)
            return None
        _touch(path)
        return entry.binary

    def _write(self, header: bytes, binary: bytes) -> None:
        key = _key_of(header)
        data = _encode_entry(header, binary)
        if len(data) > self.max_bytes:
            logger.warning(
                "not caching %s: entry of %d bytes exceeds the cap of %d", key[:16], len(data), self.max_bytes
            )
            return
        tmp = self.root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with self._write_lock():
                try:
                    _write_durably(tmp, data)
                    os.replace(tmp, self._entry_path(key))
                finally:
                    _unlink(tmp)
                _fsync_dir(self.root)
                self._evict(keep=self._entry_path(key))
        except OSError as exc:
            logger.warning("could not store cache entry %s: %s", key[:16], exc)

    def _evict(self, keep: pathlib.Path) -> None:
        """Remove least recently used entries (oldest mtime first) until the total fits the cap."""
        entries = sorted(self._entries(), key=lambda e: (e[2], e[0].name))
        total = sum(size for _, size, _ in entries)
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            if _unlink(path):
                self.stats["evictions"] += 1
                logger.debug("evicted %s (%d bytes)", path.name, size)
            total -= size

    def _entries(self) -> list[tuple[pathlib.Path, int, int]]:
        """List entries as (path, size, mtime_ns); entries removed while listing are skipped."""
        found = []
        for path in self.root.glob("*" + _ENTRY_SUFFIX):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            found.append((path, st.st_size, st.st_mtime_ns))
        return found

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    # -- crash guard ----------------------------------------------------------------------------------

    def _load_binary(
        self,
        context: cl.Context,
        device: cl.Device,
        identity: DeviceIdentity,
        binary: bytes,
        options: str,
        key: str,
        origin: str = "cached",
    ) -> cl.Program | None:
        """Load and build a binary under the crash guard; None (logged; counted for cached binaries) if the
        driver refuses it. ``origin`` is "cached" (from this cache) or "bundled" (from an artifact)."""
        fallback = "rebuilding from source" if origin == "cached" else "falling back to the cache"
        try:
            with self._binary_load_guard(identity, key):
                return cl.Program(context, [device], [binary]).build(options, cache_dir=False)
        except cl.Error as exc:
            if origin == "cached":
                self.stats["rejected"] += 1
            logger.warning("%s binary not used: driver rejected it (%s); %s", origin, _first_line(exc), fallback)
        except OSError as exc:
            logger.warning("%s binary not used: cannot set the crash-guard marker (%s); %s", origin, exc, fallback)
        return None

    @contextlib.contextmanager
    def _binary_load_guard(self, identity: DeviceIdentity, key: str | None) -> Iterator[pathlib.Path]:
        """Hold a crash marker for ``identity``'s device and driver, naming entry ``key``, while the body runs;
        remove it after.

        The marker is created and locked under a temporary name, then renamed into place, so a marker is
        never visible unlocked while its owner lives. If the process dies inside the body, the marker stays
        behind, unlocked, and the next lookup quarantines entry ``key`` (`_quarantine_crashed`).
        """
        self._guard_dir.mkdir(parents=True, exist_ok=True)
        token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        marker = self._guard_dir / f"{_device_key(identity)}.{token}{_MARKER_SUFFIX}"
        tmp = self._guard_dir / f".{token}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            note = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "entry": key}
            note.update(identity.cache_fields)
            os.write(fd, _canonical_json(note))
            os.replace(tmp, marker)
            try:
                yield marker
            finally:
                _unlink(marker)  # before the lock is released, so a checker never sees it unlocked
        finally:
            _unlink(tmp)
            os.close(fd)

    @property
    def _quarantine_dir(self) -> pathlib.Path:
        return self.root / "quarantine"

    def _quarantine_crashed(self, device_key: str = "*") -> None:
        """Quarantine the entry every abandoned marker (of one device key, or all) names, then remove the marker;
        one warning line per crashed load."""
        for marker in self._crash_markers(device_key):
            note = _read_marker(marker)
            key = note.get("entry")
            try:
                if isinstance(key, str) and _KEY.fullmatch(key):
                    note["crashes"] = self._crashes(key) + 1
                    self._quarantine_dir.mkdir(parents=True, exist_ok=True)
                    (self._quarantine_dir / key).write_bytes(_canonical_json(note))
                    _unlink(self._entry_path(key))
                _unlink(marker)
            except OSError as exc:
                if marker.name not in self._reported_crashes:
                    self._reported_crashes.add(marker.name)
                    logger.warning("a binary load crashed (%s) but cannot be quarantined: %s", marker.name, exc)
                continue
            logger.warning(
                "a binary load crashed earlier (process %s on %s, %s driver %s): %s; the rest of the cache stays in "
                "use", note.get("pid", "?"), note.get("host", "?"), note.get("device_name", "?"),
                note.get("driver_version", "?"),
                (f"removed entry {key[:16]} ({note['crashes']} crashed load(s); "
                 + ("built from source from now on, until `adreno cache clear`)" if note["crashes"] >=
                    BLOCK_AFTER_CRASHES else "rebuilt from source once)"))
                if isinstance(key, str) and _KEY.fullmatch(key) else "its marker names no entry, nothing quarantined")

    def _crash_markers(self, device_key: str = "*") -> list[pathlib.Path]:
        """Markers (for one device key, or all) left behind by loads whose process is gone."""
        if not self._guard_dir.is_dir():
            return []
        return [m for m in self._guard_dir.glob(f"{device_key}.*{_MARKER_SUFFIX}") if _marker_abandoned(m)]


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


def _read_marker(marker: pathlib.Path) -> dict:
    """The note a crash marker carries (pid, host, time, device identity), or just its name if unreadable."""
    try:
        note = json.loads(_read_regular(marker, 1 << 16))
    except (OSError, ValueError):
        note = {}
    return {"marker": marker.name, **note}


def _entry_problem(data: bytes, key: str) -> str | None:
    """Why an entry file is unusable, or None if it is intact, matches its name and is current."""
    try:
        entry = _decode_entry(data)
    except _BadEntry as bad:
        return str(bad)
    if hashlib.sha256(entry.header).hexdigest() != key:
        return "key mismatch"
    try:
        fields = json.loads(entry.header)
    except ValueError:
        return "unreadable header"
    current = {"cache_format": CACHE_FORMAT_VERSION, "adreno": adreno.__version__, "tvm": _tvm_version()}
    if not isinstance(fields, dict) or any(fields.get(name) != value for name, value in current.items()):
        return "stale"
    return None


def _build_from_source(context: cl.Context, device: cl.Device, source: str, options: str) -> cl.Program:
    """clBuildProgram from source (bypassing pyopencl's own cache); KernelBuildError with the log on failure."""
    try:
        return cl.Program(context, source).build(options, cache_dir=False)
    except cl.RuntimeError as exc:
        raise KernelBuildError(
            f"OpenCL build failed on {device.name!r} with options {options!r}:\n{exc}"
        ) from exc


def _key_of(header: bytes) -> str:
    return hashlib.sha256(header).hexdigest()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _touch(path: pathlib.Path) -> None:
    """Mark an entry as used now (its mtime is its LRU position); an entry evicted meanwhile is ignored."""
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except FileNotFoundError:
        pass


def _write_durably(path: pathlib.Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        now = time.time_ns()
        os.utime(fd, ns=(now, now))  # nanosecond LRU stamp (file system timestamps are coarser)
    finally:
        os.close(fd)


def _fsync_dir(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_regular(path: pathlib.Path, limit: int = 1 << 30) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes. Opened non-blocking and without following a final
    symlink, then checked with ``fstat``: a FIFO, a device or a directory raises OSError ("not a regular file")
    instead of blocking or streaming forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def _unlink(path: pathlib.Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


# -- TVM's precompiled-program blob -----------------------------------------------------------------------


def tvm_precompiled_blob(programs: dict[str, bytes]) -> bytes:
    """Serialize kernel binaries into the blob TVM's OpenCL runtime takes via ``opencl.SetPreCompiledPrograms``.

    Layout (what ``OpenCLModuleNode::GetPreCompiledPrograms`` writes and ``SetPreCompiledPrograms`` reads
    in TVM's ``src/backend/opencl/runtime/opencl_module.cc``, v0.26 to main; earlier
    ``src/runtime/opencl/opencl_module.cc``, through ``support::BytesOutStream`` / ``BytesInStream``,
    whose serializers write integers little-endian and strings and byte vectors as a u64 length followed
    by the bytes)::

        u64 count                       number of programs
        count times:
            u64 name_len, name bytes    kernel (function) name, the key TVM's module uses per program
            u64 bin_len,  bin bytes     the program binary (CL_PROGRAM_BINARIES) for that kernel

    Every integer is an unsigned 64-bit little-endian value; there is no magic, version, key or
    checksum, and TVM does not check for trailing bytes. TVM builds one OpenCL program per kernel, so
    each binary must contain the kernel it is named after. Programs are written in the dict's order.
    Raises ValueError for an empty name or binary (TVM refuses both).
    """
    parts = [_U64.pack(len(programs))]
    for name, binary in programs.items():
        raw_name = name.encode("utf-8")
        if not raw_name or not binary:
            raise ValueError(f"program {name!r}: TVM needs a non-empty kernel name and binary")
        parts += [_U64.pack(len(raw_name)), raw_name, _U64.pack(len(binary)), bytes(binary)]
    return b"".join(parts)


def read_tvm_precompiled_blob(blob: bytes) -> dict[str, bytes]:
    """Parse a blob in the layout of `tvm_precompiled_blob` (as ``opencl.GetPreCompiledPrograms`` returns it).

    Stricter than TVM: raises ValueError on a truncated blob, trailing bytes, a duplicate kernel name or a
    name that is not UTF-8.
    """
    view = memoryview(blob)
    pos = 0

    def take(size: int, what: str) -> memoryview:
        nonlocal pos
        if size > len(view) - pos:
            raise ValueError(
                f"truncated TVM program blob: {what} needs {size} bytes at offset {pos}, {len(view) - pos} left"
            )
        pos += size
        return view[pos - size : pos]

    def take_u64(what: str) -> int:
        return _U64.unpack(take(_U64.size, what))[0]

    programs: dict[str, bytes] = {}
    count = take_u64("program count")
    for index in range(count):
        raw_name = take(take_u64(f"name length of program {index}"), f"name of program {index}")
        try:
            name = bytes(raw_name).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"TVM program blob: name of program {index} is not UTF-8") from exc
        if name in programs:
            raise ValueError(f"TVM program blob: duplicate kernel name {name!r}")
        programs[name] = bytes(take(take_u64(f"binary length of {name!r}"), f"binary of {name!r}"))
    if pos != len(view):
        raise ValueError(f"TVM program blob: {len(view) - pos} trailing bytes after {count} programs")
    return programs


# -- binaries bundled in an artifact ----------------------------------------------------------------------

BUNDLE_DIR = "binaries"
BUNDLE_INDEX = "index.json"
BUNDLE_FORMAT = 1
TVM_BLOB_NAME = "tvm_precompiled.bin"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def bundle_dir_name(identity: DeviceIdentity) -> str:
    """The directory (under ``<artifact>/binaries/``) of the binaries for one device and driver:
    a readable slug of the device name and 16 hex digits of the hash of the whole identity."""
    slug = re.sub(r"[^a-z0-9]+", "-", identity.device_name.lower()).strip("-")[:40].strip("-") or "device"
    return f"{slug}-{_device_key(identity)[:16]}"


class ArtifactProgramCache:
    """A `ProgramCache` seen through one artifact (see `ProgramCache.for_artifact`).

    `build` opens the artifact's bundle for the context's device once (`BundledBinaries.open`) and passes
    it to `ProgramCache.build`; every other attribute (``stats``, ``root``, `info`, ...) is the cache's.
    """

    def __init__(self, cache: ProgramCache, artifact_path: str | os.PathLike):
        self.cache = cache
        self.artifact_path = pathlib.Path(artifact_path)
        self._bundles: dict[DeviceIdentity, BundledBinaries | None] = {}

    def build(self, context: cl.Context, source: str, options: str = "",
              defer_store: bool = False) -> tuple[cl.Program, str]:
        bundle = None
        if self.cache.enabled and len(context.devices) == 1:
            identity = DeviceIdentity.from_cl_device(context.devices[0])
            if identity not in self._bundles:
                self._bundles[identity] = BundledBinaries.open(self.artifact_path, identity)
            bundle = self._bundles[identity]
        return self.cache.build(context, source, options, bundle=bundle, defer_store=defer_store)

    def has_bundle(self, device: cl.Device) -> bool:
        """Whether the artifact bundles binaries for `device` (which are one per program) and the cache uses them."""
        identity = DeviceIdentity.from_cl_device(device)
        if identity not in self._bundles:
            self._bundles[identity] = BundledBinaries.open(self.artifact_path, identity)
        return self.cache.enabled and self._bundles[identity] is not None

    def for_artifact(self, artifact_path: str | os.PathLike) -> ArtifactProgramCache:
        return self.cache.for_artifact(artifact_path)

    def __getattr__(self, name: str):
        if name == "cache":  # not set yet (e.g. while unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.cache, name)


class BundledBinaries:
    """The program binaries an artifact carries for one device and driver, written by `export_bundle`.

    Layout of ``<artifact>/binaries/<bundle_dir_name(identity)>/``::

        index.json            {"format", "device" (the DeviceIdentity fields), "device_key", "adreno", "tvm",
                               "options", "created", "programs": {program: {"file", "key", "sha256",
                               "bytes", "kernels"}}, "tvm_precompiled": {"file", "sha256", "bytes", "kernels"}}
        <program>.clbin       one entry per program, in the cache's entry format (header = key fields)
        tvm_precompiled.bin   the same binaries as TVM's ``opencl.SetPreCompiledPrograms`` blob, one per kernel

    A binary is served only if everything checks out exactly as for a cache entry (magic, version,
    lengths, checksum, and a header equal byte for byte to the one this device, driver, toolchain,
    build options and kernel source produce) and its SHA-256 matches ``index.json``. Anything else is
    one warning line on the ``adreno.cache`` logger and the caller falls back to the cache or the source.
    These files are not in the artifact's manifest: `adreno.artifact.Artifact.load` checks only the
    files the manifest lists, so a bundle can be added to (or removed from) a compiled artifact.
    """

    def __init__(self, path: pathlib.Path, identity: DeviceIdentity, index: dict):
        self.path, self.identity, self.index = path, identity, index
        self._by_key = {entry["key"]: name for name, entry in index["programs"].items()}

    @classmethod
    def open(cls, artifact_path: str | os.PathLike, device: cl.Device | DeviceIdentity) -> BundledBinaries | None:
        """The artifact's binaries for this device and driver, or None when it has none that fit (logged
        once when the artifact has binaries for this device under another driver, or a damaged index)."""
        identity = device if isinstance(device, DeviceIdentity) else DeviceIdentity.from_cl_device(device)
        root = pathlib.Path(artifact_path) / BUNDLE_DIR
        path = root / bundle_dir_name(identity)
        if not path.is_dir():
            _report_other_bundles(root, identity)
            return None
        try:
            index = _read_index(path)
        except _BadEntry as bad:
            logger.warning("bundled binaries in %s not used: %s; building through the cache", path, bad)
            return None
        problem = _index_problem(index, identity)
        if problem:
            logger.warning("bundled binaries in %s not used: %s; building through the cache", path, problem)
            return None
        return cls(path, identity, index)

    def get(self, source: str, options: str) -> bytes | None:
        """The verified bundled binary of this program, or None (one warning line) if it has none or a bad one."""
        header = _canonical_json(_key_fields(self.identity, source, options))
        key = _key_of(header)
        name = self._by_key.get(key)
        if name is None:
            logger.warning(
                "bundled binaries in %s have no program with key %s (kernel source or build options %r differ "
                "from the export); using the cache", self.path, key[:16], options,
            )
            return None
        entry = self.index["programs"][name]
        try:
            decoded = _decode_entry(_read_regular(self.path / entry["file"]))
            if decoded.header != header:
                raise _BadEntry("key mismatch")
            if hashlib.sha256(decoded.binary).hexdigest() != entry["sha256"]:
                raise _BadEntry("checksum differs from index.json")
        except (OSError, _BadEntry) as bad:
            reason = f"unreadable ({bad.strerror})" if isinstance(bad, OSError) else str(bad)
            logger.warning("bundled binary of %s not used: %s; using the cache", name, reason)
            return None
        return decoded.binary


def _read_index(path: pathlib.Path) -> dict:
    try:
        index = json.loads(_read_regular(path / BUNDLE_INDEX))
    except OSError as exc:
        raise _BadEntry(f"{BUNDLE_INDEX} unreadable ({exc.strerror})") from None
    except ValueError:
        raise _BadEntry(f"{BUNDLE_INDEX} is not JSON") from None
    if not isinstance(index, dict) or index.get("format") != BUNDLE_FORMAT:
        raise _BadEntry(f"{BUNDLE_INDEX} has format {index.get('format') if isinstance(index, dict) else None!r}, "
                        f"this adreno reads {BUNDLE_FORMAT}")
    programs = index.get("programs")
    if not isinstance(programs, dict) or not all(
        isinstance(e, dict) and {"file", "key", "sha256"} <= e.keys() and _SAFE_NAME.fullmatch(str(e["file"]))
        for e in programs.values()
    ):
        raise _BadEntry(f"{BUNDLE_INDEX} is malformed")
    return index


def _index_problem(index: dict, identity: DeviceIdentity) -> str | None:
    """Why a bundle index does not serve this device and toolchain, or None."""
    if index.get("device") != identity.cache_fields:
        return f"exported for another device or driver ({_describe(index.get('device'))})"
    if index.get("adreno") != adreno.__version__ or index.get("tvm") != _tvm_version():
        return (f"exported by adreno {index.get('adreno')} / TVM {index.get('tvm')}, this is adreno "
                f"{adreno.__version__} / TVM {_tvm_version()}")
    return None


def _describe(device) -> str:
    if not isinstance(device, dict):
        return "unknown device"
    return f"{device.get('device_name')}, driver {device.get('driver_version')}, {device.get('platform_version')}"


def _report_other_bundles(root: pathlib.Path, identity: DeviceIdentity) -> None:
    """Log when the artifact bundles binaries for this very device model under another driver or platform."""
    if not root.is_dir():
        return
    for index_path in sorted(root.glob(f"*/{BUNDLE_INDEX}")):
        try:
            device = json.loads(_read_regular(index_path)).get("device") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if device.get("device_name") == identity.device_name and device != identity.cache_fields:
            logger.warning(
                "bundled binaries in %s are for %s; this device has driver %s (%s): building through the cache",
                index_path.parent, _describe(device), identity.driver_version, identity.platform_version,
            )
            return
    logger.debug("%s has no binaries for %s", root, identity.device_name)


def export_bundle(artifact, context: cl.Context, cache: ProgramCache | None = None, options: str = "") -> dict:
    """Build every program of ``artifact`` (an `adreno.artifact.Artifact`) for the single device of
    ``context`` and write the binaries into ``<artifact>/binaries/<bundle_dir_name>/`` (see
    `BundledBinaries`), replacing an earlier export for the same device; the directory appears complete
    or not at all.

    Programs are built through ``cache`` (so a warm cache makes this fast; None: from source), with the options
    the executor builds them with (`adreno.opencl.signature.program_options` of ``options``). TVM's blob
    holds one binary per kernel launched by the plan: the binary of the program containing it. Returns a
    summary: the bundle path, device, counts, bytes and how each program was obtained.
    Raises `KernelBuildError` when a program does not build and `adreno.errors.ArtifactError` when two
    programs define the same kernel name differently or a program name cannot be a file name.
    """
    from adreno.errors import ArtifactError

    options = program_options(options)
    if len(context.devices) != 1:
        raise ValueError(f"export_bundle needs a context with one device, got {len(context.devices)}")
    identity = DeviceIdentity.from_cl_device(context.devices[0])
    builder = cache if cache is not None else ProgramCache(enabled=False)
    plan = artifact.plan
    kernel_programs: dict[str, str] = {}
    for step in plan.steps:
        for launch in step.kernels:
            other = kernel_programs.setdefault(launch.name, step.program)
            if other != step.program and artifact.kernel_source(other) != artifact.kernel_source(step.program):
                raise ArtifactError(f"{artifact.path}: kernel {launch.name} is defined differently by programs "
                                    f"{other} and {step.program}; TVM's runtime keys binaries by kernel name")
    outcomes: dict[str, int] = {}
    programs: dict[str, dict] = {}
    files: dict[str, bytes] = {}
    binaries: dict[str, bytes] = {}
    for name in plan.programs:
        if not _SAFE_NAME.fullmatch(name):
            raise ArtifactError(f"{artifact.path}: program name {name!r} cannot be a file name")
        source = artifact.kernel_source(name)
        program, how = builder.build(context, source, options)
        outcomes[how] = outcomes.get(how, 0) + 1
        binary = program.get_info(cl.program_info.BINARIES)[0]
        if not binary:
            raise KernelBuildError(f"the driver of {identity.device_name!r} returned no binary for {name}")
        header = _canonical_json(_key_fields(identity, source, options))
        files[f"{name}.clbin"] = _encode_entry(header, binary)
        binaries[name] = binary
        programs[name] = {"file": f"{name}.clbin", "key": _key_of(header), "sha256": hashlib.sha256(binary).hexdigest(),
                          "bytes": len(binary), "kernels": sorted(k for k, p in kernel_programs.items() if p == name)}
    blob = tvm_precompiled_blob({kernel: binaries[program] for kernel, program in kernel_programs.items()})
    files[TVM_BLOB_NAME] = blob
    index = {
        "format": BUNDLE_FORMAT, "device": identity.cache_fields, "device_key": _device_key(identity),
        "adreno": adreno.__version__, "tvm": _tvm_version(), "options": options, "created": time.time(),
        "programs": programs,
        "tvm_precompiled": {"file": TVM_BLOB_NAME, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
                            "kernels": list(kernel_programs)},
    }
    files[BUNDLE_INDEX] = json.dumps(index, indent=1).encode("ascii") + b"\n"
    final = pathlib.Path(artifact.path) / BUNDLE_DIR / bundle_dir_name(identity)
    _replace_dir(final, files)
    return {"path": str(final), "device": identity.cache_fields, "programs": len(programs),
            "kernels": len(kernel_programs), "bytes": sum(len(d) for d in files.values()), "outcomes": outcomes,
            "tvm_precompiled": str(final / TVM_BLOB_NAME), "options": options}


def _replace_dir(final: pathlib.Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a temporary sibling of ``final``, then swap it into place."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    old = final.parent / f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.old"
    tmp.mkdir()
    try:
        for name, data in files.items():
            _write_durably(tmp / name, data)
        _fsync_dir(tmp)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        _fsync_dir(final.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def verify_bundles(artifact) -> dict:
    """Check every bundle in ``artifact`` (an `adreno.artifact.Artifact`) without loading it into a driver.

    Returns ``{"ok": n_ok, "bad": n_bad, "bundles": {dir name: {"ok", "device", "programs", "problems"}}}``.
    Problems: an unreadable or malformed index, a bad entry (as `ProgramCache.verify`), a checksum that
    differs from the index, a binary of another kernel source than the artifact's, a stale toolchain, a
    program of the plan missing, or a TVM blob that does not hold exactly the plan's kernels.
    """
    root = pathlib.Path(artifact.path) / BUNDLE_DIR
    report: dict[str, dict] = {}
    bundles = sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    for path in bundles:
        problems: list[str] = []
        try:
            index = _read_index(path)
        except _BadEntry as bad:
            report[path.name] = {"ok": False, "device": None, "programs": 0, "problems": [str(bad)]}
            continue
        binaries = {}
        for name, entry in index["programs"].items():
            try:
                data = _read_regular(path / entry["file"])
            except OSError as exc:
                problems.append(f"{name}: unreadable ({exc.strerror})")
                continue
            problem = _entry_problem(data, entry["key"])
            if problem is None:
                decoded = _decode_entry(data)
                fields = json.loads(decoded.header)
                binaries[name] = decoded.binary
                if hashlib.sha256(decoded.binary).hexdigest() != entry["sha256"]:
                    problem = "checksum differs from index.json"
                elif {k: fields.get(k) for k in index.get("device") or {}} != index.get("device"):
                    problem = "entry is for another device or driver than index.json"
                elif name not in artifact.plan.programs:
                    problem = "not a program of this artifact"
                elif fields.get("source_sha256") != hashlib.sha256(
                        artifact.kernel_source(name).encode("utf-8")).hexdigest():
                    problem = "built from another kernel source than the artifact's"
            if problem:
                problems.append(f"{name}: {problem}")
        missing = sorted(set(artifact.plan.programs) - set(index["programs"]))
        if missing:
            problems.append(f"missing programs: {', '.join(missing)}")
        problems += _blob_problems(path, artifact, binaries)
        report[path.name] = {"ok": not problems, "device": index.get("device"), "programs": len(index["programs"]),
                             "problems": problems}
    n_ok = sum(b["ok"] for b in report.values())
    return {"ok": n_ok, "bad": len(report) - n_ok, "bundles": report}


def _blob_problems(path: pathlib.Path, artifact, binaries: dict[str, bytes]) -> list[str]:
    try:
        blob = read_tvm_precompiled_blob(_read_regular(path / TVM_BLOB_NAME))
    except OSError as exc:
        return [f"{TVM_BLOB_NAME}: unreadable ({exc.strerror})"]
    except ValueError as exc:
        return [f"{TVM_BLOB_NAME}: {exc}"]
    kernels = {launch.name: step.program for step in artifact.plan.steps for launch in step.kernels}
    problems = []
    if set(blob) != set(kernels):
        problems.append(f"{TVM_BLOB_NAME}: holds {len(blob)} kernels, the plan launches {len(kernels)}")
    wrong = sorted(k for k, b in blob.items() if k in kernels and kernels[k] in binaries and b != binaries[kernels[k]])
    if wrong:
        problems.append(f"{TVM_BLOB_NAME}: binary differs from its program's entry for {', '.join(wrong[:5])}")
    return problems
