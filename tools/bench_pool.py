#!/usr/bin/env python3
"""Benchmark the pooling and reduction layers of zoo models: our schedules (`adreno/schedules/pool.py`,
`adreno/schedules/reduce.py`) against TVM 0.27's default ones (`schedules="tvm"`), side by side in one run.

The layers are found in the models themselves: every function of the model (after TVM's legalization and fusion)
that the pool or reduce family recognises, with how often the model calls it. Each is rebuilt as a one-node ONNX
model (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, Softmax, LayerNormalization) whose function must
have the same workload key, compiled both ways for buffer memory (these are the NCHW buffer schedules) and run
through the artifact executor. `--softmax N` adds a classifier softmax over N logits (the zoo models end at their
logits). Every timing counts only after that implementation's output matched onnxruntime (max |diff| <= 1e-4 *
max(1, max |ref|)); times are medians of device time (OpenCL profiling events).

    tools/bench_pool.py [--models resnet18 mobilenetv2] [--device pocl|gpu|N] [--repeat 20] [--json out.json] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

TOL = 1e-4
COLUMNS = ("adreno", "tvm")


@dataclass
class Result:
    layer: str
    key: str
    models: dict  # model -> calls
    ms: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)


def pool_layers(model_name: str) -> dict[str, tuple]:
    """workload key -> (workload, calls) of the functions of `model_name` that the pool or reduce family claims."""
    from adreno.compile import lower_relax
    from adreno.frontend.importer import load_model, to_relax
    from adreno.options import Schedules
    from adreno.compiler.plan import kernel_calls
    from adreno.schedules import pool, reduce
    from adreno.schedules.context import ScheduleContext
    from adreno.targets.devices import get_device

    onnx_model, _ = load_model(model_name)
    lowered = lower_relax(to_relax(onnx_model, {}), ScheduleContext.for_device(get_device("adreno-740")),
                          schedules=Schedules.NONE)
    found: dict[str, tuple] = {}
    for _, _, func in kernel_calls(lowered):
        wl = pool.FAMILY.workload(func) or reduce.FAMILY.workload(func)
        if wl is not None:
            found[wl.key()] = (wl, found.get(wl.key(), (wl, 0))[1] + 1)
    return found


def layer_model(wl):
    """A one-node ONNX model computing the pooling `wl` (a PoolWorkload), or None for one it cannot express."""
    from onnx import TensorProto, helper, numpy_helper

    attrs, shape, inputs, weights = {}, list(wl.shape), ["x"], []
    if wl.windowed:
        op = "MaxPool" if wl.op == "max_pool2d" else "AveragePool"
        pads = [wl.padding[0], wl.padding[1], wl.padding[2], wl.padding[3]]
        attrs = dict(kernel_shape=[wl.kh, wl.kw], strides=list(wl.stride), pads=pads)
        if wl.op == "max_pool2d":
            attrs["dilations"] = list(wl.dilation)
    elif wl.op == "softmax":
        op, attrs = "Softmax", {"axis": wl.axes[0]}
    elif wl.op == "layer_norm" and wl.axes == (len(shape) - 1,):  # the scale and shift seeded constants
        op, attrs, inputs = "LayerNormalization", {"axis": -1, "epsilon": 1e-5}, ["x", "g", "b"]
        rng = np.random.default_rng(0)
        weights = [numpy_helper.from_array(rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32), "g"),
                   numpy_helper.from_array(rng.standard_normal(shape[-1]).astype(np.float32), "b")]
    elif len(shape) == 4 and wl.axes == (2, 3) and wl.op in ("global_sum", "global_max"):
        op = "GlobalAveragePool" if "T_divide" in wl.epilogue else "GlobalMaxPool" if wl.op == "global_max" else None
        if op is None:
            return None
    else:
        return None
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], **attrs)], op.lower(),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def softmax_workload(n: int):
    from adreno.schedules.pool import PoolWorkload

    return PoolWorkload("softmax", 1, 1, 1, n, 1, 1, 1, n, shape=(1, n), axes=(1,))


def label(wl) -> str:
    shape = "x".join(map(str, wl.shape))
    if wl.windowed:
        return f"{wl.op} {wl.kh}x{wl.kw}/s{wl.stride[0]} p{wl.padding[0]} @{shape}"
    if wl.op in ("softmax", "layer_norm"):
        return f"{wl.op} axis {wl.axes[0]} @{shape}"
    return f"{'mean' if 'T_divide' in wl.epilogue else wl.op} over H,W @{shape}"


def run_layer(model, x, ref, schedules: str, device, repeat: int, workdir: Path):
    """(median device ms, max rel error), ms None on a mismatch (`check_key` checked the model's workload first)."""
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    out = workdir / schedules
    compile_model(model, out, CompileOptions(target="adreno-740", host="native", schedules=schedules, memory="buffer"))
    ex = Executor(out, device=device)
    got = ex.run([x])[0]
    err = float(np.abs(got - ref).max() / max(1.0, float(np.abs(ref).max())))
    if err > TOL:
        return None, err
    return ex.profile([x], repeat=repeat, warmup=2).device_median_ms, err


def check_key(model, key: str) -> None:
    """The one-node model lowers to a function of the same workload as the model's layer."""
    import tvm

    from adreno.compile import lower_relax
    from adreno.frontend.importer import to_relax
    from adreno.options import Schedules
    from adreno.schedules import pool, reduce
    from adreno.schedules.context import ScheduleContext
    from adreno.targets.devices import get_device

    lowered = lower_relax(to_relax(model, {}), ScheduleContext.for_device(get_device("adreno-740")),
                          schedules=Schedules.NONE)
    keys = [pool.FAMILY.workload_key(f) or reduce.FAMILY.workload_key(f) for _, f in lowered.functions.items()
            if isinstance(f, tvm.tirx.PrimFunc)]
    if key not in keys:
        raise SystemExit(f"the one-node model of {key} lowers to {keys}, not to the model's workload")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet18", "mobilenetv2"])
    ap.add_argument("--device", default="pocl", help="OpenCL device: pocl | gpu | cpu | index | name substring")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per implementation (median is reported)")
    ap.add_argument("--softmax", type=int, default=1000, help="add a softmax over this many logits (0: none)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, one timed run, a softmax of 10")
    args = ap.parse_args(argv)
    if args.smoke:
        args.models, args.repeat, args.softmax = ["tiny"], 1, 10

    from adreno.reference import onnxruntime_session

    from adreno.opencl.device import select_device

    device = select_device(args.device)
    layers: dict[str, tuple] = {}
    for model_name in args.models:
        for key, (wl, calls) in pool_layers(model_name).items():
            layers.setdefault(key, (wl, {}))[1][model_name] = calls
    if args.softmax:
        wl = softmax_workload(args.softmax)
        layers.setdefault(wl.key(), (wl, {}))[1]["classifier"] = 1
    print(f"device: {device.name.strip()} ({device.platform.name.strip()}); {len(layers)} distinct pool/reduction "
          f"layers of {', '.join(args.models)}", flush=True)
    print(f"{'layer':<44}{'calls':>22}{'ours ms':>10}{'tvm ms':>10}{'speedup':>9}")
    results: list[Result] = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (key, (wl, calls)) in enumerate(layers.items()):
            res = Result(label(wl), key, calls)
            model = layer_model(wl)
            if model is None:
                res.errors = {c: "no one-node ONNX equivalent" for c in COLUMNS}
                results.append(res)
                continue
            check_key(model, key)
            x = rng.standard_normal(wl.shape).astype(np.float32)
            ref = onnxruntime_session(model.SerializeToString()).run(None, {"x": x})[0]
            for col in COLUMNS:
                ms, err = run_layer(model, x, ref, col, device, args.repeat, Path(tmp) / str(i))
                if ms is None:
                    res.errors[col] = f"MISMATCH max rel err {err:.2e}"
                else:
                    res.ms[col] = ms
            results.append(res)
            speedup = res.ms["tvm"] / res.ms["adreno"] if len(res.ms) == 2 else None
            used = ", ".join(f"{m} x{c}" for m, c in calls.items())
            print(f"{res.layer:<44}{used:>22}" + "".join(f"{res.ms[c]:>10.4f}" if c in res.ms else f"{'FAIL':>10}"
                                                         for c in COLUMNS)
                  + (f"{speedup:>8.2f}x" if speedup else f"{'-':>9}"), flush=True)
            for col, err in res.errors.items():
                print(f"    {col}: {err}", flush=True)

    totals = {}
    for model_name in [*args.models, *(["classifier"] if args.softmax else [])]:
        rows = [r for r in results if model_name in r.models and len(r.ms) == 2]
        if rows:
            ours = sum(r.ms["adreno"] * r.models[model_name] for r in rows)
            tvm = sum(r.ms["tvm"] * r.models[model_name] for r in rows)
            totals[model_name] = {"adreno_ms": ours, "tvm_ms": tvm, "speedup": tvm / ours}
            print(f"{model_name}: pool/reduction layers {tvm:.4f} ms with TVM's schedules -> {ours:.4f} ms with ours "
                  f"({tvm / ours:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "models": args.models, "device": device.name.strip(), "platform": device.platform.name.strip(),
            "repeat": args.repeat, "tolerance": TOL, "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "layers": [asdict(r) for r in results], "totals": totals}, indent=1))
    return 1 if any(len(r.ms) < 2 for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
