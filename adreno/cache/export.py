"""Writing and checking the binaries an artifact bundles: `export_bundle` builds every program of an artifact for
one device and writes its bundle (entries, index.json, TVM's blob) atomically; `verify_bundles` checks every bundle
without a driver."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import time
import uuid

import pyopencl as cl

import adreno
from adreno.errors import ArtifactError, KernelBuildError
from adreno.support.native_log import DRIVER_NOISE, summarised_stderr
from adreno.opencl.device import DeviceIdentity
from adreno.opencl.programs import build_failure
from adreno.opencl.signature import program_options

from .bundled import BUNDLE_DIR, BUNDLE_FORMAT, BUNDLE_INDEX, SAFE_NAME, TVM_BLOB_NAME, bundle_dir_name, read_index
from .files import fsync_dir, read_regular, write_durably
from .format import (BadEntry, canonical_json, decode_entry, device_key, encode_entry, entry_problem, key_fields,
                     key_of, tvm_version)
from .store import ProgramCache
from .tvm_blob import read_tvm_precompiled_blob, tvm_precompiled_blob


def export_bundle(artifact, context: cl.Context, cache: ProgramCache | None = None, options: str = "") -> dict:
    """Build every program of ``artifact`` (an `adreno.artifact.format.Artifact`) for the single device of
    ``context`` and write the binaries into ``<artifact>/binaries/<bundle_dir_name>/`` (see
    `BundledBinaries`), replacing an earlier export for the same device; the directory appears complete
    or not at all.

    Programs are built through ``cache`` (so a warm cache makes this fast; None: from source), with the options
    the executor builds them with (`adreno.opencl.signature.program_options` of ``options``). TVM's blob
    holds one binary per kernel launched by the plan: the binary of the program containing it. Returns a
    summary: the bundle path, device, counts, bytes and how each program was obtained.
    Raises `KernelBuildError` (one line, the log in a file) when a program does not build, `BuildOptionsError` when
    the driver refuses ``options`` themselves, and `adreno.errors.ArtifactError` when two
    programs define the same kernel name differently or a program name cannot be a file name.
    """
    options = program_options(options)
    if len(context.devices) != 1:
        raise ValueError(f"export_bundle needs a context with one device, got {len(context.devices)}")
    identity = DeviceIdentity.from_cl_device(context.devices[0])
    builder = cache if cache is not None else ProgramCache(enabled=False)
    plan = artifact.plan
    kernel_programs: dict[str, str] = {}
    for step in plan.steps:
        for launch in step.kernels:
            other = kernel_programs.setdefault(launch.name, step.program)
            if other != step.program and artifact.kernel_source(other) != artifact.kernel_source(step.program):
                raise ArtifactError(f"{artifact.path}: kernel {launch.name} is defined differently by programs "
                                    f"{other} and {step.program}; TVM's runtime keys binaries by kernel name")
    outcomes: dict[str, int] = {}
    programs: dict[str, dict] = {}
    files: dict[str, bytes] = {}
    binaries: dict[str, bytes] = {}
    for name in plan.programs:
        if not SAFE_NAME.fullmatch(name):
            raise ArtifactError(f"{artifact.path}: program name {name!r} cannot be a file name")
        source = artifact.kernel_source(name)
        kernels = sorted(k for k, p in kernel_programs.items() if p == name)
        try:
            with summarised_stderr(DRIVER_NOISE):  # the compiler's "1 error generated." beside the log
                program, how = builder.build(context, source, options)
        except KernelBuildError as err:  # one line, as a run's, with the log in a file (options can break a kernel)
            raise build_failure(name, kernels, identity.device_name, str(err)) from None
        outcomes[how] = outcomes.get(how, 0) + 1
        binary = program.get_info(cl.program_info.BINARIES)[0]
        if not binary:
            raise KernelBuildError(f"the driver of {identity.device_name!r} returned no binary for {name}")
        header = canonical_json(key_fields(identity, source, options))
        files[f"{name}.clbin"] = encode_entry(header, binary)
        binaries[name] = binary
        programs[name] = {"file": f"{name}.clbin", "key": key_of(header), "sha256": hashlib.sha256(binary).hexdigest(),
                          "bytes": len(binary), "kernels": kernels}
    blob = tvm_precompiled_blob({kernel: binaries[program] for kernel, program in kernel_programs.items()})
    files[TVM_BLOB_NAME] = blob
    index = {
        "format": BUNDLE_FORMAT, "device": identity.cache_fields, "device_key": device_key(identity),
        "adreno": adreno.__version__, "tvm": tvm_version(), "options": options, "created": time.time(),
        "programs": programs,
        "tvm_precompiled": {"file": TVM_BLOB_NAME, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
                            "kernels": list(kernel_programs)},
    }
    files[BUNDLE_INDEX] = json.dumps(index, indent=1).encode("ascii") + b"\n"
    final = pathlib.Path(artifact.path) / BUNDLE_DIR / bundle_dir_name(identity)
    _replace_dir(final, files)
    return {"path": str(final), "device": identity.cache_fields, "programs": len(programs),
            "kernels": len(kernel_programs), "bytes": sum(len(d) for d in files.values()), "outcomes": outcomes,
            "tvm_precompiled": str(final / TVM_BLOB_NAME), "options": options}


def _replace_dir(final: pathlib.Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a temporary sibling of ``final``, then swap it into place."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    old = final.parent / f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.old"
    tmp.mkdir()
    try:
        for name, data in files.items():
            write_durably(tmp / name, data)
        fsync_dir(tmp)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        fsync_dir(final.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def verify_bundles(artifact) -> dict:
    """Check every bundle in ``artifact`` (an `adreno.artifact.format.Artifact`) without loading it into a driver.

    Returns ``{"ok": n_ok, "bad": n_bad, "bundles": {dir name: {"ok", "device", "programs", "problems"}}}``.
    Problems: an unreadable or malformed index, a bad entry (as `ProgramCache.verify`), a checksum that
    differs from the index, a binary of another kernel source than the artifact's, a stale toolchain, a
    program of the plan missing, or a TVM blob that does not hold exactly the plan's kernels.
    """
    root = pathlib.Path(artifact.path) / BUNDLE_DIR
    report: dict[str, dict] = {}
    bundles = sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    for path in bundles:
        problems: list[str] = []
        try:
            index = read_index(path)
        except BadEntry as bad:
            report[path.name] = {"ok": False, "device": None, "programs": 0, "problems": [str(bad)]}
            continue
        binaries = {}
        for name, entry in index["programs"].items():
            try:
                data = read_regular(path / entry["file"])
            except OSError as exc:
                problems.append(f"{name}: unreadable ({exc.strerror})")
                continue
            problem = entry_problem(data, entry["key"])
            if problem is None:
                decoded = decode_entry(data)
                fields = json.loads(decoded.header)
                binaries[name] = decoded.binary
                if hashlib.sha256(decoded.binary).hexdigest() != entry["sha256"]:
                    problem = "checksum differs from index.json"
                elif {k: fields.get(k) for k in index.get("device") or {}} != index.get("device"):
                    problem = "entry is for another device or driver than index.json"
                elif name not in artifact.plan.programs:
                    problem = "not a program of this artifact"
                elif fields.get("source_sha256") != hashlib.sha256(
                        artifact.kernel_source(name).encode("utf-8")).hexdigest():
                    problem = "built from another kernel source than the artifact's"
            if problem:
                problems.append(f"{name}: {problem}")
        missing = sorted(set(artifact.plan.programs) - set(index["programs"]))
        if missing:
            problems.append(f"missing programs: {', '.join(missing)}")
        problems += _blob_problems(path, artifact, binaries)
        report[path.name] = {"ok": not problems, "device": index.get("device"), "programs": len(index["programs"]),
                             "problems": problems}
    n_ok = sum(b["ok"] for b in report.values())
    return {"ok": n_ok, "bad": len(report) - n_ok, "bundles": report}


def _blob_problems(path: pathlib.Path, artifact, binaries: dict[str, bytes]) -> list[str]:
    try:
        blob = read_tvm_precompiled_blob(read_regular(path / TVM_BLOB_NAME))
    except OSError as exc:
        return [f"{TVM_BLOB_NAME}: unreadable ({exc.strerror})"]
    except ValueError as exc:
        return [f"{TVM_BLOB_NAME}: {exc}"]
    kernels = {launch.name: step.program for step in artifact.plan.steps for launch in step.kernels}
    problems = []
    if set(blob) != set(kernels):
        problems.append(f"{TVM_BLOB_NAME}: holds {len(blob)} kernels, the plan launches {len(kernels)}")
    wrong = sorted(k for k, b in blob.items() if k in kernels and kernels[k] in binaries and b != binaries[kernels[k]])
    if wrong:
        problems.append(f"{TVM_BLOB_NAME}: binary differs from its program's entry for {', '.join(wrong[:5])}")
    return problems
