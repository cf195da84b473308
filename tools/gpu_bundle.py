#!/usr/bin/env python3
"""One bundle that measures every speed goal on a GPU machine that has no TVM, no onnx and no network.

    tools/gpu_bundle.py prepare DIR [--quick] [--trials K]     here (TVM, onnxruntime, PoCL)
    tools/gpu_bundle.py run DIR --out OUT [--device gpu|pocl] [--budget-s S]     there (numpy, pyopencl; torch)

`prepare` writes DIR/payload.tar.xz (every artifact, kernel sources included, compressed) and DIR/bundle.json (its
checksum, what it holds, how long preparing took):
  conv/<model>/       `tools/bench_conv.py --prepare`: every distinct conv layer, the compiled columns (ours on
                      buffers and textures with rule and model-ranked defaults and unstaged (`--staging off`: the
                      summary's adreno/unstaged, texture/unstaged_tex say whether staging pays), Winograd
                      F(2x2)/F(4x4) on both, TVM's defaults)
  whole/<model>-<v>/  the whole model compiled three ways (v: buffer, texture, fp16 images), each checked on PoCL
                      against onnxruntime, then travelling light (`runners.offline.travel_light`) with its PoCL output
                      on the seeded params as reference
  batches/<model>-<memory>/  `adreno tune --export-batch` of every tunable task (K candidates each: default, the
                      cost model's picks, random ones), textures and buffers
  orchestrate/<model>-<memory>/  `adreno orchestrate --export-batch` of MobileViT-xs and MobileNetV3-small (max
                      size 2), textures and buffers: every candidate kernel of orchestration and the launch-cost
                      artifacts
`run` unpacks and checks it, then: the conv tables (`bench_conv.py --artifacts`, cuDNN column when torch has CUDA);
the whole models (cold program build, warm start through the program cache, device and wall time) beside torchvision's
same architectures on cuDNN eager and with CUDA graphs; the tuning batches (`runners.offline`, within what is left of
--budget-s) merged into OUT/records.jsonl (keyed by the GPU's fingerprint; `adreno compile --records` takes it as it
is), with each cost model's ranking quality per task (Pearson, Spearman, top-1/top-5 recall of the scores stored
at export against the measured times); and OUT/summary.txt + summary.json with every ratio the goals use. Everything
it writes goes to OUT. The orchestration batches share the batches' time and come back as
OUT/orchestrate_<model>-<memory>.records.jsonl (docs/gpu.md says how to read them back into a report).
--quick (the CI dry run): one conv layer (ResNet-18's 64@56 3x3), the zoo's tiny model, two candidates per task.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS, QUICK_MODELS = ("resnet18", "mobilenetv2"), ("tiny",)
# orchestration's candidate kernels (docs/orchestrate.md), and the bound on their primitives
ORCHESTRATED, QUICK_ORCHESTRATED, ORCHESTRATE_MAX_SIZE = ("mobilevit_xs", "mobilenetv3_small"), ("tiny",), 2
VARIANTS = {"buffer": ("buffer", "fp32"), "texture": ("texture", "fp32"), "fp16": ("texture", "fp16")}
WHOLE_TOL = {"fp32": 1e-3, "fp16": 2e-2}  # max |diff| / max(1, max |ref|)
TORCHVISION = {"resnet18": "resnet18", "mobilenetv2": "mobilenet_v2"}


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(out.astype(np.float64) - ref).max() / max(1.0, float(np.abs(ref).max())))


def model_input(seed: int, shape) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------------- prepare (here)

def prepare_whole(model: str, out: Path, target: str) -> dict:
    from adreno.reference import onnxruntime_session

    from adreno.frontend import zoo
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.runners.offline import save_reference, travel_light
    from adreno.opencl.executor import Executor

    onnx_model = zoo.get_model(model)
    shape = [d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
    x = model_input(0, shape)
    ref = onnxruntime_session(onnx_model.SerializeToString()).run(
        None, {onnx_model.graph.input[0].name: x})[0]
    entries = {}
    for variant, (memory, precision) in VARIANTS.items():
        adir = out / f"{model}-{variant}"
        compile_model(model, adir, CompileOptions(target=target, memory=memory, precision=precision))
        ex = Executor(adir, "pocl")
        err = rel_error(ex.run([x])[0], ref)
        if err > WHOLE_TOL[precision]:
            raise SystemExit(f"{model} {variant}: output differs from onnxruntime on PoCL (max rel err {err:.2e})")
        ex.write_params(travel_light(adir))
        save_reference(adir / "ref.npz", ex.run([x]))
        (adir / "params.npz").unlink()
        entries[variant] = {"artifact": f"whole/{adir.name}", "precision": precision, "input_shape": shape,
                            "input_seed": 0, "prepare_max_error": err,
                            "programs": len(json.loads((adir / "plan.json").read_text())["programs"])}
        print(f"prepared {model} {variant}: max rel err vs onnxruntime {err:.1e}", flush=True)
    return entries


def prepare(out: Path, quick: bool, trials: int, target: str) -> None:
    from adreno.artifact.check import sha256_file
    from adreno.options import Memory
    from adreno.orchestrate.batch import export_batch as export_orchestration
    from adreno.tune.batch import export_batch

    started = time.perf_counter()
    payload = out / "payload"
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    payload.mkdir(parents=True)
    conv_models, models = (["resnet18_block"], QUICK_MODELS) if quick else (list(MODELS), MODELS)
    for model in conv_models:
        subprocess.run([sys.executable, str(ROOT / "tools" / "bench_conv.py"), "--model", model, "--prepare",
                        str(payload / "conv" / model), "--target", target,
                        *(["--layers", "1"] if quick else [])], check=True)
    whole = {model: prepare_whole(model, payload / "whole", target) for model in models}
    batches = []
    for model in models:
        for memory in ("texture", "buffer"):
            name = f"{model}-{memory}"
            manifest = export_batch(model, payload / "batches" / name, target=target, memory=memory, layouts=False,
                                    trials=2 if quick else trials, model_kind="learned",
                                    say=lambda text: print(text, flush=True))
            batches.append({"name": name, "tasks": len(manifest["tasks"]), "candidates": len(manifest["candidates"])})
            print(f"exported batch {name}: {batches[-1]}", flush=True)
    orchestrations = []
    for model in QUICK_ORCHESTRATED if quick else ORCHESTRATED:
        for memory in Memory:  # both, as `adreno compile --orchestrate` measures both to choose one
            name = f"{model}-{memory}"
            manifest = export_orchestration(model, payload / "orchestrate" / name, target, ORCHESTRATE_MAX_SIZE,
                                            memory=memory)
            orchestrations.append({"name": name, "model": model, "memory": memory, "id": manifest["id"],
                                   "candidates": len(manifest["candidates"]), "max_size": ORCHESTRATE_MAX_SIZE})
            print(f"exported orchestration batch {name}: {orchestrations[-1]}", flush=True)
    with tarfile.open(out / "payload.tar.xz", "w:xz", preset=6) as tar:
        tar.add(payload, arcname="payload")
    subprocess.run(["rm", "-rf", str(payload)], check=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    bundle = {"commit": commit, "target": target, "quick": quick, "conv_models": conv_models, "models": list(models),
              "whole": whole, "batches": batches, "orchestrations": orchestrations,
              "payload_sha256": sha256_file(out / "payload.tar.xz"),
              "payload_bytes": (out / "payload.tar.xz").stat().st_size,
              "prepare_seconds": round(time.perf_counter() - started, 1), "numpy": np.__version__}
    (out / "bundle.json").write_text(json.dumps(bundle, indent=1))
    print(f"bundle {out}: payload {bundle['payload_bytes'] / 2**20:.1f} MiB, prepared in "
          f"{bundle['prepare_seconds']:.0f} s", flush=True)


# ------------------------------------------------------------------------------------------------------- run (there)

def unpack(bundle_dir: Path, work: Path) -> dict:
    """Check the payload against bundle.json and unpack it into `work`."""
    from adreno.artifact.check import sha256_file
    bundle = json.loads((bundle_dir / "bundle.json").read_text())
    if sha256_file(bundle_dir / "payload.tar.xz") != bundle["payload_sha256"]:
        raise SystemExit(f"{bundle_dir}/payload.tar.xz does not match its checksum in bundle.json: prepare it again")
    with tarfile.open(bundle_dir / "payload.tar.xz") as tar:
        tar.extractall(work, filter="data")
    return bundle


def run_conv(work: Path, model: str, device: str, out: Path, repeat: int, budget_s: float) -> dict | None:
    json_path = out / f"conv_{model}.json"
    with open(out / f"conv_{model}.txt", "w") as log:
        try:
            subprocess.run([sys.executable, str(ROOT / "tools" / "bench_conv.py"), "--artifacts",
                            str(work / "payload" / "conv" / model), "--device", device, "--repeat", str(repeat),
                            "--json", str(json_path), "--budget-s", str(budget_s)], stdout=log,
                           stderr=subprocess.STDOUT, timeout=budget_s + 60)
        except subprocess.TimeoutExpired:
            print(f"conv table {model}: killed after {budget_s + 60:.0f} s", file=log)
    print((out / f"conv_{model}.txt").read_text(), flush=True)
    return json.loads(json_path.read_text()) if json_path.is_file() else None


def run_whole(work: Path, bundle: dict, device_spec: str, repeat: int) -> dict:
    """Our executor on every whole-model artifact: cold build (in parallel processes, each timing its own model),
    warm start through the program cache, first-run check, then device and wall time."""
    from adreno.cache import ProgramCache
    from adreno.runners.offline import check_reference, load_reference, prebuild, restore_params
    from adreno.opencl.device import select_device
    from adreno.opencl.executor import Executor

    device = select_device(device_spec)
    cache_root = work / "programs-whole"
    entries = [(model, variant, entry) for model, variants in bundle["whole"].items()
               for variant, entry in variants.items()]
    paths = [str(work / "payload" / e["artifact"]) for _, _, e in entries]
    for path in paths:
        restore_params(Path(path))
    cold = prebuild(paths, device_spec, cache_root, separate=True)
    results = {}
    for (model, variant, entry), path in zip(entries, paths):
        row = {"programs": entry["programs"], "cold_build_s": round(cold[path][0], 2) if path in cold else None}
        if path not in cold or cold[path][1]:
            row["error"] = cold.get(path, (0, "not built"))[1]
        else:
            started = time.perf_counter()
            ex = Executor(path, device, cache=ProgramCache(cache_root / Path(path).name).for_artifact(path))
            row["warm_start_s"] = round(time.perf_counter() - started, 3)
            x = model_input(entry["input_seed"], entry["input_shape"])
            reference = load_reference(Path(path) / "ref.npz")
            scale = max(1.0, float(np.abs(reference[0][1]).max()))
            err, problem = check_reference(ex.run([x]), reference, rtol=0.0,
                                           atol=WHOLE_TOL[entry["precision"]] * scale)
            row["max_error"] = err / scale
            if problem:
                row["error"] = problem
            else:
                prof = ex.profile([x], repeat=repeat, warmup=5)
                row.update(device_ms=round(prof.device_median_ms, 4), wall_ms=round(prof.median_ms, 4),
                           top_kernels=[(k.name, k.calls, round(k.median_ms, 4)) for k in prof.kernels[:5]])
        results.setdefault(model, {})[variant] = row
        print(f"whole {model} {variant}: {json.dumps({k: v for k, v in row.items() if k != 'top_kernels'})}",
              flush=True)
    return results


def run_torch_models(models, repeat: int) -> dict:
    """torchvision's same architectures (random weights) on cuDNN fp32 (TF32 off): eager and CUDA graphs."""
    from adreno.baseline import cuda_median_ms

    try:
        import torch
        import torchvision
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    results = {}

    def timed(fn) -> float:
        return cuda_median_ms(fn, repeat)

    for model in models:
        if model not in TORCHVISION:
            continue
        net = getattr(torchvision.models, TORCHVISION[model])(weights=None).eval().cuda()
        x = torch.randn(1, 3, 224, 224, device="cuda")
        with torch.no_grad():
            for _ in range(20):
                net(x)
            torch.cuda.synchronize()
            eager = timed(lambda: net(x))
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    net(x)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                net(x)
            for _ in range(10):
                graph.replay()
            torch.cuda.synchronize()
            graphed = timed(graph.replay)
        results[model] = {"eager_ms": round(eager, 4), "cudagraph_ms": round(graphed, 4)}
        print(f"torch {model}: {results[model]}", flush=True)
    return results


