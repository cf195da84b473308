#!/usr/bin/env python3
"""What the run-time index check costs: a Gather-heavy model compiled with the check (the default) and with
`--trust-indices`, side by side in one run, each checked against onnxruntime, then timed on the chosen device.

    python tools/bench_indices.py [--vocab 30522] [--dim 128] [--seq 128 512] [--memory buffer texture]
                                  [--device pocl] [--repeat 50] [--json out.json]

The model is BERT's embedding lookup: three Gathers (word, token type, position) whose indices are the model's inputs,
summed. The check adds, per Gather, the guard's elementwise kernels and one reduction, and one concatenation of the
flags (`adreno.frontend.index_guards`); the table gives the kernels, the median wall time per run (launches
included: what an app waits) and the median device time (the sum of the kernels' profiling-event times), and the
checked/trusted ratio of each. On PoCL (CPU) a launch costs what it costs on a CPU; on an Adreno GPU the device time
of the tiny guard kernels is what to compare."""

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


def bench(model, inputs, memory: str, indices: Indices, device, repeat: int, workdir: Path) -> dict:
    path = compile_model(model, workdir / f"{memory}-{indices}", CompileOptions(memory=memory, indices=indices))
    executor = Executor(path, device)
    row = compare(executor.run(inputs), onnxruntime_outputs(model, inputs))[0]
    if row["problem"] or row["max_abs_error"] > 1e-4 + 1e-3 * row["max_abs_ref"]:
        raise SystemExit(f"{memory} {indices}: the output differs from onnxruntime's: {row}")
    profile = executor.profile(inputs, repeat=repeat)
    return {"memory": memory, "indices": str(indices), "kernels": executor.artifact.plan.kernel_count(),
            "median_ms": profile.median_ms, "device_median_ms": profile.device_median_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--memory", nargs="+", default=["buffer", "texture"], choices=["buffer", "texture"])
    parser.add_argument("--device", default=None, help="OpenCL device (default: the first; e.g. pocl)")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    device = select_device(args.device)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seq in args.seq:
            model, inputs = embedding_model(args.vocab, args.dim, seq)
            for memory in args.memory:
                pair = [bench(model, inputs, memory, indices, device, args.repeat, Path(tmp) / str(seq))
                        for indices in (Indices.TRUSTED, Indices.CHECKED)]
                for row in pair:
                    row["seq"] = seq
                pair[1]["wall_ratio"] = pair[1]["median_ms"] / pair[0]["median_ms"]
                pair[1]["device_ratio"] = pair[1]["device_median_ms"] / pair[0]["device_median_ms"]
                rows += pair
    print(f"embedding lookup, vocab {args.vocab} x {args.dim}, on {device.name.strip()}, median of {args.repeat} runs")
    print(f"{'seq':>5} {'memory':<8} {'indices':<8} {'kernels':>7} {'wall ms':>9} {'device ms':>10} {'wall x':>7} "
          f"{'device x':>8}")
    for r in rows:
        ratios = (f"{r['wall_ratio']:>7.2f} {r['device_ratio']:>8.2f}" if "wall_ratio" in r else "")
        print(f"{r['seq']:>5} {r['memory']:<8} {r['indices']:<8} {r['kernels']:>7} {r['median_ms']:>9.3f} "
              f"{r['device_median_ms']:>10.3f} {ratios}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name.strip(), "vocab": args.vocab, "dim": args.dim,
                                               "repeat": args.repeat, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
