"""`adreno run`: an artifact on a local OpenCL device (the launch plan, or TVM's runtime), timed and checked."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from ..api import check_outputs, model_inputs, shape_set_of
from ..artifact.format import Artifact
from ..support.command_line import require_positive
from ..errors import AdrenoError
from ..artifact.npz_files import NPY_MAGIC, NpzUnreadable, read_npz
from ..options import Runtime, enum_argument
from ..support.paths import output_file, regular_file
from ..artifact.shape_sets import parse_shape_sets
from .common import Progress, add_artifact_argument, add_device_argument, emit, error_line


def register(sub, command) -> None:  # noqa: ARG001 - the register(sub, command) interface of adreno.cli.main
    p = command("run", cmd_run, "run an artifact on a local OpenCL device, time each kernel, check the output",
                "Run ARTIFACT on an OpenCL device, through pyopencl (its launch plan) or with --runtime tvm through "
                "TVM's runtime (its host library): builds its programs, runs it once, optionally checks the output "
                "against onnxruntime on the same input, then times --repeat runs and prints a per-kernel table.")
    add_artifact_argument(p)
    add_device_argument(p)
    p.add_argument("--check", action="store_true", help="compare the output with onnxruntime on the same input "
                   "(exit status 1 on a mismatch)")
    p.add_argument("--runtime", **enum_argument(Runtime), default=Runtime.PLAN, help="plan (default): the launch plan "
                   "through pyopencl; tvm: the host library (lib.so, an artifact compiled with --host native) through "
                   "TVM's Relax VM and adreno's OpenCL plugin, the program a phone app runs")
    p.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    p.add_argument("--input", help=".npz file with one array per model input (default: seeded random input: "
                   "floats standard-normal; an integer input that indexes a Gather (token ids, token types) within "
                   "the table's size, every other integer or bool input (a mask, a flag) 0 or 1; the manifest's "
                   "inputs list each range as values)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--input-shape", action="append", metavar="NAME:DIMS", help="of an artifact of several shape sets, "
                   "the set the random input takes (default: the first); --input runs the set its arrays match")
    p.add_argument("--reference", help="ONNX model for --check (default: the model the artifact was compiled from)")
    p.add_argument("--rtol", type=float, default=None, help="--check tolerance relative to the output's largest "
                   "magnitude (default 1e-3; 5e-2 for a --precision fp16 artifact, whose images hold half floats)")
    p.add_argument("--atol", type=float, default=1e-4, help="--check absolute tolerance (default 1e-4)")
    p.add_argument("--output", help="write the outputs to this .npz file")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="wall-clock limit of the whole "
                   "run (build, runs, --check's onnxruntime reference); past it, or at Ctrl-C, the run stops at once "
                   "(default 300)")
    p.add_argument("--top", type=int, default=15, help="kernels shown in the table (default 15)")
    p.add_argument("--no-cache", action="store_true", help="build programs from source, bypassing the program cache")
    p.add_argument("--unchecked", action="store_true", help="skip comparing every file's size and SHA-256 with the "
                   "manifest (paths and the launch plan are still checked); for artifacts edited by hand")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def _load_inputs(args, artifact) -> tuple:
    """(the artifact's shape set that runs, its inputs): the set `--input`'s arrays match
    (`adreno.artifact.shape_sets`), or without --input the one `--input-shape` names, with seeded random inputs of its
    shapes."""
    where = f"--input {args.input}"
    arrays = None if not args.input else _read_npz(regular_file(args.input, "--input"))
    if arrays is None and args.input_shape:
        shape_sets = parse_shape_sets(args.input_shape)
        if len(shape_sets) > 1:
            raise AdrenoError("--input-shape: a run takes one shape set; name each input once")
        artifact = artifact.for_inputs(shape_sets[0])
    else:
        artifact = shape_set_of(artifact, arrays, where)
    return artifact, model_inputs(artifact, arrays, args.seed, where)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz file (`read_npz`: a damaged or foreign file, or a lone .npy, is one clear error)."""
    try:
        return read_npz(path)
    except NpzUnreadable as err:
        with open(path, "rb") as handle:
            lone_npy = handle.read(len(NPY_MAGIC)) == NPY_MAGIC
        if lone_npy:
            raise AdrenoError(f"--input {path} holds one unnamed array (.npy); save the inputs with "
                              "numpy.savez(FILE, NAME=array) so each has its input's name") from None
        raise AdrenoError(f"--input {err}") from None


def cmd_run(args) -> int:
    """`adreno run` under --timeout: a spinning kernel or a hung driver call ends in one line, not a hang."""
    from ..support.deadline import deadline  # inside: adreno --help does not need it

    require_positive(args, "repeat", "rtol", "atol", "top", "timeout", "seed",
                     allow_zero=("rtol", "atol", "top", "seed"))
    output = None if args.output is None else output_file(args.output, "--output")
    if output is not None and Path(args.artifact).resolve() in output.resolve().parents:
        raise AdrenoError(f"--output {output} is inside the artifact {args.artifact}, whose files are checked at "
                          "load (writing there would break it): write the outputs elsewhere")
    with deadline(args.timeout, f"run of {args.artifact}", error_line):
        return _run_artifact(args, output)


def _executor(runtime: Runtime, artifact, device, cache):
    """The executor of `runtime` for `artifact` on a local OpenCL device (`cache`: the program cache, which only the
    launch plan's executor uses)."""
    if runtime is Runtime.TVM:
        from ..native.vm_executor import VmExecutor  # inside: adreno --help does not need it

        return VmExecutor(artifact, device)
    from ..opencl.executor import CacheWrite, Executor  # inside: adreno --help does not need it

    # the cache write overlaps --check's onnxruntime reference; nothing compiles beside it
    return Executor(artifact, device, cache=cache, cache_write=CacheWrite.BACKGROUND)


def _run_artifact(args, output: Path | None) -> int:
    runtime = args.runtime
    artifact = Artifact.load(args.artifact, checked=not args.unchecked)
    if args.unchecked:
        print(f"warning: --unchecked: the sizes and SHA-256 of the {len(artifact.manifest['files'])} files of "
              f"{artifact.path} were not compared with its manifest (paths and the plan were still checked)",
              file=sys.stderr)
    progress = Progress(not (args.json or args.quiet))
    if args.input:
        progress(f"reading {args.input}")
    artifact, inputs = _load_inputs(args, artifact)
    progress(f"building the OpenCL programs of {len(artifact.plan.programs)} kernel files" if runtime is Runtime.PLAN
             else "loading the host library in TVM's runtime and building its OpenCL programs")
    start_began = time.perf_counter()
    executor = _executor(runtime, artifact, args.device, _program_cache(args))
    start_seconds = time.perf_counter() - start_began  # what a cold start waits before its first run
    progress("first run")
    first_started = time.perf_counter()
    outputs = executor.run(inputs)  # the plan's executor writes the program cache after it, in the background
    first_ms = (time.perf_counter() - first_started) * 1e3
    check = None
    if args.check:
        progress("onnxruntime reference")
        check = check_outputs(artifact, inputs, outputs, args.reference, args.rtol, args.atol)
    store_seconds = 0.0
    if runtime is Runtime.PLAN:
        if executor.storing:
            progress("writing the program cache (what the next start loads)")
        store_seconds = executor.wait_stored()
    warm_build = None
    if runtime is Runtime.PLAN and executor.cache is not None:
        progress("building the programs again from the program cache (the next start's build)")
        warm_build = executor.warm_build_seconds()
    progress(f"profiling {args.repeat} runs")
    profile = executor.profile(inputs, repeat=args.repeat)
    progress.finish_step()
    if output:
        _write_outputs(output, dict(zip(artifact.output_names(), outputs)))
    total = sum(k.median_ms for k in profile.kernels) or 1.0
    result = {
        "artifact": str(artifact.path), "shape_set": artifact.manifest.get("shape_set"), "runtime": runtime,
        "device": executor.device.name.strip(),
        "platform": executor.device.platform.name.strip(), "start_seconds": round(start_seconds, 3),
        "build_seconds": round(executor.build_seconds, 3),
        "first_launches": _first_launches(executor) if runtime is Runtime.PLAN else None,
        "build_from": _build_sources(executor) if runtime is Runtime.PLAN else None,
        "warm_build_seconds": None if warm_build is None else round(warm_build, 3),
        "cache_store_seconds": round(store_seconds, 3),
        "first_run_ms": round(first_ms, 3), "median_ms": round(profile.median_ms, 3),
        "device_median_ms": round(profile.device_median_ms, 3), "repeat": args.repeat,
        "kernels": [{"name": k.name, "op": k.op, "calls": k.calls, "median_ms": round(k.median_ms, 4),
                     "share": round(k.median_ms / total, 4)} for k in profile.kernels],
        "check": check,
    }
    emit(args, result, _run_text(result, args.top))
    return 0 if check is None or check["ok"] else 1


def _first_launches(executor) -> dict | None:
    """The kernels compiled in parallel processes during the start (`adreno.opencl.first_launches`), if any."""
    done = executor.first_launches
    if done is None:
        return None
    return {"workers": done.workers, "seconds": round(done.seconds, 3), "failures": list(done.failures)}


def _build_sources(executor) -> dict[str, int]:
    """How the launch-plan executor got its driver programs: count per `ProgramBuild.how` ("miss": built from source
    and cached, "hit": from the program cache, "bundled", "source": no cache, "disabled")."""
    counts: dict[str, int] = {}
    for build in executor.builds:
        counts[build.how] = counts.get(build.how, 0) + 1
    return counts


def _write_outputs(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Save to exactly `path` (numpy.savez given a name would add .npz to it), through a sibling renamed over it
    when complete: a write the OS refuses (a full disk) is one line and leaves `path` as it was, nothing beside."""
    staged = path.with_name(f".{path.name}.adreno-tmp.{os.getpid()}")
    try:
        with open(staged, "wb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(staged, path)
    except OSError as err:
        staged.unlink(missing_ok=True)
        raise AdrenoError(f"--output {path}: cannot write it ({err.strerror or err}); nothing was written") from None


def _run_text(result: dict, top: int) -> str:
    how = "" if result["runtime"] is Runtime.PLAN else ", host library through TVM's runtime"
    shape_set = result["shape_set"]
    lines = [f"{result['artifact']} on {result['device']} ({result['platform']}){how}"
             + ("" if shape_set is None else
                f", shape set {shape_set['index']} of {shape_set['of']}: {shape_set['label']}"),
             f"  start {result['start_seconds']:.2f} s: build {result['build_seconds']:.2f} s{_build_text(result)}"
             f"{_first_launches_text(result['first_launches'])}; first run {result['first_run_ms']:.1f} ms"
             + ("" if result["warm_build_seconds"] is None else
                f", warm build {result['warm_build_seconds']:.2f} s (from the program cache)"),
             f"  median {result['median_ms']:.2f} ms wall / {result['device_median_ms']:.2f} ms kernels "
             f"over {result['repeat']} runs", "",
             f"  {'kernel':<52} {'op':<14} {'calls':>5} {'median ms':>10} {'share':>7}"]
    kernels = result["kernels"]
    for k in kernels[:top]:
        lines.append(f"  {k['name'][:52]:<52} {k['op'][:14]:<14} {k['calls']:>5} {k['median_ms']:>10.3f} "
                     f"{k['share'] * 100:>6.1f}%")
    if len(kernels) > top:
        rest = kernels[top:]
        lines.append(f"  {'(' + str(len(rest)) + ' more kernels)':<52} {'':<14} {sum(k['calls'] for k in rest):>5} "
                     f"{sum(k['median_ms'] for k in rest):>10.3f} {sum(k['share'] for k in rest) * 100:>6.1f}%")
    check = result["check"]
    if check:
        from ..reference import SPREAD_FACTOR, tolerance  # inside: adreno --help does not need it

        lines.append("")
        for index, row in enumerate(check["outputs"]):
            if row["problem"]:
                lines.append(f"  check output {index} vs onnxruntime: {row['problem']}: MISMATCH")
                continue
            bound = tolerance(row, check["rtol"], check["atol"])
            spread = (f" (with {SPREAD_FACTOR:g} x {row['spread']:.3g}, onnxruntime's own change when its "
                      "dynamically quantized activations round otherwise)") if row.get("spread") else ""
            lines.append(f"  check output {index} vs onnxruntime: max abs error {row['max_abs_error']:.3g} "
                         f"(relative {row['max_rel_error']:.3g} of max |ref| {row['max_abs_ref']:.3g}), "
                         f"tolerance {bound:.3g}{spread}: {'OK' if row['max_abs_error'] <= bound else 'MISMATCH'}")
    return "\n".join(lines)


def _first_launches_text(done: dict | None) -> str:
    if done is None:
        return ""
    failed = f", {len(done['failures'])} failed: {done['failures'][0]}" if done["failures"] else ""
    return (f", first launches compiled with {done['workers']} more "
            f"{'process' if done['workers'] == 1 else 'processes'} in {done['seconds']:.2f} s{failed}")


def _build_text(result: dict) -> str:
    words = {"miss": "from source", "source": "from source", "disabled": "from source", "hit": "from the cache",
             "bundled": "bundled"}
    if not result["build_from"]:
        return ""
    parts = [f"{n} {'program' if n == 1 else 'programs'} {words.get(how, how)}"
             for how, n in result["build_from"].items()]
    return f" ({', '.join(parts)})"


def _program_cache(args):
    if args.no_cache:
        return None
    from ..cache import ProgramCache  # inside: loads pyopencl at import

    return ProgramCache()

