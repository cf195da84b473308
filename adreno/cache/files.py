"""The file operations every part of the cache uses: durable writes, and reads of regular files only.

Every file the cache reads (entries, markers, bundles) is opened non-blocking and checked with ``fstat`` before it
is read, up to a size limit: a FIFO, a device or a huge file in place of an entry is a bad entry, never a hang."""

from __future__ import annotations

import errno
import os
import pathlib
import stat
import time


def touch(path: pathlib.Path) -> None:
    """Mark an entry as used now (its mtime is its LRU position); an entry evicted meanwhile is ignored."""
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except FileNotFoundError:
        pass


def write_durably(path: pathlib.Path, data: bytes) -> None:
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


def fsync_dir(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_regular(path: pathlib.Path, limit: int = 1 << 30) -> bytes:
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


def unlink(path: pathlib.Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
