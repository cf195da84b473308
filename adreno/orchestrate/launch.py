"""What a launch costs on the measuring device, beyond its kernel's device time: the saving that fusion is for.

A candidate's measured time is its kernels' device time; the gaps between kernels (the enqueue, the driver's
dispatch, the wait on the previous kernel) are in no candidate, so sums of device times alone favour many small
kernels. The gap is measured once per device on two artifacts of the same elementwise add, one with one kernel and
one with a chain of `CHAIN` kernels, each kept a kernel of its own (FuseOps skipped). The add is `WIDTH` elements,
enough that the device, not the host's enqueue, sets the pace, as it does in a model: behind a host-bound chain of
tiny kernels the gap hides (docs/orchestrate.md). Their wall times per run (the runner's `wall_ms`, outputs
checked) give
- `per_launch_s` = (wall(CHAIN) - wall(1)) / (CHAIN - 1) - the per-kernel device time (clamped at 0),
- `per_run_s` = wall(1) - per_launch_s - device(1) (clamped at 0): the run's fixed cost (the final wait).

A candidate then costs its device time plus its kernel count times `per_launch_s`, and a model's predicted run is
`per_run_s` plus its kernels' costs: what `adreno run` measures as the median wall time. Both artifacts are records
(`orchestrate|launch|<target>|<kernels>|w<WIDTH>`, with `extra["wall_s"]`), so a second run on the device measures
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import relax

from adreno.support.code_version import code_fingerprint
from adreno.records import ORCHESTRATE_OP

CHAIN = 16
WIDTH = 1 << 18  # elements of the added tensor (1 MiB): a kernel the device, not the enqueue, paces


@dataclass(frozen=True)
class LaunchCost:
    """Seconds a launch adds to a run beyond its kernel's device time, and seconds a run adds once."""

    per_launch_s: float
    per_run_s: float


def chain_module(kernels: int):
    """`x + 1 + 1 ...` (`kernels` adds) on a 1 x WIDTH float32 input."""
    x = relax.Var("x", relax.TensorType((1, WIDTH), "float32"))
    builder = relax.BlockBuilder()
    with builder.function("main", [x]):
        with builder.dataflow():
            value = x
            for _ in range(kernels):
                value = builder.emit(relax.op.add(value, relax.const(1.0, "float32")))
            out = builder.emit_output(value)
        builder.emit_func_output(out)
    return builder.get()


def launch_key(target_name: str, kernels: int) -> str:
    # records of another width, or measured by other code (`adreno.support.code_version`), are not reused
    return f"{ORCHESTRATE_OP}|launch|{target_name}|{kernels}|w{WIDTH}|code-{code_fingerprint()}"


def from_records(one, chain) -> LaunchCost | None:
    """The launch cost from the records of the one-kernel and the CHAIN-kernel artifacts (None if one failed)."""
    if one is None or chain is None or "wall_s" not in one.extra or "wall_s" not in chain.extra:
        return None
    device_per_kernel = (chain.median - one.median) / (CHAIN - 1)
    per_launch = max(0.0, (chain.extra["wall_s"] - one.extra["wall_s"]) / (CHAIN - 1) - device_per_kernel)
    return LaunchCost(per_launch, max(0.0, one.extra["wall_s"] - per_launch - one.median))
