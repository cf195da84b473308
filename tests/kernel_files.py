"""An artifact's kernel sources as tests read them: the files under `kernels/` (gzip-compressed OpenCL C)."""

from __future__ import annotations

import gzip
from pathlib import Path


def kernel_sources(artifact_dir, pattern: str = "*") -> dict[str, str]:
    """{file stem: source} of the kernel files whose stem (the name without `.cl.gz`) matches the glob `pattern`."""
    return {path.name.removesuffix(".cl.gz"): gzip.decompress(path.read_bytes()).decode()
            for path in sorted((Path(artifact_dir) / "kernels").glob(f"{pattern}.cl.gz"))}


def append_to_kernel_file(path, text: str) -> None:
    """A hand edit of one kernel file: `text` appended to its source, stored compressed as the compiler stores it."""
    path = Path(path)
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()) + text.encode(), mtime=0))
