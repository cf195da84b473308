"""The cache's on-disk format: the key fields and their hash, the entry file's layout, and the versions it depends
on (the package docstring specifies them)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import re
import struct
from typing import NamedTuple

import adreno
from adreno.opencl.device import DeviceIdentity

CACHE_FORMAT_VERSION: int = 1

_MAGIC = b"ADRCLBIN"
_PREFIX = struct.Struct("<8sII")  # magic, format version, header length
_DIGEST_SIZE = hashlib.sha256().digest_size
ENTRY_SUFFIX = ".clbin"
KEY_PATTERN = re.compile(r"[0-9a-f]{64}")


def entry_path(root: pathlib.Path, key: str) -> pathlib.Path:
    """Where the entry of ``key`` lives under the cache root: the one rule the store and the crash guard share."""
    return root / (key + ENTRY_SUFFIX)


def default_cache_dir() -> pathlib.Path:
    """Return the cache root: ``$ADRENO_CACHE_DIR`` if set and not empty, else ``~/.cache/adreno/programs``."""
    env = os.environ.get("ADRENO_CACHE_DIR")
    if env:
        return pathlib.Path(env).expanduser()
    return pathlib.Path.home() / ".cache" / "adreno" / "programs"


@functools.cache
def tvm_version() -> str:
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


def canonical_json(fields: dict) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def key_fields(identity: DeviceIdentity, source: str, options: str) -> dict:
    return {
        "cache_format": CACHE_FORMAT_VERSION,
        "adreno": adreno.__version__,
        "tvm": tvm_version(),
        **identity.cache_fields,
        "options": options,
        "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
    }


def cache_key(identity: DeviceIdentity, source: str, options: str) -> str:
    """Return the entry key (hex SHA-256) over every key field listed in the module docstring."""
    return hashlib.sha256(canonical_json(key_fields(identity, source, options))).hexdigest()


def device_key(identity: DeviceIdentity) -> str:
    return hashlib.sha256(canonical_json(identity.cache_fields)).hexdigest()[:32]


def key_of(header: bytes) -> str:
    return hashlib.sha256(header).hexdigest()


class BadEntry(Exception):
    """An entry file that is not a complete, intact entry; the message is the reason."""


class Entry(NamedTuple):
    header: bytes
    binary: bytes


def encode_entry(header: bytes, binary: bytes) -> bytes:
    prefix = _PREFIX.pack(_MAGIC, CACHE_FORMAT_VERSION, len(header))
    return prefix + header + hashlib.sha256(binary).digest() + binary


def decode_entry(data: bytes) -> Entry:
    """Split an entry file into header and binary, checking magic, version, lengths and checksum."""
    if len(data) < _PREFIX.size:
        raise BadEntry(f"truncated ({len(data)} bytes)")
    magic, version, header_len = _PREFIX.unpack_from(data)
    if magic != _MAGIC:
        raise BadEntry("wrong magic")
    if version != CACHE_FORMAT_VERSION:
        raise BadEntry(f"format version {version}, expected {CACHE_FORMAT_VERSION}")
    binary_at = _PREFIX.size + header_len + _DIGEST_SIZE
    if len(data) < binary_at:
        raise BadEntry(f"truncated ({len(data)} bytes)")
    header = data[_PREFIX.size : _PREFIX.size + header_len]
    digest = data[binary_at - _DIGEST_SIZE : binary_at]
    binary = data[binary_at:]
    if hashlib.sha256(binary).digest() != digest:
        raise BadEntry("checksum mismatch")
    return Entry(header, binary)


def entry_problem(data: bytes, key: str) -> str | None:
    """Why an entry file is unusable, or None if it is intact, matches its name and is current."""
    try:
        entry = decode_entry(data)
    except BadEntry as bad:
        return str(bad)
    if hashlib.sha256(entry.header).hexdigest() != key:
        return "key mismatch"
    try:
        fields = json.loads(entry.header)
    except ValueError:
        return "unreadable header"
    current = {"cache_format": CACHE_FORMAT_VERSION, "adreno": adreno.__version__, "tvm": tvm_version()}
    if not isinstance(fields, dict) or any(fields.get(name) != value for name, value in current.items()):
        return "stale"
    return None
