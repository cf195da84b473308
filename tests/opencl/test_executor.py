"""The pyopencl executor on PoCL: correct outputs, profiling, input validation, build failures, device choice."""

from __future__ import annotations

from pathlib import Path
import shutil

import numpy as np
import pytest

from adreno.frontend import zoo
from adreno.artifact.format import Artifact
from adreno.errors import AdrenoError, DeviceError, KernelBuildError
from adreno.opencl import device as devices
from adreno.opencl.executor import Executor
from adreno.reference import onnxruntime_outputs
from adreno.artifact.format import random_inputs
from tests.kernel_files import append_to_kernel_file


def test_tiny_matches_onnxruntime_and_profiles(tiny_artifact, pocl_device):
    executor = Executor(tiny_artifact, pocl_device)
    inputs = random_inputs(executor.artifact.input_specs(), seed=3)
    outputs = executor.run(inputs)
    reference = onnxruntime_outputs(zoo.get_model("tiny"), inputs)
    np.testing.assert_allclose(outputs[0], reference[0], atol=1e-5)
    assert np.allclose(outputs[0].sum(), 1.0, atol=1e-4), "softmax output sums to one"
    profile = executor.profile(inputs, repeat=3)
    assert len(profile.run_device_ms) == 3 and all(ms > 0 for ms in profile.run_device_ms)
    assert sum(k.calls for k in profile.kernels) == executor.artifact.plan.kernel_count()
    assert profile.kernels == sorted(profile.kernels, key=lambda k: k.median_ms, reverse=True)
    assert executor.run(inputs)[0].tobytes() == outputs[0].tobytes(), "runs are repeatable"


def test_inputs_by_name_and_shape_errors(tiny_artifact):
    executor = Executor(tiny_artifact)
    x = random_inputs(executor.artifact.input_specs())[0]
    np.testing.assert_array_equal(executor.run({"input": x})[0], executor.run([x])[0])
    with pytest.raises(AdrenoError, match=r"input input must have shape \[1, 3, 32, 32\]"):
        executor.run([x[:, :, :16]])
    with pytest.raises(AdrenoError, match="missing inputs"):
        executor.run({"other": x})


def test_kernel_build_failure_shows_build_log(tiny_artifact, tmp_path):
    broken = Path(shutil.copytree(tiny_artifact, tmp_path / "broken"))
    artifact = Artifact.load(broken)
    program = artifact.plan.programs[artifact.plan.steps[0].program]
    append_to_kernel_file(broken / program, "\nthis is not OpenCL C;\n")
    with pytest.raises(KernelBuildError, match=r"(?s)OpenCL build of .* failed.*error"):
        Executor(Artifact.load(broken, checked=False))  # a hand edit: the hashes would refuse it


def test_device_selection_errors_list_devices():
    with pytest.raises(DeviceError, match="no OpenCL device 99; devices: 0:"):
        devices.select_device(99)
    with pytest.raises(DeviceError, match="no OpenCL device matches 'no-such-gpu'"):
        devices.select_device("no-such-gpu")


def test_default_device_is_a_working_pocl():
    device = devices.select_device()
    assert "portable computing language" in device.platform.name.lower()
    assert devices.compiler_works(device)
    assert devices.DeviceIdentity.from_cl_device(device).rpc_key == "pocl-cpu"
    listed = devices.list_devices()
    assert any(d.compiler_ok and d.name == device.name.strip() for d in listed)


def test_no_platform_gives_install_hint(monkeypatch):
    # Stand-in: pyopencl's wheel always brings its own PoCL, so a machine without any OpenCL platform cannot
    # exist here; the platform query is replaced to return none.
    monkeypatch.setattr(devices, "_platforms", lambda: [])
    with pytest.raises(DeviceError, match="no OpenCL platform found.*pip install pocl-binary-distribution"):
        devices.select_device()



