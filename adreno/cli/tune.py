"""`adreno tune`: search schedule knobs for every tunable kernel of a model on a device."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from ..support.command_line import require_positive
from ..errors import AdrenoError
from ..frontend.bind import add_bind_argument, read_bind
from ..farm.common import FarmError, parse_addr
from ..support.paths import creatable, output_file
from ..artifact.shape_sets import parse_shape_sets
from ..options import CompileOptions, Host, Memory, Precision, Runtime, add_staging_argument, enum_argument


def cmd_tune(args) -> int:
    require_positive(args, "seed", allow_zero=("seed",))  # numpy's generators take none below 0; a batch's too
    if args.save_model:  # written after the tuning or the export's training
        creatable(args.save_model, "--save-model")
    if args.export_batch or args.import_batch:
        if args.input_shape:
            raise AdrenoError("--input-shape is not taken with --export-batch or --import-batch yet: tune the shape "
                              "sets on a device or a farm")
        from ..tune.batch import cmd_batch  # inside: adreno --help does not need it

        return cmd_batch(args)
    # inside: adreno --help does not need it
    from ..records import Database
    from ..costmodel import make_model
    from ..tune.extract import extract_shape_sets
    from ..tune.builder import Builder
    from ..tune.session import open_tuner
    from ..tune.tuner import plot_history, plottable, save_report

    require_positive(args, "trials", "batch", "repeat", "timeout", "outage", allow_zero=("outage",))
    for addr in (args.tracker, args.server):  # a usage error now, not after extracting the tasks and --outage
        if addr:
            parse_addr(addr)
    model = make_model(args.model_kind)  # a bad --model is a usage error before the tasks are extracted
    runtime = args.runtime
    native = native_build(args, runtime)
    records = Path(args.records)
    database = Database(records)  # a records file that cannot be (a directory, under a file) is one line first
    # what is written after tuning: a path that cannot be is refused now, not after the measurements
    plot = creatable(plottable(args.plot or records.with_suffix(".png")), "--plot")
    if args.report:
        output_file(args.report, "--report")
    if args.keep_candidates:
        creatable(args.keep_candidates, "--keep-candidates", directory=True)
    quiet = args.json or args.quiet
    if database.skipped:
        print(f"warning: {database.skipped_summary()}", file=sys.stderr)

    def say(text: str) -> None:
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    say(f"extracting tasks of {args.model} for {args.target} ({args.memory} memory)")
    tasks = extract_shape_sets(args.model, CompileOptions(target=args.target, memory=args.memory,
                                                          precision=args.precision, staging=args.staging),
                               parse_shape_sets(args.input_shape), layouts=not args.no_layouts and native is None,
                               bind=read_bind(args.bind))
    builder = Builder(workdir=args.keep_candidates, native=native)
    tuner = open_tuner(tasks, database, target=args.target, device=args.device, tracker=args.tracker, key=args.key,
                       runtime=runtime, server=args.server, outage_s=args.outage, timeout_s=args.timeout,
                       cache=not args.no_cache, builder=builder,
                       strategy=args.strategy, model=model, batch=args.batch, seed=args.seed,
                       repeat=args.repeat, progress=lambda spent, total, text: say(f"  [{_bar(spent, total)}] {text}"))
    tuner.closing.append(builder.close)
    try:
        resumed = sum(len(tuner.database.query(t.key, tuner.device)) for t in tasks)
        say(f"{len(tasks)} tasks; {resumed} earlier records of {tuner.device.split('|')[0]} in {records} (resuming)")
        report = tuner.tune(args.trials)
    finally:
        tuner.close()
    if report.pending and not report.trials:
        where = f"server {args.server} unreachable" if args.server else \
            f"tracker {args.tracker} or its devices unreachable past --outage"
        raise FarmError(f"measured nothing: the farm failed all {report.pending} candidates ({where}); check "
                        "`adreno devices --tracker` and run again")
    if args.save_model:
        tuner.model.save(args.save_model)
    report.plot = plot_history(report, plot)
    if args.report:
        save_report(report, args.report)
    if args.json:
        import json

        print(json.dumps(report.__dict__, indent=1, default=float))
    else:
        print(f"{'task':<48} {'calls':>5} {'trials':>6} {'default ms':>10} {'best ms':>9} {'speedup':>7}  layout")
        for row in report.tasks:
            speed = f"{row['speedup_vs_default']:.2f}x" if row["speedup_vs_default"] else "-"
            print(f"{row['task'][:48]:<48} {row['weight']:>5} {row['trials']:>6} {_fmt(row['default_ms']):>10} "
                  f"{_fmt(row['best_ms']):>9} {speed:>7}  {_layouts(row)}")
        timing = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
        print(f"{report.trials} trials ({timing}); records: {report.records}; plot: {report.plot}")
    if report.pending:
        print(f"warning: {report.pending} candidates were not measured: the farm failed them (tracker or devices "
              "unreachable); nothing was recorded for them. Run the same command again to measure them",
              file=sys.stderr)
    return 0


def native_build(args, runtime: Runtime):
    """How candidates' TVM libraries are built under `--runtime tvm` (a `NativeBuild`; None under plan), or a
    FarmError (one line, exit 2) for options that do not go together."""
    from ..tune.native_build import NativeBuild  # inside: adreno --help does not need it

    if runtime is Runtime.PLAN:
        if args.server:
            raise FarmError("--server is a TVM RPC server (a phone's tvm_rpc): it needs --runtime tvm")
        return None
    if bool(args.tracker) == bool(args.server):
        raise FarmError("--runtime tvm measures through TVM RPC: give --tracker HOST:PORT (with --key) or "
                        "--server HOST:PORT, one of them")
    if args.precision is Precision.FP16:
        raise FarmError("--runtime tvm measures fp32 images only: TVM's runtime gives a tensor an image of its "
                        "own dtype, so --precision fp16 is tuned with --runtime plan")
    native = NativeBuild(args.host, args.cc)
    if native.host is Host.ANDROID and not native.compiler:
        raise FarmError("--runtime tvm --host android links each candidate for the phone: give --cc (an NDK "
                        "aarch64-linux-android<API>-clang) or set $TVM_NDK_CC; --host native for this machine")
    return native


def _layouts(row: dict) -> str:
    """The chosen layout and each layout's best ms / trials, for a layout task; "-" for other tasks."""
    if "layouts" not in row:
        return "-"
    each = " ".join(f"{name.removeprefix('winograd-')} {_fmt(v['best_ms'])}/{v['trials']}"
                    for name, v in row["layouts"].items())
    return f"{row['layout'] or 'none'} ({each})"


