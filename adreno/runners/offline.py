"""Measuring offline tuning batches on a machine that has only numpy and pyopencl.

    python -m adreno.runners.offline DIR [--device gpu] [--repeat 20] [--jobs 16] [--budget-s 300]

DIR is a batch written by `adreno tune MODEL --export-batch DIR` (see `adreno.tune.batch`) or by `adreno orchestrate
MODEL --export-batch DIR` (`adreno.orchestrate.batch`: its manifest says "cold", and each timed run then starts with
the device's caches evicted): a manifest
(`batch.json`), one artifact per candidate, each task's reference outputs, and the specs and checksums of its
inputs. Inputs are not stored: they are regenerated here from their seed (`seeded_inputs`, the rule the tuner
uses) and checked against the exported checksums, so a numpy whose generator differs is refused rather than
measured against the wrong reference.

Every candidate's OpenCL programs are first built in a process pool, one process per core, into the program
binary cache (`adreno.cache`): a vendor compiler can take seconds per unrolled kernel, and builds are independent.
Candidates are then measured one by one from the cached binaries: run once, output checked against the task's
reference, then profiled. Each result is one record line (the tuning-records format of `adreno tune --records`,
keyed by this device's fingerprint) appended and fsynced to DIR/records.jsonl, so a killed run loses only the
candidate in flight and a rerun measures only what is missing. `adreno tune MODEL --import-batch DIR` merges it
(`adreno orchestrate MODEL --report --batch DIR` or `adreno compile MODEL --orchestrate --measure-batch DIR` for an
orchestration batch).

Nothing on this path imports TVM or onnx: it must run where neither is installed.
"""

from __future__ import annotations

import concurrent.futures as futures
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..artifact.format import Artifact
from ..artifact.check import run_digest, sha256_file
from ..support.command_line import OneLineParser, refused, require_positive
from ..errors import AdrenoError
from ..opencl.device import DeviceIdentity, select_device
from ..opencl.evict import Evictor
from ..opencl.executor import Executor
from ..opencl.programs import Grouping, group_source, groups
from ..opencl.signature import program_options
from ..options import Precision
from ..support.processes import spawn_pool, stop_pool
from ..records import Database, Record
from .batch_dir import RESULTS_NAME, BatchError, read_manifest
from .interface import check_outputs

PARAM_SEEDS = "params.seed.json"
SAMPLE = 8192  # outputs larger than this many elements keep a seeded sample of them as the reference
RTOL = ATOL = 1e-3  # the tuner's check (`RunInput`)


