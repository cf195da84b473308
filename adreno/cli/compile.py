"""`adreno compile`: a model in, an artifact directory out (written completely or not at all)."""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ..api import default_output
from ..support.command_line import require_positive
from ..errors import AdrenoError
from ..frontend.bind import add_bind_argument, read_bind
from ..support.paths import creatable
from ..options import (CompileOptions, Defaults, Host, Indices, Memory, Precision, Schedules, Winograd,
                       add_staging_argument, enum_argument)
from ..artifact.shape_sets import parse_shape_sets
from .common import Progress, emit, megabytes
from .orchestrate import MeasureSite, add_max_size_argument, add_measure_arguments, cost_table


def register(sub, command) -> None:  # noqa: ARG001 - the register(sub, command) interface of adreno.cli.main
    p = command("compile", cmd_compile, "compile a model into a deployable artifact directory",
                "Compile MODEL (a bundled model name or an .onnx file) for an Adreno GPU. The artifact directory "
                "holds the OpenCL source of every kernel, the launch plan, the weights and the TVM host library; "
                "it is written completely or not at all.")
    p.add_argument("model", help="bundled model name (see `adreno models`) or path to an .onnx file")
    p.add_argument("-o", "--output", help="artifact directory to write (default: build/<model name>)")
    p.add_argument("--target", default="adreno-740", help="Adreno GPU: adreno-640/650/660/730/740/750/830 "
                   "(default adreno-740)")
    p.add_argument("--host", **enum_argument(Host), default=Host.ANDROID,
                   help="host CPU of the library: android (aarch64 phone, default) or native (this machine)")
    p.add_argument("--cc", help="compiler to link the host library (an NDK aarch64-linux-android<API>-clang for "
                   "--host android; default $TVM_NDK_CC; without one, lib.tar holds the objects)")
    p.add_argument("--input-shape", action="append", metavar="NAME:DIMS",
                   help="static shape for a model input with dynamic dimensions, e.g. input:1,3,224,224 (repeatable: "
                   "one per input; naming an input again starts another shape set, every set naming the same "
                   "inputs, and the artifact holds every set with its weights once, `adreno run` choosing the set "
                   "its input matches; see docs/shapes.md)")
    p.add_argument("-j", "--jobs", type=int, metavar="N",
                   help="with several shape sets: how many compile at once, each in a process of its own (default: "
                   "one per core; 1 compiles them one after another in this process)")
    add_bind_argument(p)
    p.add_argument("--memory", **enum_argument(Memory), default=None,
                   help="where tensors live on the GPU: texture (NCHW4c activations and OIHW4o weights in OpenCL "
                   "images; the default) or buffer (OpenCL buffers, the fallback); without --memory, --records of "
                   "buffer workloads only select buffer, and --orchestrate measures both and compiles the faster; "
                   "see docs/guide.md")
    p.add_argument("--precision", **enum_argument(Precision), default=Precision.FP32,
                   help="fp16 stores texture images as CL_HALF_FLOAT (arithmetic stays fp32); needs --memory texture")
    p.add_argument("--schedules", **enum_argument(Schedules, (Schedules.ADRENO, Schedules.TVM)),
                   default=Schedules.ADRENO,
                   help="adreno: our conv schedules first (default); tvm: TVM 0.27's default schedules only")
    p.add_argument("--records", help="tuning records from `adreno tune`: the best config of each workload is used, "
                   "among those measured on --target where the workload has any (else one line names the devices)")
    p.add_argument("--records-from-any-device", action="store_true",
                   help="apply records measured on other devices (where --target has none) without saying so")
    p.add_argument("--winograd", **enum_argument(Winograd), default=None,
                   help="Winograd for 3x3 stride-1 convs, on buffers or packed in textures: auto (F(4x4) or F(2x2) "
                   "where both channel counts are >= 64 and the output is >= 7x7; the default), f2/f4 (every "
                   "eligible conv), off (direct convs; the default with --schedules tvm). Tuned layout records, and "
                   "tuned direct kernels, override auto and off per conv")
    p.add_argument("--defaults", **enum_argument(Defaults), default=None,
                   help="knobs of kernels without --records: model (the analytical cost model ranks each kernel's "
                   "space for the target's device facts and its best legal config meeting the occupancy rule is "
                   "used; opt-in, not yet measured on a GPU) or rule (the family's rule default; the default). "
                   "The manifest's model_defaults lists the model's choices; records still win")
    add_staging_argument(p)
    p.add_argument("--image-max", type=int, metavar="PIXELS",
                   help="largest image width/height to use, e.g. a local check device's (PoCL: 8192): wider tensors "
                   "take another image scope or stay buffers (default: the target's limits, within 8192 where an "
                   "image scope fits)")
    p.add_argument("--trust-indices", dest="indices", action="store_const", const=Indices.TRUSTED,
                   default=Indices.CHECKED, help="no run-time check of gather and scatter indices: an index out of "
                   "range then reads or writes outside its tensor instead of failing the run in one line naming the "
                   "node (default: checked; see docs/indices.md for what the check costs)")
    p.add_argument("--no-build-check", action="store_true", help="do not build the kernels on a local OpenCL "
                   "device at the end of the compile (default: they are built, through the program cache, on a "
                   "device of the target's name or PoCL, so a kernel that cannot build fails the compile and a later "
                   "`adreno run` there loads them from the cache)")
    p.add_argument("--orchestrate", action="store_true",
                   help="choose the kernels as `adreno orchestrate` does (fission into primitives, candidate kernels "
                   "measured on --measure-device or --measure-tracker, the exact BLP of each block) and compile that "
                   "partition instead of TVM FuseOps'. Without --memory, the candidates are measured in both "
                   "memories and the memory whose choice is predicted faster is compiled; --memory texture or buffer "
                   "measures and compiles that one (texture: the packed layouts are planned first and the "
                   "candidates read images). --winograd applies first, its stages are primitives like any other. "
                   "Costs are read from and appended to --records, so a second compile measures nothing; see "
                   "docs/orchestrate.md")
    add_max_size_argument(p, "with --orchestrate: ")
    add_measure_arguments(p, "measure-", "with --orchestrate: ")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def records_elsewhere_line(manifest: dict) -> str:
    """One line saying how many workloads got records measured on devices other than the target ("" if none)."""
    from ..records import device_target  # inside: adreno --help does not need it

    elsewhere = manifest["records_elsewhere"]
    if not elsewhere:
        return ""
    devices = sorted({device_target(device) for device in elsewhere.values()})
    return (f"warning: {len(elsewhere)} workload(s) use records measured on {', '.join(devices)}, none on "
            f"{manifest['target']} (--records-from-any-device: allow this silently)")


