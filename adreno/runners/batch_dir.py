"""A batch directory, the contract between an export (`adreno.tune.batch`, `adreno.orchestrate.batch`), the
machine that measures it (`adreno.runners.offline`) and the import: its manifest (`batch.json`, format
`BATCH_FORMAT`, of a `BatchKind`), read and checked for the structure every reader indexes, and the rule for
replacing a directory with a new export, which never deletes a user's files or measurements not yet imported."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

from ..errors import AdrenoError
from ..support.paths import creatable

BATCH_FORMAT = 1
MANIFEST_NAME, RESULTS_NAME = "batch.json", "records.jsonl"


class BatchError(AdrenoError):
    """A batch directory that is incomplete, from another adreno, or does not belong where it is used."""


class BatchKind(StrEnum):
    """What a batch's candidates are: a tuner's configs (`adreno.tune.batch`, manifests without "kind") or
    orchestration's candidate kernels (`adreno.orchestrate.batch`)."""

    TUNE = "tune"
    ORCHESTRATE = "orchestrate"


def batch_kind(manifest: dict) -> BatchKind:
    try:
        return BatchKind(manifest.get("kind", BatchKind.TUNE.value))
    except ValueError:
        raise BatchError(f"a batch of kind {manifest.get('kind')!r}: this adreno knows "
                         f"{', '.join(k.value for k in BatchKind)}") from None


def check_replaceable(out: Path) -> None:
    """An export writes only into a missing directory, an empty one, or an earlier batch that holds nothing but
    what an export and a measuring run write and no measurements: replacing the directory deletes all of it, so a
    user's other files (a stray batch.json among them) and records not yet imported are refused, not lost."""
    if not out.exists():
        creatable(out, "--export-batch", directory=True)  # under a file, the export would fail after its work
        return
    if not out.is_dir():
        raise BatchError(f"{out} exists and is not a directory: choose another batch directory")
    if not any(out.iterdir()):
        return
    if not (out / MANIFEST_NAME).is_file():
        raise BatchError(f"{out} is a directory with other files in it (not an earlier batch, no {MANIFEST_NAME}): "
                         "choose a new or empty one, nothing was written")
    try:
        manifest = read_manifest(out)
        batch_kind(manifest)
    except BatchError as err:
        raise BatchError(f"{out} is not an earlier batch ({err}): choose a new or empty directory, nothing was "
                         "written") from None
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _exported_names(manifest))
    if foreign:
        raise BatchError(f"{out} is an earlier batch with other files in it ({', '.join(foreign[:3])}): choose a new "
                         "or empty directory, nothing was written")
    measured = _measured_lines(out / RESULTS_NAME)
    if measured:
        raise BatchError(f"{out} holds {measured} measured record(s) ({RESULTS_NAME}) that replacing it would delete: "
                         "import them first (`--import-batch`, or `--report --batch` for an orchestration batch) or "
                         "remove the directory yourself; nothing was written")


def _exported_names(manifest: dict) -> set[str]:
    """The names at the top of a batch directory that an export (`adreno.tune.batch`, `adreno.orchestrate.batch`)
    and a measuring run (`measure_batch`) write there."""
    references = {task["reference"] for task in manifest["tasks"] if isinstance(task.get("reference"), str)}
    return {MANIFEST_NAME, RESULTS_NAME, f"{RESULTS_NAME}.lock", "params", "candidates", ".programs", *references}


def _measured_lines(results: Path) -> int:
    """How many non-blank lines a batch's results file holds (0 when it is missing): each is a measurement."""
    if not results.is_file():
        return 0
    with open(results, "rb") as f:
        return sum(1 for line in f if line.strip())


def read_manifest(batch: Path) -> dict:
    """The batch manifest, checked for its format and for the structure every reader indexes (tasks and candidates
    as lists of objects, each candidate's task one of them); a clear BatchError otherwise."""
    path = batch / MANIFEST_NAME
    if batch.exists() and not batch.is_dir():
        raise BatchError(f"{batch} is not a directory: not a batch")
    if not path.exists():
        raise BatchError(f"{batch}: not a batch (no {MANIFEST_NAME}; write one with `adreno tune MODEL "
                         "--export-batch DIR` or `adreno orchestrate MODEL --export-batch DIR`)")
    if not path.is_file():
        raise BatchError(f"{path} is not a regular file (a directory, FIFO or device): not a batch")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BatchError(f"{path} is corrupt ({err})") from None
    if not isinstance(manifest, dict):
        raise BatchError(f"{path} is corrupt (a JSON {type(manifest).__name__}, not an object)")
    if manifest.get("format") != BATCH_FORMAT:
        raise BatchError(f"{batch}: batch format {manifest.get('format')!r}, this adreno reads {BATCH_FORMAT}")
    problem = _structure_problem(manifest)
    if problem:
        raise BatchError(f"{path} is corrupt ({problem}); export the batch again")
    return manifest


def _structure_problem(manifest: dict) -> str | None:
    """What is wrong with the shape of a manifest's tasks and candidates (None: nothing), checked once here so that
    no reader meets a malformed entry as an IndexError or TypeError."""
    tasks, candidates = manifest.get("tasks"), manifest.get("candidates")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and isinstance(t.get("key"), str) for t in tasks):
        return "\"tasks\" is not a list of objects with a \"key\""
    if not isinstance(candidates, list):
        return "\"candidates\" is not a list"
    for index, candidate in enumerate(candidates):
        if not (isinstance(candidate, dict) and isinstance(candidate.get("id"), str)
                and type(candidate.get("task")) is int and 0 <= candidate["task"] < len(tasks)):
            return f"candidate {index} is not an object with an \"id\" and the index of one of the {len(tasks)} tasks"
    return None
