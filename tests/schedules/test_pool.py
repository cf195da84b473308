"""pool: windowed max/avg pool2d and global pooling (means, global max) on PoCL against onnxruntime, each proven to be
scheduled by our rule; tuned (non-default) knob values built and checked through the tuner's own path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from adreno.options import Schedules
from adreno.schedules import pool
from tests.conftest import single_op_model
from tests.schedules.sched_helpers import checked_claims, assert_close, context
from tests.kernel_files import kernel_sources

P1 = [1, 1, 1, 1]


def chain_model(x_shape, nodes, extra_inputs: dict | None = None) -> onnx.ModelProto:
    """A model of `nodes` (the first reads graph input "x", the last writes "y"), shapes inferred."""
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
              for n, s in {"x": x_shape, **(extra_inputs or {})}.items()]
    graph = helper.make_graph(nodes, "chain", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def pool_then(op: str, x_shape, then: str, **attrs) -> onnx.ModelProto:
    """`op` followed by Relu or by an Add of a second input (what FuseOps fuses into the pool's function)."""
    nodes = [helper.make_node(op, ["x"], ["p"], **attrs)]
    if then == "relu":
        return chain_model(x_shape, nodes + [helper.make_node("Relu", ["p"], ["y"])])
    probe = chain_model(x_shape, [helper.make_node(op, ["x"], ["y"], **attrs)])
    shape = [d.dim_value for d in probe.graph.output[0].type.tensor_type.shape.dim]
    return chain_model(x_shape, nodes + [helper.make_node("Add", ["p", "s"], ["y"])], {"s": shape})


WINDOWED = {
    "resnet18-maxpool3x3s2p1-64x112": (single_op_model, "MaxPool", [1, 64, 112, 112],
                                       dict(kernel_shape=[3, 3], strides=[2, 2], pads=P1)),
    "maxpool3x3s2p1-n2c3x7x7": (single_op_model, "MaxPool", [2, 3, 7, 7],
                                dict(kernel_shape=[3, 3], strides=[2, 2], pads=P1)),
    "maxpool2x2s2-c10x7x7-relu": (pool_then, "MaxPool", [1, 10, 7, 7], dict(kernel_shape=[2, 2], strides=[2, 2])),
    "maxpool3x3s1p2d2-c3x10x9": (single_op_model, "MaxPool", [1, 3, 10, 9],
                                 dict(kernel_shape=[3, 3], strides=[1, 1], pads=[2, 2, 2, 2], dilations=[2, 2])),
    "avgpool2x2s2-c10x7x7": (single_op_model, "AveragePool", [1, 10, 7, 7], dict(kernel_shape=[2, 2], strides=[2, 2])),
    "avgpool2x2s2-n2c64x56": (single_op_model, "AveragePool", [2, 64, 56, 56],
                              dict(kernel_shape=[2, 2], strides=[2, 2])),
    "avgpool3x3s2p1-exclpad-n2c3x7x7-add": (pool_then, "AveragePool", [2, 3, 7, 7],
                                            dict(kernel_shape=[3, 3], strides=[2, 2], pads=P1)),
    "avgpool3x3s2p1-inclpad-c10x7x7": (single_op_model, "AveragePool", [1, 10, 7, 7],
                                       dict(kernel_shape=[3, 3], strides=[2, 2], pads=P1, count_include_pad=1)),
}
GLOBAL = {
    "resnet18-gap-512x7x7": (single_op_model, "GlobalAveragePool", [1, 512, 7, 7], {}),
    "mobilenetv2-gap-n2c1280x7x7": (single_op_model, "GlobalAveragePool", [2, 1280, 7, 7], {}),
    "gap-c32x28x28-cooperative": (single_op_model, "GlobalAveragePool", [1, 32, 28, 28], {}),
    "gap-c10x7x7-relu": (pool_then, "GlobalAveragePool", [1, 10, 7, 7], {}),
    "globalmaxpool-n2c10x7x7": (single_op_model, "GlobalMaxPool", [2, 10, 7, 7], {}),
    "reducemean-hw-n2c8x5x5": (single_op_model, "ReduceMean", [2, 8, 5, 5], dict(axes=[2, 3], keepdims=0)),
}


def _model(case_id: str) -> onnx.ModelProto:
    make, op, shape, attrs = {**WINDOWED, **GLOBAL}[case_id]
    if make is single_op_model:
        return single_op_model(op, {"x": shape}, **attrs)
    return pool_then(op, shape, case_id.rsplit("-", 1)[1], **attrs)


@pytest.mark.parametrize("case_id", list(WINDOWED) + list(GLOBAL))
def test_pool_matches_onnxruntime_and_is_ours(case_id, tmp_path, monkeypatch):
    artifact, claims = checked_claims(_model(case_id), tmp_path / "a", monkeypatch, "pool", "reduce")
    assert claims["reduce"] == []
    assert len(claims["pool"]) == 1, claims
    key = claims["pool"][0]
    if case_id in WINDOWED:
        op = "max_pool2d" if "maxpool" in case_id else "avg_pool2d"
        n, c, h, w = WINDOWED[case_id][2]
        assert key.startswith(f"{op}|n{n}c{c}h{h}w{w}|")
        # ours accumulates in registers; TVM's Adreno pool schedule accumulates in the global output
        (source,) = kernel_sources(artifact, "*pool2d*").values()
        assert "_local_ptr[" in source
    else:
        assert key.startswith("global_max|" if "max" in case_id else "global_sum|")


def test_tvm_default_maxpool_is_different(tmp_path):
    """The register-accumulator marker the test above checks is absent from TVM's own schedule of the same pool."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    model = _model("maxpool3x3s2p1-n2c3x7x7")
    out = compile_model(model, tmp_path / "tvm", CompileOptions(target="adreno-740", schedules="tvm", memory="buffer"))
    (source,) = kernel_sources(out, "*pool2d*").values()
    assert "_local_ptr[" not in source


TUNED = [  # (case, knobs): non-default points of the space, through the tuner's build + reference path
    ("maxpool3x3s2p1-n2c3x7x7", {"threads_x": 2, "threads_y": 4, "tile_x": 4, "unroll": 0}),
    ("avgpool3x3s2p1-exclpad-n2c3x7x7-add", {"threads_x": 8, "threads_y": 1, "tile_x": 2, "unroll": 1}),
    ("maxpool3x3s1p2d2-c3x10x9", {"threads_x": 4, "threads_y": 16, "tile_x": 2, "unroll": 1}),
    ("mobilenetv2-gap-n2c1280x7x7", {"threads_x": 16, "threads_y": 4, "tile_x": 1, "unroll": 1}),
    ("mobilenetv2-gap-n2c1280x7x7", {"threads_x": 1, "threads_y": 16, "tile_x": 4, "unroll": 0}),
    ("gap-c32x28x28-cooperative", {"threads_x": 128, "threads_y": 2, "tile_x": 1, "unroll": 0}),
    ("gap-c10x7x7-relu", {"threads_x": 4, "threads_y": 2, "tile_x": 1, "unroll": 1}),
]


@pytest.mark.parametrize("case_id, knobs", TUNED, ids=[f"{c}-{'-'.join(map(str, k.values()))}" for c, k in TUNED])
def test_tuned_knobs_build_and_match(case_id, knobs, tmp_path):
    from adreno.opencl.executor import Executor
    from adreno.tune.extract import extract_tasks

    (task,) = extract_tasks(_model(case_id))
    assert task.family == "pool" and task.flops > 0
    config = {**task.default_config(), **knobs}
    pool.check_config(task.workload, config, task.context())
    assert config != task.default_config()
    result = task.build(config, str(tmp_path / "a"))
    assert result.error is None, result.error
    inputs = task.inputs()
    for out, ref in zip(Executor(result.artifact).run(inputs), task.reference(inputs)):
        assert_close(out, ref)


def test_defaults_are_valid_and_bad_configs_refused():
    from adreno.tune.extract import extract_tasks
    from adreno.costmodel.features import featurize

    target = context("adreno-740")
    for case_id in ("maxpool3x3s2p1-n2c3x7x7", "resnet18-gap-512x7x7", "gap-c32x28x28-cooperative"):
        (task,) = extract_tasks(_model(case_id))
        wl = task.workload
        cfg = pool.default_config(wl, target)
        assert set(cfg) == set(pool.KNOBS)
        pool.check_config(wl, cfg, target)
        assert featurize(wl, [cfg], None).shape[0] == 1  # the tuner's cost model can describe it
        for bad in ({"threads_x": 128, "threads_y": 128}, {"threads_x": 3}, {"bogus": 1}):
            with pytest.raises(ValueError):
                pool.check_config(wl, {**cfg, **bad}, target)
    gap = extract_tasks(_model("resnet18-gap-512x7x7"))[0].workload
    assert (gap.op, gap.n, gap.c, gap.length, gap.flops) == ("global_sum", 1, 512, 49, 512 * 49)
    with pytest.raises(ValueError):  # 49 elements per output cannot feed 64 lanes
        pool.check_config(gap, {"threads_x": 64, "threads_y": 1, "tile_x": 1, "unroll": 0}, target)


def test_other_reductions_are_not_pools():
    """A softmax is not this family's, and a reduction over a leading axis is not a global pool."""
    import tvm

    from adreno.compile import lower_relax
    from adreno.frontend.importer import to_relax

    models = [single_op_model("Softmax", {"x": [2, 10]}, axis=-1),
              single_op_model("ReduceSum", {"x": [4, 6]}, {"axes": np.array([0], np.int64)}, inputs=["x", "axes"],
                              keepdims=0)]
    for model in models:
        lowered = lower_relax(to_relax(model, {}), context("adreno-740"), schedules=Schedules.NONE)
        funcs = [f for _, f in lowered.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
        assert funcs and all(pool.FAMILY.workload(f) is None for f in funcs)
