"""`--bind`: a graph input the kernels need at compile time (here a Reshape's shape) baked into the compile, as a
user runs it (CLI subprocesses, PoCL, onnxruntime as the reference)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_cli import adreno

SHAPE = np.array([1, 4, 36], np.int64)


def conv_reshape_model() -> onnx.ModelProto:
    """x -> Conv (a tunable kernel) -> Reshape to the graph input `p`: not compilable until `p` is known."""
    weight = np.random.default_rng(0).standard_normal((4, 4, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Reshape", ["c", "p"], ["y"], name="flat")], "conv_reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6]),
         helper.make_tensor_value_info("p", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 36])], [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bind")
    onnx.save(conv_reshape_model(), root / "model.onnx")
    np.save(root / "p.npy", SHAPE)
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.savez(root / "same.npz", x=x, p=SHAPE)  # the whole input set, the bound input included
    np.savez(root / "other.npz", x=x, p=np.array([1, 36, 4]))
    return root


@pytest.fixture(scope="module")
def artifact(files):
    adreno("compile", files / "model.onnx", "--bind", f"p={files / 'p.npy'}", "--memory", "buffer", "-q",
           "-o", files / "art")
    return files / "art"


def test_manifest_records_the_binding_and_p_is_no_input(artifact):
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["bound"] == {"p": {"dtype": "int64", "shape": [3], "value": [1, 4, 36]}}
    assert list(manifest["inputs"]) == ["x"]


def test_run_checks_a_given_bound_input_against_the_bound_value(files, artifact):
    result = json.loads(adreno("run", artifact, "--input", files / "same.npz", "--check", "--repeat", "1",
                               "--json").stdout)
    assert result["check"]["ok"], result["check"]  # onnxruntime on the original model got p = [1, 4, 36]
    assert json.loads(adreno("run", artifact, "--check", "--repeat", "1", "--json").stdout)["check"]["ok"]
    refused = adreno("run", artifact, "--input", files / "other.npz", "--repeat", "1", check_rc=2)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert lines[-1] == (f"error: --input {files / 'other.npz'}: input 'p' was bound at compile time to "
                         "[1, 4, 36]; the given value [1, 36, 4] differs: recompile with --bind"), refused.stderr
    assert not any("Traceback" in line for line in lines)


def bad_forms(root):
    np.save(root / "p32.npy", SHAPE.astype(np.int32))
    np.save(root / "p4.npy", np.array([1, 4, 36, 1], np.int64))
    np.save(root / "big.npy", np.zeros((1, 4, 64, 64), np.float32))
    np.savez(root / "all.npz", x=np.zeros((1, 4, 6, 6), np.float32), p=SHAPE)
    return [
        (f"q={root / 'p.npy'}", "--bind names ['q'], but the model's inputs are ['x', 'p']"),
        (f"p={root / 'p32.npy'}", "--bind p: the array is int32 of shape [3], the model declares int64 of shape [3]"),
        (f"p={root / 'p4.npy'}", "--bind p: the array is int64 of shape [4], the model declares int64 of shape [3]"),
        (f"p={root / 'missing.npy'}", "no such file"),
        (str(root / "p.npy"), "is one array; name the input it binds"),
        (f"x={root / 'big.npy'}", "16384 elements; a bound input is a parameter of at most 4096"),
        (str(root / "all.npz"), "--bind binds every input of the model (['x', 'p'])"),
    ]


def test_bad_bind_forms_are_one_line_errors(files):
    for bind, message in bad_forms(files):
        result = adreno("compile", files / "model.onnx", "--bind", bind, "-q", "-o", files / "bad", check_rc=2)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and message in lines[0], (bind, result.stderr)
        assert not (files / "bad").exists()


def test_refusal_names_the_way_out(files):
    result = adreno("compile", files / "model.onnx", "-q", "-o", files / "unbound", check_rc=2)
    assert "is the graph input 'p'; bind its value at compile time with --bind p=FILE.npy" in result.stderr


def test_tune_extracts_the_bound_models_tasks(files, tmp_path):
    """`adreno tune` imports the model as compile does: with --bind its conv is a task (an offline batch of one
    candidate: nothing measured)."""
    batch = tmp_path / "batch"
    out = adreno("tune", files / "model.onnx", "--bind", f"p={files / 'p.npy'}", "--export-batch", batch,
                 "--trials", "1", "--memory", "buffer", "--no-layouts", "-q")
    assert "1 candidates (1 built) of 1 tasks" in out.stdout and f"--bind p={files / 'p.npy'}" in out.stdout
    assert [t["family"] for t in json.loads((batch / "batch.json").read_text())["tasks"]] == ["conv2d_direct"]
    adreno("tune", files / "model.onnx", "--export-batch", batch, "--trials", "1", "-q", check_rc=2)


def test_python_api_binds_float_scales(tmp_path, pocl_device):
    """`compile_model(..., bind=)` with a Resize's float scales; the executor takes a dict holding the bound input
    only with the bound value."""
    from adreno.compile import compile_model
    from adreno.errors import AdrenoError
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions
    from adreno.reference import onnxruntime_outputs

    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")], "resize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3]),
         helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    scales = np.array([1, 1, 2, 2], np.float32)
    path = compile_model(model, tmp_path / "art", CompileOptions(memory="buffer"), bind={"scales": scales})
    executor = Executor(path, pocl_device)
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    expected = onnxruntime_outputs(model, [x], executor.artifact.bound_inputs())[0]
    np.testing.assert_array_equal(executor.run({"x": x, "scales": scales})[0], expected)
    with pytest.raises(AdrenoError, match=r"bound at compile time to \[1.0, 1.0, 2.0, 2.0\]; the given value "
                                          r"\[1.0, 1.0, 3.0, 3.0\] differs"):
        executor.run({"x": x, "scales": np.array([1, 1, 3, 3], np.float32)})
