"""The compile of several shape sets into one artifact (`adreno.artifact.shape_sets` has the layout and the rules).

Each set is compiled as a one-set artifact would be (`compile_model`) into a temporary directory, and its kernels
built by the build check; the sets are then merged: params of the same name and the same stored bytes (the model's
weights, whatever the input shape) become one member of the one weight file, a param that differs between sets (a
constant folded from a shape) is renamed for its set; kernel files of identical bytes (the same source for the same
tensor shapes) are stored once. Nothing is left at the output unless every set compiled (`ArtifactWriter`).

The sets share almost no lowering (a kernel of other tensor shapes is another kernel, and an input that varies
reaches nearly every kernel), so what makes several shapes cheap to compile is compiling them at once:
up to `jobs` sets at a time, each in a process of its own (spawned, so that no TVM state is forked; ended with the
compile however it ends, `adreno.support.processes.die_with_parent`). Their build checks run afterwards in this
process, one set after another, through the one program cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent import futures
from dataclasses import replace
from pathlib import Path
from typing import Mapping

import numpy as np

from .artifact.format import KERNEL_DIR, MANIFEST_NAME, PARAMS_NAME, Artifact, ArtifactWriter, Plan, kernel_path
from .compiler.build_check import BuildCheck, BuildCheckResult
from .compile import compile_model
from .compiler.progress import Progress, ProgressLine, sayer
from .errors import AdrenoError
from .options import CompileOptions
from .support.processes import spawn_pool, stop_pool
from .artifact.shape_sets import SET_FIELDS, SHAPES_DIR, label


def compile_shape_sets(model, output: str | os.PathLike, options: CompileOptions,
                       shape_sets: list[dict[str, list[int]]], progress: Progress | None = None,
                       bind: Mapping[str, np.ndarray] | None = None, build_check: BuildCheck | None = None,
                       jobs: int | None = None) -> tuple[Path, list[BuildCheckResult | None]]:
    """Compile `model` once per shape set (each `options` with that set's `input_shapes`; `progress`, `bind` and
    `build_check` as `compile_model` takes them) into one artifact at `output`, up to `jobs` sets at a time (None:
    one per core this process may use). Returns the artifact's path and each set's build check result (None where
    `build_check` is None)."""
    say = sayer(progress)
    started = time.perf_counter()
    final = Path(output)
    with ArtifactWriter(final) as writer:
        # each set's compile inside the writer's temporary directory: whatever stops the compile, the writer (or the
        # next writer of `output`, when this process was killed) removes it with the rest
        scratch = writer.tmp / ".shape-sets"
        compiled = _compile_sets(model, scratch, options, shape_sets, bind, default_jobs(jobs, len(shape_sets)),
                                 progress)
        artifacts, checks = [], []
        for index, path in enumerate(compiled):
            if build_check is not None:
                say(ProgressLine.SHAPE_SET_BUILD_CHECK, number=index + 1)
                build_check(path, options.device())
            artifacts.append(Artifact.load(path, checked=False))  # just written by this compile
            checks.append(build_check.result if build_check is not None else None)
        say(ProgressLine.MERGING)
        manifest = _merge(artifacts, writer)
        shutil.rmtree(scratch)
        manifest["compile_seconds"] = round(time.perf_counter() - started, 3)
        writer.seal(manifest)
        return writer.install(), checks


def default_jobs(jobs: int | None, sets: int) -> int:
    """How many sets compile at once: `jobs` (at least 1), else one per core this process may use; never more
    than there are sets."""
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(jobs, sets))


def _compile_sets(model, scratch: Path, options: CompileOptions, shape_sets: list[dict[str, list[int]]],
                  bind, jobs: int, progress: Progress | None) -> list[Path]:
    """Each set compiled (no build check) into `scratch/<index>`: in this process when `jobs` is 1 (its progress
    lines as `compile_model` says them), else on a pool of `jobs` processes (one line per set as it finishes)."""
    say = sayer(progress)
    count = len(shape_sets)
    if jobs == 1:
        paths = []
        for index, shapes in enumerate(shape_sets):
            say(ProgressLine.SHAPE_SET, number=index + 1, count=count, label=label(shapes))
            paths.append(compile_set(model, scratch / str(index), options, shapes, bind, progress))
        return paths
    say(ProgressLine.SHAPE_SETS_SIDE_BY_SIDE, count=count, jobs=jobs)
    pool = spawn_pool(jobs)
    try:
        pending = {pool.submit(compile_set, model, scratch / str(index), options, shapes, bind): index
                   for index, shapes in enumerate(shape_sets)}
        paths: dict[int, Path] = {}
        for done in futures.as_completed(pending):
            index = pending[done]
            try:
                paths[index] = done.result()
            except futures.process.BrokenProcessPool:  # the worker died: a crash in TVM or LLVM, or the OOM killer
                raise AdrenoError(f"the compile of shape set {index + 1} ({label(shape_sets[index])}) ended without "
                                  "a result (its process died); try --jobs 1 to see where") from None
            say(ProgressLine.SHAPE_SET_COMPILED, number=index + 1, count=count, label=label(shape_sets[index]))
        return [paths[index] for index in range(count)]
    finally:  # the other sets' compiles end with a failed or interrupted one
        stop_pool(pool)


def compile_set(model, directory: Path, options: CompileOptions, shapes: dict[str, list[int]], bind,
                progress: Progress | None = None) -> Path:
    """One set's compile, without the build check (the caller runs it): what a pool worker runs. Its error names
    the set (an error of the same type: the CLI's exit status and the API's exception stay those of the cause)."""
    try:
        return compile_model(model, directory, replace(options, input_shapes=shapes), progress=progress, bind=bind)
    except AdrenoError as err:
        raise type(err)(f"shape set {label(shapes)}: {err}") from None


def _merge(artifacts: list[Artifact], writer: ArtifactWriter) -> dict:
    """Write every set's plan, kernels and host library and the shared weight file into `writer`; the manifest."""
    params: dict[str, np.ndarray] = {}
    members: dict[tuple, str] = {}
    kernel_files: dict[str, str] = {}  # sha256 of a kernel file -> its path in the artifact
    entries = []
    for index, artifact in enumerate(artifacts):
        renamed = _add_params(params, members, artifact.stored_params(), set(artifact.plan.tensors))
        plan = _renamed(artifact.plan, renamed)
        plan.programs = {program: _add_kernel(writer, kernel_files, artifact.path / rel, index)
                         for program, rel in plan.programs.items()}
        directory = f"{SHAPES_DIR}/{index}"
        (writer.tmp / directory).mkdir(parents=True)
        writer.write_json(f"{directory}/plan.json", plan.to_json())
        fields = {key: artifact.manifest[key] for key in SET_FIELDS if key in artifact.manifest}
        fields["host_params"] = [renamed.get(name, name) for name in fields.get("host_params", [])]
        if fields.get("host_library"):
            fields["host_library"] = f"{directory}/{fields['host_library']}"
            shutil.copyfile(artifact.path / artifact.manifest["host_library"], writer.tmp / fields["host_library"])
        entries.append({"plan": f"{directory}/plan.json", "manifest": fields})
    writer.write_params(params)
    first = artifacts[0].manifest
    shared = {key: value for key, value in first.items() if key not in (*SET_FIELDS, "files", "plan_format")}
    sizes = {"weights": (writer.tmp / PARAMS_NAME).stat().st_size,
             "kernels": sum(p.stat().st_size for p in (writer.tmp / KERNEL_DIR).iterdir()),
             "host_library": sum((writer.tmp / e["manifest"]["host_library"]).stat().st_size
                                 for e in entries if e["manifest"].get("host_library"))}
    return {**shared, "sizes": sizes, "kernels_stored": len(set(kernel_files.values())), "shape_sets": entries}


