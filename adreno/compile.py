"""The compiler's pipeline: model -> Relax -> Adreno lowering -> launch plan + OpenCL sources + host library.

`compile_model` is the one entry point, and reads as its stages in order: load the model and bind its inputs
(`load_bound`), import it to Relax (`import_to_relax`), read the knob source from the records (`knob_source`: the
options' memory, Winograd and defaults are then decided), orchestrate its kernels when asked (`orchestrate`), lower it
(`lower`: `lower_relax`, i.e. layout planning for textures, Winograd, our schedule families, TVM's for the rest),
extract the launch plan (`extract`, then `completed` with the outputs no kernel writes), write the artifact with the
host library and its `manifest`, and build its kernels on a local OpenCL device (the build check).

Each stage is a function of explicit values that returns explicit values (a frozen dataclass where it returns
several), so a caller compiling one model several times (`adreno.compile_shapes`) can run the stages it shares once.
Every progress line is a `ProgressLine`, said by `compile_model` alone: the CLI prints them as steps and
tools/bench_compile.py times the stages by their prefixes.
"""

from __future__ import annotations

import hashlib
import os
import platform
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import numpy as np

from . import __version__
from .artifact.format import PLAN_NAME, ArtifactWriter, Plan
from .artifact.index_checks import MANIFEST_KEY
from .artifact.weights import QuantizedWeights, WinogradWeights
from .compiler.build_check import BuildCheck
from .compiler.host_library import export_host_library, param_order
from .compiler.lowered import LoweredFunctions
from .compiler.manifest import artifact_sizes, io_entries, weight_storage
from .compiler.numpy_fold import fold_pass
from .compiler.plan import bindings, extract_plan
from .compiler.progress import Progress, ProgressLine, sayer
from .compiler.winograd import rewrite_pass
from .costmodel.ranked_defaults import RankedDefaults
from .errors import AdrenoError, ModelError, UnsupportedOpError
from .frontend.bind import bind_inputs, bound_entries
from .frontend.empty import EmptyTensors
from .frontend.importer import graph_inputs, load_model, to_relax
from .frontend.index_guards import OUTPUT, GuardedNodes
from .frontend.input_values import integer_ranges
from .options import CompileOptions, Defaults, Indices, Memory, Precision, Schedules, Winograd
from .records import TunedConfigs, default_memory
from .schedules import last_resort, schedule_pass, thread_bound
from .schedules.context import ScheduleContext
from .schedules.conv2d_winograd import kernel_configs, layout_config_in_space
from .support.native_log import summarised_stderr
from .support.paths import TMPDIR_FLOOR_BYTES, regular_file, require_free_space
from .targets.devices import describe


