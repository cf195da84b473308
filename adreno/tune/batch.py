"""Offline tuning batches: tune a device that the tuner cannot reach (an air-gapped lab machine, a phone reachable
only by file copy, a GPU box without TVM).

    adreno tune MODEL --export-batch DIR [--trials K]     here: candidates, inputs' specs, references, manifest
    python -m adreno.runners.offline DIR [--device ...]         there: numpy + pyopencl only; writes DIR/records.jsonl
    adreno tune MODEL --import-batch DIR --records r.jsonl here: merge the measured records

Per task the batch holds K candidates: the task's seed configs (its default first), then the cost model's top picks
(the strategy's proposals ranked by the model, trained on the records of --records: a second batch continues from
an imported first one), then random configs. Each candidate is a one-kernel artifact (`Builder`), its params file
stored once per distinct content; a task's inputs travel as seed + checksums and its reference outputs as
`adreno.runners.offline.save_reference` writes them. The manifest names the adreno version, the model and its task keys:
import refuses a batch of another version or of another model's tasks, and keeps only records of this batch whose
workload and config are the candidate's. Records keep their batch and candidate ids, so importing twice adds
nothing, and a torn results file (a killed measuring run) loses only the candidates it did not finish.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

import adreno

from ..costmodel import AnalyticalModel
from ..costmodel.base import quality_per_task
from ..costmodel.ranked_defaults import RankedDefaults
from ..frontend.bind import read_bind
from ..runners.batch_dir import (BATCH_FORMAT, MANIFEST_NAME, RESULTS_NAME, BatchError, BatchKind, batch_kind,
    check_replaceable, read_manifest)
from ..runners.offline import digest, save_reference, share_params
from ..options import CompileOptions, Memory, Precision, Staging
from ..records import Database
from ..schedules.family import Matched
from .builder import Builder
from .extract import extract_tasks
from .layout_task import LAYOUT
from .tuner import Tuner, target_limits


def _candidates(tuner, state, k: int, seed: int) -> list[tuple[str, dict]]:
    """(source, config) of up to k new candidates of one task: seeds, the compile default the analytical model ranks
    best ("model-default", `adreno compile --defaults model`), model picks (half the rest), random ones."""
    chosen = [c for c in state.seeds if c not in state.measured and state.space.is_valid(c)][:k]
    sources = ["default"] * len(chosen)
    ranked = _model_default(state)
    if ranked is not None and ranked not in chosen and ranked not in state.measured and len(chosen) < k:
        chosen.append(ranked)
        sources.append("model-default")
    picks = tuner._propose(state, (k - len(chosen) + 1) // 2, state.measured | set(chosen))
    chosen += picks
    sources += ["model"] * len(picks)
    rng = np.random.default_rng(seed)
    for _ in range(100 * k):
        if len(chosen) >= k:
            break
        candidate = state.space.random(rng)
        if candidate is not None and candidate not in chosen and candidate not in state.measured:
            chosen.append(candidate)
            sources.append("random")
    return [(s, state.space.config(c)) for s, c in zip(sources, chosen)]


def _model_default(state):
    """The candidate `adreno compile --defaults model` would use for the task (None: the model keeps the rule, or
    the task is a layout task, whose layout the rule picks)."""
    task = state.task
    if task.family == LAYOUT:
        return None
    ctx = task.context()
    rule = task.default_config()
    ranked = RankedDefaults()(task.schedule_family, Matched(task.workload, task.key, None), rule, ctx)
    return None if ranked == rule else state.space.candidate(ranked)


def export_batch(model, out: Path, *, target: str = "adreno-740", memory: Memory = Memory.TEXTURE,
                 precision: Precision = Precision.FP32,
                 layouts: bool = True, trials: int = 8, records: str | None = None, model_kind: str = "analytical",
                 fingerprint: str | None = None, seed: int = 0, save_model: str | None = None,
                 say=lambda text: None, bind: dict | None = None, staging: Staging = Staging.AUTO) -> dict:
    """Write a batch of `trials` candidates per tunable task of `model` into `out` (replaced if it exists).
    `save_model`: also save the cost model trained on the records (for `--model transfer:FILE` elsewhere); `bind`:
    graph inputs baked in (`extract_tasks`)."""
    out = Path(out)
    check_replaceable(out)
    tasks = extract_tasks(model, CompileOptions(target=target, memory=memory, precision=precision, staging=staging),
                          layouts=layouts, bind=bind)
    database = Database(records) if records else Database(out / ".no-records.jsonl")
    fingerprint = fingerprint or (database.records[-1].device if database.records else "batch")
    if out.exists():
        shutil.rmtree(out)
    (out / "params").mkdir(parents=True)
    builder = Builder(workdir=out / ".build")
    manifest = {"format": BATCH_FORMAT, "adreno_version": adreno.__version__, "model": str(model),
                "target": target, "memory": memory, "precision": precision, "staging": staging, "layouts": layouts,
                "seed": seed,
                "trained_on": fingerprint, "tasks": [], "candidates": []}
    try:
        tuner = Tuner(tasks, None, database, fingerprint, model=model_kind, builder=builder, seed=seed,
                      limits=target_limits(target))
        if save_model:
            tuner.model.save(save_model)
        for index, state in enumerate(tuner.states):
            task = state.task
            picks = _candidates(tuner, state, trials, seed + index)
            inputs = task.inputs(seed)
            save_reference(out / f"T{index}.npz", task.reference(inputs))
            manifest["tasks"].append({"key": task.key, "name": task.func_name, "family": task.family,
                                      "weight": task.weight, "precision": task.precision, "seed": seed,
                                      "inputs": [{**s, "sha": digest(a)} for s, a in zip(task.input_specs(), inputs)],
                                      "reference": f"T{index}.npz"})
            predicted = _predicted(tuner, task, [c for _, c in picks])
            for number, ((source, config), built) in enumerate(zip(picks, builder.build(task, [c for _, c in picks]))):
                entry = {"id": f"T{index}-{number}", "task": index, "source": source, "config": config,
                         "artifact": f"candidates/T{index}-{number}",
                         "predicted": {name: float(scores[number]) for name, scores in predicted.items()}}
                if built.artifact:
                    entry["params"] = _move_artifact(Path(built.artifact), out / entry["artifact"], out / "params")
                else:
                    entry["error"] = built.error
                manifest["candidates"].append(entry)
            say(f"  {task.func_name} [{task.family}]: {len(picks)} candidates")
    finally:
        builder.close()
        shutil.rmtree(out / ".build", ignore_errors=True)
    keys = sorted(t["key"] for t in manifest["tasks"])
    manifest["tasks_sha"] = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
    manifest["id"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1))
    return manifest


def _predicted(tuner, task, configs: list[dict]) -> dict[str, np.ndarray]:
    """The cost models' scores of a task's candidates (higher: predicted faster), so that the measuring side can
    say how well they ranked (`model_quality`): the analytical model with its prior weights on the target's facts,
    and the tuner's model as trained on --records (when it is another kind)."""
    features = task.featurize(configs, tuner.limits)
    scores = {"analytical": AnalyticalModel().predict(features)}
    if tuner.model.name != "analytical":
        scores[tuner.model.name] = tuner.model.predict(features)
    return scores