def _add_params(params: dict[str, np.ndarray], members: dict[tuple, str], stored: dict[str, np.ndarray],
                taken: set[str]) -> dict[str, str]:
    """Add one set's stored params to the shared `params`, each value once: a param whose stored value (dtype,
    shape, bytes) a member already holds is that member (`members`: content key -> member name). Returns {name:
    member} for the params whose member has another name (the importer numbers params, `param0`, ..., so one
    weight may have another number in another set). `taken`: the set's tensor names (a member name is none of its
    other tensors')."""
    renamed, used = {}, set()
    for name, value in stored.items():
        key = (value.dtype.str, value.shape, hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest())
        member = members.get(key)
        if member is None or member in used:  # new content, or a second param of this set with the same values
            member = name
            count = 0
            while member in params or (member != name and member in taken):
                count += 1
                member = f"{name}_{count}"
            params[member] = value
            members.setdefault(key, member)
        used.add(member)
        if member != name:
            renamed[name] = member
    return renamed


def _renamed(plan: Plan, renamed: dict[str, str]) -> Plan:
    """`plan` with the params of `renamed` under their new names (the tensors' order kept: it is the host
    library's argument order)."""
    if not renamed:
        return plan
    data = plan.to_json()
    data["tensors"] = {renamed.get(name, name): {**spec, "name": renamed.get(name, name)}
                       for name, spec in data["tensors"].items()}
    for step in data["steps"]:
        step["args"] = [renamed.get(arg, arg) for arg in step["args"]]
    return Plan.from_json(data)


def _add_kernel(writer: ArtifactWriter, kernel_files: dict[str, str], source: Path, index: int) -> str:
    """Store a set's kernel file unless a file of the same bytes is stored; its path in the artifact."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest not in kernel_files:
        stem = source.name.removesuffix(".cl.gz")
        path = kernel_path(stem)
        if (writer.tmp / path).exists():  # another source under the name: this set's own
            path = kernel_path(f"{stem}-shape{index}")
        (writer.tmp / path).write_bytes(data)
        kernel_files[digest] = path
    return kernel_files[digest]


def set_summaries(path: Path) -> list[dict]:
    """Per set of the artifact at `path`: its label, kernels and host library (what `adreno compile` prints)."""
    manifest = json.loads((path / MANIFEST_NAME).read_text())
    return [{"label": label({n: e["shape"] for n, e in entry["manifest"]["inputs"].items()}),
             "kernels": entry["manifest"]["kernels"], "plan": entry["plan"]} for entry in manifest["shape_sets"]]