def measured_batches(work: Path, folder: str, prefix: str, entries: list, device_spec: str, out: Path,
                     budget_s: float):
    """Measure the offline batches `entries` (payload/<folder>/<name>) within `budget_s` in all, each its share of
    what is left; yields (entry, batch directory, measure_batch's summary, the records), the records also copied to
    OUT/<prefix>_<name>.records.jsonl."""
    from adreno.records import Database
    from adreno.runners.offline import measure_batch

    started = time.perf_counter()
    for index, entry in enumerate(entries):
        share = (budget_s - (time.perf_counter() - started)) / (len(entries) - index)
        batch = work / "payload" / folder / entry["name"]
        summary = measure_batch(batch, device_spec, repeat=10, budget_s=max(share, 1.0),
                                say=lambda text: print(text, flush=True))
        if (batch / "records.jsonl").is_file():  # nothing measured within the budget: no file
            shutil.copyfile(batch / "records.jsonl", out / f"{prefix}_{entry['name']}.records.jsonl")
        yield entry, batch, summary, Database(batch / "records.jsonl").records


def run_batches(work: Path, bundle: dict, device_spec: str, out: Path, budget_s: float) -> dict:
    """Measure the tuning batches within `budget_s` in all; merge their records into OUT/records.jsonl."""
    from adreno.records import Database
    from adreno.runners.batch_dir import read_manifest
    from adreno.tune.batch import model_quality

    results, merged = {}, Database(out / "records.jsonl")
    for entry, batch, summary, records in measured_batches(work, "batches", "batch", bundle["batches"], device_spec,
                                                           out, budget_s):
        merged.append(records)
        results[entry["name"]] = {**summary, "tuned_vs_default": tuned_vs_default(records),
                                  "model_quality": model_quality(read_manifest(batch), records)}
        print(f"batch {entry['name']}: {json.dumps(results[entry['name']])}", flush=True)
    return results


