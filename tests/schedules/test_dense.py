"""Classifier heads (one-row dense/matmul) get dlight's GEMV schedule instead of TVM's Adreno fallback."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.artifact import Artifact
from adreno.compile import compile_model
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import onnxruntime_outputs
from adreno.runners.interface import random_inputs
from tests.conftest import single_op_model


@pytest.mark.parametrize("k, n", [(1280, 1000), (512, 10), (37, 5)])
def test_gemv_head_matches_onnxruntime_and_is_ours(k, n, tmp_path):
    rng = np.random.default_rng(k)
    model = single_op_model("Gemm", {"x": [1, k]}, {"w": rng.standard_normal((n, k)), "c": rng.standard_normal(n)},
                            transB=1)
    ours = Artifact.load(compile_model(model, tmp_path / "ours"))
    tvm = Artifact.load(compile_model(model, tmp_path / "tvm", CompileOptions(schedules="tvm")))
    ours_source, tvm_source = (a.kernel_source(a.plan.steps[0].program) for a in (ours, tvm))
    assert ours_source != tvm_source, "the dense family must schedule the head, not TVM's Adreno fallback"
    inputs = random_inputs(ours.input_specs(), seed=1)
    reference = onnxruntime_outputs(model, inputs)[0]
    np.testing.assert_allclose(Executor(ours).run(inputs)[0], reference, atol=1e-4 * max(1, np.abs(reference).max()))
