"""The runners on this machine: `LocalRunner` (pyopencl in this process) and `IsolatedLocalRunner` (the same in a
child process with a deadline per measurement, so a hung or crashing driver costs one candidate, not the caller)."""

from __future__ import annotations

import os

from ..errors import AdrenoError
from ..artifact.format import random_inputs
from ..opencl.device import device_of, opencl_devices
from ..opencl.evict import Evictor
from ..opencl.executor import Executor
from ..support.processes import die_with_parent
from .interface import RunInput, RunResult, Runner, check_outputs


class LocalRunner(Runner):
    """Runs artifacts on a local OpenCL device through pyopencl (PoCL by default)."""

    name = "local"

    def __init__(self, device=None, cache=None):
        super().__init__()
        self.device_spec, self.cache = device, cache
        self._evictor: Evictor | None = None  # one context for every artifact it runs, and its eviction buffer

    def run(self, run_input: RunInput) -> RunResult:
        import pyopencl as cl

        stage = "build"
        try:
            if self._evictor is None:
                self._evictor = Evictor.for_device(device_of(self.device_spec))
            executor = Executor(run_input.artifact, cache=self.cache, context=self._evictor.context)
            device = executor.device.name.strip()
            inputs = run_input.inputs or random_inputs(executor.artifact.input_specs(), run_input.seed,
                                                        executor.artifact.value_ranges())
            stage = "run"
            outputs = executor.run(inputs)
            max_error = None
            if run_input.reference is not None:
                stage = "check"
                max_error, problem = check_outputs(outputs, run_input.reference, run_input.rtol, run_input.atol)
                if problem:
                    return RunResult(error=problem, stage=stage, max_error=max_error, tag=run_input.tag, device=device)
            stage = "run"
            profile = executor.profile(inputs, repeat=run_input.repeat, warmup=run_input.warmup,
                                       evictor=self._evictor if run_input.cold else None)
        except (AdrenoError, cl.Error, OSError, ValueError) as err:
            return RunResult(error=f"{type(err).__name__}: {err}", stage=stage, tag=run_input.tag)
        return RunResult(seconds=[ms * 1e-3 for ms in profile.run_device_ms], max_error=max_error, tag=run_input.tag,
                         device=device,
                         extra={"build_seconds": profile.build_seconds, "wall_ms": profile.latencies_ms})


def _isolated_worker(conn, device_spec, use_cache: bool, parent_pid: int) -> None:
    """Child process of `IsolatedLocalRunner`: one LocalRunner measuring what the parent sends, ending with it."""
    die_with_parent(parent_pid)
    from ..cache import ProgramCache  # inside: loads pyopencl at import

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
            device = next(i for i, d in enumerate(opencl_devices()) if d == device)
        self.device_spec, self.timeout_s, self.use_cache = device, timeout_s, cache
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self._proc = self._conn = None

    def _start(self) -> bool:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        proc = context.Process(target=_isolated_worker, args=(child, self.device_spec, self.use_cache, os.getpid()),
                                       daemon=True)
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