def digest(array: np.ndarray) -> str:
    """A short checksum of an array's bytes (shape and dtype are checked separately)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


def seeded_inputs(specs: list[dict], seed: int) -> list[np.ndarray]:
    """Arrays for `specs` ({"shape", "dtype", "storage", "uniform"}) from one generator seeded with `seed`, drawn in
    order: standard normal, or uniform in [low, high) where "uniform" gives them (orchestration's candidates: an
    input under an rsqrt or a log stays finite); an input stored as half-float pixels ("storage": "float16") is
    rounded to half first, so a reference computed from it sees what the kernel reads."""
    rng = np.random.default_rng(seed)
    return [_drawn(rng, s).astype(s.get("storage") or s["dtype"]).astype(s["dtype"]) for s in specs]


def _drawn(rng, spec: dict) -> np.ndarray:
    if "uniform" in spec:
        low, high = spec["uniform"]
        return rng.uniform(low, high, spec["shape"])
    return rng.standard_normal(spec["shape"])


def sample_indices(size: int) -> np.ndarray | None:
    """The flat indices a reference of `size` elements keeps (None: all of them): k * P mod size for k < SAMPLE,
    P a prime that divides no tensor size, so they are distinct and spread over the whole tensor; integer
    arithmetic, not a random generator, so every numpy picks the same ones."""
    if size <= SAMPLE:
        return None
    return np.sort(np.arange(SAMPLE, dtype=np.int64) * 2654435761 % size)


def save_reference(path: Path, outputs: list[np.ndarray]) -> None:
    """Store reference outputs: whole when small, else the elements at `sample_indices` (a kernel that is wrong
    on a row, a tile edge or a channel block is wrong on some of 8192 seeded positions; see docs/guide.md)."""
    arrays = {}
    if not all(np.all(np.isfinite(out)) for out in outputs):
        raise BatchError(f"{path}: the reference outputs are not all finite (inf or nan); nothing could be checked")
    for i, out in enumerate(outputs):
        keep = sample_indices(out.size)
        arrays[f"values_{i}"] = out.reshape(-1) if keep is None else out.reshape(-1)[keep]
        arrays[f"shape_{i}"] = np.array(out.shape, dtype=np.int64)
    np.savez_compressed(path, **arrays)


def load_reference(path: Path) -> list[tuple[tuple, np.ndarray]]:
    """[(shape, kept values)] of a reference written by `save_reference`."""
    with np.load(path) as npz:
        count = sum(1 for k in npz.files if k.startswith("shape_"))
        return [(tuple(int(d) for d in npz[f"shape_{i}"]), npz[f"values_{i}"]) for i in range(count)]


def check_reference(outputs: list[np.ndarray], reference, rtol: float = RTOL, atol: float = ATOL):
    """(max abs error over the kept elements, problem or None): shapes must match, every output element must be
    finite, and the kept elements must match the reference within atol + rtol * |ref|."""
    if len(outputs) != len(reference):
        return float("inf"), f"{len(outputs)} outputs, the reference has {len(reference)}"
    for index, (out, (shape, _)) in enumerate(zip(outputs, reference)):
        if tuple(out.shape) != shape:
            return float("inf"), f"output {index} has shape {tuple(out.shape)}, the reference {shape}"
        if not np.all(np.isfinite(out)):
            return float("inf"), f"output {index} has non-finite values"
    kept = [out.reshape(-1) if sample_indices(out.size) is None else out.reshape(-1)[sample_indices(out.size)]
            for out in outputs]
    return check_outputs(kept, [values for _, values in reference], rtol, atol)


SMALL_AXIS = 8  # seeded params keep their mean and std per position along axes this short (see `_stats`)


def _stats(array: np.ndarray) -> tuple:
    """(mean, std) of a param over its long axes, per position along its short ones (kernel taps, Winograd
    positions, the 4 lanes of a packed layout), as nested lists. A Winograd-transformed weight's positions differ in
    scale by an order of magnitude and the inverse transform amplifies the large ones: drawn with one std for all,
    ResNet-18's output grows to 1e15 and overflows half-float images; per position it keeps its scale."""
    if not array.size:
        return 0.0, 0.0
    long = tuple(axis for axis, n in enumerate(array.shape) if n > SMALL_AXIS)
    values = array.astype(np.float64)
    return values.mean(axis=long, keepdims=True).tolist(), values.std(axis=long, keepdims=True).tolist()


def _draw(entry: dict, seed: int, index: int) -> np.ndarray:
    rng = np.random.default_rng([seed, index])
    return (rng.standard_normal(entry["shape"]) * np.asarray(entry["std"]) + np.asarray(entry["mean"])).astype(
        entry["dtype"])


def _write_params(artifact: Path, params: dict[str, np.ndarray]) -> None:
    """params.npz of an artifact, with its size and SHA-256 in the manifest (`Artifact.load` checks them)."""
    np.savez(artifact / "params.npz", **params)
    manifest = json.loads((artifact / "manifest.json").read_text())
    manifest["files"]["params.npz"] = {"bytes": (artifact / "params.npz").stat().st_size,
                                       "sha256": sha256_file(artifact / "params.npz")}
    manifest["run_sha256"] = run_digest(manifest)
    (artifact / "manifest.json").write_text(json.dumps(manifest, indent=1))