def run_orchestrations(work: Path, bundle: dict, device_spec: str, out: Path, budget_s: float) -> dict:
    """Measure the orchestration batches within `budget_s` in all; each one's records come back as
    OUT/orchestrate_<model>-<memory>.records.jsonl (what `adreno orchestrate --batch` reads back, docs/gpu.md)."""
    results = {}
    for entry, _, summary, records in measured_batches(work, "orchestrate", "orchestrate",
                                                       bundle.get("orchestrations", []), device_spec, out, budget_s):
        results[entry["name"]] = {**summary, "candidates": entry["candidates"], "ok": sum(r.ok for r in records)}
        print(f"orchestration batch {entry['name']}: {json.dumps(results[entry['name']])}", flush=True)
    return results


def tuned_vs_default(records) -> dict:
    """Per task: default ms, best ms and their ratio, from a batch's records; plus the geomean of the ratios, and of
    the rule default's ms over the model-ranked default's (`adreno compile --defaults model`) where both ran."""
    tasks = {}
    for r in records:
        t = tasks.setdefault(r.workload, {"default_ms": None, "model_default_ms": None, "best_ms": None, "ok": 0,
                                          "measured": 0})
        t["measured"] += 1
        if r.ok:
            t["ok"] += 1
            ms = r.median * 1e3
            t["best_ms"] = ms if t["best_ms"] is None else min(t["best_ms"], ms)
            if r.extra.get("source") in ("default", "model-default"):
                t[f"{r.extra['source'].replace('-', '_')}_ms"] = ms
    ratios = [t["default_ms"] / t["best_ms"] for t in tasks.values() if t["default_ms"] and t["best_ms"]]
    model = [t["default_ms"] / t["model_default_ms"] for t in tasks.values()
             if t["default_ms"] and t["model_default_ms"]]
    return {"tasks": len(tasks), "candidates": sum(t["measured"] for t in tasks.values()),
            "ok": sum(t["ok"] for t in tasks.values()), "geomean_speedup": geomean(ratios),
            "max_speedup": max(ratios, default=None), "model_default_speedup": geomean(model),
            "model_default_faster": sum(r > 1 for r in model), "model_default_tasks": len(model)}


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(conv: dict, whole: dict, torch_models: dict, batches: dict, orchestrations: dict,
              device: str) -> tuple[dict, str]:
    """Every ratio the goals use; ratios > 1 mean the numerator is faster (a time ratio inverted)."""
    pairs = [("adreno", "torch"), ("texture", "torch"), ("adreno", "naive"), ("texture", "naive"),
             ("adreno", "tvm"), ("texture", "adreno"), ("adreno", "unstaged"), ("texture", "unstaged_tex"),
             ("model", "adreno"), ("model_tex", "texture"), ("f2", "adreno"), ("f4", "adreno"), ("f2_tex", "texture"),
             ("f4_tex", "texture")]
    summary = {"device": device, "conv": {}, "whole": {}, "tuning": {}, "orchestration": orchestrations}
    lines = [f"device: {device}", "", "conv layers: geomean speed ratios per layer (>1: the first is faster)"]
    for model, table in conv.items():
        if not table:
            lines.append(f"  {model}: no table")
            continue
        ratios = {f"{a}/{b}": table["geomean_ratios"].get(f"{a}/{b}") for a, b in pairs}
        summary["conv"][model] = {"geomean_gflops": table["geomean_gflops"], "ratios": ratios,
                                  "count_weighted_ms": table.get("count_weighted_ms", {})}
        lines.append(f"  {model}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items() if v))
        lines.append("    geomean GFLOP/s: "
                     + ", ".join(f"{k} {v:.0f}" for k, v in table["geomean_gflops"].items() if v))
    lines += ["", "whole models: ms (device / wall), cold build s, warm start s; vs PyTorch (>1: ours is faster)"]
    for model, variants in whole.items():
        ours = {v: r["device_ms"] for v, r in variants.items() if "device_ms" in r}
        best = min(ours.values(), default=None)
        row = {"variants": variants, "best_device_ms": best}
        if model in torch_models and best:
            row["vs_torch_eager"] = torch_models[model]["eager_ms"] / best
            row["vs_torch_cudagraph"] = torch_models[model]["cudagraph_ms"] / best
        if "buffer" in ours and "texture" in ours:
            row["texture/buffer"] = ours["buffer"] / ours["texture"]
        summary["whole"][model] = row
        for v, r in variants.items():
            lines.append(f"  {model:<12} {v:<8} " + (
                f"{r['device_ms']:.3f} / {r['wall_ms']:.3f} ms, cold {r['cold_build_s']} s ({r['programs']} programs), "
                f"warm {r['warm_start_s']} s" if "device_ms" in r else f"FAIL {r.get('error')}"))
        if model in torch_models:
            t = torch_models[model]
            lines.append(f"  {model:<12} torch    eager {t['eager_ms']:.3f} ms, CUDA graphs {t['cudagraph_ms']:.3f} "
                         f"ms; our best vs eager {row.get('vs_torch_eager', 0):.2f}x, vs graphs "
                         f"{row.get('vs_torch_cudagraph', 0):.2f}x")
    lines += ["", "tuning batches: tuned/default (geomean over tasks of default ms / best ms); cost models' "
              "ranking of the measured candidates (mean over tasks of Pearson, top-5 recall)"]
    for name, b in batches.items():
        t = b["tuned_vs_default"]
        summary["tuning"][name] = {**t, "model_quality": b["model_quality"]}
        speed = f"{t['geomean_speedup']:.2f}x (max {t['max_speedup']:.2f}x)" if t["geomean_speedup"] else "-"
        lines.append(f"  {name:<22} {t['candidates']} measured ({t['ok']} ok) of {t['tasks']} tasks, "
                     f"{b['unmeasured']} left: {speed}")
        if t["model_default_tasks"]:
            lines.append(f"    model-ranked default vs rule default: {t['model_default_speedup']:.2f}x geomean, "
                         f"faster on {t['model_default_faster']} of {t['model_default_tasks']} tasks")
        for model, quality in b["model_quality"].items():
            mean = quality["mean"]
            lines.append(f"    {model:<18} " + (f"Pearson {mean['pearson']:.3f}, top-5 {mean['top5']:.2f} over "
                                              f"{len(quality['tasks'])} tasks" if quality["tasks"] else "no task"))
            lines += [f"      {key[:60]:<60} Pearson {q['pearson']:+.3f} top-5 {q['top5']:.2f} ({q['rows']} rows)"
                      for key, q in quality["tasks"].items()]
    lines += ["", "orchestration batches: candidate kernels measured (ok) of those exported; their costs go into "
              "`adreno orchestrate --batch` (docs/gpu.md)"]
    lines += [f"  {name:<26} {o['measured']} measured ({o['ok']} ok) of {o['candidates']}, {o['unmeasured']} left"
              for name, o in orchestrations.items()]
    return summary, "\n".join(lines) + "\n"


def run(bundle_dir: Path, out: Path, device: str, budget_s: float, repeat: int) -> int:
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="adreno-bundle-"))  # not under OUT: only results come back
    bundle = unpack(bundle_dir, work)
    from adreno.opencl.device import DeviceIdentity, select_device

    fingerprint = DeviceIdentity.from_cl_device(select_device(device)).fingerprint
    print(f"bundle of commit {bundle['commit']} ({'quick' if bundle['quick'] else 'full'}) on {fingerprint}",
          flush=True)
    conv = {}
    for model in bundle["conv_models"]:
        conv[model] = run_conv(work, model, device, out, repeat, budget_s=max(20.0, 0.25 * budget_s))
    whole = run_whole(work, bundle, device, repeat=50)
    torch_models = run_torch_models(bundle["models"], repeat=50)
    left = budget_s - (time.perf_counter() - started) - 10
    tuning_share = len(bundle["batches"]) / max(1, len(bundle["batches"]) + len(bundle.get("orchestrations", [])))
    batches = run_batches(work, bundle, device, out, left * tuning_share)
    orchestrations = run_orchestrations(work, bundle, device, out, budget_s - (time.perf_counter() - started) - 10)
    summary, text = summarize(conv, whole, torch_models, batches, orchestrations, fingerprint)
    summary.update(commit=bundle["commit"], run_seconds=round(time.perf_counter() - started, 1))
    text += f"\nrun took {summary['run_seconds']:.0f} s; records: {out / 'records.jsonl'}\n"
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    (out / "summary.txt").write_text(text)
    print(text, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="compile everything into DIR (needs TVM, onnxruntime, PoCL)")
    p.add_argument("dir")
    p.add_argument("--quick", action="store_true", help="one conv layer, the tiny model, 2 candidates per task")
    p.add_argument("--trials", type=int, default=8, help="tuning candidates per task (default 8)")
    p.add_argument("--target", default="nvidia-h200", help="the target every artifact and batch is compiled for: its "
                   "parallelism facts decide the default tiles (default nvidia-h200, the GPU machine)")
    r = sub.add_parser("run", help="measure a prepared DIR (numpy + pyopencl; torch for the cuDNN columns)")
    r.add_argument("dir")
    r.add_argument("--out", default=os.environ.get("OUT", "out/gpu_run"))
    r.add_argument("--device", default="gpu")
    r.add_argument("--budget-s", type=float, default=300.0, help="the run's time (the batches get what is left)")
    r.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    if args.command == "prepare":
        prepare(Path(args.dir), args.quick, args.trials, args.target)
        return 0
    return run(Path(args.dir), Path(args.out), args.device, args.budget_s, args.repeat)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
