"""Classifier heads (one-row dense/matmul) get dlight's GEMV schedule, products with many rows (linear layers,
attention) dlight's Matmul schedule, instead of TVM's Adreno fallback (a work-group per output element)."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.compile import compile_model
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import onnxruntime_outputs
from adreno.artifact.format import random_inputs
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


@pytest.mark.parametrize("x, w", [([1, 64, 48], [48, 48]), ([1, 12, 20], [20, 13]), ([2, 3, 5, 7], [2, 3, 7, 6])])
@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_matmul_with_rows_is_tiled_and_matches_onnxruntime(x, w, memory, tmp_path):
    rng = np.random.default_rng(len(x) + x[-1])
    model = single_op_model("MatMul", {"x": x}, {"w": rng.standard_normal(w)})
    artifact = Artifact.load(compile_model(model, tmp_path / memory, CompileOptions(memory=memory)))
    [step] = [s for s in artifact.plan.steps if s.op == "matmul"]
    outputs = int(np.prod(artifact.plan.tensors[step.args[-1]].shape))
    work_items = int(np.prod(step.kernels[0].global_size))
    # tiled (small shapes pad to whole work-groups); TVM's fallback gave each output 256 work-items
    assert work_items < 16 * outputs and list(step.kernels[0].local_size)[:2] == [32, 4], step.kernels[0]
    inputs = random_inputs(artifact.input_specs(), seed=1)
    reference = onnxruntime_outputs(model, inputs)[0]
    atol = 1e-4 * max(1, np.abs(reference).max())
    np.testing.assert_allclose(Executor(artifact).run(inputs)[0], reference, atol=atol)


def test_a_reduction_gemv_cannot_analyse_is_refused_and_still_runs(tmp_path):
    """ReduceLogSumExp's sum of exponentials looks like a product to the dense family, but dlight's GEMV analysis
    fails its own assertion on it: the compile failed with that AssertionError. It is now the dense family's
    refusal (named in the manifest), and TVM's schedule runs the function."""
    model = single_op_model("ReduceLogSumExp", {"x": [8, 8192]}, {}, axes=[1], keepdims=1)
    artifact = Artifact.load(compile_model(model, tmp_path / "lse", CompileOptions(memory="buffer")))
    assert any(r.startswith("dense:") and "AssertionError" in r for r in artifact.manifest["refused"]), \
        artifact.manifest["refused"]
    inputs = random_inputs(artifact.input_specs(), seed=1)
    reference = onnxruntime_outputs(model, inputs)[0]
    np.testing.assert_allclose(Executor(artifact).run(inputs)[0], reference, rtol=1e-5, atol=1e-5)
