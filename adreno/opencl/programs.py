"""Which OpenCL programs the executor builds for an artifact, and what a failed build tells the user.

An artifact has one `.cl` per lowered function (ResNet-18: 28). A driver pays a fixed cost per `clBuildProgram`
(PoCL: a front-end run, a link and a temporary directory per program), so the executor builds one program of all of
them (`Grouping.MODEL`): on PoCL here ResNet-18's 28 programs took 27.9 s one by one and 10.0 s as one (docs/compile.md,
`tools/bench_programs.py`). Builds in parallel threads gained nothing (PoCL serialises its compiler). Sources are
concatenated as they are (TVM's preamble macros repeat identically, which C allows); programs whose kernel names
would collide go into separate groups. `Grouping.EACH` keeps one program per `.cl`: what an artifact's bundled
binaries and TVM's precompiled blob hold (`adreno.cache.export_bundle`), so the executor uses it when it loads them.

A build that fails is one line naming the program and its kernels, with the driver's first error, and the whole build
log in a file the line names (`build_failure`).
"""

from __future__ import annotations

import enum
import os
import tempfile
from pathlib import Path

from ..artifact import Artifact
from ..errors import KernelBuildError


class Grouping(enum.Enum):
    MODEL = "model"  # one program for every .cl whose kernel names do not collide
    EACH = "each"  # one program per .cl (bundled binaries, TVM's blob)


def program_kernels(artifact: Artifact) -> dict[str, list[str]]:
    """Program -> the kernels the plan launches from it (in launch order, once each)."""
    kernels: dict[str, list[str]] = {name: [] for name in artifact.plan.programs}
    for step in artifact.plan.steps:
        for launch in step.kernels:
            if launch.name not in kernels[step.program]:
                kernels[step.program].append(launch.name)
    return kernels


def groups(artifact: Artifact, grouping: Grouping) -> list[list[str]]:
    """The plan's programs in build groups: one per program (EACH) or as few as the kernel names allow (MODEL:
    each program joins the first group that defines none of its kernels)."""
    if grouping is Grouping.EACH:
        return [[name] for name in artifact.plan.programs]
    kernels = program_kernels(artifact)
    out: list[tuple[list[str], set[str]]] = []
    for name in artifact.plan.programs:
        for members, names in out:
            if not names & set(kernels[name]):
                members.append(name)
                names.update(kernels[name])
                break
        else:
            out.append(([name], set(kernels[name])))
    return [members for members, _ in out]


def group_source(artifact: Artifact, members: list[str]) -> str:
    return "\n".join(artifact.kernel_source(name) for name in members)


def build_failure(program: str, kernels: list[str], device: str, log: str) -> KernelBuildError:
    """The one-line error of a failed build; the full log goes to a file the line names."""
    fd, path = tempfile.mkstemp(prefix=f"adreno-build-{program[:60]}-", suffix=".log")
    with os.fdopen(fd, "w") as file:
        file.write(log)
    first = next((line.strip() for line in log.splitlines() if "error" in line.lower()), "")
    return KernelBuildError(f"OpenCL build of {program} (kernels {', '.join(kernels) or 'none'}) failed on {device}: "
                            f"{first[:200] or 'see the log'}; full build log: {Path(path)}")
