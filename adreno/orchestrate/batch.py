"""Orchestration's candidates measured offline, on a device neither the farm nor this machine reaches (a lab
phone reachable by file copy, a GPU machine without TVM):

    adreno orchestrate MODEL --export-batch DIR [--max-size N]     here: every candidate compiled, nothing measured
    python -m adreno.runners.offline DIR [--device gpu]             there: numpy and pyopencl only
    adreno orchestrate MODEL --report --batch DIR [--records R]     here: the costs come from DIR's records
    adreno compile MODEL --orchestrate --measure-batch DIR [--records R]

The batch is in the tuning batches' format (`adreno.runners.offline`), kind "orchestrate": one task per distinct
candidate (its record key, its inputs as seeded uniform specs with checksums, TVM's LLVM outputs as the reference),
one candidate each (config `{}`, `extra` carrying the record's primitives and kernel count), then the two
launch-cost artifacts (`launch.py`). `"cold": true` has the measuring side evict the device's caches before each
timed run, as `RunInput.cold` does here. The manifest carries the code fingerprint (`adreno.support.code_version`):
costs of another adreno's kernels are refused at import.

Import turns the batch's records into orchestration records in the records database under the device that measured
them (exactly one), so the `CostTable` reads them as it reads its own; a candidate the batch lacks (another model,
`--max-size` or target) is `BatchRunner`'s one-line failure, never a made-up cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import adreno
from adreno.support.code_version import code_fingerprint
from adreno.options import Memory, Winograd
from adreno.orchestrate.costs import CostTable, input_specs
from adreno.orchestrate.report import imported, model_candidates
from adreno.records import ORCHESTRATE_OP, Database, Record
from adreno.runners.interface import Runner, RunResult
from adreno.runners.batch_dir import (BATCH_FORMAT, MANIFEST_NAME, RESULTS_NAME, BatchError, BatchKind, batch_kind,
    check_replaceable, read_manifest)
from adreno.runners.offline import digest, save_reference, share_params


def export_batch(model, out: Path, target_name: str, max_size: int, say=lambda line: None,
                 winograd: Winograd = Winograd.AUTO, memory: Memory = Memory.BUFFER) -> dict:
    """Compile every distinct candidate of `model` in `memory` (its convs laid out first as the compile does, with
    `winograd`: `report.imported`) and the launch-cost artifacts into the batch `out` (an earlier batch there is
    replaced; written beside it and renamed, so a failed export leaves the old one). The manifest."""
    out = Path(out)
    check_replaceable(out)
    mod, name = imported(model, target_name, memory, winograd)
    found = model_candidates(mod, name, target_name, max_size, say, memory)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.adreno-tmp.{os.getpid()}.", dir=out.parent))
    try:
        # no records and no device: every candidate is a job
        table = CostTable(Database(staging / ".no-records.jsonl"), None, "", target_name, memory)
        jobs = table.launch_jobs() + table.jobs(found.graph, found.kernels)
        manifest = {"format": BATCH_FORMAT, "kind": BatchKind.ORCHESTRATE, "adreno_version": adreno.__version__,
                    "code": code_fingerprint(), "model": name, "target": target_name, "max_size": max_size,
                    "winograd": winograd, "memory": memory,
                    "cold": True, "candidates_of_model": len(found.kernels), "tasks": [], "candidates": []}
        for n, job in enumerate(jobs):
            record, run = table.prepare(job, staging / "candidates" / f"C{n}")
            candidate = {"id": f"C{n}-0", "task": n, "source": ORCHESTRATE_OP, "config": {},
                         "artifact": f"candidates/C{n}", "extra": record.extra}
            task = {"key": job.key, "name": f"C{n}", "precision": "fp32", "seed": 0, "inputs": []}
            if run is None:
                candidate["error"] = record.error
            else:
                candidate["params"] = share_params(staging / candidate["artifact"], staging / "params")
                specs = input_specs(job.mod["main"])
                task.update(inputs=[{**s, "sha": digest(a)} for s, a in zip(specs, run.inputs)],
                            reference=f"C{n}.npz")
                try:
                    save_reference(staging / task["reference"], run.reference)
                except BatchError as err:  # outputs that are not finite: nothing could be checked there
                    candidate["error"] = str(err)
            manifest["tasks"].append(task)
            manifest["candidates"].append(candidate)
            failed = f": failed ({candidate['error']})" if candidate.get("error") else ""
            say(f"exported {n + 1}/{len(jobs)}{failed}")
        (staging / ".no-records.jsonl").unlink(missing_ok=True)
        manifest["id"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1))
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def import_costs(batch: Path, database: Database) -> tuple[str, int]:
    """Append the costs measured in `batch` to `database` as orchestration records: (the fingerprint of the device
    that measured them, how many records were new). Importing twice adds nothing."""
    batch = Path(batch)
    manifest = read_manifest(batch)
    if batch_kind(manifest) is not BatchKind.ORCHESTRATE:
        raise BatchError(f"{batch} is a tuning batch: import it with `adreno tune {manifest.get('model', 'MODEL')} "
                         f"--import-batch {batch} --records FILE`")
    if manifest.get("code") != code_fingerprint():
        raise BatchError(f"{batch} was exported by other adreno code (fingerprint {manifest.get('code')}, this is "
                         f"{code_fingerprint()}): its kernels may not be today's; export and measure it again")
    if not (batch / RESULTS_NAME).is_file():
        raise BatchError(f"{batch} has no {RESULTS_NAME}: measure it first (python -m adreno.runners.offline {batch})")
    measured = [r for r in Database(batch / RESULTS_NAME).records if r.extra.get("batch") == manifest["id"]]
    devices = sorted({r.device for r in measured})
    if len(devices) != 1:
        raise BatchError(f"{batch} holds costs of {len(devices)} devices ({', '.join(devices) or 'none measured'}); "
                         "orchestration needs one: measure a fresh export of it on one device")
    candidates = {c["id"]: c for c in manifest["candidates"]}
    present = {r.workload for r in database.query(device=devices[0])}
    fresh = []
    for record in measured:
        candidate = candidates.get(record.extra.get("candidate"))
        key = None if candidate is None else manifest["tasks"][candidate["task"]]["key"]
        if key is None or record.workload != key or key in present:
            continue
        extra = dict(candidate["extra"])
        if record.ok and record.extra.get("wall_ms") is not None:
            extra["wall_s"] = record.extra["wall_ms"] * 1e-3
        fresh.append(Record(key, record.device, {}, record.seconds, record.error, record.stage,
                            strategy=ORCHESTRATE_OP, timestamp=record.timestamp, extra=extra))
        present.add(key)
    database.append(fresh)
    return devices[0], len(fresh)


class BatchRunner(Runner):
    """What stands for the device of a measured batch: it measures nothing. A candidate the batch did not hold
    fails as the infrastructure's (stage "request"), which the `CostTable` turns into one line; nothing is
    recorded for it."""

    name = "batch"
    remote = True

    def __init__(self, batch: str | Path):
        super().__init__()
        self.batch = batch

    def run(self, run_input) -> RunResult:
        return RunResult(error=f"the batch {self.batch} holds no cost of it (exported for another model, "
                         "--max-size or target?): export a batch of this one and measure it", stage="request",
                         tag=run_input.tag)
