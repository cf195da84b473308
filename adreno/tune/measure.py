"""Measuring candidates: build a one-kernel artifact per (task, config) in a process pool, compute the
task's reference output once on the CPU (TVM's LLVM build of the unscheduled function), and run candidates
through any Runner, which checks each output against that reference before its time counts.

A layout task's candidate is the whole pipeline of its conv under the chosen layout: a module of that one conv
(seeded constant weight, no epilogue) compiled as `adreno compile --records` would (`lower_relax` with the
candidate as the conv's record, then the launch plan): one direct kernel, or the three Winograd kernels. Every
candidate of the task runs on the same input against the same reference (a float64 numpy conv), and the Runner's
time is the sum of the artifact's kernel times, so the layouts are compared like with like.

A texture task's candidate is its one function (the packed conv with its pad and epilogue) lowered with its
parameters in the images the model's artifact gives them (`Task.images`, the texture TIR pipeline) into a
one-step artifact whose inputs and output are those images: the time is the conv kernel's alone (the model's
pack/unpack kernels are not part of it), and the reference is the unscheduled function built for the CPU."""

from __future__ import annotations

import concurrent.futures as futures
import importlib
import multiprocessing
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..artifact import ArtifactWriter, Plan, Step, TensorSpec
from ..errors import TVM_ERRORS
from ..measure import seeded_inputs
from .task import LayoutTask, Task


@dataclass
class BuildResult:
    """A built candidate artifact, or why it could not be built."""

    artifact: str | None = None
    error: str | None = None
    seconds: float = 0.0


def _tensor_specs(func, images: list | None = None) -> list[TensorSpec]:
    specs = [TensorSpec(p.name, [int(d) for d in p.shape], str(p.dtype), "input", "") for p in func.params]
    for spec, image in zip(specs, images or ()):
        if image:
            spec.scope, spec.image = image["scope"], image
    return specs


def _refusal(caught) -> str | None:
    """The warning a schedule of ours gave when it refused a config (another schedule would run in its place)."""
    return next((str(w.message)[:300] for w in caught if "falling back" in str(w.message)), None)


def _failure(err: Exception, started: float) -> BuildResult:
    return BuildResult(error=f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}",
                       seconds=time.perf_counter() - started)


def _write_artifact(out_dir: str, plan: Plan, sources: dict, params: dict, task: Task, config: dict) -> None:
    import tvm

    with ArtifactWriter(out_dir) as writer:
        for name, source in sources.items():
            writer.write_text(plan.programs[name], source)
        writer.write_json("plan.json", plan.to_json())
        writer.write_params(params)
        writer.commit({"kind": "kernel", "workload": task.key, "config": config, "target": task.target_name,
                       "adreno_version": __import__("adreno").__version__, "tvm_version": tvm.__version__})


def build_candidate(task: Task, config: dict, out_dir: str) -> BuildResult:
    """Schedule the task's function with `config`, lower it, and write a one-step artifact to `out_dir` (a layout
    task: the conv's pipeline, see the module doc). A config the schedule refuses, or a lowering failure, is a
    BuildResult error, not an exception."""
    from ..target import tvm_target

    if isinstance(task, LayoutTask):
        return _build_layout(task, config, out_dir)
    started = time.perf_counter()
    target = tvm_target(task.target_name)
    func = task.func()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            sch = task.module.apply(func, target, {task.key: config})
        if sch is None:
            return BuildResult(error=_refusal(caught) or "the schedule does not apply to this function",
                               seconds=time.perf_counter() - started)
    except TVM_ERRORS as err:
        return _failure(err, started)
    return build_scheduled(task, sch.mod["main"], out_dir, config, started)


def build_scheduled(task: Task, scheduled, out_dir: str, config: dict, started: float | None = None) -> BuildResult:
    """Lower `scheduled` (the task's function, already scheduled: by our family with `config`, or by MetaSchedule)
    and write a one-step artifact to `out_dir`, its parameters in the task's images if it has any; a lowering
    failure is a BuildResult error. `started`: when the caller's part of the build began (perf_counter), so that
    BuildResult.seconds covers it."""
    from ..compile import lower_primfunc, plan_storage
    from ..texture import TextureLoweringError
    from ..target import tvm_target

    started = time.perf_counter() if started is None else started
    func = task.func()
    try:
        launches, workspaces, source = lower_primfunc(scheduled.with_attr("tirx.is_scheduled", True), task.func_name,
                                                      tvm_target(task.target_name), task.scopes)
    except (*TVM_ERRORS, TextureLoweringError) as err:
        return _failure(err, started)
    specs = _tensor_specs(func, task.images)
    for spec in specs[len(specs) - task.n_outputs:]:
        spec.kind = "output"
    tensors = {s.name: s for s in specs}
    steps = [Step(task.func_name, task.func_name, task.family, [s.name for s in specs], launches, workspaces)]
    inputs = [s.name for s in specs if s.kind == "input"]
    outputs = [s.name for s in specs if s.kind == "output"]
    storage, images = plan_storage(tensors, steps, outputs, with_images=True)
    plan = Plan(inputs, outputs, tensors, storage, {task.func_name: f"kernels/{task.func_name}.cl"}, steps,
                images=images)
    _write_artifact(out_dir, plan, {task.func_name: source}, {}, task, config)
    return BuildResult(artifact=out_dir, seconds=time.perf_counter() - started)


