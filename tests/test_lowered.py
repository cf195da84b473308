"""The host library's build reuses the launch plan's lowering (adreno.compiler.lowered): every function the plan lowered
is a hit, and the library's OpenCL kernels (its `devc.o`) are the ones a fresh lowering gives, byte for byte (its host
object orders the functions differently)."""

from __future__ import annotations

import tarfile

import pytest

from adreno.compile import lower_relax
from adreno.frontend.empty import EmptyTensors
from adreno.frontend.importer import load_model, to_relax
from adreno.compiler.host_library import export_host_library
from adreno.compiler.lowered import LoweredFunctions
from adreno.options import CompileOptions
from adreno.compiler.plan import extract_plan
from adreno.schedules.context import ScheduleContext


def _members(path):
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_host_library_reuses_the_plans_lowering(memory, tmp_path):
    options = CompileOptions(memory=memory)
    device = options.device()
    ctx = ScheduleContext.for_device(device, host=options.host)
    tvm_target = ctx.target
    model, _ = load_model("tiny")
    lowered = lower_relax(to_relax(model, options.input_shapes, EmptyTensors()), ctx, memory=options.memory)
    store = LoweredFunctions()
    plan, _, _ = extract_plan(lowered, tvm_target, memory=options.memory, device=device, store=store)
    assert len(store) == len({(s.func, s.program) for s in plan.steps}) > 1
    (tmp_path / "reused").mkdir()
    (tmp_path / "fresh").mkdir()
    reused = export_host_library(lowered, plan, tvm_target, tmp_path / "reused", options.host, None, store)
    assert store.misses == 0 and store.hits == len(store)
    fresh = export_host_library(lowered, plan, tvm_target, tmp_path / "fresh", options.host, None)
    assert _members(tmp_path / "reused" / reused)["devc.o"] == _members(tmp_path / "fresh" / fresh)["devc.o"]