def compile_model(model, output: str | os.PathLike, options: CompileOptions | None = None,
                  progress: Progress | None = None, bind: Mapping[str, np.ndarray] | None = None,
                  build_check: BuildCheck | None = None, orchestrator=None) -> Path:
    """Compile `model` (a zoo name, an .onnx path or an onnx.ModelProto) into an artifact directory.

    `bind` maps graph inputs to values baked into the compile (`adreno.frontend.bind`; `--bind`). It is an argument
    next to the model, not a `CompileOptions` field: the values are the model's data (they change what it computes, like
    its initializers), while the options say what to compile for (target, memory, precision, ...), a frozen value
    of small fields that tuning and the records share across models.

    `build_check` (`adreno.compiler.build_check`; `adreno compile` passes one unless `--no-build-check`) builds the
    finished artifact's programs on a local OpenCL device before it is moved into place (its result:
    `build_check.result`).

    `orchestrator` (`adreno.orchestrate.orchestrator.Orchestrator`; `--orchestrate`) replaces FuseOps' partition
    with the kernels a binary linear program chose on costs measured on a device, and picks the memory when it
    measures more than one (the options' memory, when given, must be one of them); the manifest's `orchestration`
    lists them.

    Nothing is left at `output` unless the whole compile succeeds, the build check included (the artifact is written
    to a temporary sibling directory and renamed into place at the end)."""
    from .targets import target as targets  # inside: loads TVM at import

    options = options or CompileOptions()
    say = sayer(progress)
    device = options.device()
    # first: LLVM writes the host library's objects there and ends the process when it cannot (no error to catch)
    require_free_space(tempfile.gettempdir(), TMPDIR_FLOOR_BYTES, "TMPDIR")
    started = time.perf_counter()

    say(ProgressLine.LOADING)
    loaded = load_bound(model, bind)
    say(ProgressLine.IMPORTING)
    imported = import_to_relax(loaded, options)
    tuned = knob_source(options, device.name)
    if orchestrator is not None:
        orchestrator.check(options)
    options = options.resolved(default_memory(tuned))  # memory, Winograd and defaults decided; checked again
    ctx = ScheduleContext(device, targets.tvm_target(device, host=options.host), options.staging, tuned)
    transformed = WinogradWeights()  # stored as their 3x3 source, transformed at load (adreno.artifact.weights)
    module = imported.module
    if orchestrator is not None and module is not None:
        say(ProgressLine.ORCHESTRATING)
        chosen = orchestrate(orchestrator, module, ctx, options, transformed, loaded.name)
        options, module = replace(options, memory=chosen.memory), chosen.module

    lowered, kernels = None, Kernels.none()
    if module is None:
        say(ProgressLine.NOTHING_TO_LOWER)
    else:
        say(ProgressLine.LOWERING_TUNED if options.records else ProgressLine.LOWERING, device=device.name,
            memory=options.memory, tuned=len(tuned))
        lowered = lower(module, ctx, options, transformed, orchestrator)
        for refusal in lowered.refusals:
            say(ProgressLine.FALLBACK, refusal=refusal)
        if lowered.ranked:
            say(ProgressLine.RANKED, **lowered.ranked)
        say(ProgressLine.EXTRACTING)
        kernels = extract(lowered, ctx, options, transformed, imported.quantized)
    plan = completed(kernels.plan, loaded, imported)

    say(ProgressLine.WRITING)
    with ArtifactWriter(output) as writer:
        writer.write_kernels(plan, kernels.sources)
        writer.write_json(PLAN_NAME, plan.to_json())
        writer.write_params(kernels.params)
        library = None
        if lowered is not None:
            say(ProgressLine.HOST_LIBRARY)
            library = export_host_library(lowered.module, plan, ctx.target, writer.tmp, options.host, options.cc,
                                          kernels.store)
        orchestration = orchestrator.summary(plan) if orchestrator is not None and lowered is not None else None
        sealed = writer.seal(manifest(loaded, imported, plan, options, ctx, lowered, library, orchestration,
                                      writer.tmp, started))
        if build_check is not None:
            say(ProgressLine.BUILD_CHECK)
            build_check(sealed, device)
        return writer.install()


# --- the stages, in order ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadedModel:
    """The model as the compile takes it: the ONNX graph with the bound inputs baked in (`bound`: name -> value,
    `adreno.frontend.bind`), its name, where it came from (`model_source`) and the SHA-256 of the model as given,
    before binding (`run --check` finds the reference model by its source, checks it by the digest and feeds it the
    bound values)."""

    onnx: object  # onnx.ModelProto
    name: str
    source: dict
    sha256: str
    bound: dict


def load_bound(model, bind: Mapping[str, np.ndarray] | None) -> LoadedModel:
    """Load and check `model` (a zoo name, an .onnx path or a ModelProto) and bake `bind`'s values into it."""
    onnx_model, name = load_model(model)
    sha256 = hashlib.sha256(onnx_model.SerializeToString()).hexdigest()
    onnx_model, bound = bind_inputs(onnx_model, bind)
    return LoadedModel(onnx_model, name, model_source(model, name), sha256, bound)


@dataclass(frozen=True)
class ImportedModel:
    """The Relax module (None when every output is empty: nothing to lower) and what the import collected for the
    later stages: the outputs no kernel writes (`adreno.frontend.empty`), the integer weights stored in their
    integer type and dequantized at load (`adreno.artifact.weights`), and the nodes whose run-time indices are
    clamped and checked (`adreno.frontend.index_guards`; under `--indices checked` only)."""

    module: object | None
    empty: EmptyTensors
    quantized: QuantizedWeights
    guarded: GuardedNodes


