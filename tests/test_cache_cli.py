"""The program cache in use: `adreno cache info|clear|verify|export` as a user runs them (subprocesses with
`ADRENO_CACHE_DIR` in a temporary directory), executors and runners on a warm cache, and the binaries bundled in
an artifact (used first, verified, and a damaged one falls back with the output unchanged). Real PoCL, no mocks.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

from adreno.artifact.format import Artifact
from adreno.opencl.programs import Grouping, groups
from adreno.opencl.signature import program_options
from adreno.cache import (
    BUNDLE_DIR,
    BUNDLE_INDEX,
    TVM_BLOB_NAME,
    BundledBinaries,
    DeviceIdentity,
    ProgramCache,
    bundle_dir_name,
    read_tvm_precompiled_blob,
)
from adreno.opencl.executor import Executor
from adreno.artifact.format import random_inputs
from adreno.runners.interface import RunInput
from adreno.runners.local import LocalRunner

ENTRY_HEADER_AT = 16  # magic, version, header length; then the header, the SHA-256 and the binary


def adreno(cache_dir: Path, *args, check_rc: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "ADRENO_CACHE_DIR": str(cache_dir), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == check_rc, f"rc {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def cache_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "adreno.cache" and r.levelno >= logging.WARNING]


@pytest.fixture(scope="module")
def identity(pocl_device) -> DeviceIdentity:
    return DeviceIdentity.from_cl_device(pocl_device)


@pytest.fixture(scope="module")
def exported(tiny_artifact, tmp_path_factory) -> dict:
    """A copy of the tiny artifact with its binaries exported for PoCL by `adreno cache export` (which also filled
    a cache), the export's JSON summary, and the reference outputs (a source build, no cache) on seeded inputs."""
    root = tmp_path_factory.mktemp("exported")
    artifact = root / "tiny"
    shutil.copytree(tiny_artifact, artifact)
    summary = json.loads(adreno(root / "cache", "cache", "export", artifact, "--device", "pocl", "--json").stdout)
    inputs = random_inputs(Artifact.load(artifact).input_specs(), seed=0)
    reference = Executor(tiny_artifact, "pocl").run(inputs)
    return {"artifact": artifact, "cache": root / "cache", "summary": summary, "inputs": inputs,
            "reference": reference}


def bundled_copy(exported: dict, tmp_path: Path) -> Path:
    path = tmp_path / "tiny"
    shutil.copytree(exported["artifact"], path)
    return path


def run_bundled(artifact: Path, cache: ProgramCache, inputs, device) -> list[np.ndarray]:
    """Run through `ProgramCache.for_artifact`, which is what the executor does with bundled binaries."""
    return Executor(artifact, device, cache=cache.for_artifact(artifact)).run(inputs)


# -- the CLI -----------------------------------------------------------------------------------------------


def test_cache_help_lists_subcommands(tmp_path):
    out = adreno(tmp_path, "cache", "--help").stdout
    for sub in ("info", "clear", "verify", "export"):
        assert sub in out
    assert "SetPreCompiledPrograms" in adreno(tmp_path, "cache", "export", "--help").stdout
    assert "required" in adreno(tmp_path, "cache", check_rc=2).stderr


def test_info_verify_clear_through_the_cli(exported, tmp_path):
    cache_dir = tmp_path / "cache"
    shutil.copytree(exported["cache"], cache_dir)
    programs = exported["summary"]["programs"]

    info = json.loads(adreno(cache_dir, "cache", "info", "--json").stdout)
    assert info["root"] == str(cache_dir) and info["entries"] == programs and info["quarantined"] == []
    assert info["bytes"] == sum(p.stat().st_size for p in cache_dir.glob("*.clbin"))
    assert f"{programs} entries" in adreno(cache_dir, "cache", "info").stdout

    report = json.loads(adreno(cache_dir, "cache", "verify", "--json", "--artifact", exported["artifact"]).stdout)
    assert (report["ok"], report["bad"]) == (programs, 0)
    (bundle,) = report["artifact"]["bundles"].values()
    assert bundle["ok"] and bundle["programs"] == programs and bundle["problems"] == []

    victim = sorted(cache_dir.glob("*.clbin"))[0]
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    text = adreno(cache_dir, "cache", "verify", check_rc=1).stdout
    assert f"{programs - 1} entries ok, 1 bad" in text and f"{victim.name}: checksum mismatch" in text

    cleared = json.loads(adreno(cache_dir, "cache", "clear", "--json").stdout)
    assert cleared["removed"] == programs
    assert json.loads(adreno(cache_dir, "cache", "info", "--json").stdout)["entries"] == 0
    assert list(cache_dir.glob("*.clbin")) == []