def cmd_compile(args) -> int:
    from ..compiler.build_check import BuildCheck  # inside: adreno --help does not need it
    from ..cache import ProgramCache  # inside: loads pyopencl at import
    from ..compile import compile_model  # inside: adreno --help does not need it

    require_positive(args, "jobs")
    output = default_output(args.model) if args.output is None else args.output
    shape_sets = parse_shape_sets(args.input_shape)
    options = CompileOptions(target=args.target, host=args.host, cc=args.cc, input_shapes=shape_sets[0],
                             memory=args.memory, precision=args.precision, schedules=args.schedules,
                             records=args.records, winograd=args.winograd, image_max=args.image_max,
                             defaults=args.defaults, staging=args.staging, indices=args.indices)
    bind = read_bind(args.bind)
    progress = Progress(not (args.json or args.quiet))
    started = time.perf_counter()
    check = None if args.no_build_check else BuildCheck(ProgramCache())
    if len(shape_sets) > 1:
        return _compile_shape_sets(args, output, options, shape_sets, bind, progress, check)
    with _orchestrator(args, options, progress) as orchestrator:
        path = compile_model(args.model, output, options, progress=progress, bind=bind, build_check=check,
                             orchestrator=orchestrator)
    progress.finish_step()
    manifest = json.loads((path / "manifest.json").read_text())
    summary = {"artifact": str(path), "target": manifest["target"], "kernels": manifest["kernels"],
               "memory": manifest["memory"], "tuned_kernels": manifest["tuned_kernels"],
               "host_library": manifest["host_library"], "records_skipped": manifest["records_skipped"],
               "records_elsewhere": manifest["records_elsewhere"], "bound": list(manifest["bound"]),
               "sizes": manifest["sizes"], "seconds": round(time.perf_counter() - started, 2),
               "build_check": check.result.to_json() if check else None}
    tuned = f", {manifest['tuned_kernels']} tuned workloads" if args.records else ""
    elsewhere = records_elsewhere_line(manifest)
    if elsewhere and not args.records_from_any_device:
        print(elsewhere, file=sys.stderr)
    if manifest["records_skipped"]:
        tuned += f" ({manifest['records_skipped']} records skipped: malformed or outside this version's knobs)"
    if manifest["bound"]:
        tuned += f", bound inputs {', '.join(manifest['bound'])}"
    library = manifest["host_library"] or "none (nothing to compute)"
    if manifest.get("orchestration"):
        tuned += f", {orchestration_line(manifest['orchestration'])}"
    sizes = manifest["sizes"]
    wide = manifest["weight_storage"].get("quantized_stored_wide", 0)
    summary["quantized_stored_wide"] = wide
    wide_line = (f" ({wide} quantized weight(s) stored as the wide values the kernels read: the compile changed them "
                 "past recognition; outputs are right, the file is larger)" if wide else "")
    emit(args, summary, f"compiled {manifest['model']} for {manifest['target']} ({manifest['memory']} memory): "
                         f"{manifest['kernels']} kernels{tuned}, host library {library} -> {path} "
                         f"({summary['seconds']} s)\n  size: weights {megabytes(sizes['weights'])}{wide_line}, "
                         f"kernels {megabytes(sizes['kernels'])}, host library {megabytes(sizes['host_library'])}"
                         f"\n  {check.result.line() if check else 'build check: off (--no-build-check)'}")
    return 0


