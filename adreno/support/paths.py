"""Files the user names on the command line (a model, an --input, --records): checked before anything opens them.

Opening a FIFO blocks until a writer comes, and /dev/zero or a directory never read as a file ends; so every
such path must be an existing regular file (a symlink to one is fine) before it is opened."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import AdrenoError


def regular_file(path, what: str, error=AdrenoError) -> Path:
    """`path` as a Path if it names a regular file, else an `error` naming `what` (e.g. "--input")."""
    path = Path(path)
    if not path.exists():
        raise error(f"{what} {path}: no such file")
    if not path.is_file():
        raise error(f"{what} {path} is not a regular file (a directory, FIFO or device); give a file")
    return path


def output_file(path, what: str) -> Path:
    """`path` as a Path if a file can be written there: checked before a long run, not after it. The check creates
    and removes a probe file beside it, since only creating one tells (root passes `os.access` on /proc, where
    no file can be created)."""
    path = Path(path)
    if not str(path).strip() or path.is_dir():
        raise AdrenoError(f"{what} {str(path)!r} is a directory or empty; name the file to write, e.g. out.npz")
    if not path.parent.is_dir():
        raise AdrenoError(f"{what} {path}: {path.parent} is not a directory" if path.parent.exists() else
                          f"{what} {path}: the directory {path.parent} does not exist")
    if path.exists() and not path.is_file():
        raise AdrenoError(f"{what} {path} exists and is not a regular file (a FIFO or device); name a file to write")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.adreno-probe."):
            pass
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as err:
        raise AdrenoError(f"{what} {path}: cannot write it ({err.strerror or err}); choose another file") from None
    return path


def creatable(path, what: str, directory: bool = False) -> Path:
    """`path` as a Path if a command can create it there, missing parent directories and all (--records, --plot,
    --keep-candidates, --export-batch): a file's path is no directory, FIFO or device, a directory's no file, and
    the nearest existing folder above it is a directory. Checked before the work whose result it keeps, not after."""
    path = Path(path)
    if directory and path.exists() and not path.is_dir():
        raise AdrenoError(f"{what} {path} exists and is not a directory; name a directory")
    if not directory and path.is_dir():
        raise AdrenoError(f"{what} {path} is a directory; name the file to write")
    if not directory and path.exists() and not path.is_file():
        raise AdrenoError(f"{what} {path} exists and is not a regular file (a FIFO or device); name a file to write")
    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise AdrenoError(f"{what} {path}: {above} is not a directory")
    return path


# What LLVM writes to TMPDIR while a host library is built (its objects, before they are packed): LLVM ends the
# process on a failed write ("LLVM ERROR: IO failure on output stream"), past any handler, leaving its temporary
# folder behind. ResNet-18's objects are ~3 MB; the floor leaves room for models ten times larger.
TMPDIR_FLOOR_BYTES = 32 << 20


def require_free_space(folder, nbytes: int, what: str) -> None:
    """One line when the file system of `folder` has fewer than `nbytes` free: checked before work whose writes
    fail where no error can be caught."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError as err:
        raise AdrenoError(f"{what} {folder}: cannot read its free space ({err.strerror or err})") from None
    if free < nbytes:
        raise AdrenoError(f"{what} {folder} has {free >> 20} MiB free, fewer than the {nbytes >> 20} MiB this step "
                          "writes there: free some space (or point TMPDIR elsewhere); nothing was written")
