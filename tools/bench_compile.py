#!/usr/bin/env python3
"""Where `adreno compile`'s time goes, stage by stage, next to TVM 0.27's own build of the same Relax module.

    python tools/bench_compile.py [resnet18 mobilenetv2 ...] [--memory texture buffer] [--repeat 1]
                                  [--source DIR] [--json bench_compile.json] [--smoke]

For each model and memory, `adreno compile` runs in a fresh process (imports included, as a user pays them) and
its progress lines split it into stages: import (load the model, import to Relax), lowering (layout planning,
Winograd, schedules), launch plan (every function through TVM's TIR pipeline and OpenCL codegen), writing (kernels,
plan, weights), host library (the VM executable, reusing the plan's lowering: `adreno.compiler.lowered`) and build check
(the finished programs built on the local OpenCL device through an empty program cache, as `adreno compile` does
unless `--no-build-check`; a `--source` checkout from before the build check has no such stage). Each stage has
its wall time and the CPU time of the process (all threads, and the compiler it runs), since this machine's 2 cores
are shared: CPU seconds move less with other load than wall seconds.

"tvm" is TVM's own flow for the same model, in a fresh process too: the same import, then the Adreno backend's
Relax passes with TVM's default (dlight) schedules (`lower_relax(..., Schedules.TVM)`, what `--schedules tvm`
starts from), its dataflow-lowering and finalize passes and `tvm.compile` with TVM's default TIR pipeline, then
`export_library`. It is buffer memory only (TVM 0.27's texture pipeline crashes; see docs/compile.md). The goals
(issue 21): ResNet-18 at most 10 s, MobileNetV2 at most 6 s, or at most 2x TVM's own build.

--source DIR times the `adreno` package of another checkout (e.g. `git archive main | tar -x -C DIR`: "before").
Medians over --repeat runs; a table is printed and everything is written to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# progress line prefix -> stage (adreno.compiler.progress.ProgressLine, the lines compile_model says, in order)
STAGES = {"loading model": "import", "importing to Relax": "import", "lowering for": "lowering",
          "extracting the launch plan": "launch plan", "writing the artifact": "writing",
          "building the host library": "host library", "building the kernels on a local OpenCL": "build check"}
COLUMNS = ("import", "lowering", "launch plan", "writing", "host library", "build check")


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of the children it waited for (the C compiler TVM runs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class StageClock:
    """Wall and CPU seconds per stage from a sequence of `mark(stage)` calls (`mark(None)` ends the last)."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.current, self.started = None, (time.perf_counter(), cpu_seconds())

    def mark(self, stage: str | None) -> None:
        now = (time.perf_counter(), cpu_seconds())
        if self.current is not None:
            self.wall[self.current] = self.wall.get(self.current, 0.0) + now[0] - self.started[0]
            self.cpu[self.current] = self.cpu.get(self.current, 0.0) + now[1] - self.started[1]
        self.current, self.started = stage, now

    def result(self) -> dict:
        self.mark(None)
        return {"stages": self.wall, "cpu": self.cpu, "total": sum(self.wall.values()),
                "total_cpu": sum(self.cpu.values())}


def adreno_once(model: str, memory: str, out: Path) -> dict:
    """One `adreno compile` (in this process, which the caller started fresh)."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    clock = StageClock()

    def progress(message: str) -> None:
        stage = next((s for prefix, s in STAGES.items() if message.startswith(prefix)), None)
        if stage is not None:
            clock.mark(stage)

    try:
        from adreno.compiler.build_check import BuildCheck
        from adreno.cache import ProgramCache
        check = {"build_check": BuildCheck(ProgramCache(out.parent / "program-cache"))}
    except ImportError:  # a --source checkout from before the build check
        check = {}
    path = compile_model(model, out, CompileOptions(memory=memory), progress=progress, **check)
    result = clock.result()
    manifest = json.loads((path / "manifest.json").read_text())
    result.update(kernels=manifest["kernels"], programs=len(list((path / "kernels").iterdir())),
                  compile_seconds=manifest["compile_seconds"])
    return result


def tvm_once(model: str, out: Path) -> dict:
    """TVM's own build of the same Relax module with its default schedules (see the module doc)."""
    clock = StageClock()
    clock.mark("import")
    import tvm
    from tvm.relax.backend.adreno import pipeline

    from adreno.compile import lower_relax
    from adreno.frontend.empty import EmptyTensors
    from adreno.frontend.importer import load_model, to_relax
    from adreno.options import CompileOptions, Memory, Schedules
    from adreno.schedules.context import ScheduleContext

    options = CompileOptions(memory="buffer")
    onnx_model, _ = load_model(model)
    mod = to_relax(onnx_model, options.input_shapes, EmptyTensors())
    ctx = ScheduleContext.for_device(options.device(), host=options.host)
    tvm_target = ctx.target
    clock.mark("lowering")
    lowered = lower_relax(mod, ctx, Schedules.TVM, memory=Memory.BUFFER)
    clock.mark("host library")
    with tvm_target:
        passes = pipeline.dataflow_lower_passes(tvm_target) + pipeline.finalize_passes(tvm_target)
        vm_module = tvm.transform.Sequential(passes)(lowered)
    executable = tvm.compile(vm_module, target=tvm_target, relax_pipeline=None)
    clock.mark("writing")
    out.mkdir(parents=True, exist_ok=True)
    executable.export_library(str(out / "lib.tar"))
    return clock.result()


