"""TVM MetaSchedule's design space, sampled by its replay-func strategy, built and measured by our pipeline on PoCL."""

from __future__ import annotations

import pytest

from adreno.errors import AdrenoError
from adreno.runners.local import LocalRunner
from adreno.tune import metaschedule
from adreno.tune.extract import extract_tasks
from tests.conftest import save_conv3x3
from tests.kernel_files import kernel_sources


@pytest.fixture(scope="module")
def conv_task(tmp_path_factory):
    return extract_tasks(save_conv3x3(tmp_path_factory.mktemp("ms") / "conv.onnx", 16, 16, 14))[0]


def test_metaschedule_candidates_are_checked_and_timed(conv_task, pocl_device, tmp_path):
    batches = []
    trials = metaschedule.tune(conv_task, LocalRunner(pocl_device), 6, batch=3, repeat=2, workdir=str(tmp_path),
                               progress=lambda n, batch: batches.append((n, len(batch))))
    assert [t.trial for t in trials] == list(range(1, 7)) and batches == [(3, 3), (6, 3)]
    ok = [t for t in trials if t.ok]
    assert ok, [t.error for t in trials]
    assert all(t.max_error is not None and t.max_error < 1e-3 and min(t.seconds) > 0 for t in ok)
    assert all(t.error and t.stage for t in trials if not t.ok)
    sources = {kernel_sources(tmp_path / f"ms-{t.trial - 1}")[conv_task.func_name] for t in ok}
    assert len(sources) == len(ok), "every sample of MetaSchedule's space is a different kernel"


@pytest.mark.parametrize("strategy", ["evolutionary", "replay-trace", "annealing"])
def test_strategies_that_crash_the_wheel_are_refused(conv_task, pocl_device, tmp_path, strategy):
    with pytest.raises(AdrenoError, match="segfaults" if strategy in metaschedule.BROKEN else "must be one of"):
        metaschedule.tune(conv_task, LocalRunner(pocl_device), 2, workdir=str(tmp_path), strategy=strategy)
