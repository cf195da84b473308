"""The entry store: `ProgramCache` builds a program through its binary entries (and an artifact's bundle, seen
through `ArtifactProgramCache`), writes entries under a lock, evicts the least recently used ones past its cap and
loads every binary inside the crash guard."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pathlib
import uuid
from collections.abc import Iterator

import pyopencl as cl

from adreno.errors import BuildOptionsError, KernelBuildError
from adreno.opencl.binaries import BinaryError, program_binary
from adreno.opencl.device import DeviceIdentity

from .bundled import BundledBinaries
from .files import fsync_dir, read_regular, touch, unlink, write_durably
from .format import (ENTRY_SUFFIX, BadEntry, canonical_json, decode_entry, default_cache_dir, encode_entry,
                     entry_path, entry_problem, key_fields, key_of)
from .guard import CrashGuard

logger = logging.getLogger("adreno.cache")


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
        self.guard = CrashGuard(self.root)

    # -- lookups and stores ---------------------------------------------------------------------------

    def get(self, identity: DeviceIdentity, source: str, options: str) -> bytes | None:
        """Return the verified binary for this program, or None on a miss (never raises on a bad entry).

        Also None while the cache is disabled, or this entry is quarantined after a crashed load.
        """
        header = canonical_json(key_fields(identity, source, options))
        if not self._usable(identity, key_of(header)):
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
        header = canonical_json(key_fields(identity, source, options))
        if self._usable(identity, key_of(header)):
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
        header = canonical_json(key_fields(identity, source, options))
        if not self._usable(identity, key_of(header)):
            self.stats["disabled"] += 1
            return _build_from_source(context, device, source, options), "disabled"
        if bundle is not None and bundle.identity == identity:
            binary = bundle.get(source, options)
            if binary is not None:
                program = self._load_binary(context, device, identity, binary, options, key_of(header), "bundled")
                if program is not None:
                    self.stats["bundled"] += 1
                    return program, "bundled"
            self.stats["bundle_rejected"] += 1  # missing, damaged or refused: logged, fall back
        binary = self._read(header)
        if binary is not None:
            program = self._load_binary(context, device, identity, binary, options, key_of(header))
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
        header = canonical_json(key_fields(identity, source, options))
        try:
            built = program_binary(program)  # the GIL released: the executor stores in a background thread
        except BinaryError as err:
            logger.warning("%s; %s not cached", err, key_of(header)[:16])
            return
        if built:
            self._write(header, built)
        else:
            logger.warning("driver returned an empty binary for %s; not cached", key_of(header)[:16])

    def for_artifact(self, artifact_path: str | os.PathLike) -> ArtifactProgramCache:
        """This cache seen through one artifact: its `build` first tries the binaries the artifact bundles
        for the device being built for (written by `export_bundle`), then this cache, then the source."""
        return ArtifactProgramCache(self, artifact_path)

    # -- maintenance ----------------------------------------------------------------------------------

    def info(self) -> dict:
        """Describe the cache: root, cap, entry count and bytes, quarantined entries and this object's stats."""
        self.guard.quarantine_crashed()
        entries = self._entries()
        return {
            "root": str(self.root),
            "enabled": self.enabled,
            "max_bytes": self.max_bytes,
            "entries": len(entries),
            "bytes": sum(size for _, size, _ in entries),
            "quarantined": self.guard.notes(),
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
                removed += unlink(path)
            for path in self.root.glob(".*.tmp"):
                unlink(path)
            self.guard.clear()
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
                reason = entry_problem(read_regular(path, self.max_bytes), path.name[: -len(ENTRY_SUFFIX)])
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
        return self.enabled and not self.guard.blocked(identity, key)

    def _entry_path(self, key: str) -> pathlib.Path:
        return entry_path(self.root, key)

    def _read(self, header: bytes) -> bytes | None:
        """Return the binary of the entry for ``header`` if it is intact and matches; log bad entries."""
        key = key_of(header)
        path = self._entry_path(key)
        try:
            data = read_regular(path, self.max_bytes)
        except FileNotFoundError:
            logger.debug("miss %s: no entry", key[:16])
            return None
        except OSError as exc:
            self.stats["rejected"] += 1
            logger.warning("cache miss %s: entry unreadable (%s); rebuilding from source", key[:16], exc)
            return None
        try:
            entry = decode_entry(data)
            if entry.header != header:
                raise BadEntry("key mismatch")
        except BadEntry as bad:
            self.stats["rejected"] += 1
            logger.warning("cache miss %s: bad entry (%s); rebuilding from source", key[:16], bad)
            return None
        touch(path)
        return entry.binary

    def _write(self, header: bytes, binary: bytes) -> None:
        key = key_of(header)
        data = encode_entry(header, binary)
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
                    write_durably(tmp, data)
                    os.replace(tmp, self._entry_path(key))
                finally:
                    unlink(tmp)
                fsync_dir(self.root)
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
            if unlink(path):
                self.stats["evictions"] += 1
                logger.debug("evicted %s (%d bytes)", path.name, size)
            total -= size

    def _entries(self) -> list[tuple[pathlib.Path, int, int]]:
        """List entries as (path, size, mtime_ns); entries removed while listing are skipped."""
        found = []
        for path in self.root.glob("*" + ENTRY_SUFFIX):
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
            with self.guard.loading(identity, key):
                return cl.Program(context, [device], [binary]).build(options, cache_dir=False)
        except cl.Error as exc:
            if origin == "cached":
                self.stats["rejected"] += 1
            logger.warning("%s binary not used: driver rejected it (%s); %s", origin, first_line(exc), fallback)
        except OSError as exc:
            logger.warning("%s binary not used: cannot set the crash-guard marker (%s); %s", origin, exc, fallback)
        return None


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


def _build_from_source(context: cl.Context, device: cl.Device, source: str, options: str) -> cl.Program:
    """clBuildProgram from source (bypassing pyopencl's own cache); KernelBuildError with the log on failure, or
    BuildOptionsError (one line) where the driver refused the options rather than the kernel."""
    try:
        return cl.Program(context, source).build(options, cache_dir=False)
    except cl.RuntimeError as exc:
        if exc.code == cl.status_code.INVALID_BUILD_OPTIONS:
            raise BuildOptionsError(f"the OpenCL compiler of {device.name.strip()!r} rejects the build options "
                                    f"{options!r}: {_option_complaint(str(exc))}") from None
        raise KernelBuildError(
            f"OpenCL build failed on {device.name!r} with options {options!r}:\n{exc}"
        ) from exc


def _option_complaint(message: str) -> str:
    """The driver's line on the option it refuses (PoCL: "Invalid build option: -cl-bogus") in pyopencl's message
    of a failed build, else the status: pyopencl's own lines around it name the options, not the culprit."""
    return next((line.strip() for line in message.splitlines() if "option" in line.lower()
                 and not line.startswith(("clBuildProgram failed", "(options:"))), "INVALID_BUILD_OPTIONS")


def first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
