"""The Runner interface: measure an artifact on a device, with its output checked before its time counts.

`Runner.submit(RunInput) -> RunFuture`; `RunFuture.result() -> RunResult`. Failures are values: a build error,
a wrong output, a dead device or a timeout is a `RunResult(error=..., stage=...)`, never an exception across
the interface. Local, device-agent (RPC) and TVM-native runners implement the same interface; each is one file.
"""

from __future__ import annotations

import concurrent.futures as futures
from dataclasses import dataclass, field

import numpy as np

from .errors import AdrenoError


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


def random_inputs(specs, seed: int = 0) -> list[np.ndarray]:
    """Seeded standard-normal inputs for the given tensor specs (the same seed gives the same inputs)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]


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


class LocalRunner(Runner):
    """Runs artifacts on a local OpenCL device through pyopencl (PoCL by default)."""

    name = "local"

    def __init__(self, device=None, cache=None):
        super().__init__()
        self.device_spec, self.cache = device, cache

    def run(self, run_input: RunInput) -> RunResult:
        import pyopencl as cl

        from .opencl.executor import Executor

        stage = "build"
        try:
            executor = Executor(run_input.artifact, self.device_spec, cache=self.cache)
            device = executor.device.name.strip()
            inputs = run_input.inputs or random_inputs(executor.artifact.input_specs(), run_input.seed)
            stage = "run"
            outputs = executor.run(inputs)
            max_error = None
            if run_input.reference is not None:
                stage = "check"
                max_error, problem = check_outputs(outputs, run_input.reference, run_input.rtol, run_input.atol)
                if problem:
                    return RunResult(error=problem, stage=stage, max_error=max_error, tag=run_input.tag, device=device)
            stage = "run"
            profile = executor.profile(inputs, repeat=run_input.repeat, warmup=run_input.warmup)
        except (AdrenoError, cl.Error, OSError, ValueError) as err:
            return RunResult(error=f"{type(err).__name__}: {err}", stage=stage, tag=run_input.tag)
        return RunResult(seconds=[ms * 1e-3 for ms in profile.run_device_ms], max_error=max_error, tag=run_input.tag,
                         device=device,
                         extra={"build_seconds": profile.build_seconds, "wall_ms": profile.latencies_ms})


def _isolated_worker(conn, device_spec, use_cache: bool) -> None:
    """Child process of `IsolatedLocalRunner`: one LocalRunner measuring what the parent sends."""
    from .cache import ProgramCache

    runner = LocalRunner(device_spec, cache=ProgramCache() if use_cache else None)
    conn.send("ready")
    while (item := conn.recv()) is not None:
        conn.send(runner.run(item))


class IsolatedLocalRunner(Runner):
    """A LocalRunner in a child process, with a deadline per measurement: a candidate whose build, first-launch
    compile or run exceeds `timeout_s`, or that crashes the OpenCL driver, becomes a RunResult (stage "timeout"
    or "device") and the child is restarted for the next one; the caller never hangs or dies with it."""

    name = "local-isolated"

    def __init__(self, device=None, timeout_s: float = 60.0, cache: bool = True, start_timeout_s: float = 300.0):
        """`device`: a spec as `select_device` takes it, or a pyopencl Device (sent to the child as its index)."""
        super().__init__()
        if hasattr(device, "platform"):
            from .opencl.device import opencl_devices

            device = next(i for i, d in enumerate(opencl_devices()) if d == device)
        self.device_spec, self.timeout_s, self.use_cache = device, timeout_s, cache
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self._proc = self._conn = None

    def _start(self) -> bool:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        proc = context.Process(target=_isolated_worker, args=(child, self.device_spec, self.use_cache), daemon=True)
        proc.start()
        child.close()
        try:
            ready = parent.poll(self.start_timeout_s) and parent.recv() == "ready"
        except (EOFError, OSError):  # the child died while starting (no device, broken driver)
            ready = False
        if not ready:
            proc.kill()
            proc.join(10)
            return False
        self._proc, self._conn = proc, parent
        self.restarts += 1
        return True

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(10)
        self._proc = self._conn = None

    def run(self, run_input: RunInput) -> RunResult:
        if (self._proc is None or not self._proc.is_alive()) and not self._start():
            return RunResult(error=f"the measuring process did not start within {self.start_timeout_s:g} s on "
                             f"device {self.device_spec or 'pocl'}", stage="device", tag=run_input.tag)
        self._conn.send(run_input)
        try:
            if self._conn.poll(self.timeout_s):
                return self._conn.recv()
        except (EOFError, OSError) as err:
            self._stop()
            return RunResult(error=f"the measuring process died ({type(err).__name__}): the candidate crashed the "
                             "OpenCL driver", stage="device", tag=run_input.tag)
        self._stop()
        return RunResult(error=f"no result within {self.timeout_s:g} s (build, first-launch compile and runs); "
                         "abandoned", stage="timeout", tag=run_input.tag)

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(10)
            except OSError:
                pass
        self._stop()
        super().close()
