"""What travels to an agent: artifact tarballs (`artifact_tarball`), and their confined extraction, which is what an
agent accepts from any client that reaches it.

TVM RPC has no authentication, so an upload is hostile until proven otherwise. `safe_extract` streams the members
one by one and writes only regular files and directories, with its own modes (0644 files, 0755 directories: no
setuid, setgid or sticky bits, no owners), never a link, FIFO or device node, never outside the destination. It
stops, with a `FarmError`, at the first member that breaks a rule or a ceiling (`UploadLimits`: total bytes, file
count, and the ratio of extracted bytes to the tarball's bytes, counted while the bytes are written, so a gzip bomb
is stopped at the ceiling, not after it fills the disk)."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from .common import FarmError

CHUNK = 1 << 20


@dataclass(frozen=True)
class UploadLimits:
    """Ceilings of one extraction. An artifact of ResNet-18 is ~50 MB in ~40 files at a ratio below 3."""

    max_bytes: int = 1 << 30
    max_files: int = 10_000
    max_ratio: float = 200.0  # extracted bytes per tarball byte, checked once past `ratio_floor` bytes
    ratio_floor: int = 1 << 20


def safe_extract(fileobj: BinaryIO, source_bytes: int, dest: str, limits: UploadLimits = UploadLimits()) -> None:
    """Extract the tarball (plain or compressed) read from `fileobj`, of `source_bytes` bytes, into directory `dest`
    (created if missing) under `limits`."""
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    budget = _Budget(limits, source_bytes)
    try:
        with tarfile.open(fileobj=fileobj) as tar:
            for member in tar:
                budget.count_file(member.name)
                target = _confined(root, member.name)
                if member.isdir() and not member.size:
                    os.makedirs(target, mode=0o755, exist_ok=True)
                elif member.isreg():
                    _write_member(tar, member, target, budget)
                else:
                    raise FarmError(f"refusing tar member {member.name!r}: only regular files and directories are "
                                    "accepted")
    except (tarfile.TarError, EOFError, OSError, zlib.error) as err:
        raise FarmError(f"refusing upload: not a readable tarball ({type(err).__name__}: "
                        f"{str(err).splitlines()[0][:100]})") from None


class _Budget:
    def __init__(self, limits: UploadLimits, source_bytes: int | None):
        self.limits, self.source_bytes = limits, source_bytes
        self.files = self.bytes = 0

    def count_file(self, name: str) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise FarmError(f"refusing upload: more than {self.limits.max_files} members (at {name!r})")

    def count_bytes(self, n: int, name: str) -> None:
        self.bytes += n
        if self.bytes > self.limits.max_bytes:
            raise FarmError(f"refusing upload: more than {self.limits.max_bytes} bytes (at {name!r})")
        if self.source_bytes is not None and self.bytes > self.limits.ratio_floor \
                and self.bytes > self.limits.max_ratio * max(1, self.source_bytes):
            raise FarmError(f"refusing upload: expands more than {self.limits.max_ratio:g}x its {self.source_bytes} "
                            f"bytes (at {name!r}): a compression bomb")


def _confined(root: str, name: str) -> str:
    """The path of member `name` under `root`; FarmError when it is absolute, climbs with `..`, or resolves
    (through an existing path) outside `root`."""
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith("/") or ".." in parts or "\0" in name:
        raise FarmError(f"refusing tar member {name!r}: not a relative path inside the upload")
    target = os.path.realpath(os.path.join(root, name))
    if not (target == root or target.startswith(root + os.sep)):
        raise FarmError(f"refusing tar member {name!r}: leads outside the upload")
    return target


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: str, budget: _Budget) -> None:
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    source = tar.extractfile(member)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise FarmError(f"refusing tar member {member.name!r}: a second member of that name") from None
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            budget.count_bytes(len(chunk), member.name)
            out.write(chunk)


def artifact_tarball(artifact_dir: str) -> tuple[str, bytes]:
    """(content-addressed name, tar bytes) of an artifact directory, for upload."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for root, dirs, files in sorted(os.walk(artifact_dir)):
            dirs.sort()
            for file in sorted(files):
                path = os.path.join(root, file)
                info = tar.gettarinfo(path, arcname=os.path.relpath(path, artifact_dir))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
    data = buffer.getvalue()
    return "art-" + hashlib.sha256(data).hexdigest()[:20], data
