"""The compiler: model -> Relax -> Adreno lowering -> launch plan + OpenCL sources + host library.

`compile_model` is the one entry point: it imports the model (`frontend`), lowers it (`lower_relax`: layout planning
for textures, Winograd, our schedule families, TVM's for the rest), extracts the launch plan (`plan.py`) and writes
the artifact (`artifact.py`) with the host library.
"""

from __future__ import annotations

import hashlib
import os
import platform
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from . import __version__
from .artifact.format import KERNEL_DIR, PARAMS_NAME, PLAN_NAME, ArtifactWriter, Plan
from .costmodel.ranked_defaults import RankedDefaults
from .frontend.bind import bind_inputs, bound_entries
from .compiler.build_check import BuildCheck
from .frontend.empty import EmptyTensors
from .errors import AdrenoError, ModelError, UnsupportedOpError
from .frontend.importer import graph_inputs, load_model, to_relax
from .frontend.index_guards import OUTPUT, GuardedNodes
from .frontend.input_values import integer_ranges
from .compiler.host_library import export_host_library, param_order
from .artifact.index_checks import MANIFEST_KEY
from .compiler.lowered import LoweredFunctions
from .support.native_log import summarised_stderr
from .compiler.numpy_fold import fold_pass
from .targets.devices import describe
from .options import CompileOptions, Defaults, Indices, Memory, Precision, Schedules, Winograd
from .support.paths import TMPDIR_FLOOR_BYTES, regular_file, require_free_space
from .compiler.plan import bindings, extract_plan
from .records import TunedConfigs, default_memory
from .schedules import last_resort, schedule_pass, thread_bound
from .schedules.context import ScheduleContext
from .schedules.conv2d_winograd import kernel_configs, layout_config_in_space
from .artifact.weights import QuantizedWeights, WinogradWeights
from .compiler.winograd import rewrite_pass

Progress = Callable[[str], None]


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
    say = progress or (lambda msg: None)
    device = options.device()
    # first: LLVM writes the host library's objects there and ends the process when it cannot (no error to catch)
    require_free_space(tempfile.gettempdir(), TMPDIR_FLOOR_BYTES, "TMPDIR")

    start = time.perf_counter()
    say("loading model")
    onnx_model, model_name = load_model(model)
    model_bytes = onnx_model.SerializeToString()  # the model as given: `run --check` feeds it the bound values
    onnx_model, bound = bind_inputs(onnx_model, bind)
    say("importing to Relax")
    empty = EmptyTensors()
    quantized = QuantizedWeights()  # stored in their integer type, dequantized at load (adreno.artifact.weights)
    guarded = GuardedNodes()  # run-time indices clamped and checked (adreno.frontend.index_guards)
    mod = to_relax(onnx_model, options.input_shapes, empty, quantized,
                   guarded if options.indices is Indices.CHECKED else None)
    tuned = tuned_configs(options.records, options.precision, device.name)
    if orchestrator is not None:
        orchestrator.check(options)
    # memory, Winograd and defaults decided; checked again (fp16 needs textures)
    options = options.resolved(default_memory(tuned))
    memory, winograd, host = options.memory, options.winograd, options.host
    transformed = WinogradWeights()  # stored as their 3x3 source, transformed at load (adreno.artifact.weights)
    if options.defaults is Defaults.MODEL and options.schedules is Schedules.ADRENO:
        tuned.ranker = RankedDefaults()
    tvm_target = targets.tvm_target(device, host=host)
    ctx = ScheduleContext(device, tvm_target, options.staging, tuned)
    if orchestrator is not None and mod is not None:
        say("orchestrating: fission, candidates, costs, the BLP of each block")
        # the convs laid out first (Winograd stages; packed layouts in texture memory), so that they are primitives
        # the candidates group; `lower_relax`'s own step then makes the same choices and changes nothing more
        from .orchestrate.layouts import laid_out  # inside: orchestration's modules import this one

        imported = mod
        memory, mod = orchestrator.prepare(lambda m: laid_out(imported, ctx, m, winograd, transformed), model_name)
        options = replace(options, memory=memory)
    refusals, lowered, plan, sources, params, ranked, store = [], None, None, {}, {}, None, None
    if mod is None:
        say("every output is empty: no kernels, no host library")
    else:
        say(f"lowering for {device.name} ({memory} memory"
            f"{f', {len(tuned)} tuned workloads' if options.records else ''})")
        lowered = lower_relax(mod, ctx, options.schedules, memory=memory, winograd=winograd, refusals=refusals,
                              weights=transformed, fuse=orchestrator.fuse_pass() if orchestrator else None)
        for refusal in refusals:
            say(f"fallback: {refusal}; TVM's schedule runs it")
        ranked = tuned.ranker.summary() if tuned.ranker else None
        if ranked:
            say(f"defaults: {ranked['ranked']} kernels ranked by the analytical model, {ranked['changed']} differ "
                f"from the rule (slowest ranking {ranked['max_seconds']:.2f} s)")
        say("extracting the launch plan")
        store = LoweredFunctions()  # the plan's lowering of each function, reused by the host library's build
        plan, sources, params = extract_plan(lowered, tvm_target, memory=memory, device=device,
                                             precision=options.precision, weights=transformed, quantized=quantized,
                                             store=store)
    model_outputs = [o.name for o in onnx_model.graph.output]
    flags = [OUTPUT] if guarded.nodes else []  # the index flags: the plan's last output, not the model's
    plan = empty.complete(plan, [i.name for i in graph_inputs(onnx_model)], model_outputs + flags)
    checked_outputs = plan.outputs[:len(plan.outputs) - len(flags)]

    say("writing the artifact")
    with ArtifactWriter(output) as writer:
        writer.write_kernels(plan, sources)
        writer.write_json(PLAN_NAME, plan.to_json())
        writer.write_params(params)
        library = None
        if lowered is not None:
            say("building the host library")
            library = export_host_library(lowered, plan, tvm_target, writer.tmp, host, options.cc, store)
        import tvm

        manifest = {
            "model": model_name,
            "model_source": model_source(model, model_name),
            "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
            "target": device.name,
            "target_info": describe(device),
            "tvm_target": str(tvm_target),
            "memory": memory,
            "winograd": winograd,
            "defaults": options.defaults,
            "model_defaults": ranked,
            "staging": options.staging,
            "indices": options.indices,
            "precision": options.precision,
            "textures": plan.texture_summary(),
            "schedules": options.schedules,
            "records": str(Path(options.records).resolve()) if options.records else None,
            "tuned_kernels": len(tuned.applied),
            "records_elsewhere": tuned.elsewhere,  # key -> device of its record, where none is of the target
            "records_skipped": tuned.skipped,  # malformed, outside the space, or refused by a schedule
            "refused": [str(r) for r in refusals],
            "host": host,
            "host_library": library,
            "host_params": param_order(plan) if library else [],  # main(*inputs, *these) (adreno.compiler.host_library)
            "adreno_version": __version__,
            "tvm_version": tvm.__version__,
            "compiled_on": platform.node(),
            "compile_seconds": round(time.perf_counter() - start, 3),
            "sizes": artifact_sizes(writer.tmp, library),
            "weight_storage": weight_storage(plan),
            "bound": bound_entries(bound),
            "inputs": _io_entries(plan, plan.inputs, [i.name for i in graph_inputs(onnx_model)],
                                  integer_ranges(onnx_model, graph_inputs(onnx_model))),
            "outputs": _io_entries(plan, checked_outputs, model_outputs),
            **({MANIFEST_KEY: {"tensor": plan.outputs[-1], "nodes": guarded.nodes}} if flags else {}),
            "kernels": plan.kernel_count(),
            "empty_outputs": list(empty.outputs),  # no kernel writes them: zeros of their shape (frontend.empty)
            "orchestration": orchestrator.summary(plan) if orchestrator is not None and lowered is not None else None,
        }
        sealed = writer.seal(manifest)
        if build_check is not None:
            say("building the kernels on a local OpenCL device (the build check)")
            build_check(sealed, device)
        return writer.install()


