"""The compiler: launch-plan extraction per op, whole models against onnxruntime, bad input, atomic output."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from adreno.artifact.format import Artifact
from adreno.compile import compile_model
from adreno.compiler.progress import ProgressLine
from adreno.errors import AdrenoError, DynamicShapeError, ModelError, UnknownTargetError, UnsupportedOpError
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.compiler.plan import plan_storage
from adreno.reference import onnxruntime_outputs
from tests.conftest import single_op_model


def run_and_compare(model, tmp_path, rng, name="m", atol=1e-4):
    artifact = Artifact.load(compile_model(model, tmp_path / name))
    inputs = [rng.standard_normal(s.shape).astype(np.float32) for s in artifact.input_specs()]
    outputs = Executor(artifact).run(inputs)
    reference = onnxruntime_outputs(model, inputs)
    for out, ref in zip(outputs, reference):
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, atol=atol * max(1.0, np.abs(ref).max()), rtol=1e-4)
    return artifact


OPS = {
    "conv": lambda r: single_op_model("Conv", {"x": [1, 8, 12, 12]}, {"w": r.standard_normal((16, 8, 3, 3)),
                                                                      "b": r.standard_normal(16)}, pads=[1, 1, 1, 1]),
    "conv_stride2_pad2": lambda r: single_op_model("Conv", {"x": [2, 3, 11, 11]},
                                                   {"w": r.standard_normal((10, 3, 5, 5))},
                                                   pads=[2, 2, 2, 2], strides=[2, 2]),
    "maxpool": lambda r: single_op_model("MaxPool", {"x": [1, 4, 9, 9]}, kernel_shape=[3, 3], strides=[2, 2],
                                         pads=[1, 1, 1, 1]),
    "avgpool": lambda r: single_op_model("GlobalAveragePool", {"x": [1, 6, 7, 7]}),
    "add": lambda r: single_op_model("Add", {"a": [1, 4, 5, 5], "b": [1, 4, 5, 5]}),
    "dense": lambda r: single_op_model("Gemm", {"x": [2, 32]}, {"w": r.standard_normal((10, 32)),
                                                               "c": r.standard_normal(10)}, transB=1),
    "softmax": lambda r: single_op_model("Softmax", {"x": [3, 17]}, axis=1),
    "reshape": lambda r: single_op_model("Reshape", {"x": [2, 3, 4, 5]}, {"s": np.array([2, -1], dtype=np.int64)}),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_single_op_plans_run_and_match_onnxruntime(op, tmp_path, rng):
    artifact = run_and_compare(OPS[op](rng), tmp_path, rng)
    plan = artifact.plan
    assert plan.kernel_count() >= 1
    for step in plan.steps:
        assert all(len(k.global_size) == len(k.local_size) for k in step.kernels)
        assert all(g % w == 0 for k in step.kernels for g, w in zip(k.global_size, k.local_size))
        for kernel in step.kernels:
            assert f"__kernel void {kernel.name}(" in artifact.kernel_source(step.program)
            assert sorted(a.arg for a in kernel.args if a.arg is not None) == \
                sorted(set(a.arg for a in kernel.args if a.arg is not None))


def test_tiny_plan_structure(tiny_artifact):
    artifact = Artifact.load(tiny_artifact)
    plan, manifest = artifact.plan, artifact.manifest
    assert plan.inputs == ["input"] and len(plan.outputs) == 1
    params = [t for t in plan.tensors.values() if t.kind == "param"]
    assert params and set(artifact.params()) == {t.name for t in params}
    intermediates = [t for t in plan.tensors.values() if t.kind == "intermediate"]
    assert len({t.storage for t in intermediates}) < len(intermediates), "intermediates should share storage"
    assert manifest["target"] == "adreno-740" and manifest["tvm_version"].startswith("0.27")
    assert manifest["model_source"] == {"zoo": "tiny", "seed": 0}
    assert manifest["host_library"] == "lib.tar" and (tiny_artifact / "lib.tar").stat().st_size > 0
    assert all((tiny_artifact / path).is_file() for path in plan.programs.values())


def test_storage_plan_never_overlaps_live_tensors(tiny_artifact):
    plan = Artifact.load(tiny_artifact).plan
    live: dict[str, str] = {}  # storage -> tensor currently held
    last_use = {}
    for index, step in enumerate(plan.steps):
        for name in step.args:
            last_use[name] = index
    for index, step in enumerate(plan.steps):
        for name in step.args:
            storage = plan.tensors[name].storage
            holder = live.get(storage)
            assert holder in (None, name) or last_use[holder] < index, f"{name} overwrites live {holder}"
            live[storage] = name
        for name in step.args:
            assert plan.storage[plan.tensors[name].storage] >= plan.tensors[name].nbytes


def test_storage_plan_reuses_freed_blocks():
    from adreno.artifact.format import Step, TensorSpec

    tensors = {n: TensorSpec(n, [256], "float32", kind, "") for n, kind in
               [("x", "input"), ("a", "intermediate"), ("b", "intermediate"), ("c", "intermediate"), ("y", "output")]}
    steps = [Step("f", "f", "op", args, []) for args in (["x", "a"], ["a", "b"], ["b", "c"], ["c", "y"])]
    storage = plan_storage(tensors, steps)
    assert tensors["a"].storage == tensors["c"].storage != tensors["b"].storage
    assert len(storage) == 4


def test_resnet18_block_matches_onnxruntime(tmp_path, rng):
    from adreno.frontend import zoo

    run_and_compare(zoo.get_model("resnet18_block"), tmp_path, rng)


def test_missing_model_file(tmp_path):
    with pytest.raises(ModelError, match="no such file.*bundled"):
        compile_model(tmp_path / "nope.onnx", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_malformed_model_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf model\xff\xff")
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        compile_model(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unsupported_op_names_op_and_node(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="first"),
                               helper.make_node("Celu", ["r"], ["y"], name="celu_node")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "celu.onnx"
    onnx.save(model, path)
    with pytest.raises(UnsupportedOpError, match="Celu.*celu_node"):
        compile_model(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_dynamic_input_shape_needs_input_shape(tmp_path, rng):
    model = single_op_model("Relu", {"x": ["batch", 4, 6, 6]}, output_shape=["batch", 4, 6, 6])
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    with pytest.raises(DynamicShapeError, match=r"'x'.*dimension 0.*'batch'.*--input-shape x:1,4,6,6"):
        compile_model(path, tmp_path / "out")
    artifact = Artifact.load(compile_model(path, tmp_path / "out", CompileOptions(input_shapes={"x": [2, 4, 6, 6]})))
    assert artifact.input_specs()[0].shape == [2, 4, 6, 6]
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(Executor(artifact).run([x])[0], np.maximum(x, 0))


def test_unknown_target_lists_known(tmp_path):
    with pytest.raises(UnknownTargetError, match="adreno-640.*adreno-830"):
        compile_model("tiny", tmp_path / "out", CompileOptions(target="adreno-999"))


def test_failed_compile_keeps_previous_artifact(tmp_path):
    out = compile_model("tiny", tmp_path / "art")
    before = json.loads((out / "manifest.json").read_text())
    with pytest.raises(ModelError):
        compile_model(tmp_path / "missing.onnx", out)
    assert json.loads((out / "manifest.json").read_text()) == before
    assert [p.name for p in tmp_path.iterdir()] == ["art"], "no temporary directory may be left behind"


def test_native_host_exports_shared_library(tmp_path):
    out = compile_model("tiny", tmp_path / "native", CompileOptions(host="native"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["host_library"] == "lib.so"
    assert (out / "lib.so").read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize("options, memory, winograd", [
    ({}, "texture", "auto"),                                         # the default: textures, Winograd by the rule
    ({"memory": "buffer"}, "buffer", "auto"),                        # buffers: the auto rule picks Winograd
    ({"memory": "buffer", "schedules": "tvm"}, "buffer", "off"),     # TVM's schedules: no rewrite of ours
    ({"winograd": "f2"}, "texture", "f2"),                           # Winograd stages on packed textures
    ({"winograd": "off"}, "texture", "off"),
])
def test_memory_and_winograd_defaults(options, memory, winograd, tmp_path, rng):
    model = single_op_model("Conv", {"x": [1, 64, 8, 8]}, {"w": rng.standard_normal((64, 64, 3, 3)) * 0.05},
                            pads=[1, 1, 1, 1])
    artifact = Artifact.load(compile_model(model, tmp_path / "o", CompileOptions(**options)))
    assert (artifact.manifest["memory"], artifact.manifest["winograd"]) == (memory, winograd)
    assert any("winograd" in step.func for step in artifact.plan.steps) == (winograd != "off")
    x = rng.standard_normal((1, 64, 8, 8)).astype(np.float32)
    out, ref = Executor(artifact).run([x])[0], onnxruntime_outputs(model, [x])[0]
    np.testing.assert_allclose(out, ref, atol=1e-3 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_unknown_winograd_mode_is_refused(memory, tmp_path, rng):
    model = single_op_model("Conv", {"x": [1, 64, 8, 8]}, {"w": rng.standard_normal((64, 64, 3, 3))}, pads=[1, 1, 1, 1])
    with pytest.raises(AdrenoError, match="winograd must be one of off, auto, f2, f4"):
        compile_model(model, tmp_path / "o", CompileOptions(memory=memory, winograd="f3"))
    assert not (tmp_path / "o").exists()


def test_progress_lines_come_from_one_list_in_its_order(tmp_path):
    """Issue 50: every line a compile says is a `ProgressLine`, said in the list's order (the CLI, the bench's stage
    timer and users read them); `--defaults model` says the ranking's account after lowering."""
    said = []
    compile_model("tiny", tmp_path / "o", CompileOptions(memory="buffer", defaults="model"), progress=said.append)
    patterns = [re.compile(re.sub(r"\\\{\w+(:[^}]*)?\\\}", ".+", re.escape(line.value)) + "$") for line in ProgressLine]
    order = [next(i for i, pattern in enumerate(patterns) if pattern.match(text)) for text in said]
    assert order == sorted(order), said
    names = [list(ProgressLine)[i].name for i in order]
    assert names == ["LOADING", "IMPORTING", "LOWERING", "RANKED", "EXTRACTING", "WRITING", "HOST_LIBRARY"], said
