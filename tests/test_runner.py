"""The local Runner: timings only after the output matched; every failure is a RunResult, not an exception."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.frontend import zoo
from adreno.artifact.format import Artifact
from adreno.reference import onnxruntime_outputs
from adreno.artifact.format import random_inputs
from adreno.runners.interface import RunInput, check_outputs
from adreno.runners.local import LocalRunner


def test_checked_run_gives_timings(tiny_artifact):
    inputs = random_inputs(Artifact.load(tiny_artifact).input_specs(), seed=5)
    reference = onnxruntime_outputs(zoo.get_model("tiny"), inputs)
    runner = LocalRunner()
    result = runner.submit(RunInput(str(tiny_artifact), inputs, reference, repeat=4, tag="c1")).result()
    runner.close()
    assert result.ok and result.tag == "c1" and len(result.seconds) == 4
    assert all(s > 0 for s in result.seconds) and result.max_error < 1e-5


def test_wrong_output_is_an_error_not_a_timing(tiny_artifact):
    inputs = random_inputs(Artifact.load(tiny_artifact).input_specs(), seed=5)
    wrong = [r + 0.5 for r in onnxruntime_outputs(zoo.get_model("tiny"), inputs)]
    result = LocalRunner().run(RunInput(str(tiny_artifact), inputs, wrong))
    assert not result.ok and result.seconds is None and result.stage == "check"
    assert "differs from the reference" in result.error


def test_broken_artifact_is_a_build_error(tmp_path):
    result = LocalRunner().run(RunInput(str(tmp_path / "missing")))
    assert result.stage == "build" and "no such artifact directory" in result.error


def test_check_outputs_shapes_and_nan():
    ref = [np.ones((2, 2), np.float32)]
    assert check_outputs([np.ones((2, 2))], ref, 1e-3, 1e-3) == (0.0, None)
    assert "shape" in check_outputs([np.ones((2, 3))], ref, 1e-3, 1e-3)[1]
    bad = np.ones((2, 2))
    bad[0, 0] = np.nan
    assert check_outputs([bad], ref, 1e-3, 1e-3)[1] is not None


def test_isolated_runner_turns_an_overrun_into_a_timeout_and_recovers(tiny_artifact):
    from adreno.runners.local import IsolatedLocalRunner

    inputs = random_inputs(Artifact.load(tiny_artifact).input_specs(), seed=5)
    reference = onnxruntime_outputs(zoo.get_model("tiny"), inputs)
    runner = IsolatedLocalRunner(timeout_s=0.001)  # nothing builds and runs in a millisecond
    try:
        late = runner.run(RunInput(str(tiny_artifact), inputs, reference, tag="late"))
        assert late.stage == "timeout" and late.tag == "late" and late.seconds is None
        runner.timeout_s = 120
        ok = runner.run(RunInput(str(tiny_artifact), inputs, reference, repeat=2, tag="ok"))
        assert ok.ok and ok.tag == "ok" and len(ok.seconds) == 2
        assert runner.restarts == 2, "the overrun child was killed and a fresh one measured the next candidate"
    finally:
        runner.close()


def test_isolated_runner_failures_are_results_not_exceptions(tiny_artifact):
    from adreno.runners.local import IsolatedLocalRunner

    runner = IsolatedLocalRunner(device="no-such-gpu", start_timeout_s=60)
    try:
        wrong = runner.run(RunInput(str(tiny_artifact), tag="x"))
    finally:
        runner.close()
    assert wrong.seconds is None and wrong.tag == "x" and "no OpenCL device matches 'no-such-gpu'" in wrong.error
    slow_start = IsolatedLocalRunner(start_timeout_s=0.001)  # no Python process starts in a millisecond
    try:
        late = slow_start.run(RunInput(str(tiny_artifact), tag="y"))
    finally:
        slow_start.close()
    assert late.stage == "device" and late.tag == "y" and "did not start" in late.error


def test_a_cold_run_evicts_the_caches_before_each_timed_run(tiny_artifact, monkeypatch):
    """`RunInput.cold` (orchestration's candidates): a scratch fill of at least 8 MiB before each timed run, not
    before the checked one, and the run is still checked. The runner's next artifact is built in the same context
    and fills the same scratch buffer (a fresh one pays for its first touch every time); a warm run fills none."""
    import pyopencl as cl

    fills = []
    fill = cl.enqueue_fill_buffer
    monkeypatch.setattr(cl, "enqueue_fill_buffer", lambda queue, mem, pattern, offset, size, *a, **k: (
        fills.append((size, mem.int_ptr, queue.context.int_ptr)), fill(queue, mem, pattern, offset, size, *a, **k))[1])
    inputs = random_inputs(Artifact.load(tiny_artifact).input_specs(), seed=5)
    reference = onnxruntime_outputs(zoo.get_model("tiny"), inputs)
    runner = LocalRunner()
    result = runner.run(RunInput(str(tiny_artifact), inputs, reference, repeat=3, cold=True))
    assert result.ok and len(result.seconds) == 3 and result.max_error < 1e-5
    assert len(fills) == 3 and min(size for size, _, _ in fills) >= 8 << 20
    assert runner.run(RunInput(str(tiny_artifact), inputs, reference, repeat=2)).ok and len(fills) == 3
    assert runner.run(RunInput(str(tiny_artifact), inputs, reference, repeat=2, cold=True)).ok
    assert len(fills) == 5 and len({(mem, context) for _, mem, context in fills}) == 1


def test_an_evictor_of_another_context_is_refused(tiny_artifact):
    from adreno.opencl.evict import Evictor
    from adreno.opencl.executor import Executor

    executor = Executor(tiny_artifact)
    inputs = random_inputs(executor.artifact.input_specs(), seed=1)
    with pytest.raises(ValueError, match="context"):
        executor.profile(inputs, repeat=1, evictor=Evictor.for_device(executor.device))
    assert len(executor.profile(inputs, repeat=2, evictor=Evictor(executor.context)).run_device_ms) == 2


def test_native_runner_refuses_a_cold_run_as_a_value(tiny_artifact):
    """TVM's runtime on a tvm_rpc cannot fill a scratch buffer between runs (the farm's agents can:
    tests/farm/test_farm_runner.py)."""
    from adreno.runners.native import NativeRunner

    runner = NativeRunner(server="127.0.0.1:1")
    result = runner.submit(RunInput(str(tiny_artifact), cold=True, tag="t")).result()
    runner.close()
    assert not result.ok and result.tag == "t" and "cold caches" in result.error, result


def test_prebuild_stops_the_builds_still_running_at_its_deadline(tiny_artifact, tmp_path):
    """An offline batch builds its candidates' programs in worker processes until its deadline. The builds past it
    are ended, not left loading the CPU under the timings that follow, and nothing writes into the caches after
    `prebuild` returns; without a deadline every artifact is built."""
    import multiprocessing
    import shutil
    import time

    from adreno.runners.offline import prebuild

    def new_children(before) -> list:  # other tests of this process may keep children of their own (a runner's)
        return [p for p in multiprocessing.active_children() if p.is_alive() and p.pid not in before]

    copies = [str(shutil.copytree(tiny_artifact, tmp_path / f"copy{i}")) for i in range(3)]
    before = {p.pid for p in multiprocessing.active_children()}
    assert prebuild(copies, "pocl", tmp_path / "late", jobs=2, deadline=time.perf_counter(), separate=True) == {}
    assert not new_children(before)
    time.sleep(2)
    assert not list((tmp_path / "late").rglob("*.*")), "a stopped build wrote into its cache"
    built = prebuild(copies, "pocl", tmp_path / "cache", jobs=2, separate=True)
    assert sorted(built) == copies and all(error is None for _, error in built.values()), built
    assert all(list((tmp_path / "cache" / f"copy{i}").rglob("*")) for i in range(3))
    assert not new_children(before)
