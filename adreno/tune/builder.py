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
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..artifact.format import Plan, Step, TensorSpec, kernel_path
from ..compile import lower_relax
from ..errors import TVM_ERRORS
from ..support.processes import owned_temp_dir, spawn_pool
from ..compiler.local_arrays import LocalMemoryError
from ..options import Schedules
from ..compiler.plan import extract_plan, lower_primfunc, plan_storage
from ..compiler.private_arrays import PrivateArrayError
from ..runners.kernel_artifact import write_kernel_artifact
from ..runners.offline import seeded_inputs
from ..schedules.conv2d_winograd import kernel_configs
from ..schedules.family import Refused
from ..texture.tir import TextureLoweringError
from .native_build import export_candidate


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


def _failure(err: Exception, started: float) -> BuildResult:
    return BuildResult(error=f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}",
                       seconds=time.perf_counter() - started)


def build_kernel(task, config: dict, out_dir: str, native=None) -> BuildResult:
    """Schedule a kernel task's function with `config`, lower it, and write a one-step artifact to `out_dir` (with
    `native`, a `native_build.NativeBuild`, its TVM library too). A config the schedule refuses, or a lowering
    failure, is a BuildResult error, not an exception."""
    started = time.perf_counter()
    func = task.func()
    try:
        sch = task.schedule_family.apply(func, task.context({task.key: config}))
    except TVM_ERRORS as err:
        return _failure(err, started)
    if sch is None or isinstance(sch, Refused):  # our schedule refused: TVM's would run in its place
        return BuildResult(error=str(sch or "the schedule does not apply to this function"),
                           seconds=time.perf_counter() - started)
    return build_scheduled(task, sch.mod["main"], out_dir, config, started, native)


def build_scheduled(task, scheduled, out_dir: str, config: dict, started: float | None = None,
                    native=None) -> BuildResult:
    """Lower `scheduled` (the task's function, already scheduled: by our family with `config`, or by MetaSchedule)
    and write a one-step artifact to `out_dir`, its parameters in the task's images if it has any; with `native`
    (a `native_build.NativeBuild`) also the native artifact TVM's runtime measures (`native_build`). A lowering
    or library build failure is a BuildResult error. `started`: when the caller's part of the build began
    (perf_counter), so that BuildResult.seconds covers it."""
    from ..targets.target import tvm_target  # inside: loads TVM at import

    started = time.perf_counter() if started is None else started
    func = task.func()
    try:
        launches, workspaces, source = lower_primfunc(scheduled.with_attr("tirx.is_scheduled", True), task.func_name,
                                                      tvm_target(task.target_name), task.scopes)
    except (*TVM_ERRORS, TextureLoweringError, PrivateArrayError, LocalMemoryError) as err:
        return _failure(err, started)
    specs = _tensor_specs(func, task.images)
    for spec in specs[len(specs) - task.n_outputs:]:
        spec.kind = "output"
    tensors = {s.name: s for s in specs}
    steps = [Step(task.func_name, task.func_name, task.family, [s.name for s in specs], launches, workspaces)]
    inputs = [s.name for s in specs if s.kind == "input"]
    outputs = [s.name for s in specs if s.kind == "output"]
    storage, images = plan_storage(tensors, steps, with_images=True)
    plan = Plan(inputs, outputs, tensors, storage, {task.func_name: kernel_path(task.func_name)}, steps,
                images=images)
    write_kernel_artifact(out_dir, plan, {task.func_name: source}, {}, task.key, task.target_name, config)
    if native is not None:
        try:
            export_candidate(task, scheduled, out_dir, native)
        except (*TVM_ERRORS, OSError) as err:  # TVM's build, or the host compiler linking lib.so
            return _failure(err, started)
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


def layout_weight(task) -> np.ndarray:
    """The seeded weight of a layout task's conv, scaled to outputs of about unit size (so that F(4x4)'s rounding,
    ~1e-5 of the output magnitude, stays well inside the check's absolute tolerance)."""
    wl = task.workload
    rng = np.random.default_rng(0)
    return (rng.standard_normal((wl.o, wl.c, wl.kh, wl.kw)) / np.sqrt(wl.c * wl.kh * wl.kw)).astype(wl.dtype)


