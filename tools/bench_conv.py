#!/usr/bin/env python3
"""Benchmark every distinct conv layer of a zoo model (conv + BN + activation, as in the model) four ways:

  adreno  our default schedules (`schedules="adreno"`), run through the artifact executor
  tvm     TVM 0.27's default dlight schedules (`schedules="tvm"`)
  winograd  our schedules with the conv rewritten to Winograd (`winograd="f4"`, or `--winograd f2|auto`), only for
          3x3 stride-1 layers (others: "n/a"); checked to WINOGRAD_TOL (fp32 Winograd rounds more than direct)
  naive   a hand-written one-output-per-work-item OpenCL kernel (BN folded to scale/shift, activation fused;
          `adreno.baseline`)
  torch   PyTorch/cuDNN fp32 with TF32 off, only when torch with CUDA is importable

Every timing counts only after that implementation's output matched the onnxruntime reference of the same layer
(max |diff| <= 1e-4 * max(1, max |ref|)); a mismatch is reported and the timing dropped.
Times are medians of device time (OpenCL profiling events / CUDA events), GFLOP/s = 2*N*Co*Ho*Wo*(Ci/g)*Kh*Kw / t.

    tools/bench_conv.py [--device pocl|gpu|N] [--model resnet18|mobilenetv2|tiny] [--json out.json] [--layers N]
                        [--memory buffer|texture] [--smoke]

`--memory texture` compiles the adreno, winograd and tvm columns for images (direct convs: `conv2d_texture`, 1x1
convs `conv2d_1x1`; the tvm column: TVM's schedules on the texture path) and times each layer's own kernels.

For a machine without TVM (e.g. a GPU box that has only pyopencl, numpy and torch), split the run in two:
`--prepare DIR` (here) compiles the columns of `PREPARED` for every layer: ours on buffers (adreno) and on textures
(texture), the same with the analytical model's ranked defaults (model, model_tex: `--defaults model`) and
unstaged (unstaged, unstaged_tex: `--staging off`, so a GPU run says whether staging in local memory pays),
Winograd F(2x2)/F(4x4) on buffers (f2, f4) and textures (f2_tex, f4_tex) for 3x3 stride-1 layers, and TVM's
defaults (tvm). Each is checked on PoCL against onnxruntime with the layer's weights, then travels light
(`runners.offline.travel_light`: seeded params regenerated there and checked by checksum, no host library) with its
PoCL output on those params as its reference (sampled, `runners.offline.save_reference`); the layer's input and raw
weights (naive, torch columns) are regenerated there from their seed, checked against onnxruntime's output.
`--artifacts DIR` there (no compiler, no onnxruntime) builds every artifact's programs in parallel first.
See tools/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

# The checkout this tool lives in is the library it measures (on a GPU machine: the bundle's copy, not installed).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adreno.baseline import cuda_median_ms, run_naive  # noqa: E402
from adreno.conv_layers import (TOL, WINOGRAD_TOL, Layer, conv_layers, folded_bn, layer_model,  # noqa: E402
                                layer_params, max_error)


@dataclass
class Result:
    layer: str
    gflop: float
    count: int
    ms: dict = field(default_factory=dict)
    gflops: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)  # compiled column -> {"timed": [names], "untimed": [names]}


def run_compiled(model, layer: Layer, x, ref, schedules: str, device, repeat: int, workdir: Path,
                 winograd: str = "off", tol: float = TOL, memory: str = "buffer", target: str = "adreno-740",
                 facts=None):
    """(median device ms, max error, kernels) of the layer compiled for `target` with `schedules`, `winograd` and
    `memory` (`facts`: the measured device's, `measured_target`); (None, error, {}) when its output does not
    match. With textures the time is the layer's own kernels' (`layer_time`)."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    out = workdir / f"{layer.name}-{schedules}-{memory}{'' if winograd == 'off' else '-' + winograd}"
    compile_model(model, out, CompileOptions(target=target, host="native", schedules=schedules,
                                             memory=memory, winograd=winograd, facts=facts))
    ex = Executor(out, device=device)
    err = max_error(ex.run([x])[0], ref)
    if err > tol:
        return None, err, {}
    prof = ex.profile([x], repeat=repeat, warmup=1)
    ms, kernels = layer_time([(k.name, k.calls, k.median_ms) for k in prof.kernels], memory)
    return (prof.device_median_ms if memory == "buffer" else ms), err, kernels


def torch_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def run_torch(layer: Layer, p, compare, repeat: int):
    import torch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    scale, shift = folded_bn(p)
    x = torch.from_numpy(p["x"]).to(dev)
    w = torch.from_numpy(p["w"]).to(dev)
    s = torch.from_numpy(scale).to(dev).view(1, -1, 1, 1)
    b = torch.from_numpy(shift).to(dev).view(1, -1, 1, 1)

    def fn():
        y = torch.nn.functional.conv2d(x, w, stride=layer.stride, padding=layer.pad, groups=layer.groups) * s + b
        if layer.act == "relu":
            y = torch.relu(y)
        elif layer.act == "clip6":
            y = torch.clamp(y, 0.0, 6.0)
        return y

    with torch.no_grad():
        for _ in range(3):
            y = fn()
        torch.cuda.synchronize()
        err = compare(y.cpu().numpy())
        if err > TOL:
            return None, err
        return cuda_median_ms(fn, max(repeat, 10)), err


def checksum(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


class Column(NamedTuple):
    """How a prepared column is compiled (`CompileOptions` fields; defaults None: the rule's)."""

    schedules: str
    memory: str
    winograd: str
    defaults: str | None = None
    staging: str = "auto"


# The compiled columns of a prepared run; f2/f4 only for Winograd-eligible layers; model/model_tex: the analytical
# model's ranked defaults beside adreno/texture's rule defaults, unstaged/unstaged_tex: the rule defaults never staged
# in local memory, so a GPU run says which is faster per layer.
PREPARED = {"adreno": Column("adreno", "buffer", "off"), "texture": Column("adreno", "texture", "off"),
            "unstaged": Column("adreno", "buffer", "off", staging="off"),
            "unstaged_tex": Column("adreno", "texture", "off", staging="off"),
            "model": Column("adreno", "buffer", "off", "model"),
            "model_tex": Column("adreno", "texture", "off", "model"),
            "f2": Column("adreno", "buffer", "f2"), "f4": Column("adreno", "buffer", "f4"),
            "f2_tex": Column("adreno", "texture", "f2"), "f4_tex": Column("adreno", "texture", "f4"),
            "tvm": Column("tvm", "buffer", "off")}


def eligible(layer: Layer, winograd: str) -> bool:
    return winograd == "off" or (layer.k == 3 and layer.stride == 1 and layer.groups == 1)


def layer_time(prof_kernels, memory: str) -> tuple[float, dict]:
    """The layer's own kernels' ms and {"timed": names, "untimed": names}: with textures, without the packing of its
    NCHW input and the unpacking of its output (a model's boundary, not the layer's)."""
    own = [memory == "buffer" or "pack_nchw4c" not in name for name, _, _ in prof_kernels]
    names = {"timed": [], "untimed": []}
    for (name, _, _), timed in zip(prof_kernels, own, strict=True):
        names["timed" if timed else "untimed"].append(name)
    return sum(ms * calls for (_, calls, ms), timed in zip(prof_kernels, own, strict=True) if timed), names


def prepare(model_name: str, layers: list[Layer], out: Path, columns: list[str], target: str = "adreno-740") -> None:
    """Compile every prepared column of every layer into `out`, check each on PoCL against onnxruntime with the real
    weights, then let it travel light (`runners.offline.travel_light`: seeded params, no host library) with its PoCL
    output on the seeded params as its reference; the naive and torch columns get the onnxruntime reference. A
    column that fails here is recorded with why and not shipped."""
    from adreno.reference import onnxruntime_session

    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.runners.offline import save_reference, travel_light
    from adreno.opencl.executor import Executor

    out.mkdir(parents=True, exist_ok=True)
    index = []
    for layer in layers:
        p = layer_params(layer)
        model = layer_model(layer, p)
        ref = onnxruntime_session(model.SerializeToString()).run(
            None, {"x": p["x"]})[0]
        ldir = out / layer.name
        if ldir.exists():
            shutil.rmtree(ldir)
        ldir.mkdir()
        save_reference(ldir / "ref.npz", [ref])
        prepared = {}
        for col in columns:
            column = PREPARED[col]
            if not eligible(layer, column.winograd):
                continue
            adir = ldir / col
            tol = TOL if column.winograd == "off" else WINOGRAD_TOL
            try:
                compile_model(model, adir, CompileOptions(target=target, **column._asdict()))
                ex = Executor(adir, "pocl")
                err = max_error(ex.run([p["x"]])[0], ref)
                if err > tol:
                    raise ValueError(f"MISMATCH on PoCL: max rel err {err:.2e}")
                ex.write_params(travel_light(adir))
                save_reference(adir / "ref.npz", ex.run([p["x"]]))
                (adir / "params.npz").unlink()
                prepared[col] = {"max_error": err}
            except Exception as exc:  # noqa: BLE001 - a failing column must not stop the table
                shutil.rmtree(adir, ignore_errors=True)
                prepared[col] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        index.append({**asdict(layer), "x_sha": checksum(p["x"]), "w_sha": checksum(p["w"]), "prepared": prepared})
        print(f"prepared {layer.name}: {layer.label()} "
              + " ".join(f"{c}:{'ok' if 'error' not in v else 'FAIL'}" for c, v in prepared.items()), flush=True)
    (out / "layers.json").write_text(json.dumps({"model": model_name, "target": target, "columns": columns,
                                                 "layers": index}, indent=1))


def load_prepared(prepared: Path) -> tuple[str, str, list[str], list[Layer], dict]:
    """(model, target, columns, layers, layer name -> its index entry) of a `prepare`d directory."""
    index = json.loads((prepared / "layers.json").read_text())
    names = set(Layer.__dataclass_fields__)
    layers = [Layer(**{k: tuple(v) if k == "pads" else v for k, v in entry.items() if k in names})
              for entry in index["layers"]]
    return index["model"], index["target"], index["columns"], layers, {e["name"]: e for e in index["layers"]}


def prebuild_prepared(prepared: Path, layers: list[Layer], index: dict, device_spec: str, cache_root: Path,
                      deadline: float | None) -> dict:
    """Restore every shipped artifact's params and build all their programs in parallel (one process per core);
    artifact -> (seconds, error or None) for those built by `deadline`."""
    from adreno.runners.offline import prebuild, restore_params

    paths = []
    for layer in layers:
        for col, state in index[layer.name]["prepared"].items():
            if "error" not in state:
                restore_params(prepared / layer.name / col)
                paths.append(str(prepared / layer.name / col))
    started = time.perf_counter()
    built = prebuild(paths, device_spec, cache_root, deadline=deadline)
    print(f"built {len(built)} of {len(paths)} artifacts' programs in parallel in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    return built


def run_prepared(prepared: Path, layer: Layer, col: str, x, device, cache, built: dict, repeat: int):
    """(ms, max error, kernels) of a prepared column on this device, checked against its PoCL reference first
    (`built`: `prebuild_prepared`'s result)."""
    from adreno.runners.offline import load_reference, measure_artifact

    adir = prepared / layer.name / col
    if str(adir) not in built or built[str(adir)][1]:
        return None, built.get(str(adir), (0, "not built within the time budget"))[1], {}
    tol = TOL if PREPARED[col].winograd == "off" else WINOGRAD_TOL
    reference = load_reference(adir / "ref.npz")
    scale = max(1.0, float(np.abs(reference[0][1]).max()))
    result = measure_artifact(str(adir), [x], reference, device, cache.for_artifact(adir), repeat,
                              rtol=0.0, atol=tol * scale)
    if "error" in result:
        return None, result["error"], {}
    ms, kernels = layer_time(result["kernels"], PREPARED[col].memory)
    return ms, result["max_error"] / scale, kernels


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return float(math.exp(sum(math.log(v) for v in values) / len(values))) if values else None


def measured_target(device):
    """(target name, facts) of the device being measured: its table entry with its live values over it
    (`from_opencl`, e.g. pocl-cpu with this machine's cores, handed to compile as `CompileOptions.facts`), or
    adreno-740's entry when the table does not know the device."""
    from adreno.targets.devices import DEVICES, OTHER_DEVICES, from_opencl

    live = from_opencl(device)
    return (live.name, live) if live.name in {**DEVICES, **OTHER_DEVICES} else ("adreno-740", None)


def sampled_error(out: np.ndarray, reference) -> float:
    """max |out - ref| / max(1, max |ref|) over the elements a sampled reference (`runners.offline`) keeps."""
    from adreno.runners.offline import sample_indices

    (shape, values), = reference
    if tuple(out.shape) != shape or not np.all(np.isfinite(out)):
        return float("inf")
    keep = sample_indices(out.size)
    flat = out.reshape(-1) if keep is None else out.reshape(-1)[keep]
    return max_error(flat, values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="pocl", help="OpenCL device: pocl | gpu | cpu | index | name substring")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "mobilenetv2", "resnet18_block", "tiny"])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--layers", type=int, help="only the first N distinct layers")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per implementation (median is reported)")
    ap.add_argument("--skip", default="", help="comma-separated columns to skip: adreno,tvm,winograd,naive,torch "
                    "(prepared runs: also texture,f2,f4,f2_tex,f4_tex)")
    ap.add_argument("--winograd", default="f4", choices=["f2", "f4", "auto"],
                    help="the winograd column's mode (f2/f4: forced on every 3x3 stride-1 layer)")
    ap.add_argument("--memory", default="buffer", choices=["buffer", "texture"],
                    help="where the compiled columns keep tensors (texture: packed images; the layer's own kernels "
                    "are timed, without the packing of its NCHW input and the unpacking of its output)")
    ap.add_argument("--prepare", metavar="DIR", help="only compile the layers' artifacts + references into DIR "
                    f"(columns {', '.join(PREPARED)}, less --skip)")
    ap.add_argument("--artifacts", metavar="DIR", help="run from a --prepare'd DIR (no TVM/onnxruntime needed)")
    ap.add_argument("--target", help="compile for this target (default: the measured device's own entry, e.g. "
                    "pocl-cpu on PoCL, nvidia-h200 on the H200; adreno-740 for --prepare and for devices the table "
                    "does not know); its parallelism decides the default tiles")
    ap.add_argument("--budget-s", type=float, help="with --artifacts: stop building and measuring after this many "
                    "seconds (the table so far is printed and written)")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny's first layer, one timed run, no "
                    "torch or naive column")
    args = ap.parse_args(argv)
    if args.smoke:
        args.model, args.layers, args.repeat = "tiny", 1, 1
        args.skip = ",".join(filter(None, [args.skip, "torch", "naive"]))
    started = time.perf_counter()
    skip = set(filter(None, args.skip.split(",")))

    if args.memory == "texture" and (args.prepare or args.artifacts):
        ap.error("--prepare/--artifacts have their own texture columns (texture, f2_tex, f4_tex)")
    if args.artifacts and args.target:
        ap.error("--artifacts measures what --prepare compiled, for the --target given there")
    if args.prepare:
        layers = conv_layers(args.model)
        prepare(args.model, layers[: args.layers] if args.layers else layers, Path(args.prepare),
                [c for c in PREPARED if c not in skip], args.target or "adreno-740")
        return 0

    from adreno.opencl.device import select_device

    prepared = Path(args.artifacts) if args.artifacts else None
    if prepared is not None:
        args.model, target, compiled, layers, index = load_prepared(prepared)
        facts = None  # compiled already, for `target`'s table entry
        compiled = [c for c in compiled if c not in skip]
    else:
        layers = conv_layers(args.model)
        compiled = [c for c in ("adreno", "tvm", "winograd") if c not in skip]
    layers = layers[: args.layers] if args.layers else layers
    device = select_device(args.device)
    if prepared is None:  # a prepared run compiled already
        target, facts = (args.target, None) if args.target else measured_target(device)
    columns = compiled + [c for c in ("naive",) if c not in skip]
    if "torch" not in skip and torch_available():
        columns.append("torch")
    memory = "buffer/texture" if prepared is not None else args.memory
    print(f"device: {device.name.strip()} ({device.platform.name.strip()}); model {args.model}: "
          f"{len(layers)} distinct conv layers; {memory} memory; target {target}; columns: {', '.join(columns)}",
          flush=True)
    results: list[Result] = []
    header = f"{'layer':<44}{'x':>3}{'GFLOP':>8}" + "".join(f"{c + ' ms':>12}{c + ' GF/s':>12}" for c in columns)
    with tempfile.TemporaryDirectory() as tmp:
        if prepared is not None:
            from adreno.cache import ProgramCache

            built = prebuild_prepared(prepared, layers, index, args.device, Path(tmp) / "programs",
                                      None if args.budget_s is None else started + args.budget_s)
            cache = ProgramCache(Path(tmp) / "programs")
        print(header)
        for number, layer in enumerate(layers):
            if args.budget_s is not None and time.perf_counter() - started > args.budget_s:
                print(f"time budget of {args.budget_s:g} s spent: {len(layers) - number} layers not measured")
                break
            p = layer_params(layer)
            if prepared is not None:
                from adreno.runners.offline import load_reference

                model, entry = None, index[layer.name]
                reference = load_reference(prepared / layer.name / "ref.npz")
                compare = lambda out, reference=reference: sampled_error(out, reference)  # noqa: E731
                if (checksum(p["x"]), checksum(p["w"])) != (entry["x_sha"], entry["w_sha"]):
                    raise SystemExit(f"{layer.name}: regenerated inputs differ from the prepared ones (numpy version?)")
            else:
                from adreno.reference import onnxruntime_session

                model = layer_model(layer, p)
                ref = onnxruntime_session(model.SerializeToString()).run(
                    None, {"x": p["x"]})[0]
                compare = lambda out, ref=ref: max_error(out, ref)  # noqa: E731
            res = Result(layer.label(), layer.flops / 1e9, layer.count)
            for col in columns:
                kernels = {}
                try:
                    if prepared is not None and col in PREPARED:
                        state = entry["prepared"].get(col)
                        if state is None:
                            res.errors[col] = "n/a"
                            continue
                        ms, err, kernels = ((None, f"prepare: {state['error']}", {}) if "error" in state
                                            else run_prepared(prepared, layer, col, p["x"], device, cache, built,
                                                              args.repeat))
                    elif col == "winograd":
                        if not eligible(layer, "f4"):
                            res.errors[col] = "n/a"
                            continue
                        ms, err, kernels = run_compiled(model, layer, p["x"], ref, "adreno", device, args.repeat,
                                                        Path(tmp), winograd=args.winograd, tol=WINOGRAD_TOL,
                                                        memory=args.memory, target=target, facts=facts)
                    elif col in ("adreno", "tvm"):
                        ms, err, kernels = run_compiled(model, layer, p["x"], ref, col, device, args.repeat,
                                                        Path(tmp), memory=args.memory, target=target, facts=facts)
                    elif col == "naive":
                        ms, err = run_naive(layer, p, compare, device, args.repeat)
                    else:
                        ms, err = run_torch(layer, p, compare, args.repeat)
                except Exception as exc:  # noqa: BLE001 - a failing column must not stop the table
                    ms, err = None, f"{type(exc).__name__}: {exc}"[:300]
                res.errors[col] = err
                if kernels:
                    res.kernels[col] = kernels
                if ms is not None:
                    res.ms[col] = ms
                    res.gflops[col] = layer.flops / (ms * 1e6)
                elif isinstance(err, float):
                    res.errors[col] = f"MISMATCH max rel err {err:.2e}"
            for wino in ("winograd", "f2", "f4", "f2_tex", "f4_tex"):
                direct = "texture" if wino.endswith("_tex") else "adreno"
                if wino in res.ms and direct in res.ms:
                    res.errors[f"{wino}_speedup_vs_{direct}"] = res.ms[direct] / res.ms[wino]
            results.append(res)
            line = f"{res.layer:<44}{layer.count:>3}{res.gflop:>8.3f}"
            for col in columns:
                if col in res.ms:
                    line += f"{res.ms[col]:>12.3f}{res.gflops[col]:>12.2f}"
                elif res.errors.get(col) == "n/a":
                    line += f"{'n/a':>12}{'-':>12}"
                else:
                    line += f"{'FAIL':>12}{'-':>12}"
            print(line, flush=True)
            for col in columns:
                if col not in res.ms and res.errors.get(col) != "n/a":
                    print(f"    {col}: {res.errors[col]}", flush=True)

    summary = {col: geomean([r.gflops.get(col) for r in results]) for col in columns}
    ratios = {}
    for a in columns:
        for b in columns:
            if a != b:
                pairs = [r.gflops[a] / r.gflops[b] for r in results if a in r.gflops and b in r.gflops]
                if pairs:
                    ratios[f"{a}/{b}"] = geomean(pairs)
    weighted = {col: sum(r.ms[col] * r.count for r in results if col in r.ms) for col in columns
                if all(col in r.ms for r in results)}
    print("geomean GFLOP/s: " + ", ".join(f"{c} {v:.2f}" if v else f"{c} -" for c, v in summary.items()))
    print("geomean ratios (per layer, layers where both ran): "
          + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()
                      if k.startswith("adreno/") or k in ("naive/tvm", "winograd/adreno", "texture/adreno")))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": args.model, "memory": memory, "target": target, "device": device.name.strip(),
            "platform": device.platform.name.strip(),
            "columns": columns, "repeat": args.repeat, "tolerance": TOL, "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "layers": [asdict(r) for r in results], "geomean_gflops": summary, "geomean_ratios": ratios,
            "count_weighted_ms": weighted,
        }, indent=1))
    failed = [r.layer for r in results if "adreno" in columns and "adreno" not in r.ms]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