def test_user_errors_are_one_line_and_status_2(tmp_path):
    err = adreno(tmp_path, "cache", "export", tmp_path / "missing", check_rc=2).stderr
    assert "no such artifact directory" in err and "Traceback" not in err
    err = adreno(tmp_path, "cache", "verify", "--artifact", tmp_path / "missing", check_rc=2).stderr
    assert "no such artifact directory" in err


# -- export: the bundle and TVM's blob ---------------------------------------------------------------------


def test_export_writes_verified_bundle_and_tvm_blob(exported, identity, pocl_device):
    artifact = Artifact.load(exported["artifact"])  # the manifest does not list binaries/: still loads
    assert not any(f.startswith(BUNDLE_DIR) for f in artifact.manifest["files"])
    summary = exported["summary"]
    bundle = exported["artifact"] / BUNDLE_DIR / bundle_dir_name(identity)
    assert summary["path"] == str(bundle) and summary["outcomes"] == {"miss": len(artifact.plan.programs)}

    index = json.loads((bundle / BUNDLE_INDEX).read_text())
    assert index["device"] == summary["device"] == {
        "platform_name": identity.platform_name, "platform_version": identity.platform_version,
        "device_name": identity.device_name, "driver_version": identity.driver_version,
        "opencl_c_version": identity.opencl_c_version}
    assert set(index["programs"]) == set(artifact.plan.programs)
    opened = BundledBinaries.open(exported["artifact"], pocl_device)
    binaries = {}
    for name, entry in index["programs"].items():
        binary = opened.get(artifact.kernel_source(name), program_options(""))  # verified like a cache entry
        assert binary is not None and len(binary) == entry["bytes"]
        binaries[name] = binary

    kernels = {launch.name: step.program for step in artifact.plan.steps for launch in step.kernels}
    blob = read_tvm_precompiled_blob((bundle / TVM_BLOB_NAME).read_bytes())
    assert sorted(blob) == sorted(kernels) == sorted(index["tvm_precompiled"]["kernels"])  # one per kernel
    context = cl.Context([pocl_device])
    for kernel, binary in blob.items():
        assert binary == binaries[kernels[kernel]]
        program = cl.Program(context, [pocl_device], [binary]).build(cache_dir=False)
        assert kernel in program.get_info(cl.program_info.KERNEL_NAMES).split(";")


# -- executors and runners on the cache ----------------------------------------------------------------------


def test_second_executor_is_all_hits_with_identical_outputs(exported, tiny_artifact, tmp_path, pocl_device):
    plain = tiny_artifact  # no bundled binaries: programs come from the cache or the source
    programs = len(groups(Artifact.load(plain), Grouping.MODEL))  # driver programs: one for the model
    assert programs == 1
    first_cache = ProgramCache(tmp_path / "cache")
    # the default CacheWrite.INLINE: the cache is written before run returns, so the second executor finds it
    first = Executor(plain, pocl_device, cache=first_cache).run(exported["inputs"])
    assert first_cache.stats["misses"] == programs and first_cache.stats["hits"] == 0

    second_cache = ProgramCache(tmp_path / "cache")
    second = Executor(plain, pocl_device, cache=second_cache).run(exported["inputs"])
    assert second_cache.stats["hits"] == programs and second_cache.stats["misses"] == 0
    for a, b, ref in zip(first, second, exported["reference"]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, ref)

    runner = LocalRunner("pocl", cache=second_cache)  # the tuner's runner: re-measuring does not rebuild
    try:
        for _ in range(2):
            result = runner.run(RunInput(str(plain), inputs=exported["inputs"],
                                         reference=exported["reference"], repeat=1))
            assert result.ok, result.error
    finally:
        runner.close()
    assert second_cache.stats["hits"] == 3 * programs and second_cache.stats["misses"] == 0


def test_executor_prefers_bundled_binaries(exported, tmp_path, pocl_device):
    cache = ProgramCache(tmp_path / "empty-cache")
    outputs = Executor(exported["artifact"], pocl_device, cache=cache).run(exported["inputs"])
    programs = len(Artifact.load(exported["artifact"]).plan.programs)
    assert cache.stats["bundled"] == programs and cache.stats["misses"] == 0
    for a, ref in zip(outputs, exported["reference"]):
        np.testing.assert_array_equal(a, ref)