def _compile_shape_sets(args, output, options, shape_sets, bind, progress, check) -> int:
    """`adreno compile` of several shape sets into one artifact (`adreno.compile_shapes`)."""
    from ..compile_shapes import compile_shape_sets, set_summaries  # inside: adreno --help does not need it

    if args.orchestrate:
        raise AdrenoError("--orchestrate compiles one shape set; give each input one --input-shape")
    started = time.perf_counter()
    path, checks = compile_shape_sets(args.model, output, options, shape_sets, progress=progress, bind=bind,
                                      build_check=check, jobs=args.jobs)
    progress.finish_step()
    manifest = json.loads((path / "manifest.json").read_text())
    sets = set_summaries(path)
    for summary, result in zip(sets, checks):
        summary["build_check"] = result.to_json() if result is not None else None
    sizes = manifest["sizes"]
    summary = {"artifact": str(path), "target": manifest["target"], "memory": manifest["memory"],
               "shape_sets": sets, "kernels_stored": manifest["kernels_stored"], "sizes": sizes,
               "seconds": round(time.perf_counter() - started, 2)}
    lines = [f"compiled {manifest['model']} for {manifest['target']} ({manifest['memory']} memory) at "
             f"{len(sets)} shape sets, {manifest['kernels_stored']} kernel files stored -> {path} "
             f"({summary['seconds']} s)",
             f"  size: weights {megabytes(sizes['weights'])} (once), kernels {megabytes(sizes['kernels'])}, host "
             f"libraries {megabytes(sizes['host_library'])}"]
    for index, (entry, result) in enumerate(zip(sets, checks)):
        lines.append(f"  set {index}: {entry['label']}: {entry['kernels']} kernels; "
                     f"{result.line() if result else 'build check: off (--no-build-check)'}")
    emit(args, summary, "\n".join(lines))
    return 0


@contextmanager
def _orchestrator(args, options, progress):
    """The `Orchestrator` of `--orchestrate` (None without it), its options checked before anything is measured."""
    if not args.orchestrate:
        yield None
        return
    from ..orchestrate.orchestrator import Orchestrator  # inside: loads TVM and scipy at import

    require_positive(args, "max_size")
    site = MeasureSite.from_args(args, "measure-")
    memories = site.memories(options.memory)
    Orchestrator.check_options(options, memories)  # before a device or a farm is opened
    if args.records and not Path(args.records).exists():
        # the costs are appended to it; the compile reads its tuning records too (missing folders made, as an
        # append to the records makes them)
        records = creatable(args.records, "--records")
        records.parent.mkdir(parents=True, exist_ok=True)
        records.touch()
    with cost_table(args.records, site, options.target, 5, progress, memories[0]) as table:
        yield Orchestrator([table.in_memory(m) for m in memories], args.max_size, progress=progress)


def orchestration_line(summary: dict) -> str:
    """The orchestration in a few words: kernels chosen, candidates measured, the predicted total."""
    from ..orchestrate.orchestrator import milliseconds  # inside: loads TVM and scipy at import

    predicted = summary["predicted_run_s"]
    fallbacks = f", {len(summary['fallbacks'])} blocks on FuseOps' partition" if summary["fallbacks"] else ""
    memories = summary["memories"]
    others = "; ".join(f"in {memory} {milliseconds(seconds)}" for memory, seconds in memories.items()
                       if memory != summary["memory"])
    return (f"orchestrated: {len(summary['kernels'])} chosen kernels of {summary['candidates']} candidates "
            f"({summary['measured_now']} measured now), a run predicted {milliseconds(predicted)}"
            f"{f' ({others})' if others else ''}{fallbacks}")
