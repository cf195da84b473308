"""Run-time indices out of range never read or write past a tensor: the launch plan, TVM's runtime (`--runtime tvm`)
and the app harness fail in one line naming the node (exit 2) for an index one past the end or one below -n, in
each index-taking op and both memories; in-range negative indices give onnxruntime's answer, and so do OneHot's
out-of-range ones (ONNX defines them)
(`adreno.frontend.index_guards`, `adreno.artifact.index_checks`, native/harness/index_checks.cc).

One model holds the gathers, scatters and OneHot (each with its own index input), compiled once per memory with a
host library; MaxUnpool's and RoiAlign's indices, which never wrap, have a small model of their own (buffer)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.index_checks import IndexRangeError
from adreno.native.vm_executor import VmExecutor
from adreno.opencl.executor import Executor
from adreno.reference import onnxruntime_outputs

from .harness_cli import report, run_harness

TABLE = np.arange(8, dtype=np.float32).reshape(2, 4)  # Gather's rows: valid -2..1
DATA = np.arange(6, dtype=np.float32).reshape(3, 2) + 1  # the others' data: axis 0 valid -3..2, axis 1 -2..1
# node -> (op, its index input, in-range indices with negative ones, the size its bad indices leave)
CASES = {
    "lookup": ("Gather", "ids", np.array([-1, 0, -2], np.int64), 2),
    "pick": ("GatherElements", "picks", np.array([[-1, 0], [2, -3]], np.int64), 3),
    "tuples": ("GatherND", "coords", np.array([[-1, -2], [0, 1]], np.int64), 3),
    "spread": ("ScatterElements", "targets", np.array([[-3, -1]], np.int64), 3),
    "rows": ("ScatterND", "slots", np.array([[-1], [0]], np.int64), 3),
}
# OneHot: ONNX defines an index outside -depth..depth-1 (its row is all off_value): no error, onnxruntime's answer
LABELS = np.array([-1, 0, 2], np.int64)


def _model() -> onnx.ModelProto:
    nodes = [helper.make_node("Gather", ["table", "ids"], ["lookup_out"], name="lookup", axis=0),
             helper.make_node("GatherElements", ["data", "picks"], ["pick_out"], name="pick", axis=0),
             helper.make_node("GatherND", ["data", "coords"], ["tuples_out"], name="tuples"),
             helper.make_node("ScatterElements", ["data", "targets", "updates"], ["spread_out"], name="spread", axis=0),
             helper.make_node("ScatterND", ["data", "slots", "rows_updates"], ["rows_out"], name="rows",
                              reduction="add"),
             helper.make_node("OneHot", ["labels", "depth", "values"], ["classes_out"], name="classes")]
    inputs = [helper.make_tensor_value_info(index, TensorProto.INT64, list(good.shape))
              for _, index, good, _ in [*CASES.values(), (None, "labels", LABELS, None)]]
    shapes = {"lookup": [3, 4], "pick": [2, 2], "tuples": [2], "spread": [3, 2], "rows": [3, 2], "classes": [3, 3]}
    outputs = [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, shape) for name, shape in shapes.items()]
    weights = [numpy_helper.from_array(TABLE, "table"), numpy_helper.from_array(DATA, "data"),
               numpy_helper.from_array(np.full((1, 2), 10, np.float32), "updates"),
               numpy_helper.from_array(np.full((2, 2), 100, np.float32), "rows_updates"),
               numpy_helper.from_array(np.array(3, np.int64), "depth"),
               numpy_helper.from_array(np.array([0, 1], np.float32), "values")]
    graph = helper.make_graph(nodes, "indices", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _inputs(bad_node: str | None = None, bad_value: int = 0, labels: np.ndarray = LABELS) -> list[np.ndarray]:
    """The in-range inputs, with the first index of `bad_node`'s input set to `bad_value`, and OneHot's `labels`."""
    arrays = []
    for name, (_, _, good, _) in CASES.items():
        array = good.copy()
        if name == bad_node:
            array.flat[0] = bad_value
        arrays.append(array)
    return arrays + [labels]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The model and its artifact per memory, with a host library for TVM's runtime and the harness."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    root = tmp_path_factory.mktemp("indices")
    model = root / "indices.onnx"
    onnx.save(_model(), model)
    return model, {memory: compile_model(model, root / memory, CompileOptions(memory=memory, host="native"))
                   for memory in ("buffer", "texture")}


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_in_range_negative_indices_match_onnxruntime(artifacts, memory):
    model, paths = artifacts
    inputs = _inputs()
    expected = onnxruntime_outputs(onnx.load(model), inputs)
    for executor in (Executor(paths[memory]), VmExecutor(paths[memory])):
        outputs = executor.run(inputs)
        assert len(outputs) == len(expected)  # the flags are not among them
        for name, out, ref in zip([*CASES, "classes"], outputs, expected):
            np.testing.assert_array_equal(out, ref, err_msg=f"{name} ({type(executor).__name__}, {memory})")
            assert out.dtype == ref.dtype, name  # OneHot's float32, not TVM's one_hot's float64
        # OneHot's out-of-range labels are no error: all-off rows, as onnxruntime gives
        outside = _inputs(labels=np.array([3, -4, 1], np.int64))
        np.testing.assert_array_equal(executor.run(outside)[-1], onnxruntime_outputs(onnx.load(model), outside)[-1])


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_out_of_range_index_fails_naming_its_node(artifacts, memory):
    """One past the end and one below -n, in each op: onnxruntime refuses each; both runtimes fail in one line."""
    model, paths = artifacts
    executors = (Executor(paths[memory]), VmExecutor(paths[memory]))
    for name, (op, _, _, size) in CASES.items():
        for bad in (size, -size - 1):
            with pytest.raises(Exception, match=f"Name:'{name}'"):  # onnxruntime's refusal names it too
                onnxruntime_outputs(onnx.load(model), _inputs(name, bad))
            for executor in executors:
                with pytest.raises(IndexRangeError) as caught:
                    executor.run(_inputs(name, bad))
                message = str(caught.value)
                assert message.startswith(f"node {name} ({op}): ") and "\n" not in message, message
                assert f"-{size}..{size - 1}" in message
        # the safe fallback left nothing behind: the next in-range run is right
        np.testing.assert_array_equal(executors[0].run(_inputs())[0], TABLE[[-1, 0, -2]])


@pytest.mark.parametrize("memory, runtime", [("buffer", "plan"), ("texture", "tvm")])
def test_run_exits_2_with_one_line(artifacts, memory, runtime, tmp_path):
    _, paths = artifacts
    names = [CASES[n][1] for n in CASES] + ["labels"]
    np.savez(tmp_path / "bad.npz", **dict(zip(names, _inputs("lookup", 2))))
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "run", paths[memory], "--runtime", runtime,
                           "--input", tmp_path / "bad.npz", "--repeat", "1", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: node lookup (Gather): an index computed from this input is outside -2..1, which ONNX makes an error; "
        "no output is returned"]


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_harness_exits_2_naming_the_node(artifacts, memory, tmp_path):
    _, paths = artifacts
    names = [CASES[n][1] for n in CASES] + ["labels"]
    proc = run_harness(paths[memory], dict(zip(names, _inputs("rows", -4))), tmp_path / "bad")
    assert proc.returncode == 2 and proc.stderr.startswith("error: node rows (ScatterND): "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "-3..2" in proc.stderr
    good = report(run_harness(paths[memory], dict(zip(names, _inputs())), tmp_path / "good"))
    assert sorted(good["outputs"]) == sorted(f"{n}_out" for n in [*CASES, "classes"])  # the flags are no output file


def _pooling_model() -> onnx.ModelProto:
    """MaxUnpool of a 2x2 pooled map by run-time argmax positions (flat, into the 4x4 output: valid 0..15) and
    RoiAlign of two boxes by run-time batch indices (valid 0..1): neither wraps a negative index."""
    nodes = [helper.make_node("MaxUnpool", ["pooled", "where"], ["unpooled"], name="unpool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("RoiAlign", ["features", "boxes", "batch"], ["aligned"], name="align", output_height=2,
                              output_width=2, sampling_ratio=1)]
    inputs = [helper.make_tensor_value_info("where", TensorProto.INT64, [1, 1, 2, 2]),
              helper.make_tensor_value_info("batch", TensorProto.INT64, [2])]
    outputs = [helper.make_tensor_value_info("unpooled", TensorProto.FLOAT, [1, 1, 4, 4]),
               helper.make_tensor_value_info("aligned", TensorProto.FLOAT, [2, 1, 2, 2])]
    weights = [numpy_helper.from_array(np.array([[[[1, 2], [3, 4]]]], np.float32), "pooled"),
               numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(2, 1, 4, 4), "features"),
               numpy_helper.from_array(np.array([[0, 0, 3, 3], [1, 1, 3, 3]], np.float32), "boxes")]
    graph = helper.make_graph(nodes, "pooling_indices", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def test_maxunpool_and_roialign_indices_are_checked(tmp_path):
    """In range: onnxruntime's outputs exactly, on the plan and TVM's runtime; one past the end, or negative (these
    ops do not wrap): onnxruntime refuses, and both runtimes fail in one line naming the node and its range."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    model = _pooling_model()
    onnx.save(model, tmp_path / "pooling.onnx")
    path = compile_model(tmp_path / "pooling.onnx", tmp_path / "art", CompileOptions(memory="buffer", host="native"))
    where, batch = np.array([[[[0, 3], [9, 15]]]], np.int64), np.array([1, 0], np.int64)
    expected = onnxruntime_outputs(model, [where, batch])
    executors = (Executor(path), VmExecutor(path))
    for executor in executors:
        for out, ref in zip(executor.run([where, batch]), expected, strict=True):
            np.testing.assert_array_equal(out, ref)
    bad_cases = [("unpool", "MaxUnpool", "0..15", [np.where(where == 15, 16, where), batch]),
                 ("unpool", "MaxUnpool", "0..15", [np.where(where == 0, -1, where), batch]),
                 ("align", "RoiAlign", "0..1", [where, np.array([2, 0], np.int64)]),
                 ("align", "RoiAlign", "0..1", [where, np.array([1, -1], np.int64)])]
    for name, op, valid, inputs in bad_cases:
        with pytest.raises(Exception, match="INVALID_ARG"):
            onnxruntime_outputs(model, inputs)
        for executor in executors:
            with pytest.raises(IndexRangeError) as caught:
                executor.run(inputs)
            message = str(caught.value)
            assert message.startswith(f"node {name} ({op}): ") and f"outside {valid}," in message, message