def travel_light(artifact: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Prepare an artifact to travel to a measuring machine: drop its TVM host library (the executor does not use
    it) and replace its params by seeded normal values of the same shapes and dtypes, each drawn with that
    param's own mean and std (so activations keep their scale through a deep model), and write PARAM_SEEDS, how to
    draw them again with their checksums: the artifact can travel without its weights (`restore_params`); its
    reference outputs must then be computed with the seeded values, which this returns (as the kernels read them:
    the draws are of params.npz's stored forms, `adreno.artifact.weights`, so a Winograd weight travels as its 3x3
    source). The kernels, and so the timings, do not depend on the values."""
    artifact = Path(artifact)
    manifest = json.loads((artifact / "manifest.json").read_text())
    for lib in ("lib.so", "lib.tar"):
        if manifest["files"].pop(lib, None) is not None:
            (artifact / lib).unlink()
    manifest["host_library"] = None
    manifest["run_sha256"] = run_digest(manifest)
    (artifact / "manifest.json").write_text(json.dumps(manifest, indent=1))
    real = Artifact.load(artifact).stored_params()
    spec, seeded = {"seed": seed, "params": {}}, {}
    for index, name in enumerate(sorted(real)):
        array = real[name]
        if array.dtype.kind != "f":
            raise BatchError(f"{artifact}: param {name} is {array.dtype}, not a float: it cannot travel as a seed")
        mean, std = _stats(array)
        entry = {"shape": list(array.shape), "dtype": str(array.dtype), "mean": mean, "std": std}
        seeded[name] = _draw(entry, seed, index)
        spec["params"][name] = {**entry, "sha": digest(seeded[name])}
    _write_params(artifact, seeded)
    (artifact / PARAM_SEEDS).write_text(json.dumps(spec, indent=1))
    return Artifact.load(artifact).params()


def restore_params(artifact: Path) -> None:
    """Draw the params of an artifact written by `travel_light` again and check them against their checksums."""
    artifact = Path(artifact)
    spec = json.loads((artifact / PARAM_SEEDS).read_text())
    params = {name: _draw(entry, spec["seed"], index)
              for index, (name, entry) in enumerate(sorted(spec["params"].items()))}
    wrong = [name for name, array in params.items() if digest(array) != spec["params"][name]["sha"]]
    if wrong:
        raise BatchError(f"{artifact}: params {wrong[:3]} drawn here differ from the prepared ones (numpy "
                         f"{np.__version__} draws other numbers)")
    _write_params(artifact, params)


def _build_programs(artifact: str, device_spec, cache_root: str) -> tuple[float, str | None]:
    """Worker: build the programs the executor builds for an artifact (`adreno.opencl.programs`: one of the whole
    model) through the program cache (seconds, error or None)."""
    import pyopencl as cl

    from ..cache import ProgramCache  # inside: loads pyopencl at import

    started = time.perf_counter()
    try:
        art = Artifact.load(artifact)
        context = cl.Context([select_device(device_spec)])
        cache = ProgramCache(Path(cache_root))
        for members in groups(art, Grouping.MODEL):
            cache.build(context, group_source(art, members), program_options(""))
    except (AdrenoError, cl.Error) as err:
        return time.perf_counter() - started, f"{type(err).__name__}: {str(err).strip()[:300]}"
    return time.perf_counter() - started, None


def prebuild(artifacts: list[str], device_spec, cache_root: Path, jobs: int | None = None,
             deadline: float | None = None, separate: bool = False) -> dict[str, tuple]:
    """Build the programs of many artifacts in parallel processes into the cache at `cache_root` (`separate`: each
    into its own cache, `cache_root / <artifact directory name>`, so that each build starts cold); artifact ->
    (seconds, error or None) for those built by `deadline` (a `time.perf_counter()` value; the rest are left out,
    their builds stopped)."""
    jobs = jobs or os.cpu_count() or 1
    pool = spawn_pool(jobs)
    jobs_ = {pool.submit(_build_programs, a, device_spec,
                         str(Path(cache_root) / Path(a).name if separate else cache_root)): a for a in artifacts}
    done = {}
    try:
        timeout = None if deadline is None else max(0.0, deadline - time.perf_counter())
        for job in futures.as_completed(jobs_, timeout=timeout):
            done[jobs_[job]] = job.result()
    except futures.TimeoutError:
        pass
    finally:
        stop_pool(pool)
    return done


def measure_artifact(artifact: str, inputs, reference, device, cache=None, repeat: int = 20,
                     rtol: float = RTOL, atol: float = ATOL, evictor: Evictor | None = None) -> dict:
    """Load, run once, check against `reference` (`load_reference`'s form), then profile an artifact (with an
    `evictor`: built in its context, the device's caches evicted before each timed run, as `RunInput.cold`): a dict
    with "seconds" (device time per run, a list) or "error" and "stage", and "max_error", "wall_ms", "load_s"."""
    import pyopencl as cl

    stage, started = "build", time.perf_counter()
    try:
        executor = Executor(artifact, device, cache=cache, context=None if evictor is None else evictor.context,
                            compile_workers=0)  # the batch's own jobs use the cores
        load_s = time.perf_counter() - started
        stage = "run"
        outputs = executor.run(inputs)
        stage = "check"
        max_error, problem = check_reference(outputs, reference, rtol, atol)
        if problem:
            return {"error": problem, "stage": stage, "max_error": max_error}
        stage = "run"
        profile = executor.profile(inputs, repeat=repeat, warmup=2, evictor=evictor)
    except (AdrenoError, cl.Error, OSError, ValueError) as err:
        return {"error": f"{type(err).__name__}: {str(err).strip()[:300]}", "stage": stage}
    return {"seconds": [ms * 1e-3 for ms in profile.run_device_ms], "max_error": max_error,
            "wall_ms": float(np.median(profile.latencies_ms)), "load_s": round(load_s, 4),
            "kernels": [(k.name, k.calls, k.median_ms) for k in profile.kernels]}


def task_inputs_checked(batch: Path, task: dict) -> list[np.ndarray]:
    """A task's inputs regenerated from their seed and checked against the exported checksums."""
    inputs = seeded_inputs(task["inputs"], task["seed"])
    if [digest(a) for a in inputs] != [s["sha"] for s in task["inputs"]]:
        raise BatchError(f"{batch}: the inputs of {task['name']} regenerated here differ from the exported ones "
                         f"(numpy {np.__version__} draws other numbers); measure with the exporter's numpy major")
    return inputs


def share_params(artifact: Path, params_dir: Path) -> str | None:
    """Move an exported candidate's params.npz to `params_dir`/<sha>.npz, stored once per distinct content (a
    layout's candidates share the weight; orchestration's have none), for `candidate_artifact` to link back.
    Returns that sha, or None when it has no params."""
    params = artifact / "params.npz"
    if not params.is_file():
        return None
    sha = hashlib.sha256(params.read_bytes()).hexdigest()[:16]
    params_dir.mkdir(parents=True, exist_ok=True)
    if (params_dir / f"{sha}.npz").is_file():
        params.unlink()
    else:
        params.rename(params_dir / f"{sha}.npz")
    return sha


def candidate_artifact(batch: Path, candidate: dict) -> str:
    """The candidate's artifact directory, with its shared params file (stored once per distinct content) linked
    back into it."""
    path = batch / candidate["artifact"]
    if candidate.get("params") and not (path / "params.npz").is_file():
        os.link(batch / "params" / f"{candidate['params']}.npz", path / "params.npz")
    return str(path)


def measure_batch(batch: Path, device_spec=None, repeat: int = 20, jobs: int | None = None,
                  budget_s: float | None = None, say=print) -> dict:
    """Measure every not yet measured candidate of a batch on one device; returns counts and the records path."""
    from ..cache import ProgramCache  # inside: loads pyopencl at import

    started = time.perf_counter()
    batch = Path(batch)
    manifest = read_manifest(batch)
    device = select_device(device_spec)
    fingerprint = DeviceIdentity.from_cl_device(device).fingerprint
    database = Database(batch / RESULTS_NAME)
    done = {r.extra.get("candidate") for r in database.query(device=fingerprint)}
    # round robin over the tasks (every task's default first), so that a time budget cuts every task's tail
    pending = sorted((c for c in manifest["candidates"] if c["id"] not in done),
                     key=lambda c: (int(c["id"].rsplit("-", 1)[1]), c["task"]))
    say(f"{batch}: {len(manifest['candidates'])} candidates of {len(manifest['tasks'])} tasks, "
        f"{len(pending)} to measure on {device.name.strip()}")
    cache_root = batch / ".programs"
    buildable = [c for c in pending if not c.get("error")]
    built = prebuild([candidate_artifact(batch, c) for c in buildable], device_spec, cache_root, jobs,
                     None if budget_s is None else started + budget_s)
    say(f"  built {len(built)} candidates' programs in {time.perf_counter() - started:.1f} s "
        f"({sum(1 for _, e in built.values() if e)} failed)")
    cache = ProgramCache(cache_root)
    evictor = Evictor.for_device(device) if manifest.get("cold") else None  # one context and buffer for all
    inputs, references, measured = {}, {}, 0
    for candidate in pending:
        if budget_s is not None and time.perf_counter() - started > budget_s:
            say(f"  time budget of {budget_s:g} s spent: {len(pending) - measured} candidates left unmeasured")
            break
        task = manifest["tasks"][candidate["task"]]
        extra = {"batch": manifest["id"], "candidate": candidate["id"], "source": candidate["source"],
                 **({"precision": Precision.FP16} if Precision(task["precision"]) is Precision.FP16 else {})}
        path = str(batch / candidate["artifact"])
        if not candidate.get("error") and path not in built:
            continue  # not built within the budget: stays unmeasured
        build_error = candidate.get("error") or built[path][1]
        if build_error:
            result = {"error": build_error, "stage": "build"}
        else:
            if candidate["task"] not in inputs:
                inputs[candidate["task"]] = task_inputs_checked(batch, task)
                references[candidate["task"]] = load_reference(batch / task["reference"])
            result = measure_artifact(path, inputs[candidate["task"]], references[candidate["task"]], device,
                                      cache.for_artifact(path), repeat, evictor=evictor)
            extra.update(max_error=result.get("max_error"), build_seconds=round(built[path][0], 3),
                         wall_ms=result.get("wall_ms"))
        record = Record(task["key"], fingerprint, candidate["config"], result.get("seconds"), result.get("error"),
                        result.get("stage"), trial=0, strategy=f"batch:{candidate['source']}",
                        timestamp=time.time(), extra=extra)
        database.append([record])
        measured += 1
    return {"batch": str(batch), "device": fingerprint, "measured": measured, "unmeasured": len(pending) - measured,
            "records": str(batch / RESULTS_NAME), "seconds": round(time.perf_counter() - started, 1)}


def main(argv=None) -> int:
    ap = OneLineParser(prog="python -m adreno.runners.offline", description=__doc__.split("\n\n")[0])
    ap.add_argument("batch", help="a batch directory written by `adreno tune MODEL --export-batch DIR`")
    ap.add_argument("--device", help="OpenCL device: pocl (default), gpu, cpu, an index or a name substring")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per candidate (default 20)")
    ap.add_argument("--jobs", type=int, help="parallel program builds (default: one per core)")
    ap.add_argument("--budget-s", type=float, help="stop measuring after this many seconds (what is left stays "
                    "unmeasured; a rerun continues)")
    args = ap.parse_args(argv)
    try:
        require_positive(args, "repeat", "jobs", "budget_s")  # before the batch is read: `--repeat 0` measures nothing
        summary = measure_batch(Path(args.batch), args.device, args.repeat, args.jobs, args.budget_s,
                                say=lambda text: print(text, file=sys.stderr, flush=True))
    except AdrenoError as err:
        return refused(err)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # run as the imported module, so the build pool's workers find its functions
    from adreno.runners.offline import main as module_main

    sys.exit(module_main())
