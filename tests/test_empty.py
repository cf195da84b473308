"""Outputs with no elements (`adreno.frontend.empty`): recorded in the plan without storage, produced without
kernels, next to computed outputs or alone; an empty tensor another node reads is refused in one line; a plan that
claims storage-less tensors it may not have is refused at load."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.format import Artifact
from adreno.errors import ArtifactError, ModelError


def model(nodes, inputs: dict, outputs: dict, weights: dict) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "empty", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
        [numpy_helper.from_array(np.asarray(w), n) for n, w in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def conv_and_empty_slice() -> onnx.ModelProto:
    """A conv with 8 channels (images on textures), an empty slice of it between two outputs, an empty int64 one."""
    rng = np.random.default_rng(0)
    return model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4),
         helper.make_node("Slice", ["y", "start", "end", "axis"], ["past_end"]),
         helper.make_node("Shape", ["x"], ["shape"]),
         helper.make_node("Slice", ["shape", "start", "end", "zero"], ["no_dims"]),
         helper.make_node("Relu", ["y"], ["z"])],
        {"x": [1, 8, 6, 6]}, {"y": TensorProto.FLOAT, "past_end": TensorProto.FLOAT, "no_dims": TensorProto.INT64,
                              "z": TensorProto.FLOAT},
        {"w": rng.standard_normal((8, 8, 3, 3)).astype(np.float32), "start": np.array([9]),
         "end": np.array([12]), "axis": np.array([2]), "zero": np.array([0])})


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_empty_outputs_beside_computed_ones(memory, tmp_path):
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    onnx_model = conv_and_empty_slice()
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)
    expected = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None,
                                                                                                              {"x": x})
    artifact = Artifact.load(compile_model(onnx_model, tmp_path / "art", CompileOptions(memory=memory)))
    assert artifact.manifest["empty_outputs"] == ["past_end", "no_dims"]
    assert artifact.output_names() == ["y", "past_end", "no_dims", "z"]
    entries = artifact.manifest["outputs"]
    assert entries["past_end"]["shape"] == [1, 8, 0, 6] and entries["no_dims"]["dtype"] == "int64"
    if memory == "texture":
        assert artifact.manifest["textures"]["image_tensors"] > 0
    outputs = Executor(artifact).run([x])
    assert [o.dtype for o in outputs] == [e.dtype for e in expected]
    assert [o.shape for o in outputs] == [e.shape for e in expected]
    for out, ref in zip(outputs, expected):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_only_empty_outputs_compile_to_no_kernels_and_run_from_the_cli(tmp_path):
    """A split into sizes 0 of an empty input: nothing to compute, no host library; `adreno run --check` agrees
    with onnxruntime."""
    onnx_model = model([helper.make_node("Split", ["x", "split"], ["a", "b"], axis=0)], {"x": [0, 3]},
                       {"a": TensorProto.FLOAT, "b": TensorProto.FLOAT}, {"split": np.array([0, 0])})
    onnx.save(onnx.shape_inference.infer_shapes(onnx_model), tmp_path / "split.onnx")
    cli = [sys.executable, "-m", "adreno.cli"]
    subprocess.run([*cli, "compile", str(tmp_path / "split.onnx"), "-o", str(tmp_path / "art"), "-q"], check=True,
                   timeout=300)
    artifact = Artifact.load(tmp_path / "art")
    assert artifact.manifest["kernels"] == 0 and artifact.manifest["host_library"] is None
    assert [t.storage for t in artifact.input_specs()] == [""]
    run = subprocess.run([*cli, "run", str(tmp_path / "art"), "--check", "--json", "--repeat", "1"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["kernels"] == [] and report["check"]["ok"] and len(report["check"]["outputs"]) == 2, report


def test_an_empty_tensor_another_node_reads_is_refused_in_one_line(tmp_path):
    from adreno.compile import compile_model

    onnx_model = model([helper.make_node("Slice", ["x", "start", "end", "axis"], ["s"]),
                        helper.make_node("Concat", ["x", "s"], ["y"], axis=0)],
                       {"x": [2, 3]}, {"y": TensorProto.FLOAT},
                       {"start": np.array([5]), "end": np.array([9]), "axis": np.array([0])})
    with pytest.raises(ModelError) as refused:
        compile_model(onnx_model, tmp_path / "art")
    message = str(refused.value)
    assert "\n" not in message and message.startswith("node #0 (Slice): its output 's' is empty (shape [0, 3])")
    assert not (tmp_path / "art").exists()


def test_storage_less_tensors_are_checked_at_load(tiny_artifact, tmp_path):
    """Only an input, or an output without elements, may lack storage, and no kernel may name one."""
    copy = shutil.copytree(tiny_artifact, tmp_path / "copy")
    plan = json.loads((copy / "plan.json").read_text())
    output = plan["tensors"][plan["outputs"][0]]
    output["storage"] = ""  # a computed output of elements claimed storage-less
    (copy / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(ArtifactError, match="unknown storage ''"):
        Artifact.load(copy, checked=False)
    output["shape"] = [0, *output["shape"][1:]]  # now empty, but a kernel still writes it
    (copy / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(ArtifactError, match="tensors without storage"):
        Artifact.load(copy, checked=False)


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_a_value_computed_from_an_empty_input_alone_folds_to_a_constant(memory, tmp_path):
    """A sum over an empty axis is the sum's identity, known at compile time: the empty input is no longer read,
    and what adds the sum to a real input compiles and agrees with onnxruntime."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    onnx_model = model([helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=1),
                        helper.make_node("Add", ["x", "s"], ["y"])],
                       {"x": [2, 3], "e": [2, 0]}, {"y": TensorProto.FLOAT}, {"axes": np.array([1])})
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    e = np.zeros((2, 0), np.float32)
    (expected,) = ort.InferenceSession(onnx_model.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, {"x": x, "e": e})
    artifact = Artifact.load(compile_model(onnx_model, tmp_path / "art", CompileOptions(memory=memory)))
    assert [t.storage for t in artifact.input_specs()][1] == ""
    (output,) = Executor(artifact).run([x, e])
    np.testing.assert_allclose(output, expected, rtol=1e-6)