def conv_module(wl, weight: np.ndarray):
    """A Relax module computing the one conv `wl` (a ConvWorkload; NCHW input `x`, constant OIHW `weight`)."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((wl.n, wl.c, wl.h, wl.w), wl.dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.conv2d(x, relax.const(weight), strides=wl.stride, padding=wl.padding,
                                                  dilation=wl.dilation, groups=wl.groups))
        bb.emit_func_output(y)
    return bb.get()


def layout_weight(task: LayoutTask) -> np.ndarray:
    """The seeded weight of a layout task's conv, scaled to outputs of about unit size (so that F(4x4)'s rounding,
    ~1e-5 of the output magnitude, stays well inside the check's absolute tolerance)."""
    wl = task.workload
    rng = np.random.default_rng(0)
    return (rng.standard_normal((wl.o, wl.c, wl.kh, wl.kw)) / np.sqrt(wl.c * wl.kh * wl.kw)).astype(wl.dtype)


def _build_layout(task: LayoutTask, config: dict, out_dir: str) -> BuildResult:
    from .. import winograd
    from ..compile import extract_plan, lower_relax
    from ..target import get_device, tvm_target

    started = time.perf_counter()
    target = tvm_target(task.target_name)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            lowered = lower_relax(conv_module(task.workload, layout_weight(task)), target, "adreno",
                                  memory=task.memory, schedule_config=winograd.kernel_configs({task.key: config}))
            plan, sources, params = extract_plan(lowered, target, memory=task.memory,
                                                 device=get_device(task.target_name))
    except TVM_ERRORS as err:
        return _failure(err, started)
    refusal = _refusal(caught)
    if refusal:  # our schedule refused: TVM's would be measured in its place
        return BuildResult(error=refusal, seconds=time.perf_counter() - started)
    if any("winograd" in step.func for step in plan.steps) != bool(config["tile"]):
        return BuildResult(error=f"the plan's steps {[s.func for s in plan.steps]} are not layout tile "
                           f"{config['tile']}", seconds=time.perf_counter() - started)
    _write_artifact(out_dir, plan, sources, params, task, config)
    return BuildResult(artifact=out_dir, seconds=time.perf_counter() - started)


def _direct_conv(x: np.ndarray, w: np.ndarray, wl) -> np.ndarray:
    """A stride-1, dilation-1, groups-1 conv in float64 numpy (a layout task's reference)."""
    top, left, bottom, right = wl.padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    y = np.zeros((wl.n, wl.o, wl.oh, wl.ow))
    for i in range(wl.kh):
        for j in range(wl.kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + wl.oh, j:j + wl.ow], w[:, :, i, j].astype(np.float64))
    return y.astype(wl.dtype)


def reference_outputs(task: Task, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The unscheduled function built for the CPU by TVM's LLVM backend and run on `inputs`: an independent
    reference for every candidate of the task (a layout task: its conv in numpy)."""
    import tvm

    if isinstance(task, LayoutTask):
        return [_direct_conv(inputs[0], layout_weight(task), task.workload)]
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
    """Seeded inputs of every candidate of a task (a layout task: the conv's input only). Inputs stored in
    half-float images are rounded to half first, so the reference sees what the kernel reads."""
    return seeded_inputs(input_specs(task), seed)


def input_specs(task: Task) -> list[dict]:
    """The shape, dtype and storage dtype (an image's channel type) of each input of a task's candidates."""
    if isinstance(task, LayoutTask):
        wl = task.workload
        return [{"shape": [wl.n, wl.c, wl.h, wl.w], "dtype": wl.dtype, "storage": wl.dtype}]
    specs = _tensor_specs(task.func(), task.images)
    return [{"shape": s.shape, "dtype": s.dtype, "storage": s.image["channel_type"] if s.image else s.dtype}
            for s in specs[: len(specs) - task.n_outputs]]


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