def artifact_sizes(directory: Path, library: str | None) -> dict:
    """Bytes of what an app ships: the weight file, the kernel sources, the host library (before the manifest)."""
    kernels = directory / KERNEL_DIR
    return {"weights": (directory / PARAMS_NAME).stat().st_size,
            "kernels": sum(p.stat().st_size for p in kernels.iterdir()) if kernels.is_dir() else 0,
            "host_library": (directory / library).stat().st_size if library else 0}


def weight_storage(plan: Plan) -> dict:
    """How params.npz stores the params (`adreno.artifact.weights`): the count per stored dtype and per transform, how
    many are integer weights dequantized at load, and the
    bytes of the params as the kernels read them next to the bytes stored."""
    params = [t for t in plan.tensors.values() if t.kind == "param"]
    forms = [t.stored_weight for t in params]
    return {"dtypes": dict(Counter(f.dtype for f in forms)),
            "transforms": dict(Counter(f.transform.value for f in forms)),
            "quantized": sum(f.quantization is not None for f in forms),
            "param_bytes": sum(t.nbytes for t in params), "stored_bytes": sum(f.nbytes for f in forms)}


def tuned_configs(records: str | None, precision: Precision, target: str) -> TunedConfigs:
    """What the schedules read from `--records`: the best config per kernel key for the compile's precision,
    measured on `target` where the records have one (`TunedConfigs.load`)."""
    if not records:
        return TunedConfigs()
    if not Path(records).exists():
        raise AdrenoError(f"--records {records}: no such file (write one with `adreno tune`)")
    regular_file(records, "--records")  # a FIFO would block the load, a directory is no records file

    return TunedConfigs.load(records, precision, kernel_configs, layout_config_in_space, target)


def _io_entries(plan: Plan, tensors: list[str], onnx_names: list[str], ranges: dict | None = None) -> dict:
    """The model's inputs or outputs under their ONNX names (what the user's .npz files use), each with the plan
    tensor that holds it: names that are not C identifiers are renamed before import (`adreno.support.identifiers`: `0`
    -> `input_0`, `gpu_0/data_0` -> `gpu_0_data_0`) and outputs are bindings (`gv`). An integer input has the range
    a random run draws it from (`values`, `adreno.frontend.input_values`)."""
    names = onnx_names if len(onnx_names) == len(tensors) else tensors
    ranges = ranges or {}
    return {name: {"tensor": t, "shape": plan.tensors[t].shape, "dtype": plan.tensors[t].dtype,
                   **({"values": list(ranges[name])} if name in ranges else {})}
            for name, t in zip(names, tensors)}


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
