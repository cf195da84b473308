"""Parallel first launches on PoCL (`adreno.opencl.first_launches`) and the program binary fetched without the GIL
(`adreno.opencl.binaries`)."""

import os
import subprocess
import sys

import numpy as np

from adreno.artifact.format import random_inputs
from adreno.opencl import first_launches
from adreno.opencl.device import DeviceIdentity, opencl_devices
from adreno.opencl.executor import Executor
from adreno.opencl.first_launches import (MIN_KERNELS, Helpers, compile_order, kernel_sizes, launch_claimed,
                                          launch_order, read_claims, worker_count, write_claims)


def test_each_kernel_is_launched_by_the_one_process_that_claims_it_largest_first(tiny_artifact, pocl_device):
    executor = Executor(tiny_artifact, pocl_device, compile_workers=0)
    order, names = compile_order(executor.artifact), launch_order(executor.artifact)
    sizes = kernel_sizes(executor.artifact)
    assert sorted(order) == sorted({b.name for b in executor.launches})
    assert [sizes[n] for n in order] == sorted((sizes[n] for n in order), reverse=True)
    claims = write_claims(order, names)
    try:
        taken = read_claims(claims, names)
        assert next(taken) == order[0]  # another process took the largest
        assert launch_claimed(executor.queue, executor.launches, read_claims(claims, names)) == len(order) - 1
        assert launch_claimed(executor.queue, executor.launches, read_claims(claims, names)) == 0  # all taken
    finally:
        os.close(claims)


def test_claims_interleaved_between_readers_give_each_kernel_once(tiny_artifact):
    from adreno.artifact.format import Artifact

    artifact = Artifact.load(tiny_artifact)
    order, names = compile_order(artifact), launch_order(artifact)
    claims = write_claims(order, names)
    try:
        first, second = read_claims(claims, names), read_claims(claims, names)
        got = [next(first), next(second), *second, *first]
    finally:
        os.close(claims)
    assert got == order


def test_workers_only_where_the_driver_compiles_at_first_launch_and_shares_its_disk_cache(pocl_device, monkeypatch):
    pocl = DeviceIdentity.from_cl_device(pocl_device)
    monkeypatch.setattr(first_launches.os, "cpu_count", lambda: 4)
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    assert worker_count(pocl, 8 * MIN_KERNELS, built_from_source=True) == 4  # one per core, the executor waits
    assert worker_count(pocl, MIN_KERNELS, built_from_source=True) == 1
    assert worker_count(pocl, MIN_KERNELS - 1, built_from_source=True) == 0  # a process start would cost more
    assert worker_count(pocl, 4 * MIN_KERNELS, built_from_source=False) == 0  # from a cache: nothing to compile
    monkeypatch.setattr(DeviceIdentity, "compiles_at_first_launch", property(lambda self: False))
    assert worker_count(pocl, 4 * MIN_KERNELS, built_from_source=True) == 0  # a GPU compiled it in the build
    monkeypatch.undo()
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")
    assert worker_count(pocl, 4 * MIN_KERNELS, built_from_source=True) == 0  # no cache shared between processes
    monkeypatch.delenv("POCL_KERNEL_CACHE")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert worker_count(pocl, 4 * MIN_KERNELS, built_from_source=True) == 0  # sys.executable is the app itself


def test_a_worker_compiles_a_share_and_the_outputs_are_those_of_a_start_alone(tiny_artifact, pocl_device, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "pocl"))
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the worker finds the package where this process did
    inputs = random_inputs(Executor(tiny_artifact, pocl_device, compile_workers=0).artifact.input_specs(), seed=4)
    alone = Executor(tiny_artifact, pocl_device, compile_workers=0)
    helped = Executor(tiny_artifact, pocl_device, compile_workers=1)
    assert alone.first_launches is None
    assert helped.first_launches.workers == 1 and helped.first_launches.failures == ()
    for a, b in zip(alone.run(inputs), helped.run(inputs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_failed_worker_is_a_value_and_costs_no_correctness(tiny_artifact, pocl_device):
    executor = Executor(tiny_artifact, pocl_device, compile_workers=0)
    missing_device = len(opencl_devices()) + 5
    helpers = Helpers(executor.artifact, missing_device, 1)
    done = helpers.finish()
    assert done.workers == 1 and len(done.failures) == 1 and done.failures[0].startswith("worker 1: error:")
    again = Executor(tiny_artifact, pocl_device, compile_workers=0)
    inputs = random_inputs(executor.artifact.input_specs(), seed=5)
    for a, b in zip(executor.run(inputs), again.run(inputs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_worker_refuses_a_bad_artifact_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "adreno.opencl.first_launch_worker", str(tmp_path / "none"),
                           "--device", "0", "--claims-fd", "0", "--deadline", "60"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1


def test_the_binary_fetched_without_the_gil_is_the_drivers(pocl_device):
    import pyopencl as cl

    from adreno.opencl.binaries import program_binary

    source = "__kernel void k(__global float *a) { a[get_global_id(0)] *= 2.0f; }"
    program = cl.Program(cl.Context([pocl_device]), source).build()
    binary = program_binary(program)
    assert binary and binary == bytes(program.get_info(cl.program_info.BINARIES)[0])
