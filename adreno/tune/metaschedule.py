"""TVM MetaSchedule driven with our builder and runner: the baseline `tools/bench_search.py` compares against.

MetaSchedule's own LocalBuilder/LocalRunner cannot build or run OpenCL here (the wheel's runtime has no OpenCL), but
its design space and search strategies are separate from them. What works on apache-tvm 0.27 (measured):

- the design space: `post-order-apply` with the CUDA schedule rules and postprocessors (multi-level tiling,
  cross-thread reduction, auto-bind, auto-inline, unroll, ...) on an OpenCL target, mutators `MutateTileSize` and
  `MutateUnroll`;
- the `replay-func` search strategy: every candidate is a fresh random sample of that space.

What crashes the process (segfault in `tvm::ffi::ToJSONGraph`; the wheel cannot serialise a PrimFunc:
`tvm.ir.save_json(IRModule)` segfaults): the `evolutionary` and `replay-trace` strategies (their `pre_tuning`),
`tune_tir` (task initialisation), the JSON database, and the initialisation of `MutateThreadBinding`. Those are
refused here with an `AdrenoError` instead of being tried, so MetaSchedule's baseline is its space sampled at random,
without its XGBoost cost model.

Each candidate is lowered by `measure.build_scheduled` into a one-kernel artifact exactly like our own candidates and
measured through any `Runner`, with the same output check against the task's reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AdrenoError
from ..runners.interface import RunInput
from .builder import build_scheduled
from .task import Task

STRATEGIES = ("replay-func",)
BROKEN = {"evolutionary": "its pre_tuning serialises traces to JSON, which segfaults on the apache-tvm 0.27 wheel",
          "replay-trace": "its pre_tuning serialises traces to JSON, which segfaults on the apache-tvm 0.27 wheel"}


@dataclass
class Trial:
    """One MetaSchedule candidate: its measurement (seconds per repeat) or why it failed."""

    trial: int
    seconds: list[float] | None
    error: str | None
    stage: str | None
    build_seconds: float
    max_error: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.seconds)


def metaschedule_target(tvm_target):
    """The OpenCL target MetaSchedule schedules for: our target's device limits, no host (the host part is ours)."""
    import tvm

    keys = ("max_num_threads", "thread_warp_size", "max_shared_memory_per_block", "max_threads_per_block")
    attrs = {k: int(tvm_target.attrs[k]) for k in keys if tvm_target.attrs.get(k) is not None}
    return tvm.target.Target({"kind": "opencl", "device": "adreno", **attrs})


def design_space():
    """MetaSchedule's GPU design space generator, minus the mutator that crashes this wheel."""
    from tvm.s_tir import meta_schedule as ms

    return ms.space_generator.PostOrderApply(
        sch_rules=ms.ScheduleRule.create("cuda"), postprocs=ms.Postproc.create("cuda"),
        mutator_probs={ms.mutator.MutateTileSize(): 0.9, ms.mutator.MutateUnroll(): 0.1})


def tune(task: Task, runner, trials: int, batch: int = 8, seed: int = 0, repeat: int = 5, workdir: str = ".",
         strategy: str = "replay-func", progress=None) -> list[Trial]:
    """Measure `trials` MetaSchedule candidates of `task` through `runner` (batches of `batch`); `progress(trials
    so far, batch results)` after each batch. Candidates whose output does not match the reference are errors."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from ..targets.target import tvm_target  # inside: loads TVM at import

    if strategy in BROKEN:
        raise AdrenoError(f"MetaSchedule strategy {strategy!r} cannot run here: {BROKEN[strategy]}")
    if strategy not in STRATEGIES:
        raise AdrenoError(f"MetaSchedule strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")

    target = metaschedule_target(tvm_target(task.target_name))
    mod = tvm.IRModule({"main": task.func().with_attr("global_symbol", "main")})
    ctx = ms.TuneContext(mod=mod, target=target, space_generator=design_space(), search_strategy=strategy,
                         task_name=task.func_name, num_threads=1, rand_state=seed)
    ctx.pre_tuning(trials, batch, ctx.generate_design_space(), None, None)
    inputs = task.inputs(seed)
    reference = task.reference(inputs)
    done: list[Trial] = []
    try:
        while len(done) < trials:
            candidates = (ctx.generate_measure_candidates() or [])[: trials - len(done)]
            if not candidates:
                break
            builds = []
            for i, cand in enumerate(candidates):
                out_dir = f"{workdir}/ms-{len(done) + i}"
                builds.append(build_scheduled(task, cand.sch.mod["main"], out_dir, {"metaschedule": len(done) + i}))
            futures = [runner.submit(RunInput(b.artifact, inputs, reference, repeat=repeat)) if b.artifact else None
                       for b in builds]
            results = []
            for build, future in zip(builds, futures):
                trial = len(done) + 1
                if future is None:
                    done.append(Trial(trial, None, build.error, "build", build.seconds))
                    results.append(ms.runner.RunnerResult(None, build.error))
                    continue
                r = future.result()
                done.append(Trial(trial, r.seconds if r.ok else None, r.error, r.stage, build.seconds, r.max_error))
                results.append(ms.runner.RunnerResult(r.seconds if r.ok else None, None if r.ok else r.error))
            ctx.notify_runner_results(candidates, results)
            if progress is not None:
                progress(len(done), done[-len(candidates):])
    finally:
        ctx.post_tuning()
    return done

