"""How the executor builds an artifact's programs (adreno.opencl.programs): one driver program for the model, the same
outputs as one program per kernel file, the cache written after the first run, and a failed build in one line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.cache import ProgramCache
from adreno.errors import KernelBuildError
from adreno.opencl.executor import CacheWrite, Executor
from adreno.opencl.programs import Grouping, groups, program_kernels
from adreno.artifact.format import random_inputs
from tests.kernel_files import append_to_kernel_file


def test_one_program_for_the_model_runs_as_one_per_file(tiny_artifact, pocl_device):
    artifact = Artifact.load(tiny_artifact)
    assert len(artifact.plan.programs) > 1 and groups(artifact, Grouping.MODEL) == [list(artifact.plan.programs)]
    model = Executor(artifact, pocl_device)
    each = Executor(artifact, pocl_device, grouping=Grouping.EACH)
    assert [b.programs for b in model.builds] == [list(artifact.plan.programs)]
    assert len(each.builds) == len(artifact.plan.programs) and all(b.how == "source" for b in each.builds)
    inputs = random_inputs(artifact.input_specs(), seed=1)
    for a, b in zip(model.run(inputs), each.run(inputs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_colliding_kernel_names_go_to_separate_groups(tiny_artifact):
    artifact = Artifact.load(tiny_artifact)
    first, second = list(artifact.plan.programs)[:2]
    kernel = program_kernels(artifact)[first][0]
    artifact.plan.steps[[s.program for s in artifact.plan.steps].index(second)].kernels[0].name = kernel
    grouped = groups(artifact, Grouping.MODEL)
    assert len(grouped) == 2 and first in grouped[0] and second in grouped[1]


@pytest.mark.parametrize("write", list(CacheWrite))
def test_cache_is_written_after_the_first_run(tiny_artifact, pocl_device, tmp_path, write):
    cache = ProgramCache(tmp_path / "cache")
    executor = Executor(tiny_artifact, pocl_device, cache=cache, cache_write=write)
    assert [b.how for b in executor.builds] == ["miss"] and not list((tmp_path / "cache").glob("*.clbin"))
    inputs = random_inputs(executor.artifact.input_specs(), seed=2)
    first = executor.run(inputs)
    assert executor.wait_stored() > 0 and executor.store_failure is None
    assert len(list((tmp_path / "cache").glob("*.clbin"))) == 1
    assert executor.warm_build_seconds() is not None and cache.stats["hits"] == 1
    again = Executor(tiny_artifact, pocl_device, cache=ProgramCache(tmp_path / "cache"))
    assert [b.how for b in again.builds] == ["hit"]
    for a, b in zip(first, again.run(inputs), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cached", [False, True])
def test_failed_build_is_one_line_naming_the_program_with_the_log_in_a_file(tiny_artifact, tmp_path, cached):
    broken = Path(shutil.copytree(tiny_artifact, tmp_path / "broken"))
    artifact = Artifact.load(broken)
    name = artifact.plan.steps[-1].program
    path = broken / artifact.plan.programs[name]
    append_to_kernel_file(path, "\nthis is not OpenCL C;\n")
    cache = ProgramCache(tmp_path / "cache") if cached else None
    with pytest.raises(KernelBuildError) as caught:
        Executor(Artifact.load(broken, checked=False), cache=cache)  # a hand edit: the hashes would refuse it
    message = str(caught.value)
    assert "\n" not in message and f"OpenCL build of {name} (kernels {program_kernels(artifact)[name][0]}" in message
    log = Path(re.search(r"full build log: (\S+)$", message).group(1))
    text = log.read_text()
    assert "error:" in text and "error:" in message and len(text) > len(message)
    log.unlink()