def model_quality(manifest: dict, records) -> dict:
    """How well the scores stored at export ranked the measured candidates: per model, per task (its key) Pearson
    of score vs -log(seconds), Spearman, top-1 and top-5 recall (`quality_per_task`; failed candidates count as the
    task's slowest x2), and their means over the tasks. Numpy only: the measuring side has no TVM."""
    candidates = {c["id"]: c for c in manifest["candidates"]}
    measured = [(candidates[r.extra["candidate"]], r) for r in records if r.extra.get("candidate") in candidates]
    out = {}
    for name in sorted({n for c, _ in measured for n in c.get("predicted", {})}):
        rows = [(c["predicted"][name], r.median, manifest["tasks"][c["task"]]["key"]) for c, r in measured
                if name in c.get("predicted", {})]
        tasks = quality_per_task(*zip(*rows)) if rows else {}
        means = {k: round(float(np.mean([t[k] for t in tasks.values()])), 4) if tasks else None
                 for k in ("pearson", "spearman", "top1", "top5")}
        out[name] = {"tasks": tasks, "mean": means}
    return out


def _move_artifact(built: Path, final: Path, params_dir: Path) -> str | None:
    """Move a built candidate into the batch, its params shared (`share_params`); returns their sha or None."""
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(built, final)
    return share_params(final, params_dir)


