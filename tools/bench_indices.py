#!/usr/bin/env python3
"""What the run-time index check costs: a Gather-heavy model compiled with the check (the default) and with
`--trust-indices`, side by side in one run, each checked against onnxruntime, then timed on the chosen device.

    python tools/bench_indices.py [--vocab 30522] [--dim 128] [--seq 128 512] [--memory buffer texture]
                                  [--device pocl] [--repeat 50] [--json out.json] [--smoke]

The model is BERT's embedding lookup: three Gathers (word, token type, position) whose indices are the model's inputs,
summed. The check adds, per Gather, the guard's elementwise kernels and one reduction, and one concatenation of the
flags (`adreno.frontend.index_guards`); the table gives the kernels, the median wall time per run (launches
included: what an app waits) and the median device time (the sum of the kernels' profiling-event times), and the
checked/trusted ratio of each, both variants profiled in alternating rounds. On PoCL (CPU) a launch costs what it
costs on a CPU; on an Adreno GPU the device time of the tiny guard kernels is what to compare. `--smoke` (CI): a
64-word table of 8, 8 ids, buffer memory, one round of 2 runs."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from adreno.compile import compile_model
from adreno.opencl.device import select_device
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions, Indices
from adreno.reference import compare, onnxruntime_outputs


def embedding_model(vocab: int, dim: int, seq: int):
    """BERT's embeddings without the LayerNorm: word + token type + position lookups, indices as inputs."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    tables = {"words": (vocab, dim), "types": (2, dim), "positions": (seq, dim)}
    nodes = [helper.make_node("Gather", [table, f"{table}_ids"], [f"{table}_rows"], name=f"{table}_lookup")
             for table in tables]
    nodes += [helper.make_node("Add", ["words_rows", "types_rows"], ["partial"]),
              helper.make_node("Add", ["partial", "positions_rows"], ["embeddings"])]
    graph = helper.make_graph(
        nodes, "embeddings", [helper.make_tensor_value_info(f"{t}_ids", TensorProto.INT64, [1, seq]) for t in tables],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, [1, seq, dim])],
        [numpy_helper.from_array(rng.standard_normal(shape, np.float32), t) for t, shape in tables.items()])
    inputs = [rng.integers(0, vocab, (1, seq)), rng.integers(0, 2, (1, seq)), np.arange(seq)[None]]
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), inputs


def executor(model, inputs, memory: str, indices: Indices, device, workdir: Path) -> Executor:
    """The compiled variant's executor, once its output matched onnxruntime's."""
    path = compile_model(model, workdir / f"{memory}-{indices}", CompileOptions(memory=memory, indices=indices))
    executor = Executor(path, device)
    row = compare(executor.run(inputs), onnxruntime_outputs(model, inputs))[0]
    if row["problem"] or row["max_abs_error"] > 1e-4 + 1e-3 * row["max_abs_ref"]:
        raise SystemExit(f"{memory} {indices}: the output differs from onnxruntime's: {row}")
    return executor


def bench_pair(model, inputs, memory: str, device, repeat: int, rounds: int, workdir: Path) -> list[dict]:
    """Trusted and checked, profiled in alternation for `rounds` rounds (a busy machine's drift hits both alike):
    per variant the median of the rounds' medians, and the median of the per-round checked/trusted ratios."""
    variants = (Indices.TRUSTED, Indices.CHECKED)
    executors = [executor(model, inputs, memory, indices, device, workdir) for indices in variants]
    wall, dev = [[], []], [[], []]
    for _ in range(rounds):
        for i, ex in enumerate(executors):
            profile = ex.profile(inputs, repeat=repeat)
            wall[i].append(profile.median_ms)
            dev[i].append(profile.device_median_ms)
    rows = [{"memory": memory, "indices": str(v), "kernels": ex.artifact.plan.kernel_count(),
             "median_ms": float(np.median(wall[i])), "device_median_ms": float(np.median(dev[i])),
             "rounds_median_ms": wall[i], "rounds_device_ms": dev[i]} for i, (v, ex) in enumerate(zip(variants,
                                                                                                  executors))]
    rows[1]["wall_ratio"] = float(np.median(np.array(wall[1]) / np.array(wall[0])))
    rows[1]["device_ratio"] = float(np.median(np.array(dev[1]) / np.array(dev[0])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--memory", nargs="+", default=["buffer", "texture"], choices=["buffer", "texture"])
    parser.add_argument("--device", default=None, help="OpenCL device (default: the first; e.g. pocl)")
    parser.add_argument("--repeat", type=int, default=50, help="timed runs per round and variant (default 50)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--smoke", action="store_true", help="a tiny table, one round (CI: the tool still runs)")
    args = parser.parse_args()
    if args.smoke:
        args.vocab, args.dim, args.seq, args.memory, args.repeat, args.rounds = 64, 8, [8], ["buffer"], 2, 1
    device = select_device(args.device)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seq in args.seq:
            model, inputs = embedding_model(args.vocab, args.dim, seq)
            for memory in args.memory:
                pair = bench_pair(model, inputs, memory, device, args.repeat, args.rounds, Path(tmp) / str(seq))
                rows += [{"seq": seq, **row} for row in pair]
    print(f"embedding lookup, vocab {args.vocab} x {args.dim}, on {device.name.strip()}: medians of {args.rounds} "
          f"alternating rounds of {args.repeat} runs; ratios: median of the per-round checked/trusted ratios")
    print(f"{'seq':>5} {'memory':<8} {'indices':<8} {'kernels':>7} {'wall ms':>9} {'device ms':>10} {'wall x':>7} "
          f"{'device x':>8}")
    for r in rows:
        ratios = (f"{r['wall_ratio']:>7.2f} {r['device_ratio']:>8.2f}" if "wall_ratio" in r else "")
        print(f"{r['seq']:>5} {r['memory']:<8} {r['indices']:<8} {r['kernels']:>7} {r['median_ms']:>9.3f} "
              f"{r['device_median_ms']:>10.3f} {ratios}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name.strip(), "vocab": args.vocab, "dim": args.dim,
                                               "repeat": args.repeat, "rounds": args.rounds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
