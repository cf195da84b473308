"""Binaries bundled in an artifact: ``<artifact>/binaries/<device>/``, one directory per device and driver,
read by `BundledBinaries` (its docstring gives the layout) and verified like cache entries."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import re

import pyopencl as cl

import adreno
from adreno.artifact.format import BUNDLE_DIR
from adreno.opencl.device import DeviceIdentity

from .files import read_regular
from .format import BadEntry, canonical_json, decode_entry, device_key, key_fields, key_of, tvm_version

logger = logging.getLogger("adreno.cache")

BUNDLE_INDEX = "index.json"
BUNDLE_FORMAT = 1
TVM_BLOB_NAME = "tvm_precompiled.bin"
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def bundle_dir_name(identity: DeviceIdentity) -> str:
    """The directory (under ``<artifact>/binaries/``) of the binaries for one device and driver:
    a readable slug of the device name and 16 hex digits of the hash of the whole identity."""
    slug = re.sub(r"[^a-z0-9]+", "-", identity.device_name.lower()).strip("-")[:40].strip("-") or "device"
    return f"{slug}-{device_key(identity)[:16]}"


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
    These files are not in the artifact's manifest: `adreno.artifact.format.Artifact.load` checks only the
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
            index = read_index(path)
        except BadEntry as bad:
            logger.warning("bundled binaries in %s not used: %s; building through the cache", path, bad)
            return None
        problem = index_problem(index, identity)
        if problem:
            logger.warning("bundled binaries in %s not used: %s; building through the cache", path, problem)
            return None
        return cls(path, identity, index)

    def get(self, source: str, options: str) -> bytes | None:
        """The verified bundled binary of this program, or None (one warning line) if it has none or a bad one."""
        header = canonical_json(key_fields(self.identity, source, options))
        key = key_of(header)
        name = self._by_key.get(key)
        if name is None:
            logger.warning(
                "bundled binaries in %s have no program with key %s (kernel source or build options %r differ "
                "from the export); using the cache", self.path, key[:16], options,
            )
            return None
        entry = self.index["programs"][name]
        try:
            decoded = decode_entry(read_regular(self.path / entry["file"]))
            if decoded.header != header:
                raise BadEntry("key mismatch")
            if hashlib.sha256(decoded.binary).hexdigest() != entry["sha256"]:
                raise BadEntry("checksum differs from index.json")
        except (OSError, BadEntry) as bad:
            reason = f"unreadable ({bad.strerror})" if isinstance(bad, OSError) else str(bad)
            logger.warning("bundled binary of %s not used: %s; using the cache", name, reason)
            return None
        return decoded.binary


def read_index(path: pathlib.Path) -> dict:
    try:
        index = json.loads(read_regular(path / BUNDLE_INDEX))
    except OSError as exc:
        raise BadEntry(f"{BUNDLE_INDEX} unreadable ({exc.strerror})") from None
    except ValueError:
        raise BadEntry(f"{BUNDLE_INDEX} is not JSON") from None
    if not isinstance(index, dict) or index.get("format") != BUNDLE_FORMAT:
        raise BadEntry(f"{BUNDLE_INDEX} has format {index.get('format') if isinstance(index, dict) else None!r}, "
                        f"this adreno reads {BUNDLE_FORMAT}")
    programs = index.get("programs")
    if not isinstance(programs, dict) or not all(
        isinstance(e, dict) and {"file", "key", "sha256"} <= e.keys() and SAFE_NAME.fullmatch(str(e["file"]))
        for e in programs.values()
    ):
        raise BadEntry(f"{BUNDLE_INDEX} is malformed")
    return index


def index_problem(index: dict, identity: DeviceIdentity) -> str | None:
    """Why a bundle index does not serve this device and toolchain, or None."""
    if index.get("device") != identity.cache_fields:
        return f"exported for another device or driver ({_describe(index.get('device'))})"
    if index.get("adreno") != adreno.__version__ or index.get("tvm") != tvm_version():
        return (f"exported by adreno {index.get('adreno')} / TVM {index.get('tvm')}, this is adreno "
                f"{adreno.__version__} / TVM {tvm_version()}")
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
            device = json.loads(read_regular(index_path)).get("device") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if device.get("device_name") == identity.device_name and device != identity.cache_fields:
            logger.warning(
                "bundled binaries in %s are for %s; this device has driver %s (%s): building through the cache",
                index_path.parent, _describe(device), identity.driver_version, identity.platform_version,
            )
            return
    logger.debug("%s has no binaries for %s", root, identity.device_name)