def test_bundled_binaries_are_loaded_first(exported, tmp_path, pocl_device, caplog):
    caplog.set_level(logging.WARNING, logger="adreno.cache")
    cache = ProgramCache(tmp_path / "empty-cache")
    outputs = run_bundled(exported["artifact"], cache, exported["inputs"], pocl_device)
    programs = len(Artifact.load(exported["artifact"]).plan.programs)
    assert cache.stats["bundled"] == programs and cache.stats["misses"] == cache.stats["hits"] == 0
    assert cache_warnings(caplog) == []
    for got, ref in zip(outputs, exported["reference"]):
        np.testing.assert_array_equal(got, ref)


def _flip_last_byte(bundle: Path, name: str, index: dict) -> None:
    path = bundle / index["programs"][name]["file"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _index_checksum(bundle: Path, name: str, index: dict) -> None:
    index["programs"][name]["sha256"] = "0" * 64
    (bundle / BUNDLE_INDEX).write_text(json.dumps(index))


def _other_program(bundle: Path, name: str, index: dict) -> None:
    other = next(n for n in index["programs"] if n != name)
    shutil.copyfile(bundle / index["programs"][other]["file"], bundle / index["programs"][name]["file"])


def _truncated(bundle: Path, name: str, index: dict) -> None:
    path = bundle / index["programs"][name]["file"]
    path.write_bytes(path.read_bytes()[: ENTRY_HEADER_AT + 10])


@pytest.mark.parametrize("damage, reason", [(_flip_last_byte, "checksum mismatch"),
                                            (_index_checksum, "checksum differs from index.json"),
                                            (_other_program, "key mismatch"), (_truncated, "truncated")],
                         ids=["binary-byte", "index-checksum", "other-program", "truncated"])
def test_damaged_bundled_binary_falls_back(exported, identity, tmp_path, pocl_device, caplog, damage, reason):
    artifact = bundled_copy(exported, tmp_path)
    bundle = artifact / BUNDLE_DIR / bundle_dir_name(identity)
    index = json.loads((bundle / BUNDLE_INDEX).read_text())
    victim = min(index["programs"], key=lambda n: index["programs"][n]["bytes"])  # the cheapest rebuild
    damage(bundle, victim, index)
    caplog.set_level(logging.WARNING, logger="adreno.cache")

    cache = ProgramCache(tmp_path / "cache")
    outputs = run_bundled(artifact, cache, exported["inputs"], pocl_device)

    (line,) = cache_warnings(caplog)
    assert victim in line and reason in line
    assert cache.stats["bundle_rejected"] == 1 and cache.stats["misses"] == 1
    assert cache.stats["bundled"] == len(index["programs"]) - 1
    for got, ref in zip(outputs, exported["reference"]):
        np.testing.assert_array_equal(got, ref)
    report = json.loads(adreno(tmp_path / "cache", "cache", "verify", "--json", "--artifact", artifact,
                               check_rc=1).stdout)
    (checked,) = report["artifact"]["bundles"].values()
    assert not checked["ok"] and any(p.startswith(victim) for p in checked["problems"])


def test_bundle_for_another_driver_is_not_used(exported, identity, tmp_path, pocl_device, caplog):
    artifact = bundled_copy(exported, tmp_path)
    older = DeviceIdentity(identity.platform_name, identity.platform_version, identity.device_name,
                           identity.driver_version + "-older", identity.opencl_c_version)
    bundle = artifact / BUNDLE_DIR / bundle_dir_name(identity)
    index = json.loads((bundle / BUNDLE_INDEX).read_text())
    index["device"]["driver_version"] = older.driver_version
    (bundle / BUNDLE_INDEX).write_text(json.dumps(index))
    bundle.rename(bundle.with_name(bundle_dir_name(older)))
    cache_dir = tmp_path / "cache"
    shutil.copytree(exported["cache"], cache_dir)  # the warm cache takes over
    caplog.set_level(logging.WARNING, logger="adreno.cache")

    cache = ProgramCache(cache_dir)
    outputs = run_bundled(artifact, cache, exported["inputs"], pocl_device)

    (line,) = cache_warnings(caplog)
    assert older.driver_version in line and "building through the cache" in line
    # no bundle it can use: the executor builds the model as one program (adreno.opencl.programs), through the cache
    assert cache.stats["bundled"] == 0 and cache.stats["hits"] + cache.stats["misses"] == 1
    for got, ref in zip(outputs, exported["reference"]):
        np.testing.assert_array_equal(got, ref)
