"""Which OpenCL programs the executor builds for an artifact, and what a failed build tells the user.

An artifact has one `.cl` per lowered function (ResNet-18: 28). A driver pays a fixed cost per `clBuildProgram`
(PoCL: a front-end run, a link and a temporary directory per program), so the executor builds one program of all of
them (`Grouping.MODEL`): on PoCL here ResNet-18's 28 programs took 27.9 s one by one and 10.0 s as one (docs/compile.md,
`tools/bench_programs.py`). Builds in parallel threads gained nothing (PoCL serialises its compiler). Sources are
concatenated as they are (TVM's preamble macros repeat identically, which C allows); programs whose kernel names
would collide go into separate groups. `Grouping.EACH` keeps one program per `.cl`: what an artifact's bundled
binaries and TVM's precompiled blob hold (`adreno.cache.export_bundle`), so the executor uses it when it loads them.

A build that fails is one line naming the program and its kernels, with the driver's first error, and the whole build
log in a file the line names (`build_failure`). `build_programs` is the one path that builds an artifact's programs:
the executor's (`adreno run`) and the compile's build check (`adreno.compiler.build_check`), so both fail in that one
form and the check fills the program cache with exactly the programs a later run looks up.
"""

from __future__ import annotations

import enum
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..artifact.format import Artifact
from ..errors import DeviceError, KernelBuildError
from ..support.native_log import DRIVER_NOISE, summarised_stderr
from .device import INSTALL_HINT, compiler_works
from .signature import program_options


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


FROM_SOURCE = ("miss", "disabled", "source")  # the `ProgramBuild.how`s of a program the driver compiled from source


@dataclass
class ProgramBuild:
    """One driver program built: the plan programs in it, how (`ProgramCache.build`'s "hit", "miss", "bundled",
    "disabled", or "source" without a cache) and its wall seconds."""

    programs: list[str]
    how: str
    seconds: float


@dataclass
class BuiltPrograms:
    """What `build_programs` built: plan program -> driver program, each build, and the programs built from source
    that a deferred store still has to put in the cache ((program, source) pairs)."""

    programs: dict = field(default_factory=dict)
    builds: list[ProgramBuild] = field(default_factory=list)
    unstored: list[tuple] = field(default_factory=list)


def build_programs(artifact: Artifact, context, program_groups: list[list[str]], cache=None, build_options: str = "",
                   defer_store: bool = False) -> BuiltPrograms:
    """Build each group of `program_groups` as one program for the one device of `context`, through `cache` (an
    `ArtifactProgramCache`) when given. A group that fails is built again member by member, so the error
    (`build_failure`) names the program that fails (and a group that fails only together, which TVM's sources should
    never do, still builds, one program each). With `defer_store` a program built from source is not stored but
    listed in `unstored` (the executor stores it after its first run: docs/compile.md)."""
    built = BuiltPrograms()
    device = context.devices[0].name.strip()
    # the compiler's "1 error generated." beside the log (adreno.support.native_log)
    with summarised_stderr(DRIVER_NOISE):
        for members in program_groups:
            _build_group(artifact, context, members, cache, program_options(build_options), defer_store, built,
                         device)
    return built


def _build_group(artifact, context, members, cache, options, defer_store, built, device) -> None:
    try:
        program = _build(artifact, context, members, cache, options, defer_store, built, device)
    except KernelBuildError:
        if len(members) == 1:
            raise
        for member in members:
            _build_group(artifact, context, [member], cache, options, defer_store, built, device)
        return
    built.programs.update(dict.fromkeys(members, program))


def _build(artifact, context, members, cache, options, defer_store, built, device):
    import pyopencl as cl

    source, started = group_source(artifact, members), time.perf_counter()
    try:
        if cache is not None:
            program, how = cache.build(context, source, options, defer_store=defer_store)
            if how == "miss" and defer_store:
                built.unstored.append((program, source))
        else:
            program, how = cl.Program(context, source).build(options=options, cache_dir=False), "source"
    except (KernelBuildError, cl.RuntimeError) as err:
        if len(members) > 1:
            raise KernelBuildError(str(err)) from None  # `_build_group` tries them one by one
        if not compiler_works(context.devices[0]):  # the driver, not this kernel (`select_device` no longer probes)
            raise DeviceError(f"the OpenCL compiler of {device} cannot build a one-line kernel; {INSTALL_HINT}") \
                from None
        raise build_failure(members[0], program_kernels(artifact)[members[0]], device, str(err)) from None
    built.builds.append(ProgramBuild(members, how, time.perf_counter() - started))
    return program