def import_batch(model, batch: Path, records: str, say=lambda text: None, bind: dict | None = None) -> dict:
    """Merge the measured records of `batch` into `records`: refused for another adreno version or another model's
    tasks (`model` with `bind`, as exported); idempotent; only records that are one of the batch's candidates
    (workload and config) count."""
    batch = Path(batch)
    manifest = read_manifest(batch)
    if batch_kind(manifest) is not BatchKind.TUNE:
        raise BatchError(f"{batch} is an orchestration batch: use it with `adreno orchestrate {manifest['model']} "
                         f"--report --batch {batch}` or `adreno compile ... --orchestrate --measure-batch {batch}`")
    if manifest["adreno_version"] != adreno.__version__:
        raise BatchError(f"{batch} was exported by adreno {manifest['adreno_version']}, this is adreno "
                         f"{adreno.__version__}: its workload keys may mean other kernels; export a new batch")
    tasks = extract_tasks(model, CompileOptions(target=manifest["target"], memory=manifest["memory"],
                                                precision=manifest["precision"],
                                                staging=manifest.get("staging", Staging.AUTO)),
                          layouts=manifest["layouts"], bind=bind)
    foreign = {t["key"] for t in manifest["tasks"]} - {t.key for t in tasks}
    if foreign:
        raise BatchError(f"{batch} was exported for model {manifest['model']}; {len(foreign)} of its "
                         f"{len(manifest['tasks'])} tasks are not tasks of {model} (e.g. {sorted(foreign)[0]})")
    if not (batch / RESULTS_NAME).is_file():
        raise BatchError(f"{batch} has no {RESULTS_NAME}: measure it first (python -m adreno.runners.offline {batch})")
    candidates = {c["id"]: c for c in manifest["candidates"]}
    measured = Database(batch / RESULTS_NAME)
    target = Database(records)
    present = {(r.device, r.extra.get("batch"), r.extra.get("candidate")) for r in target.records}
    fresh, foreign_records = [], 0
    for record in measured.records:
        candidate = candidates.get(record.extra.get("candidate"))
        if (record.extra.get("batch") != manifest["id"] or candidate is None
                or record.workload != manifest["tasks"][candidate["task"]]["key"]
                or record.config != candidate["config"]):
            foreign_records += 1
            continue
        if (record.device, manifest["id"], candidate["id"]) in present:
            continue
        present.add((record.device, manifest["id"], candidate["id"]))
        record.trial = target.next_trial(record.workload, record.device) + sum(
            1 for r in fresh if (r.workload, r.device) == (record.workload, record.device))
        fresh.append(record)
    target.append(fresh)
    devices = sorted({r.device.split("|")[0] for r in measured.records})
    summary = {"imported": len(fresh), "ok": sum(1 for r in fresh if r.ok), "skipped_foreign": foreign_records,
               "torn_lines": measured.skipped, "unmeasured": len(candidates) - len(
                   {r.extra.get("candidate") for r in measured.records}), "devices": devices, "records": records}
    say(f"{batch}: {summary['imported']} new records ({summary['ok']} ok) from {', '.join(devices) or 'no device'} "
        f"into {records}; {summary['unmeasured']} candidates unmeasured")
    return summary


def cmd_batch(args) -> int:
    """`adreno tune MODEL --export-batch DIR` / `--import-batch DIR` (called by `adreno tune`)."""
    import sys

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    if args.export_batch:
        manifest = export_batch(args.model, Path(args.export_batch), target=args.target, memory=args.memory,
                                precision=args.precision, layouts=not args.no_layouts, trials=args.trials,
                                records=args.records, model_kind=args.model_kind, seed=args.seed,
                                save_model=args.save_model, say=say, bind=read_bind(args.bind),
                                staging=args.staging)
        built = sum(1 for c in manifest["candidates"] if not c.get("error"))
        print(f"{args.export_batch}: {len(manifest['candidates'])} candidates ({built} built) of "
              f"{len(manifest['tasks'])} tasks; measure it with `python -m adreno.runners.offline {args.export_batch} "
              f"--device ...`, then `adreno tune {args.model}{''.join(f' --bind {b}' for b in args.bind or [])} "
              f"--import-batch {args.export_batch} --records FILE`")
    else:
        summary = import_batch(args.model, Path(args.import_batch), args.records, say=say, bind=read_bind(args.bind))
        print(json.dumps(summary))
    return 0
