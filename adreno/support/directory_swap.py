"""Replacing a directory with another so that its path names one of the two at every instant.

Replacing an artifact directory took two renames (the old one aside, the new one in); a process killed between
them left no artifact at the path. Linux swaps two paths in one step: `renameat2(RENAME_EXCHANGE)` (Linux 3.15,
glibc 2.28; ext4, xfs, btrfs, tmpfs). `swap_into_place` uses it, so the old directory ends up at the new one's
temporary path, to be removed at leisure; where the file system or libc refuses it, it falls back to the two
renames with the old directory parked under a name that says so (`parked`), which the next writer of the path
moves back if the path is missing (`adreno.artifact.format`'s recovery of stale siblings): either way, nothing is lost.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# errnos that say "this kernel, libc or file system cannot exchange": fall back to two renames
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM)


def _renameat2():
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except AttributeError:  # a libc older than 2.28
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def exchange(a: Path, b: Path) -> bool:
    """Swap the directory entries `a` and `b` atomically; False when the system cannot (nothing was changed)."""
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def swap_into_place(new: Path, final: Path, parked: Path) -> Path | None:
    """Put directory `new` at `final`; returns where the directory that was at `final` now is (None when there was
    none): `new`'s old path after an exchange, or `parked` after the two-rename fallback. The caller removes it."""
    if not os.path.lexists(final):
        os.rename(new, final)  # an empty path: one rename is already atomic
        return None
    if exchange(new, final):
        return new
    os.rename(final, parked)  # a kill after this leaves `parked`, which the next writer moves back
    os.rename(new, final)
    return parked
