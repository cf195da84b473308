"""The lines a compile says while it runs, all in one place: `adreno.compile.compile_model` says each through
`sayer`, the CLI prints them as timed steps (`adreno.cli.common.Progress`), tools/bench_compile.py maps their prefixes
to the stages it times, and tests look for some. A caller passes a `Progress`, any callable taking the line."""

from __future__ import annotations

import enum
from typing import Callable

Progress = Callable[[str], None]


class ProgressLine(enum.Enum):
    """Every line a compile says, in the order it says them (`sayer` fills in the `{field}`s). Their texts are an
    interface (see the module docstring): change one only with the tools and tests that read it."""

    LOADING = "loading model"
    IMPORTING = "importing to Relax"
    ORCHESTRATING = "orchestrating: fission, candidates, costs, the BLP of each block"
    NOTHING_TO_LOWER = "every output is empty: no kernels, no host library"
    LOWERING = "lowering for {device} ({memory} memory)"
    LOWERING_TUNED = "lowering for {device} ({memory} memory, {tuned} tuned workloads)"
    FALLBACK = "fallback: {refusal}; TVM's schedule runs it"
    RANKED = ("defaults: {ranked} kernels ranked by the analytical model, {changed} differ from the rule (slowest "
              "ranking {max_seconds:.2f} s)")
    EXTRACTING = "extracting the launch plan"
    WRITING = "writing the artifact"
    HOST_LIBRARY = "building the host library"
    BUILD_CHECK = "building the kernels on a local OpenCL device (the build check)"
    # a compile of several shape sets (`adreno.compile_shapes`), around each set's lines or in their place
    SHAPE_SET = "shape set {number} of {count}: {label}"
    SHAPE_SETS_SIDE_BY_SIDE = "compiling {count} shape sets, {jobs} at a time (one process each)"
    SHAPE_SET_COMPILED = "shape set {number} of {count} compiled: {label}"
    SHAPE_SET_BUILD_CHECK = "building shape set {number}'s kernels on a local OpenCL device (the build check)"
    MERGING = "merging the shape sets: one weight file, kernels of identical source once"


def sayer(progress: Progress | None) -> Callable[..., None]:
    """`say(line, **fields)`: the one place a compile's progress lines are formatted and handed to `progress`."""
    def say(line: ProgressLine, **fields) -> None:
        if progress is not None:
            progress(line.value.format(**fields))
    return say