def import_to_relax(loaded: LoadedModel, options: CompileOptions) -> ImportedModel:
    """The Relax module of the loaded model at the options' input shapes."""
    empty, quantized, guarded = EmptyTensors(), QuantizedWeights(), GuardedNodes()
    module = to_relax(loaded.onnx, options.input_shapes, empty, quantized,
                      guarded if options.indices is Indices.CHECKED else None)
    return ImportedModel(module, empty, quantized, guarded)


def knob_source(options: CompileOptions, target: str) -> TunedConfigs:
    """Where the compile's schedules get their knobs: the records' best configs for `target` (`tuned_configs`), and
    the defaults ranked by the analytical model under `--defaults model` (our schedules only; TVM's take no knobs).
    The ranker is decided here, from the options, so that it is part of the knob source from the start."""
    ranked = options.defaults is Defaults.MODEL and options.schedules is Schedules.ADRENO
    return tuned_configs(options.records, options.precision, target, RankedDefaults() if ranked else None)


def tuned_configs(records: str | None, precision: Precision, target: str, ranker=None) -> TunedConfigs:
    """What the schedules read from `--records`: the best config per kernel key for the compile's precision,
    measured on `target` where the records have one (`TunedConfigs.load`); `ranker` as `TunedConfigs` takes it."""
    if not records:
        return TunedConfigs(ranker=ranker)
    if not Path(records).exists():
        raise AdrenoError(f"--records {records}: no such file (write one with `adreno tune`)")
    regular_file(records, "--records")  # a FIFO would block the load, a directory is no records file

    return TunedConfigs.load(records, precision, kernel_configs, layout_config_in_space, target, ranker)


@dataclass(frozen=True)
class Orchestrated:
    """The memory the orchestrator chose and the Relax module it emitted, for `lower` to lower."""

    memory: Memory
    module: object


def orchestrate(orchestrator, module, ctx: ScheduleContext, options: CompileOptions, weights: WinogradWeights,
                name: str) -> Orchestrated:
    """The kernels `orchestrator` chooses for `module` (see `compile_model`). The convs are laid out first (Winograd
    stages; packed layouts in texture memory), so that they are primitives the candidates group; `lower_relax`'s own
    step then makes the same choices and changes nothing more."""
    from .orchestrate.layouts import laid_out  # inside: orchestration's modules import this one

    memory, emitted = orchestrator.prepare(lambda m: laid_out(module, ctx, m, options.winograd, weights), name)
    return Orchestrated(memory, emitted)


@dataclass(frozen=True)
class Lowered:
    """The lowered module (a flat dataflow of `call_tir`), the functions our schedules refused (`Refused` values:
    TVM's schedule runs them) and the ranked defaults' account (`RankedDefaults.summary`; None without a ranker)."""

    module: object
    refusals: tuple
    ranked: dict | None


def lower(module, ctx: ScheduleContext, options: CompileOptions, weights: WinogradWeights, orchestrator) -> Lowered:
    """`lower_relax` with the decided options, FuseOps replaced by the orchestrator's pass when there is one."""
    refusals = []
    lowered = lower_relax(module, ctx, options.schedules, memory=options.memory, winograd=options.winograd,
                          refusals=refusals, weights=weights,
                          fuse=orchestrator.fuse_pass() if orchestrator is not None else None)
    ranker = ctx.knobs.ranker  # the compile's knob source is `knob_source`'s `TunedConfigs`
    return Lowered(lowered, tuple(refusals), ranker.summary() if ranker is not None else None)


@dataclass(frozen=True)
class Kernels:
    """The launch plan (None before `completed` when nothing was lowered), the OpenCL sources per program, the params'
    values and each function's lowering (`adreno.compiler.lowered`), which the host library's build reuses."""

    plan: Plan | None
    sources: dict
    params: dict
    store: LoweredFunctions | None

    @staticmethod
    def none() -> Kernels:
        """What a model whose outputs are all empty compiles to: no kernel, no param."""
        return Kernels(None, {}, {}, None)


