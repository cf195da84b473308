"""`adreno compile`'s build check (adreno.compiler.build_check) as a user meets it: a kernel that cannot build fails the
compile in one line with its build log in a file and leaves no artifact, `--no-build-check` skips it, a device that
cannot stand for the target skips it in one line, and the program cache is filled where the driver's binary is worth it:
at the check on a driver that compiles at the build, at the first run on PoCL.

The kernel that cannot build is a real one: a model that computes in float16 (Cast to FLOAT16, Mul) makes TVM emit
`half` arithmetic, which a target without cl_khr_fp16 (pocl-cpu) cannot build; on adreno-740, which has it, PoCL
cannot stand in and the check is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from adreno.artifact.format import Artifact
from adreno.compiler.build_check import BuildCheck
from adreno.cache import ProgramCache
from adreno.compile import compile_model
from adreno.opencl.device import DeviceIdentity
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from tests.conftest import single_op_model


def adreno(*args, env=None):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


@pytest.fixture(scope="module")
def half_model(tmp_path_factory) -> Path:
    """x -> Cast(float16) -> Mul(itself) -> Cast(float): one kernel computing in half."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), helper.make_node("Mul", ["h", "h"], ["m"]),
         helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)], "half",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("half") / "half.onnx"
    onnx.save(model, path)
    return path


def test_a_kernel_that_cannot_build_fails_the_compile_in_one_line(half_model, tmp_path):
    out = tmp_path / "out" / "art"
    proc = adreno("compile", half_model, "--target", "pocl-cpu", "--memory", "buffer", "-q", "-o", out)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: OpenCL build of fused_cast_multiply_cast") and "_kernel" in lines[0]
    log = Path(lines[0].rsplit("full build log: ", 1)[1])
    assert "Half precision" in lines[0] and "Half precision" in log.read_text()
    assert list((tmp_path / "out").iterdir()) == []  # neither the artifact nor its temporary sibling
    log.unlink()

    proc = adreno("compile", half_model, "--target", "pocl-cpu", "--memory", "buffer", "-q", "-o", out,
                  "--no-build-check")
    assert proc.returncode == 0 and "build check: off (--no-build-check)" in proc.stdout, proc.stderr
    assert (out / "manifest.json").is_file()


def test_a_device_that_cannot_stand_for_the_target_skips_the_check_in_one_line(half_model, tmp_path):
    proc = adreno("compile", half_model, "--memory", "buffer", "-q", "-o", tmp_path / "a")  # adreno-740 has fp16
    assert proc.returncode == 0, proc.stderr
    assert "build check skipped: " in proc.stdout and "has no cl_khr_fp16" in proc.stdout
    proc = adreno("compile", half_model, "--memory", "buffer", "-q", "-o", tmp_path / "b", "--json",
                  env={"OCL_ICD_VENDORS": str(tmp_path / "missing")})  # the ICD loader then finds no platform
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["build_check"]["skipped"].startswith("no local OpenCL device")


def test_on_pocl_the_first_run_after_a_compile_caches_the_programs(tmp_path):
    """PoCL compiles at first launch (`DeviceIdentity.compiles_at_first_launch`): the check builds without storing a
    binary, the first run builds from source and stores the binary after it, and every start after that loads it."""
    model = tmp_path / "relu.onnx"
    onnx.save(single_op_model("Relu", {"x": [1, 4, 8, 8]}), model)
    env = {"ADRENO_CACHE_DIR": str(tmp_path / "cache")}
    proc = adreno("compile", model, "-q", "--json", "-o", tmp_path / "art", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["build_check"]["builds"] == ["deferred"]  # built from source, not stored
    assert not list((tmp_path / "cache").rglob("*.bin")), "the check stored a binary"
    froms = []
    for _ in range(2):
        proc = adreno("run", tmp_path / "art", "--json", "-q", "--repeat", "1", "--check", env=env)
        result = json.loads(proc.stdout)
        assert proc.returncode == 0 and result["check"]["ok"] and np.isfinite(result["build_seconds"]), proc.stderr
        froms.append(result["build_from"])
    assert froms == [{"miss": 1}, {"hit": 1}]
    proc = adreno("compile", model, "-q", "-o", tmp_path / "art", env=env)  # again: nothing is rebuilt
    assert proc.returncode == 0 and "(1 already cached;" in proc.stdout, proc.stderr


def test_a_driver_that_compiles_at_the_build_gets_its_binary_stored_by_the_check(tmp_path, monkeypatch):
    """Stand-in for a GPU driver (none here): PoCL is taken for one that compiles at the build, so the check stores
    the binary and the run after the compile loads it."""
    monkeypatch.setattr(DeviceIdentity, "compiles_at_first_launch", property(lambda self: False))
    model = tmp_path / "relu.onnx"
    onnx.save(single_op_model("Relu", {"x": [1, 4, 8, 8]}), model)
    cache = ProgramCache(tmp_path / "cache")
    check = BuildCheck(cache)
    out = compile_model(str(model), tmp_path / "art", CompileOptions(target="pocl-cpu"), build_check=check)
    assert check.result.builds == ("miss",)  # built and stored
    assert [b.how for b in Executor(Artifact.load(out), cache=cache).builds] == ["hit"]
