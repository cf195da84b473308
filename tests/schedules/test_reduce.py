"""reduce: softmax over the last axis (classifier logits) and over the channels of NCHW, and LayerNorm over the last
axis (ConvNeXt's channels-last blocks, MobileViT's tokens), on PoCL against onnxruntime, proven to be scheduled by
our rule; a LayerNorm over two axes is left to dlight and still right; tuned (non-default) knob values through the
tuner's build + reference path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.schedules import reduce
from tests.conftest import single_op_model
from tests.schedules.sched_helpers import (assert_close, checked_claims, compile_and_run, context, model_inputs,
                                          record_claims, reference)


def softmax_add(shape: list[int], axis: int) -> onnx.ModelProto:
    """Softmax then Add of a second input (FuseOps fuses the add into the softmax's function)."""
    nodes = [helper.make_node("Softmax", ["x"], ["p"], axis=axis), helper.make_node("Add", ["p", "s"], ["y"])]
    graph = helper.make_graph(nodes, "softmax_add", [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
                                                     for n in ("x", "s")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


CASES = {  # id: (shape, axis, with a fused Add)
    "logits-1x1000": ([1, 1000], -1, False),
    "logits-2x1000": ([2, 1000], -1, False),
    "logits-1x10": ([1, 10], -1, False),
    "logits-2x10": ([2, 10], -1, False),
    "channels-n2c10x3x3": ([2, 10, 3, 3], 1, False),
    "rows-3x5x100-add": ([3, 5, 100], -1, True),
    # MobileViT's attention over 4 patches: 4 lanes per row, the shape that showed the shared-memory race
    "attention-4x2x4x4": ([4, 2, 4, 4], -1, False),
}


def layer_norm(shape: list[int], axis: int, gelu: bool = False) -> onnx.ModelProto:
    """LayerNormalization over `axis` and the axes after it, seeded scale and shift, optionally then ConvNeXt's GELU
    as Erf (x * 0.5 * (1 + erf(x / sqrt 2)), which FuseOps fuses into the LayerNorm's function)."""
    rng = np.random.default_rng(7)
    normalized = shape[axis:]
    weights = {"g": rng.uniform(0.5, 1.5, normalized), "b": rng.standard_normal(normalized)}
    if not gelu:
        return single_op_model("LayerNormalization", {"x": shape}, weights, axis=axis, epsilon=1e-5)
    half = np.float32(0.5)
    consts = {**weights, "r": np.float32(1 / np.sqrt(2)), "h": half, "one": np.float32(1.0)}
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=axis, epsilon=1e-5),
             helper.make_node("Mul", ["n", "r"], ["s"]), helper.make_node("Erf", ["s"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["n", "a"], ["m"]),
             helper.make_node("Mul", ["m", "h"], ["y"])]
    graph = helper.make_graph(nodes, "layer_norm_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


LAYER_NORMS = {  # id: (shape, axis, with GELU after it)
    "convnext-1x16x16x32": ([1, 16, 16, 32], -1, False),
    "convnext-gelu-1x8x8x64": ([1, 8, 8, 64], -1, True),
    "mobilevit-4x16x48": ([4, 16, 48], -1, False),
    "tokens-2x7x100": ([2, 7, 100], -1, False),  # rows longer than the default's 32 lanes, not a multiple of them
    "one-row-1x5": ([1, 5], -1, False),
}


def _model(case_id: str) -> onnx.ModelProto:
    if case_id in LAYER_NORMS:
        return layer_norm(*LAYER_NORMS[case_id])
    shape, axis, add = CASES[case_id]
    return softmax_add(shape, axis) if add else single_op_model("Softmax", {"x": shape}, axis=axis)


@pytest.mark.parametrize("case_id", list(CASES))
def test_softmax_matches_onnxruntime_and_is_ours(case_id, tmp_path, monkeypatch):
    model = _model(case_id)
    inputs = model_inputs(model)
    with record_claims(monkeypatch, "pool", "reduce") as claims:
        artifact, outputs = compile_and_run(model, tmp_path / "a", inputs)
    ref = reference(model, inputs)[0]
    assert_close(outputs[0], ref, rtol=1e-5)
    assert claims["pool"] == []
    shape, axis, _ = CASES[case_id]
    assert claims["reduce"] == [f"softmax|x{'x'.join(map(str, shape))}|axes{axis % len(shape)}|float32"]


@pytest.mark.parametrize("case_id", list(LAYER_NORMS))
def test_layer_norm_matches_onnxruntime_and_is_ours(case_id, tmp_path, monkeypatch):
    _, claims = checked_claims(_model(case_id), tmp_path / "a", monkeypatch, "reduce", rtol=1e-5)
    shape, axis, _ = LAYER_NORMS[case_id]
    assert claims["reduce"] == [f"layer_norm|x{'x'.join(map(str, shape))}|axes{axis % len(shape)}|float32"]


def test_layer_norm_over_two_axes_is_left_to_dlight_and_right(tmp_path, monkeypatch):
    _, claims = checked_claims(layer_norm([2, 6, 4, 8], -2), tmp_path / "a", monkeypatch, "reduce", rtol=1e-5)
    assert claims["reduce"] == []


TUNED = [
    ("logits-1x1000", {"threads_x": 1, "threads_y": 1}),
    ("logits-1x1000", {"threads_x": 256, "threads_y": 1}),
    ("logits-2x1000", {"threads_x": 32, "threads_y": 2}),
    ("channels-n2c10x3x3", {"threads_x": 8, "threads_y": 4}),
    ("rows-3x5x100-add", {"threads_x": 16, "threads_y": 16}),
    ("convnext-1x16x16x32", {"threads_x": 1, "threads_y": 64}),
    ("convnext-gelu-1x8x8x64", {"threads_x": 64, "threads_y": 1}),
    ("tokens-2x7x100", {"threads_x": 8, "threads_y": 4}),
]


@pytest.mark.parametrize("case_id, knobs", TUNED, ids=[f"{c}-{k['threads_x']}x{k['threads_y']}" for c, k in TUNED])
def test_tuned_knobs_build_and_match(case_id, knobs, tmp_path):
    from adreno.opencl.executor import Executor
    from adreno.tune.extract import extract_tasks

    (task,) = extract_tasks(_model(case_id))
    assert task.family == "reduce" and task.flops > 0
    config = {**task.default_config(), **knobs}
    assert config != task.default_config()
    result = task.build(config, str(tmp_path / "a"))
    assert result.error is None, result.error
    inputs = task.inputs()
    for out, ref in zip(Executor(result.artifact).run(inputs), task.reference(inputs)):
        assert_close(out, ref, rtol=1e-5)


def test_defaults_are_valid_and_bad_configs_refused():
    from adreno.tune.extract import extract_tasks
    from adreno.costmodel.features import featurize

    target = context("adreno-740")
    for case_id in [*CASES, *LAYER_NORMS]:
        (task,) = extract_tasks(_model(case_id))
        wl = task.workload
        cfg = reduce.default_config(wl, target)
        assert set(cfg) == set(reduce.KNOBS)
        reduce.check_config(wl, cfg, target)
        assert featurize(wl, [cfg], None).shape[0] == 1
        with pytest.raises(ValueError):
            reduce.check_config(wl, {"threads_x": 256, "threads_y": 2}, target)
    wl = extract_tasks(_model("logits-2x10"))[0].workload
    assert (wl.c, wl.length) == (2, 10)
    with pytest.raises(ValueError):  # more lanes than elements in a row
        reduce.check_config(wl, {"threads_x": 16, "threads_y": 1}, target)