def extract(lowered: Lowered, ctx: ScheduleContext, options: CompileOptions, weights: WinogradWeights,
            quantized: QuantizedWeights) -> Kernels:
    """The launch plan, sources and params of the lowered module (`adreno.compiler.plan`)."""
    store = LoweredFunctions()
    plan, sources, params = extract_plan(lowered.module, ctx.target, memory=options.memory, device=ctx.device,
                                         precision=options.precision, weights=weights, quantized=quantized,
                                         store=store)
    return Kernels(plan, sources, params, store)


def completed(plan: Plan | None, loaded: LoadedModel, imported: ImportedModel) -> Plan:
    """The plan with the model's inputs and outputs, the empty ones included (zeros of their shape,
    `adreno.frontend.empty`), and the index flags as its last output where indices are checked."""
    outputs = [o.name for o in loaded.onnx.graph.output] + ([OUTPUT] if imported.guarded.nodes else [])
    return imported.empty.complete(plan, [i.name for i in graph_inputs(loaded.onnx)], outputs)


def manifest(loaded: LoadedModel, imported: ImportedModel, plan: Plan, options: CompileOptions,
             ctx: ScheduleContext, lowered: Lowered | None, library: str | None, orchestration: dict | None,
             directory: Path, started: float) -> dict:
    """What manifest.json says of the compile (`directory`: the artifact being written, its files but the manifest
    there; `started`: `time.perf_counter()` at the compile's start)."""
    import tvm

    inputs, model_outputs = graph_inputs(loaded.onnx), [o.name for o in loaded.onnx.graph.output]
    guarded = imported.guarded.nodes  # the index flags: the plan's last output, not the model's (`completed`)
    checked_outputs = plan.outputs[:-1] if guarded else plan.outputs
    tuned: TunedConfigs = ctx.knobs  # `knob_source`'s
    return {
        "model": loaded.name,
        "model_source": loaded.source,
        "model_sha256": loaded.sha256,
        "target": ctx.device.name,
        "target_info": describe(ctx.device),
        "tvm_target": str(ctx.target),
        "memory": options.memory,
        "winograd": options.winograd,
        "defaults": options.defaults,
        "model_defaults": lowered.ranked if lowered is not None else None,
        "staging": options.staging,
        "indices": options.indices,
        "precision": options.precision,
        "textures": plan.texture_summary(),
        "schedules": options.schedules,
        "records": str(Path(options.records).resolve()) if options.records else None,
        "tuned_kernels": len(tuned.applied),
        "records_elsewhere": tuned.elsewhere,  # key -> device of its record, where none is of the target
        "records_skipped": tuned.skipped,  # malformed, outside the space, or refused by a schedule
        "refused": [str(r) for r in lowered.refusals] if lowered is not None else [],
        "host": options.host,
        "host_library": library,
        "host_params": param_order(plan) if library else [],  # main(*inputs, *these) (adreno.compiler.host_library)
        "adreno_version": __version__,
        "tvm_version": tvm.__version__,
        "compiled_on": platform.node(),
        "compile_seconds": round(time.perf_counter() - started, 3),
        "sizes": artifact_sizes(directory, library),
        "weight_storage": weight_storage(plan, imported.quantized),
        "bound": bound_entries(loaded.bound),
        "inputs": io_entries(plan, plan.inputs, [i.name for i in inputs], integer_ranges(loaded.onnx, inputs)),
        "outputs": io_entries(plan, checked_outputs, model_outputs),
        **({MANIFEST_KEY: {"tensor": plan.outputs[-1], "nodes": guarded}} if guarded else {}),
        "kernels": plan.kernel_count(),
        "empty_outputs": list(imported.empty.outputs),  # no kernel writes them: zeros of their shape (frontend.empty)
        "orchestration": orchestration,
    }


def model_source(model, model_name: str) -> dict:
    """Where the model came from, so `adreno run --check` can find the reference model again."""
    from .frontend import zoo  # inside: loads onnx at import

    if isinstance(model, (str, os.PathLike)) and str(model) in zoo.MODELS:
        return {"zoo": model_name, "seed": 0}
    if isinstance(model, (str, os.PathLike)):
        return {"path": str(Path(model).resolve())}
    return {}


