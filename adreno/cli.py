"""`adreno`: compile models for Adreno GPUs, run and check them on OpenCL devices, manage the farm and caches.

Every command prints human-readable output by default and JSON with --json. A user error (bad model, unknown
target, missing device, broken artifact) is one line on stderr and exit status 2; a failed --check is status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from .errors import AdrenoError
from .options import (Defaults, Host, Memory, Precision, Runtime, Schedules, Winograd, add_staging_argument,
                      enum_argument)
from .paths import output_file, regular_file

EPILOG = """examples:
  adreno models
  adreno compile resnet18 --target adreno-740 -o build/resnet18
  adreno run build/resnet18 --check --repeat 20
  adreno devices --local
"""


class Progress:
    """One line per step on stderr, with the time the previous step took; silent under --json/--quiet."""

    def __init__(self, enabled: bool = True):
        self.enabled, self.started, self.last = enabled, time.perf_counter(), None

    def __call__(self, message: str) -> None:
        self.finish_step()
        self.last = (message, time.perf_counter())
        if self.enabled:
            print(f"  {message} ...", end="", file=sys.stderr, flush=True)

    def finish_step(self) -> None:
        if self.last and self.enabled:
            print(f" {time.perf_counter() - self.last[1]:.1f} s", file=sys.stderr, flush=True)
        self.last = None


def _emit(args, data, text: str) -> None:
    print(json.dumps(data, indent=1, default=_json_default) if args.json else text)


def _json_default(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def cmd_models(args) -> int:
    from .frontend import zoo

    models = zoo.list_models()
    rows = [{"name": m.name, "input": [m.input_name, list(m.input_shape)], "description": m.description}
            for m in models]
    width = max(len(m.name) for m in models)
    text = "\n".join(f"{m.name:<{width}} {'x'.join(map(str, m.input_shape)):<14} {m.description}" for m in models)
    _emit(args, rows, text)
    return 0


def require_positive(args, *names: str, allow_zero: tuple[str, ...] = ()) -> None:
    """A one-line error (exit status 2) for a numeric option that is not a positive finite number (or, for those in
    `allow_zero`, not a non-negative one): `--repeat 0` must not "succeed" measuring nothing."""
    for name in names:
        value = getattr(args, name)
        if value is None:  # not given: the command's default applies
            continue
        low_ok = value >= 0 if name in allow_zero else value > 0
        if not (np.isfinite(value) and low_ok):
            flag = "--" + name.replace("_", "-")
            raise AdrenoError(f"{flag} must be {'>= 0' if name in allow_zero else 'positive'}, not {value}")


def _parse_shapes(items: list[str] | None) -> dict[str, list[int]]:
    shapes = {}
    for item in items or []:
        name, sep, dims = item.rpartition(":")
        if name in shapes:
            raise AdrenoError(f"--input-shape {item!r}: {name} already has a shape; give each input one")
        try:
            shapes[name] = [int(d) for d in dims.replace("x", ",").split(",") if d]
        except ValueError:
            sep = ""
        if not sep or not name or not shapes.get(name):
            raise AdrenoError(f"--input-shape {item!r}: expected NAME:D0,D1,... e.g. input:1,3,224,224")
    return shapes


def records_elsewhere_line(manifest: dict) -> str:
    """One line saying how many workloads got records measured on devices other than the target ("" if none)."""
    from .records import device_target

    elsewhere = manifest["records_elsewhere"]
    if not elsewhere:
        return ""
    devices = sorted({device_target(device) for device in elsewhere.values()})
    return (f"warning: {len(elsewhere)} workload(s) use records measured on {', '.join(devices)}, none on "
            f"{manifest['target']} (--records-from-any-device: allow this silently)")


def cmd_compile(args) -> int:
    from .frontend.bind import read_bind
    from .build_check import BuildCheck
    from .cache import ProgramCache
    from .compile import compile_model
    from .options import CompileOptions

    output = f"build/{Path(str(args.model)).stem}" if args.output is None else args.output
    options = CompileOptions(target=args.target, host=args.host, cc=args.cc,
                             input_shapes=_parse_shapes(args.input_shape),
                             memory=args.memory, precision=args.precision, schedules=args.schedules,
                             records=args.records, winograd=args.winograd, image_max=args.image_max,
                             defaults=args.defaults, staging=args.staging)
    bind = read_bind(args.bind)
    progress = Progress(not (args.json or args.quiet))
    started = time.perf_counter()
    check = None if args.no_build_check else BuildCheck(ProgramCache())
    path = compile_model(args.model, output, options, progress=progress, bind=bind, build_check=check)
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
    sizes = manifest["sizes"]
    _emit(args, summary, f"compiled {manifest['model']} for {manifest['target']} ({manifest['memory']} memory): "
                         f"{manifest['kernels']} kernels{tuned}, host library {library} -> {path} "
                         f"({summary['seconds']} s)\n  size: weights {_megabytes(sizes['weights'])}, kernels "
                         f"{_megabytes(sizes['kernels'])}, host library {_megabytes(sizes['host_library'])}"
                         f"\n  {check.result.line() if check else 'build check: off (--no-build-check)'}")
    return 0


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 10_000 else f"{size} B"


def _load_inputs(args, artifact) -> list[np.ndarray]:
    from .runner import random_inputs

    specs = artifact.input_specs()
    if not args.input:
        return random_inputs(specs, args.seed)
    arrays = _read_npz(regular_file(args.input, "--input"))
    try:
        ordered = artifact.ordered_inputs(arrays)
    except AdrenoError as err:
        raise AdrenoError(f"--input {args.input}: {err}") from None
    for spec, array in zip(specs, ordered):
        lossless_input(spec, array, args.input)
    return ordered


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz file; a .npy (one unnamed array), a truncated or foreign file is one clear error."""
    try:
        loaded = np.load(path)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise AdrenoError(f"--input {path} holds one unnamed array (.npy); save the inputs with "
                              "numpy.savez(FILE, NAME=array) so each has its input's name")
        with loaded as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise AdrenoError(f"--input {path}: cannot read it as .npz ({type(err).__name__}: {err})") from None