def build_layout(task, config: dict, out_dir: str, native=None) -> BuildResult:
    """A layout task's candidate: its conv's whole pipeline under the config's layout (see the module doc). Not as
    a TVM library (`native`): the TVM-native runner measures one function, a layout candidate is a pipeline."""
    if native is not None:
        return BuildResult(error="a layout candidate (a conv's whole pipeline) is not measured through TVM's "
                                 "runtime: tune with --no-layouts")
    started = time.perf_counter()
    ctx, refusals = task.context(kernel_configs({task.key: config})), []
    try:
        lowered = lower_relax(conv_module(task.workload, layout_weight(task)), ctx, Schedules.ADRENO,
                              memory=task.memory, refusals=refusals)
        plan, sources, params = extract_plan(lowered, ctx.target, memory=task.memory, device=ctx.device)
    except TVM_ERRORS as err:
        return _failure(err, started)
    if refusals:  # our schedule refused: TVM's would be measured in its place
        return BuildResult(error=str(refusals[0]), seconds=time.perf_counter() - started)
    if any("winograd" in step.func for step in plan.steps) != bool(config["tile"]):
        return BuildResult(error=f"the plan's steps {[s.func for s in plan.steps]} are not layout tile "
                           f"{config['tile']}", seconds=time.perf_counter() - started)
    write_kernel_artifact(out_dir, plan, sources, params, task.key, task.target_name, config)
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


def layout_reference(task, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """A layout task's reference: its conv in float64 numpy."""
    return [_direct_conv(inputs[0], layout_weight(task), task.workload)]


def kernel_reference(task, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The unscheduled function built for the CPU by TVM's LLVM backend and run on `inputs`: an independent
    reference for every candidate of a kernel task."""
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


def task_inputs(task, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs of every candidate of a task (`seeded_inputs` of its `input_specs`: inputs stored in half-float
    images are rounded to half first, so the reference sees what the kernel reads)."""
    return seeded_inputs(task.input_specs(), seed)


def layout_input_specs(task) -> list[dict]:
    """A layout task's candidates take the conv's input."""
    wl = task.workload
    return [{"shape": [wl.n, wl.c, wl.h, wl.w], "dtype": wl.dtype, "storage": wl.dtype}]


def kernel_input_specs(task) -> list[dict]:
    """The shape, dtype and storage dtype (an image's channel type) of each input of a kernel task's candidates."""
    specs = _tensor_specs(task.func(), task.images)
    return [{"shape": s.shape, "dtype": s.dtype, "storage": s.image["channel_type"] if s.image else s.dtype}
            for s in specs[: len(specs) - task.n_outputs]]


def _build(task, config: dict, out_dir: str, native) -> BuildResult:
    """A build worker's job (a module-level function: a task's `build` is a plain function on its class, which a
    bound method does not pickle by)."""
    return task.build(config, out_dir, native)


class Builder:
    """Builds candidates in worker processes (TVM lowering is CPU-bound and not thread-parallel). The workers die
    with the process that made the pool (`adreno.support.processes.die_with_parent`), so a SIGKILLed tuner leaves none
    behind. Candidate artifacts go to `workdir`, kept; without one, to a temporary directory removed by `close` (or,
    after a SIGKILL, by the next tuner's `owned_temp_dir`). With `native` (a
    `native_build.NativeBuild`) every candidate also gets its TVM library, for the TVM-native runner."""

    def __init__(self, workers: int | None = None, workdir: str | os.PathLike | None = None, native=None):
        self._own_workdir = workdir is None
        self.workdir = owned_temp_dir("adreno-tune-") if workdir is None else Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self.native = native
        self._pool = self._new_pool()
        self._counter = 0

    def _new_pool(self) -> futures.ProcessPoolExecutor:
        return spawn_pool(self.workers)

    def build(self, task, configs: list[dict]) -> list[BuildResult]:
        jobs = []
        for config in configs:
            self._counter += 1
            out = str(self.workdir / f"{os.getpid()}-{self._counter}")
            jobs.append(self._pool.submit(_build, task, config, out, self.native))
        results = []
        for job in jobs:
            try:
                results.append(job.result())
            except futures.process.BrokenProcessPool as err:  # a worker died (e.g. a crash in lowering)
                self._pool = self._new_pool()
                results.append(BuildResult(error=f"build worker died: {err}"))
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
