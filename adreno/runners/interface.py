"""The Runner interface: measure an artifact on a device, with its output checked before its time counts.

`Runner.submit(RunInput) -> RunFuture`; `RunFuture.result() -> RunResult`. Failures are values: a build error,
a wrong output, a dead device or a timeout is a `RunResult(error=..., stage=...)`, never an exception across
the interface. Local, device-agent (RPC) and TVM-native runners implement the same interface; each is one file.
"""

from __future__ import annotations

import concurrent.futures as futures
from dataclasses import dataclass, field

import numpy as np



@dataclass
class RunInput:
    """What to measure: an artifact directory, its inputs, and the reference its outputs must match."""

    artifact: str
    inputs: list[np.ndarray] | None = None  # None: seeded random inputs of the artifact's input shapes
    reference: list[np.ndarray] | None = None  # None: outputs are not checked
    repeat: int = 10
    warmup: int = 1
    rtol: float = 1e-3
    atol: float = 1e-3
    seed: int = 0
    tag: str = ""  # the caller's id for this candidate, carried into the result
    cold: bool = False  # evict the device's caches before each timed run (local and farm runners; native refuses it)


# Stages whose failure is the infrastructure's, not the candidate's: "request" (tracker unreachable, no device of
# the key, a lease gone stale, the runner closed before the candidate ran). Candidate failures (build, upload, run,
# check, timeout, device: the device died twice under this candidate) are final.
INFRASTRUCTURE_STAGES = frozenset({"request"})


@dataclass
class RunResult:
    """Per-repeat seconds (the sum of kernel device times of one run) or an error with the stage it failed in."""

    seconds: list[float] | None = None
    error: str | None = None
    stage: str | None = None  # build | upload | run | check | timeout | device; request: see `infrastructure`
    max_error: float | None = None
    tag: str = ""
    device: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds is not None

    @property
    def median(self) -> float:
        return float(np.median(self.seconds)) if self.seconds else float("inf")

    @property
    def infrastructure(self) -> bool:
        """The candidate never ran: the farm failed it (see `INFRASTRUCTURE_STAGES`). Not a result of the
        candidate: the tuner records nothing for it and measures it again later."""
        return self.stage in INFRASTRUCTURE_STAGES


class RunFuture:
    """The pending result of one submitted `RunInput`."""

    def __init__(self, future: futures.Future, run_input: RunInput):
        self._future, self._input = future, run_input

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> RunResult:
        try:
            return self._future.result(timeout)
        except futures.TimeoutError:
            return RunResult(error=f"no result within {timeout} s", stage="timeout", tag=self._input.tag)


class Runner:
    """Measures `RunInput`s; subclasses implement `run` (blocking) and may override `submit`."""

    name = "runner"
    # It measures on another machine: work on this host (compiling the next candidate) does not disturb its
    # timings, so a caller may prepare while it measures.
    remote = False

    def __init__(self):
        self._pool = futures.ThreadPoolExecutor(max_workers=1)

    def submit(self, run_input: RunInput) -> RunFuture:
        return RunFuture(self._pool.submit(self.run, run_input), run_input)

    def run(self, run_input: RunInput) -> RunResult:
        raise NotImplementedError

    def run_batch(self, inputs: list[RunInput]) -> list[RunResult]:
        return [f.result() for f in [self.submit(i) for i in inputs]]

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def check_outputs(outputs, reference, rtol: float, atol: float) -> tuple[float, str | None]:
    """(max abs error, error message or None) of outputs against a reference."""
    if len(outputs) != len(reference):
        return float("inf"), f"{len(outputs)} outputs, the reference has {len(reference)}"
    worst = 0.0
    for index, (out, ref) in enumerate(zip(outputs, reference)):
        if out.shape != ref.shape:
            return float("inf"), f"output {index} has shape {out.shape}, the reference {ref.shape}"
        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
        if not np.all(np.isfinite(out)) or np.any(diff > atol + rtol * np.abs(ref)):
            return worst, f"output {index} differs from the reference: max abs error {worst:.3g}"
    return worst, None


def refuse_cold(runner: str, run_input: RunInput) -> RunResult | None:
    """The failure of a cold run on a runner that cannot evict the device's caches, or None for a warm one."""
    if not run_input.cold:
        return None
    return RunResult(error=f"the {runner} runner cannot run with cold caches (the local runner and the farm's "
                     "agents can)", stage="run", tag=run_input.tag)