def lossless_input(spec, array: np.ndarray, where: str) -> None:
    """Refuse an --input array that the cast to the input's dtype would change: complex values (the imaginary part
    would be dropped), values the dtype does not hold exactly (int64 above 2**24 in float32, fractions for an
    integer input), non-numbers. A float64 array becomes float32 by rounding, as every framework does."""
    dtype = np.dtype(spec.dtype)
    if array.dtype.kind not in "biuf":
        raise AdrenoError(f"--input {where}: {spec.name} is {array.dtype}, the model takes {dtype}: convert it first")
    if not (array.dtype.kind == dtype.kind == "f") and not np.array_equal(array.astype(dtype).astype(array.dtype),
                                                                        array):
        raise AdrenoError(f"--input {where}: {spec.name} holds {array.dtype} values that {dtype} cannot represent "
                          "exactly; convert it first")


def cmd_run(args) -> int:
    """`adreno run` under --timeout: a spinning kernel or a hung driver call ends in one line, not a hang."""
    from .deadline import deadline

    require_positive(args, "repeat", "rtol", "atol", "top", "timeout", "seed",
                     allow_zero=("rtol", "atol", "top", "seed"))
    output = None if args.output is None else output_file(args.output, "--output")
    with deadline(args.timeout, f"run of {args.artifact}"):
        return _run_artifact(args, output)


