"""Files the user names on the command line (a model, an --input, --records): checked before anything opens them.

Opening a FIFO blocks until a writer comes, and /dev/zero or a directory never read as a file ends; so every
such path must be an existing regular file (a symlink to one is fine) before it is opened."""

from __future__ import annotations

from pathlib import Path

from .errors import AdrenoError


def regular_file(path, what: str, error=AdrenoError) -> Path:
    """`path` as a Path if it names a regular file, else an `error` naming `what` (e.g. "--input")."""
    path = Path(path)
    if not path.exists():
        raise error(f"{what} {path}: no such file")
    if not path.is_file():
        raise error(f"{what} {path} is not a regular file (a directory, FIFO or device); give a file")
    return path


def output_file(path, what: str) -> Path:
    """`path` as a Path if a file can be written there: checked before a long run, not after it."""
    path = Path(path)
    if not str(path).strip() or path.is_dir():
        raise AdrenoError(f"{what} {str(path)!r} is a directory or empty; name the file to write, e.g. out.npz")
    if not path.parent.is_dir():
        raise AdrenoError(f"{what} {path}: the directory {path.parent} does not exist")
    return path
