"""The fingerprint of the code that turns a graph into kernels and measures them: part of every measured cost's
key (`orchestrate/costs.py`), so that a cost measured before a schedule changed is never read as the cost of the
kernel the changed schedule makes.

It hashes the package version and the source of every module that can change a kernel or how it is timed: all of
`adreno` but the packages listed in `NOT_KERNELS`, which only carry kernels elsewhere (the CLI, the farm, the
tuner's search and models, the program cache, the native build), and the modules of `NOT_KERNEL_MODULES`, which
choose among measured kernels (orchestration's enumeration, FuseOps' partition, solver, report, offline export and
emission; a different graph or group makes a different subgraph, and so a different key, whatever these modules
say), and this module itself. A new module is hashed unless listed there, so a forgotten one costs a measurement,
never a wrong cost. Any edit of a hashed module re-measures; a cosmetic one too, which costs time only.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from adreno import __version__

NOT_KERNELS = frozenset({"cli", "farm", "tune", "costmodel", "cache", "native"})
NOT_KERNEL_MODULES = frozenset({"support/code_version.py"} | {f"orchestrate/{name}.py" for name in (
    "blp", "blocks", "candidates", "choose", "fuseops", "report", "partition", "emit", "orchestrator", "batch")})
PACKAGE = Path(__file__).resolve().parents[1]  # adreno/, this module being adreno/support/code_version.py


@functools.cache
def code_fingerprint() -> str:
    """This installation's fingerprint (computed once a process)."""
    return sources_fingerprint(PACKAGE)


def sources_fingerprint(package: Path) -> str:
    """12 hex digits of the hash of the version and the kernel-deciding sources under `package`."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] in NOT_KERNELS or relative.as_posix() in NOT_KERNEL_MODULES:
            continue
        digest.update(f"\0{relative.as_posix()}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
