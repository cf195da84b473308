"""Measuring candidates: build a one-kernel artifact per (task, config) in a process pool, compute the
task's reference output once on the CPU (TVM's LLVM build of the unscheduled function), and run candidates
through any Runner, which checks each output against that reference before its time counts."""

from __future__ import annotations

import concurrent.futures as futures
import importlib
import multiprocessing
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..artifact import ArtifactWriter, Plan, Step, TensorSpec
from ..errors import TVM_ERRORS
from .task import Task


@dataclass
class BuildResult:
    """A built candidate artifact, or why it could not be built."""

    artifact: str | None = None
    error: str | None = None
    seconds: float = 0.0


def _tensor_specs(func) -> list[TensorSpec]:
    return [TensorSpec(p.name, [int(d) for d in p.shape], str(p.dtype), "input", "") for p in func.params]


def build_candidate(task: Task, config: dict, out_dir: str) -> BuildResult:
    """Schedule the task's function with `config`, lower it, and write a one-step artifact to `out_dir`.
    A config the schedule refuses, or a lowering failure, is a BuildResult error, not an exception."""
    import tvm

    from ..compile import lower_primfunc, plan_storage
    from ..target import tvm_target

    started = time.perf_counter()
    target = tvm_target(task.target_name)
    func = task.func()
    try:
        sch = task.module.apply(func, target, {task.key: config})
        if sch is None:
            return BuildResult(error="the schedule does not apply to this function", seconds=0.0)
        scheduled = sch.mod["main"].with_attr("tirx.is_scheduled", True)
        launches, workspaces, source = lower_primfunc(scheduled, task.func_name, target)
    except TVM_ERRORS as err:
        return BuildResult(error=f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}",
                           seconds=time.perf_counter() - started)
    specs = _tensor_specs(func)
    for spec in specs[len(specs) - task.n_outputs:]:
        spec.kind = "output"
    tensors = {s.name: s for s in specs}
    steps = [Step(task.func_name, task.func_name, task.family, [s.name for s in specs], launches, workspaces)]
    inputs = [s.name for s in specs if s.kind == "input"]
    outputs = [s.name for s in specs if s.kind == "output"]
    storage = plan_storage(tensors, steps, outputs)
    plan = Plan(inputs, outputs, tensors, storage, {task.func_name: f"kernels/{task.func_name}.cl"}, steps)
    with ArtifactWriter(out_dir) as writer:
        writer.write_text(plan.programs[task.func_name], source)
        writer.write_json("plan.json", plan.to_json())
        writer.write_params({})
        writer.commit({"kind": "kernel", "workload": task.key, "config": config, "target": task.target_name,
                       "adreno_version": __import__("adreno").__version__, "tvm_version": tvm.__version__})
    return BuildResult(artifact=out_dir, seconds=time.perf_counter() - started)


def reference_outputs(task: Task, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The unscheduled function built for the CPU by TVM's LLVM backend and run on `inputs`: an independent
    reference for every candidate of the task."""
    import tvm

    func = task.func()
    if func.attrs is not None and "target" in func.attrs:
        func = func.without_attr("target")
    func = func.with_attr("global_symbol", "main")
    build = importlib.import_module("tvm.tirx.build").build  # `tvm.tirx.build` the attribute is the function
    library = build(tvm.IRModule({"main": func}), target="llvm", pipeline="s_tir")
    specs = _tensor_specs(func)
    arrays = [tvm.runtime.tensor(a) for a in inputs] + [
        tvm.runtime.tensor(np.zeros(s.shape, s.dtype)) for s in specs[len(specs) - task.n_outputs:]]
    library["main"](*arrays)
    return [a.numpy() for a in arrays[len(inputs):]]


def task_inputs(task: Task, seed: int = 0) -> list[np.ndarray]:
    specs = _tensor_specs(task.func())
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s.shape).astype(s.dtype) for s in specs[: len(specs) - task.n_outputs]]


class Builder:
    """Builds candidates in worker processes (TVM lowering is CPU-bound and not thread-parallel)."""

    def __init__(self, workers: int | None = None, workdir: str | os.PathLike = "build/tune"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self._pool = futures.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        self._counter = 0

    def build(self, task: Task, configs: list[dict]) -> list[BuildResult]:
        jobs = []
        for config in configs:
            self._counter += 1
            out = str(self.workdir / f"{os.getpid()}-{self._counter}")
            jobs.append(self._pool.submit(build_candidate, task, config, out))
        results = []
        for job in jobs:
            try:
                results.append(job.result())
            except futures.process.BrokenProcessPool as err:  # a worker died (e.g. a crash in lowering)
                self._pool = futures.ProcessPoolExecutor(self.workers,
                                                         mp_context=multiprocessing.get_context("spawn"))
                results.append(BuildResult(error=f"build worker died: {err}"))
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
