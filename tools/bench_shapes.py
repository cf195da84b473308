#!/usr/bin/env python3
"""Several shapes in one artifact against one shape: size, compile time, and switching shapes between runs.

    python tools/bench_shapes.py [--model PATH.onnx] [--input x] [--widths 160,320,640] [--memory texture]
                                 [--jobs N] [--json bench_shapes.json] [--smoke]

The model defaults to PP-OCRv4's text recogniser from the rapidocr-onnxruntime wheel (input x, 1x3x48xW). Each
compile is `adreno compile` in a fresh process (wall seconds and the CPU seconds of it and its children, which move
much less with a shared machine's load than the wall): the first width alone, then every width in one artifact, its
sets compiled `--jobs` at a time (default: adreno's, one per core). The compile goal is on the wall time, what the
user waits for; the CPU time shows what compiling sets side by side costs the machine. Sizes are the artifacts'
files as an app ships them (weights, kernel sources, host libraries). Then, in one process with an empty program
cache (a fresh `ADRENO_CACHE_DIR`): an executor per shape set made at its first run and kept, the sets run in turn
twice; each run reports how many programs it built from source. Finally one fresh `adreno run --json` per width
reports where its start got its programs (`build_from`: "hit" is the program cache). The goals (issue 49): 3 shapes
<= 1.1x the weights + 3x one shape's kernels and host library; the compile of 3 shapes <= 2.5x one shape's; no
program built after each shape's first run. A table is printed, all goes to --json.
`--smoke` (CI): a one-conv model of a dynamic width made here, widths 8 and 16, buffer memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's adreno, in this process as in the `adreno` ones it starts


def default_model() -> str:
    import rapidocr_onnxruntime

    return str(Path(rapidocr_onnxruntime.__file__).parent / "models" / "ch_PP-OCRv4_rec_infer.onnx")


def smoke_model(path: Path) -> str:
    """A 3x3 conv (4 -> 8 channels) and a ReLU on a 1x4x8xW input: the smallest model with a width to vary."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["c"], ["y"])], "smoke_width",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, "width"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, "width"])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def adreno(*args, env=None) -> tuple[dict, float, float]:
    """(the --json result, wall seconds, CPU seconds of the process and its children) of one `adreno` command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args), "--json"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"adreno {' '.join(map(str, args))} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(proc.stdout), wall, cpu


def switching(artifact: str, cache_dir: str) -> list[dict]:
    """Each set run in turn, twice, in this process; executors made at a set's first run and kept."""
    os.environ["ADRENO_CACHE_DIR"] = cache_dir
    from adreno.artifact.format import Artifact, random_inputs
    from adreno.cache import ProgramCache
    from adreno.opencl.executor import Executor

    loaded, cache, executors, runs = Artifact.load(artifact), ProgramCache(), {}, []
    for turn in range(2):
        for index in range(len(loaded.shape_sets)):
            view = Artifact.load(artifact, shape_set=index)
            started = time.perf_counter()
            executor = executors.get(index)
            built = 0
            if executor is None:
                executor = executors[index] = Executor(view, "pocl", cache=cache)
                built = sum(b.how in ("miss", "source", "disabled") for b in executor.builds)
            executor.run(random_inputs(view.input_specs(), 0))
            runs.append({"turn": turn, "set": view.manifest["shape_set"]["label"], "programs_built": built,
                         "seconds": round(time.perf_counter() - started, 3)})
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="ONNX model (default: PP-OCRv4 rec of rapidocr-onnxruntime)")
    parser.add_argument("--input", default="x", help="the input whose width varies (default x)")
    parser.add_argument("--shape", default="1,3,48,{w}", help="its shape, {w} the width (default 1,3,48,{w})")
    parser.add_argument("--widths", default="160,320,640")
    parser.add_argument("--memory", default="texture", choices=("texture", "buffer"))
    parser.add_argument("--jobs", type=int, default=None, help="adreno compile --jobs of the several-shape compile "
                        "(default: adreno's, one per core)")
    parser.add_argument("--json", default="bench_shapes.json")
    parser.add_argument("--smoke", action="store_true", help="a one-conv model at widths 8 and 16 in buffer memory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as scratch:
        if args.smoke:
            args.model, args.shape, args.widths, args.memory = (smoke_model(Path(scratch) / "smoke.onnx"),
                                                                "1,4,8,{w}", "8,16", "buffer")
        return measure(args, scratch)


def measure(args, scratch: str) -> int:
    """Compile, measure and report (see the module doc), working in `scratch`."""
    import numpy as np

    model = args.model or default_model()
    widths = [int(w) for w in args.widths.split(",")]
    flags = [f"{args.input}:{args.shape.format(w=w)}" for w in widths]
    env = {"ADRENO_CACHE_DIR": str(Path(scratch) / "compile-cache")}
    common = ["--memory", args.memory, "-q"]
    one, one_wall, one_cpu = adreno("compile", model, "-o", Path(scratch) / "one", "--input-shape", flags[0],
                                    *common, env=env)
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    many, many_wall, many_cpu = adreno("compile", model, "-o", Path(scratch) / "many", *common, *jobs,
                                       *[a for flag in flags for a in ("--input-shape", flag)], env=env)
    runs = switching(str(Path(scratch) / "many"), str(Path(scratch) / "run-cache"))
    starts = []
    for width in widths:
        inputs = Path(scratch) / f"w{width}.npz"
        shape = [int(d) for d in args.shape.format(w=width).split(",")]
        np.savez(inputs, **{args.input: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
        result, _, _ = adreno("run", Path(scratch) / "many", "--input", inputs, "--repeat", "1",
                              env={"ADRENO_CACHE_DIR": str(Path(scratch) / "run-cache")})
        starts.append({"set": result["shape_set"]["label"], "build_from": result["build_from"],
                       "start_seconds": result["start_seconds"]})
    one_sizes, many_sizes = one["sizes"], many["sizes"]
    budget = 1.1 * one_sizes["weights"] + len(widths) * (one_sizes["kernels"] + one_sizes["host_library"])
    total_many = sum(many_sizes.values())
    report = {
        "model": model, "memory": args.memory, "widths": widths, "jobs": args.jobs, "cores": os.cpu_count(),
        "one": {"sizes": one_sizes, "wall_s": round(one_wall, 1), "cpu_s": round(one_cpu, 1)},
        "many": {"sizes": many_sizes, "wall_s": round(many_wall, 1), "cpu_s": round(many_cpu, 1),
                 "kernels_stored": many["kernels_stored"],
                 "kernels_per_set": [s["kernels"] for s in many["shape_sets"]]},
        "size_ratio_to_budget": round(total_many / budget, 3),
        "compile_cpu_ratio": round(many_cpu / one_cpu, 2), "compile_wall_ratio": round(many_wall / one_wall, 2),
        "switching": runs, "fresh_starts": starts,
        "load_average": os.getloadavg()[0],
    }
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    kib = 1024

    def sizes(s):
        return (f"{s['weights'] / kib:9.0f} {s['kernels'] / kib:9.0f} {s['host_library'] / kib:9.0f} "
                f"{sum(s.values()) / kib:9.0f}")
    print(f"{Path(model).name}, {args.memory} memory, widths {widths} (KiB; CPU s of the compile process and its "
          f"children; --jobs {args.jobs or 'default'} on {os.cpu_count()} cores)")
    print(f"{'artifact':<28} {'weights':>9} {'kernels':>9} {'host lib':>9} {'total':>9} {'CPU s':>7} {'wall s':>7}")
    print(f"{'one width (' + str(widths[0]) + ')':<28} {sizes(one_sizes)} {one_cpu:7.1f} {one_wall:7.1f}")
    print(f"{str(len(widths)) + ' widths, one artifact':<28} {sizes(many_sizes)} {many_cpu:7.1f} {many_wall:7.1f}")
    print(f"size / (1.1 x weights + {len(widths)} x one width's kernels and host library): "
          f"{report['size_ratio_to_budget']:.2f}; compile CPU {report['compile_cpu_ratio']:.2f}x, wall "
          f"{report['compile_wall_ratio']:.2f}x one width's")
    print("runs in one process (executor per set kept): " + ", ".join(
        f"{r['set']} built {r['programs_built']}" for r in runs))
    print("fresh `adreno run` per width after them: " + ", ".join(f"{s['set']} {s['build_from']}" for s in starts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