def fresh_process(model: str, memory: str, flow: str, source: Path) -> dict:
    """Run one compile in a new interpreter, importing `adreno` from `source`, and return its timings."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, __file__, "--worker", flow, model, memory, tmp],
                              capture_output=True, text=True,
                              # PoCL's own kernel cache off: the build check does the driver's real work, as a first
                              # compile on a machine does
                              env={**os.environ, "PYTHONPATH": str(source), "POCL_KERNEL_CACHE": "0"})
    if proc.returncode != 0:
        raise SystemExit(f"{flow} compile of {model} ({memory}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_run(runs: list[dict]) -> dict:
    """The per-stage medians of several runs of one case (and every run kept)."""
    keys = sorted({k for r in runs for k in r["stages"]})
    out = {"stages": {k: statistics.median(r["stages"].get(k, 0.0) for r in runs) for k in keys},
           "cpu": {k: statistics.median(r["cpu"].get(k, 0.0) for r in runs) for k in keys},
           "total": statistics.median(r["total"] for r in runs),
           "total_cpu": statistics.median(r["total_cpu"] for r in runs), "runs": runs}
    for extra in ("kernels", "programs"):
        if extra in runs[0]:
            out[extra] = runs[0][extra]
    return out


def table(report: dict) -> str:
    head = f"{'model':<12} {'memory':<8} {'flow':<7}" + "".join(f" {c:>13}" for c in COLUMNS) + \
        f" {'total s':>9} {'cpu s':>7} {'vs tvm':>7}"
    lines = [head, "-" * len(head)]
    for model, cases in report["models"].items():
        tvm_total = cases["tvm"]["total"]
        for name, row in cases.items():
            flow, memory = ("tvm", "buffer") if name == "tvm" else ("adreno", name)
            cells = "".join(f" {row['stages'].get(c, 0.0):>6.2f}/{row['cpu'].get(c, 0.0):>5.2f}s"
                            if c in row["stages"] else f" {'-':>13}" for c in COLUMNS)
            lines.append(f"{model:<12} {memory:<8} {flow:<7}{cells} {row['total']:>9.2f} {row['total_cpu']:>7.2f} "
                         f"{row['total'] / tvm_total:>6.2f}x")
    lines.append("(each stage: wall/cpu seconds)")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        flow, model, memory, out = sys.argv[2:6]
        result = tvm_once(model, Path(out) / "tvm") if flow == "tvm" else adreno_once(model, memory, Path(out) / "a")
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenetv2"])
    parser.add_argument("--memory", nargs="+", default=["texture", "buffer"], choices=["texture", "buffer"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--source", type=Path, default=REPO, help="the checkout whose adreno package is timed")
    parser.add_argument("--json", default="bench_compile.json")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, texture memory, one run")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.memory, args.repeat = ["tiny"], ["texture"], 1
    report: dict = {"source": str(args.source.resolve()), "repeat": args.repeat, "cpus": os.cpu_count(),
                    "load_average": os.getloadavg(), "models": {}}
    for model in args.models:
        cases = report["models"].setdefault(model, {})
        for memory in args.memory:
            cases[memory] = median_run([fresh_process(model, memory, "adreno", args.source)
                                        for _ in range(args.repeat)])
        cases["tvm"] = median_run([fresh_process(model, "buffer", "tvm", args.source) for _ in range(args.repeat)])
    report["load_average_after"] = os.getloadavg()
    print(table(report))
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