def lower_relax(mod, ctx, schedules: Schedules = Schedules.ADRENO, memory: Memory = Memory.BUFFER,
                winograd: Winograd = Winograd.OFF, refusals: list | None = None, weights=None, fuse=None):
    """Run the Adreno Relax legalization pipeline (library dispatch, legalize, fuse, schedules) for the
    `ScheduleContext` `ctx` (`adreno.schedules.context`: device, TVM target, staging policy, knob source).

    With schedules adreno our families (`adreno.schedules.FAMILIES`, with tuned knobs from `ctx.knobs`) get
    the first chance at every function and TVM's dlight rules schedule the rest (also what a family refuses: each
    refusal is appended to `refusals` when given); tvm keeps TVM 0.27's defaults (for comparisons); both end with
    the last resort (`adreno.schedules.last_resort`: dlight's reduction rules, checked against the device; what it
    refuses is appended to `refusals` too); none stops before any schedule (what the tuner extracts tasks from).
    The result's `main` is a flat dataflow of `call_tir`; any other call left there is an op we cannot lower.
    `weights` (an `adreno.artifact.weights.WinogradWeights`) collects the Winograd-transformed weights, for
    `extract_plan`. `fuse` is a pass run instead of TVM's FuseOps (`adreno.orchestrate.emit.fuse_within`)."""
    import tvm
    from tvm.relax.backend.adreno import pipeline

    tvm_target, ours = ctx.target, []
    if schedules is not Schedules.NONE:  # TVM's hand-written GPU kernels (scatter) are scheduled already
        ours = [thread_bound.mark_pass()]
    if schedules is Schedules.ADRENO:
        ours.append(schedule_pass(ctx, refusals))
    with tvm_target:
        if memory is Memory.TEXTURE:
            from .texture.planning import relax_passes  # inside: loads TVM at import

            passes = relax_passes(ctx, ours, default_schedules=schedules is not Schedules.NONE, winograd=winograd,
                                  weights=weights, fuse=fuse, refusals=refusals)
        else:
            passes = pipeline.library_dispatch_passes(tvm_target) + pipeline.legalize_passes(tvm_target)
            # batch norms' constant arithmetic in numpy, right after TVM decomposes them (adreno.compiler.numpy_fold)
            decomposed = next(i for i, p in enumerate(passes) if p.info.name == "DecomposeOps") + 1
            passes.insert(decomposed, fold_pass())
            if fuse is not None:
                passes = [fuse if p.info.name == "FuseOps" else p for p in passes]
            # TVM's dlight default-schedule passes close the list: its Adreno rules, then its reduction rules, which
            # our last resort replaces (`adreno.schedules.last_resort`: checked, with dlight's Fallback after them)
            dlight_defaults = [passes[-2], last_resort.schedule_pass(ctx, refusals)]
            passes = passes[:-2] + ours + ([] if schedules is Schedules.NONE else dlight_defaults)
            # Relax-level rewrite of eligible 3x3 stride-1 convs before legalization (mode and tuned layout records)
            passes = [rewrite_pass(winograd, ctx.knobs, weights)] + passes
        with summarised_stderr():  # legalization's C++ warnings, once per Gather (adreno.support.native_log)
            try:
                lowered = tvm.transform.Sequential(passes)(mod)
            except ValueError as err:  # TVM's operator definitions refuse shapes they cannot compute (topi's checks)
                raise ModelError(f"TVM cannot lower the model at these shapes: {str(err).strip().splitlines()[0]}; "
                                 "check --input-shape against the sizes the model was made for") from None
    if schedules is Schedules.NONE:
        return lowered
    call_tir = tvm.ir.Op.get("relax.call_tir")
    for binding in bindings(lowered["main"]):
        value = binding.value
        if isinstance(value, tvm.ir.expr.Call) and value.op != call_tir:
            name = getattr(value.op, "name", str(value.op))
            raise UnsupportedOpError(f"operator {name} (producing {binding.var.name}) has no lowering for Adreno "
                                     "in this version; replace it in the model or file an issue with the model")
    return lowered