def _run_artifact(args, output: Path | None) -> int:
    from .artifact import Artifact

    runtime = args.runtime
    artifact = Artifact.load(args.artifact, checked=not args.unchecked)
    if args.unchecked:
        print(f"warning: --unchecked: the sizes and SHA-256 of the {len(artifact.manifest['files'])} files of "
              f"{artifact.path} were not compared with its manifest (paths and the plan were still checked)",
              file=sys.stderr)
    progress = Progress(not (args.json or args.quiet))
    progress(f"building the OpenCL programs of {len(artifact.plan.programs)} kernel files" if runtime is Runtime.PLAN
             else "loading the host library in TVM's runtime and building its OpenCL programs")
    executor = runtime.executor(artifact, args.device, cache=_program_cache(args))
    inputs = _load_inputs(args, artifact)
    progress("first run")
    first_started = time.perf_counter()
    outputs = executor.run(inputs)
    store_seconds = executor.store_seconds if runtime is Runtime.PLAN else 0.0  # the cache write after it
    first_ms = (time.perf_counter() - first_started - store_seconds) * 1e3
    check = None
    if args.check:
        from .reference import compare, default_rtol, onnxruntime_outputs, reference_model, within

        progress("onnxruntime reference")
        reference = onnxruntime_outputs(reference_model(artifact, args.reference), inputs, artifact.bound_inputs())
        rows = compare(outputs, reference)
        rtol = default_rtol(artifact) if args.rtol is None else args.rtol
        ok = all(within(r, rtol, args.atol) for r in rows)
        check = {"ok": ok, "outputs": rows, "rtol": rtol, "atol": args.atol}
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
        "artifact": str(artifact.path), "runtime": runtime, "device": executor.device.name.strip(),
        "platform": executor.device.platform.name.strip(), "build_seconds": round(executor.build_seconds, 3),
        "build_from": _build_sources(executor) if runtime is Runtime.PLAN else None,
        "warm_build_seconds": None if warm_build is None else round(warm_build, 3),
        "cache_store_seconds": round(store_seconds, 3),
        "first_run_ms": round(first_ms, 3), "median_ms": round(profile.median_ms, 3),
        "device_median_ms": round(profile.device_median_ms, 3), "repeat": args.repeat,
        "kernels": [{"name": k.name, "op": k.op, "calls": k.calls, "median_ms": round(k.median_ms, 4),
                     "share": round(k.median_ms / total, 4)} for k in profile.kernels],
        "check": check,
    }
    _emit(args, result, _run_text(result, args.top))
    return 0 if check is None or check["ok"] else 1


def _build_sources(executor) -> dict[str, int]:
    """How the launch-plan executor got its driver programs: count per `ProgramBuild.how` ("miss": built from source
    and cached, "hit": from the program cache, "bundled", "source": no cache, "disabled")."""
    counts: dict[str, int] = {}
    for build in executor.builds:
        counts[build.how] = counts.get(build.how, 0) + 1
    return counts