def _fmt(value) -> str:
    return f"{value:.3f}" if value is not None and math.isfinite(value) else "-"


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = min(width, int(width * done / max(1, total)))
    return "#" * filled + "." * (width - filled) + f" {min(done, total)}/{total}"


def register(sub, command) -> None:  # noqa: ARG001 - the register(sub, command) interface of adreno.cli.main
    p = command("tune", cmd_tune, "search the best schedule for every kernel of a model on a device",
                "Tune MODEL's kernels on a device: a cost-model-guided search over each schedule's knobs. Every "
                "measurement (output checked against a CPU reference first) is appended to --records; running "
                "the same command again resumes where it stopped. `adreno compile --records FILE` applies the "
                "best record per kernel (records of texture convs keep the compile in texture memory), and per 3x3 "
                "stride-1 conv its layout (direct or Winograd).")
    p.add_argument("model", help="bundled model name or .onnx file")
    p.add_argument("--input-shape", action="append", metavar="NAME:DIMS", help="static shape for a model input with "
                   "dynamic dimensions, as `adreno compile` takes it: naming an input again starts another shape set, "
                   "and the kernels of every set are tuned (a kernel several sets share, once)")
    add_bind_argument(p)
    p.add_argument("--target", default="adreno-740", help="Adreno target the kernels are compiled for")
    p.add_argument("--device", help="local OpenCL device to measure on: pocl (default), gpu, or an index")
    p.add_argument("--tracker", metavar="HOST:PORT", help="measure on the device farm instead (`adreno farm ...`): "
                   "every free device of --key in parallel")
    p.add_argument("--key", default="pocl-cpu", help="the farm's device key to measure on (with --tracker; e.g. "
                   "adreno-740); with --server, the device name the records are keyed by")
    p.add_argument("--runtime", **enum_argument(Runtime), default=Runtime.PLAN,
                   help="plan (default): candidates are launch plans run through pyopencl (--device here, or the "
                   "farm's agents with --tracker); tvm: they are TVM libraries run by TVM's own runtime over TVM "
                   "RPC, what a phone's tvm_rpc runs (a tvm_rpc of --key from --tracker, or --server); fp32 only, "
                   "layouts not searched (as --no-layouts)")
    p.add_argument("--server", metavar="HOST:PORT", help="with --runtime tvm: measure on this one TVM RPC server "
                   "(e.g. a phone's tvm_rpc through `adb forward`) instead of a tracker's")
    p.add_argument("--host", **enum_argument(Host), default=Host.ANDROID, help="with --runtime tvm: host CPU the "
                   "candidates' libraries are built for: android (aarch64 phone, default; needs --cc) or native "
                   "(this machine, e.g. a loopback server)")
    p.add_argument("--cc", help="with --runtime tvm --host android: the NDK aarch64-linux-android<API>-clang "
                   "linking each candidate (default $TVM_NDK_CC)")
    p.add_argument("--memory", default=Memory.TEXTURE, **enum_argument(Memory),
                   help="tune the kernels `adreno compile --memory MEMORY` runs (default texture, as compile's "
                   "default): texture tunes the packed convs on OpenCL images; buffer the NCHW buffer kernels; "
                   "both the Winograd layouts of 3x3 stride-1 convs")
    p.add_argument("--precision", default=Precision.FP32, **enum_argument(Precision),
                   help="image storage of texture tasks (fp16: half-float images, as `compile --precision fp16`)")
    add_staging_argument(p)
    p.add_argument("--trials", type=int, default=64, help="measurements to spend in all (default 64; with "
                   "--export-batch: candidates per task)")
    p.add_argument("--strategy", default="genetic", choices=["genetic", "random", "grid"],
                   help="search strategy (default genetic)")
    p.add_argument("--model", dest="model_kind", default="learned",
                   metavar="analytical|learned|learned-regression|transfer:FILE",
                   help="cost model guiding the search (default learned: LightGBM lambdarank; learned-regression: "
                   "LightGBM regression of per-task standardised speed)")
    p.add_argument("--records", default="records.jsonl", help="records database (JSON lines; default records.jsonl)")
    p.add_argument("--batch", type=int, default=8, help="candidates measured per round (default 8)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per candidate (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", help="plot of best latency against trials, in the format its extension names (.png, "
                   ".svg, .pdf, ...; default: a PNG next to --records)")
    p.add_argument("--report", help="also write the report as JSON to this file")
    p.add_argument("--save-model", help="save the trained cost model (for transfer:FILE on another device)")
    p.add_argument("--outage", type=float, default=120.0, help="with --tracker: seconds to keep retrying an "
                   "unreachable tracker or device (with back-off) before the candidates are left pending, unrecorded, "
                   "for the next run (default 120)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds one local measurement may take (build, "
                   "first-launch compile, runs) before it is recorded as a timeout (default 60)")
    p.add_argument("--keep-candidates", metavar="DIR", help="keep every candidate's artifact in DIR (default: a "
                   "temporary directory, removed at exit)")
    p.add_argument("--no-cache", action="store_true", help="do not use the OpenCL program-binary cache")
    p.add_argument("--no-layouts", action="store_true", help="tune Winograd-eligible convs (3x3, stride 1) as "
                   "direct kernels only (compile then keeps them direct); by default their weight layout (direct, "
                   "Winograd F(2x2) or F(4x4)) is searched together with each layout's knobs (not with --precision "
                   "fp16)")
    p.add_argument("--export-batch", metavar="DIR", help="measure nothing here: write an offline batch of --trials "
                   "candidates per task (default, cost model's picks, random) to DIR, for `python -m "
                   "adreno.runners.offline DIR` on a machine with numpy and pyopencl only")
    p.add_argument("--import-batch", metavar="DIR", help="merge the records a measured batch holds into --records "
                   "(again: nothing changes; another model's or adreno version's batch is refused)")
    p.add_argument("-q", "--quiet", action="store_true")