def _write_outputs(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Save to exactly `path` (numpy.savez given a name would add .npz to it); a write the OS refuses is one line."""
    try:
        with open(path, "wb") as file:
            np.savez(file, **arrays)
    except OSError as err:
        raise AdrenoError(f"--output {path}: cannot write it ({err.strerror or err})") from None


def _run_text(result: dict, top: int) -> str:
    how = "" if result["runtime"] is Runtime.PLAN else ", host library through TVM's runtime"
    lines = [f"{result['artifact']} on {result['device']} ({result['platform']}){how}",
             f"  build {result['build_seconds']:.2f} s{_build_text(result)}, first run {result['first_run_ms']:.1f} ms"
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
        lines.append("")
        for index, row in enumerate(check["outputs"]):
            if row["problem"]:
                lines.append(f"  check output {index} vs onnxruntime: {row['problem']}: MISMATCH")
                continue
            tolerance = check["atol"] + check["rtol"] * row["max_abs_ref"]
            lines.append(f"  check output {index} vs onnxruntime: max abs error {row['max_abs_error']:.3g} "
                         f"(relative {row['max_rel_error']:.3g} of max |ref| {row['max_abs_ref']:.3g}), "
                         f"tolerance {tolerance:.3g}: {'OK' if row['max_abs_error'] <= tolerance else 'MISMATCH'}")
    return "\n".join(lines)


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
    from .cache import ProgramCache

    return ProgramCache()


def cmd_devices(args) -> int:
    from dataclasses import asdict

    data: dict = {}
    lines: list[str] = []
    if args.local or not args.tracker:
        from .opencl.device import list_devices

        devices = list_devices()
        data["local"] = [asdict(d) for d in devices]
        lines.append("local OpenCL devices:" if devices else "no local OpenCL devices (install PoCL: "
                     "`pip install pocl-binary-distribution`, or a GPU vendor's OpenCL driver)")
        for d in devices:
            lines.append(f"  [{d.index}] {d.name} ({d.kind}) on {d.platform} {d.platform_version}; "
                         f"{d.compute_units} CUs, max workgroup {d.max_workgroup_size}, local mem "
                         f"{d.local_memory_bytes // 1024} KiB, images {'yes' if d.image_support else 'no'}, "
                         f"fp16 {'yes' if d.fp16 else 'no'}, compiler {'ok' if d.compiler_ok else 'BROKEN'}")
    if args.tracker:
        from .farm.tracker import farm_status, format_status

        status = farm_status(args.tracker)
        data["tracker"] = asdict(status)
        lines.append(format_status(status))
    _emit(args, data, "\n".join(lines))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .frontend.bind import add_bind_argument

    parser = argparse.ArgumentParser(
        prog="adreno", description="Compile neural networks for Qualcomm Adreno GPUs (OpenCL, on Apache TVM), run and "
        "check them on OpenCL devices, tune them on phones.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"adreno {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name, func, help_text, description=None):
        p = sub.add_parser(name, help=help_text, description=description or help_text)
        p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
        p.set_defaults(func=func)
        return p

    command("models", cmd_models, "list the bundled example models (built in code, nothing downloaded)")

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
                   help="static shape for a model input with dynamic dimensions, e.g. input:1,3,224,224 (repeatable)")
    add_bind_argument(p)
    p.add_argument("--memory", **enum_argument(Memory), default=None,
                   help="where tensors live on the GPU: texture (NCHW4c activations and OIHW4o weights in OpenCL "
                   "images; the default) or buffer (OpenCL buffers, the fallback); without --memory, --records of "
                   "buffer workloads only select buffer; see README")
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
    p.add_argument("--no-build-check", action="store_true", help="do not build the kernels on a local OpenCL "
                   "device at the end of the compile (default: they are built, through the program cache, on a "
                   "device of the target's name or PoCL, so a kernel that cannot build fails the compile and a later "
                   "`adreno run` there loads them from the cache)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    p = command("run", cmd_run, "run an artifact on a local OpenCL device, time each kernel, check the output",
                "Run ARTIFACT on an OpenCL device, through pyopencl (its launch plan) or with --runtime tvm through "
                "TVM's runtime (its host library): builds its programs, runs it once, optionally checks the output "
                "against onnxruntime on the same input, then times --repeat runs and prints a per-kernel table.")
    p.add_argument("artifact", help="artifact directory written by `adreno compile`")
    p.add_argument("--device", help="pocl (default), gpu, cpu, an index from `adreno devices --local`, or part of "
                   "a device name")
    p.add_argument("--check", action="store_true", help="compare the output with onnxruntime on the same input "
                   "(exit status 1 on a mismatch)")
    p.add_argument("--runtime", **enum_argument(Runtime), default=Runtime.PLAN, help="plan (default): the launch plan "
                   "through pyopencl; tvm: the host library (lib.so, an artifact compiled with --host native) through "
                   "TVM's Relax VM and adreno's OpenCL plugin, the program a phone app runs")
    p.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    p.add_argument("--input", help=".npz file with one array per model input (default: seeded random input)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
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

    p = command("devices", cmd_devices, "list OpenCL devices on this machine, or the device farm's queue")
    p.add_argument("--local", action="store_true", help="the OpenCL platforms/devices pyopencl sees here (default)")
    p.add_argument("--tracker", metavar="HOST:PORT", help="also show the RPC tracker's queue and device health")

    from . import cache_cli
    from .farm import cli as farm_cli
    from .orchestrate import cli as orchestrate_cli
    from .tune import cli as tune_cli

    for group in (tune_cli, cache_cli, farm_cli, orchestrate_cli):
        group.register(sub, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except AdrenoError as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
