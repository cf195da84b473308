"""Models as other exporters write them: initializers listed as inputs (IR version 3), names that are not
identifiers, reshape targets computed from the runtime shape, parameters given as graph inputs."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def adreno(*args, check_rc=0):
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == check_rc, f"rc {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def legacy_export(rng) -> onnx.ModelProto:
    """An old-exporter model: IR version 3 with the conv's weights also listed in graph.input, input `0` with a
    dynamic batch, output `1`, and the flatten written as Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    weight = numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "conv.weight")
    bias = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "conv.bias")
    minus_one = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one")
    nodes = [
        helper.make_node("Conv", ["0", "conv.weight", "conv.bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["c"], ["s"], name="shape"),
        helper.make_node("Constant", [], ["zero"], name="zero_const",
                         value=numpy_helper.from_array(np.array(0, dtype=np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], name="unsqueeze", axes=[0]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["c", "target"], ["1"], name="flatten"),
    ]
    graph = helper.make_graph(
        nodes, "legacy",
        [helper.make_tensor_value_info("0", TensorProto.FLOAT, ["batch", 4, 6, 6]),
         helper.make_tensor_value_info("conv.weight", TensorProto.FLOAT, [8, 4, 3, 3]),
         helper.make_tensor_value_info("conv.bias", TensorProto.FLOAT, [8]),
         helper.make_tensor_value_info("minus_one", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("1", TensorProto.FLOAT, ["batch", 288])], [weight, bias, minus_one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.checker.check_model(model)
    return model


def test_legacy_export_imports_with_folded_shapes(rng):
    from adreno.frontend.constfold import prepare

    model = legacy_export(rng)
    prepared = prepare(model, {"0": [1, 4, 6, 6]})
    assert [i.name for i in prepared.graph.input] == ["0"]
    assert [n.op_type for n in prepared.graph.node] == ["Conv", "Constant", "Reshape"]
    target = {i.name: numpy_helper.to_array(i) for i in prepared.graph.initializer}[prepared.graph.node[-1].input[1]]
    assert target.tolist() == [1, -1]


def test_legacy_export_compiles_and_keeps_the_model_names(tmp_path, rng):
    """`--input` takes the model's input name `0`, `--output` writes the model's output name `1`, and the
    values are onnxruntime's."""
    import onnxruntime as ort

    model = legacy_export(rng)
    path = tmp_path / "legacy.onnx"
    onnx.save(model, path)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.savez(tmp_path / "x.npz", **{"0": x})
    adreno("compile", path, "--input-shape", "0:1,4,6,6", "--memory", "buffer", "-o", tmp_path / "art", "-q")
    adreno("run", tmp_path / "art", "--input", tmp_path / "x.npz", "--output", tmp_path / "y.npz", "--check",
           "--repeat", "1", "-q")
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"0": x})
    with np.load(tmp_path / "y.npz") as saved:
        assert saved.files == ["1"]
        np.testing.assert_allclose(saved["1"], expected[0], rtol=1e-4, atol=1e-4)


def runtime_parameter_model(op: str) -> onnx.ModelProto:
    """`op` whose shape-deciding parameter (Pad's pads, Reshape's shape) is a graph input, not an initializer."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])
    param = helper.make_tensor_value_info("p", TensorProto.INT64, [8 if op == "Pad" else 2])
    graph = helper.make_graph([helper.make_node(op, ["x", "p"], ["y"], name=f"my_{op.lower()}")], "runtime",
                              [x, param], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                         ["d0", "d1"] + ["d2", "d3"] * (op == "Pad"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("op, label", [("Pad", "pads"), ("Reshape", "shape")])
def test_runtime_parameter_is_one_line_error(tmp_path, op, label):
    path = tmp_path / f"{op}.onnx"
    onnx.save(runtime_parameter_model(op), path)
    result = adreno("compile", path, "-o", tmp_path / "art", "-q", check_rc=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"my_{op.lower()} ({op})" in lines[0] and f"its {label} input is the graph input 'p'" in lines[0]
    assert "bind its value at compile time with --bind p=FILE.npy (or make it an initializer)" in lines[0]
    assert not (tmp_path / "art").exists()


def test_quiet_stderr_silences_native_writes(capfd):
    """What C++ code writes to file descriptor 2 inside the block is dropped; Python's stderr works after it."""
    from adreno.support.native_log import quiet_stderr

    with quiet_stderr():
        os.write(2, b"BlockBuilder destroyed with remaining blocks!\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_summarised_stderr_drops_the_harmless_and_shows_the_rest_once(capfd):
    """A TVM warning we do not know is one line with its count (glog's timestamps differ between repeats), the
    harmless one is gone, and what was captured comes out even when the block raises."""
    from adreno.support.native_log import summarised_stderr

    with pytest.raises(ValueError), summarised_stderr():
        for second in range(3):
            os.write(2, f"[02:41:3{second}] transform.h:1261: Warning: Fast mode segfaults when there are "
                        "out-of-bounds indices. Make sure input indices are in bound\n".encode())
            os.write(2, f"[02:41:3{second}] pass.cc:7: Warning: something new\n".encode())
        raise ValueError
    assert capfd.readouterr().err == "pass.cc:7: Warning: something new (3 times)\n"


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_a_compile_with_gather_prints_nothing(memory, tmp_path, capfd):
    """The importer makes every Gather a `take` in TVM's fast mode, whose legalization warns on stderr from C++
    (twice for this one Gather); a compile prints nothing."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    model = one_node("Gather", {"x": [1, 4, 8]}, {"y": [1, 3, 8]}, {"idx": np.array([2, 0, -1])}, axis=1)
    compile_model(model, tmp_path / "art", CompileOptions(memory=memory))
    assert capfd.readouterr().err == ""


def test_winograd_workloads_of_a_model_with_a_constant_gather_print_nothing(capfd):
    """What `adreno tune` extracts its Winograd tasks from folds the constants first; folding a Gather of an
    initializer (as the unrolled LSTM's weights are) legalizes a fast-mode `take`, whose warning is dropped."""
    from adreno.frontend.importer import to_relax
    from adreno.compiler.winograd import eligible_workloads

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["w2", "d"], ["w"], axis=0), helper.make_node("Conv", ["x", "w"], ["y"],
                                                                                   pads=[1] * 4)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 8, 8])],
        [numpy_helper.from_array(rng.standard_normal((2, 64, 64, 3, 3)).astype(np.float32), "w2"),
         numpy_helper.from_array(np.int64(1), "d")])
    workloads = eligible_workloads(to_relax(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])))
    assert len(workloads) == 1 and capfd.readouterr().err == ""


def one_node(op: str, inputs: dict, outputs: dict, weights: dict | None = None, **attrs) -> onnx.ModelProto:
    """One node named `bad` with graph inputs and outputs {name: shape} and initializers `weights`."""
    graph = helper.make_graph(
        [helper.make_node(op, [*inputs, *(weights or {})], list(outputs), name="bad", **attrs)], "one",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(np.asarray(w), n) for n, w in (weights or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def with_opset(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    model.opset_import[0].version = version
    return model


@pytest.mark.parametrize("model, message", [
    (with_opset(one_node("BatchNormalization", {"x": [1, 2, 3, 3]}, {"y": [1, 2, 3, 3], "mean": [2], "var": [2]},
                         {n: np.ones(2, np.float32) for n in ("s", "b", "m", "v")}), 9), "running statistics"),
    (one_node("MaxPool", {"x": [1, 2, 4]}, {"y": [1, 2, 2], "i": [1, 2, 2]}, kernel_shape=[2], strides=[2]),
     "argmax indices are computed for a 2-D pool"),
    (one_node("Resize", {"x": [1, 2, 4, 4]}, {"y": [1, 2, 2, 2]}, {"roi": np.zeros(0, np.float32),
              "scales": np.array([1, 1, 0.5, 0.5], np.float32)}, mode="nearest", antialias=1),
     "antialias=1 with mode nearest"),
    (one_node("Slice", {"x": [4, 4]}, {"y": [0, 4]}, {"starts": np.array([9]), "ends": np.array([10]),
              "axes": np.array([0])}), "is empty (shape [0, 4])"),
], ids=["batchnorm-statistics-opset9", "maxpool-1d-indices", "resize-nearest-antialias", "empty-slice"])
def test_forms_the_importer_gets_wrong_are_refused(model, message):
    """Each would have been a wrong result or a traceback inside TVM; the error names the node."""
    from adreno.errors import ModelError
    from adreno.frontend.importer import to_relax

    with pytest.raises(ModelError) as refused:
        to_relax(model)
    assert "node bad (" in str(refused.value) and message in str(refused.value)


def resize_forms(form: str) -> onnx.ModelProto:
    """Upsample with constant scales (opset 9), or opset 18's Resize with an `axes` attribute."""
    if form == "upsample":
        model = one_node("Upsample", {"x": [1, 4, 3, 3]}, {"y": [1, 4, 6, 9]},
                         {"scales": np.array([1, 1, 2, 3], np.float32)}, mode="nearest")
        model.opset_import[0].version = 9
    else:
        model = one_node("Resize", {"x": [1, 4, 3, 3]}, {"y": [1, 4, 6, 6]},
                         {"roi": np.zeros(0, np.float32), "scales": np.array([2, 2], np.float32)},
                         mode="linear", axes=[2, 3])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("form", ["upsample", "resize-axes"])
def test_upsample_and_resize_forms_match_onnxruntime(form, rng, pocl_device, tmp_path):
    import onnxruntime as ort

    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    model = resize_forms(form)
    x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    artifact = compile_model(model, tmp_path / "art", CompileOptions(memory="buffer"))
    np.testing.assert_allclose(Executor(artifact, pocl_device).run([x])[0], expected[0], rtol=1e-5, atol=1e-5)


def test_empty_constant_parameters_are_not_empty_tensors():
    """PP-OCR det's Resize takes its empty roi from a Constant node: a parameter, not a tensor to refuse."""
    from adreno.frontend.constfold import prepare

    model = one_node("Resize", {"x": [1, 2, 3, 3]}, {"y": [1, 2, 6, 6]},
                     {"scales": np.array([1, 1, 2, 2], np.float32)}, mode="nearest")
    roi = helper.make_node("Constant", [], ["roi"], value=numpy_helper.from_array(np.zeros(0, np.float32)))
    model.graph.node.insert(0, roi)
    model.graph.node[1].input.insert(1, "roi")
    assert [n.op_type for n in prepare(model, {"x": [1, 2, 3, 3]}).graph.node] == ["Constant", "Resize"]


def test_importer_failure_is_one_line_and_nothing_else(tmp_path):
    """TVM's importer prints "Error converting operator ..." on stdout and its BlockBuilder warns on fd 2 when an
    op fails to convert (here a Resize whose sizes miss the batch and channel dimensions): only our line remains."""
    model = one_node("Resize", {"x": [1, 2, 3, 3]}, {"y": [1, 2, 6, 6]}, mode="nearest")
    model.graph.initializer.append(numpy_helper.from_array(np.array([6, 6], np.int64), "sizes"))
    model.graph.node[0].input.extend(["", "", "sizes"])
    model.ir_version = 8
    onnx.save(model, tmp_path / "resize.onnx")
    result = adreno("compile", tmp_path / "resize.onnx", "-o", tmp_path / "art", "-q", check_rc=2)
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the ONNX importer failed: ValueError: Resize2D"), lines


def unidentifiable_names(rng) -> onnx.ModelProto:
    """Names that are not C identifiers where they reach the kernels: the input `gpu_0/data_0` (ONNX's ResNet-50),
    `a/b` and `a_b`, which sanitise to the same identifier, a conv weight `conv/w`, an intermediate `relu/0` and
    outputs `out:0` and `relu.1`, as TensorFlow converters name them."""
    weight = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "conv/w")
    nodes = [helper.make_node("Relu", ["gpu_0/data_0"], ["relu/0"], name="relu"),
             helper.make_node("Conv", ["relu/0", "conv/w"], ["conv:0"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["conv:0", "a/b"], ["sum"], name="add"),
             helper.make_node("Sub", ["sum", "a_b"], ["out:0"], name="sub"),
             helper.make_node("Relu", ["a/b"], ["relu.1"], name="relu_b")]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8, 8]) for n in ("gpu_0/data_0", "a/b", "a_b")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8, 8]) for n in ("out:0", "relu.1")]
    model = helper.make_model(helper.make_graph(nodes, "names", inputs, outputs, [weight]),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_identifier_renaming_keeps_identifiers_and_deduplicates():
    """`a_b` is an identifier and keeps its name; `a/b` becomes the next free one, a leading digit gets `input_`."""
    from adreno.support.identifiers import identifiers

    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["a/b", "a_b"], ["0"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a/b", "a_b")],
        [helper.make_tensor_value_info("0", TensorProto.FLOAT, [2])]))
    renamed, shapes = identifiers(model, {"a/b": [2], "a_b": [2]})
    assert [i.name for i in renamed.graph.input] == ["a_b_1", "a_b"]
    assert list(renamed.graph.node[0].input) == ["a_b_1", "a_b"] and renamed.graph.output[0].name == "input_0"
    assert shapes == {"a_b_1": [2], "a_b": [2]}
    assert [i.name for i in model.graph.input] == ["a/b", "a_b"]  # the caller's model is untouched


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_names_that_are_not_identifiers_build_and_keep_the_model_names(memory, tmp_path, rng):
    """The kernels build (the names reached the OpenCL signatures as written before), `run --check` passes, the
    manifest, `--input` and `--output` use the model's names."""
    import json

    import onnxruntime as ort

    model = unidentifiable_names(rng)
    onnx.save(model, tmp_path / "names.onnx")
    feeds = {n: rng.standard_normal((1, 4, 8, 8)).astype(np.float32) for n in ("gpu_0/data_0", "a/b", "a_b")}
    np.savez(tmp_path / "x.npz", **feeds)
    adreno("compile", tmp_path / "names.onnx", "--memory", memory, "-o", tmp_path / "art", "-q")
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert list(manifest["inputs"]) == ["gpu_0/data_0", "a/b", "a_b"]
    assert list(manifest["outputs"]) == ["out:0", "relu.1"]
    assert (manifest["textures"]["image_tensors"] > 0) == (memory == "texture")  # the conv's tensors are images
    adreno("run", tmp_path / "art", "--input", tmp_path / "x.npz", "--output", tmp_path / "y.npz", "--check",
           "--repeat", "1", "-q")
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    with np.load(tmp_path / "y.npz") as saved:
        assert saved.files == ["out:0", "relu.1"]
        for name, value in zip(saved.files, expected):
            np.testing.assert_allclose(saved[name], value, rtol=1e-4, atol=1e-4)


def test_bind_and_input_shape_take_the_model_names(tmp_path, rng, pocl_device):
    """`--bind` and `--input-shape` name inputs as the model does, also where the kernels see other names."""
    import json

    import onnxruntime as ort

    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    graph = helper.make_graph(
        [helper.make_node("Relu", ["gpu_0/data_0"], ["r"]), helper.make_node("Reshape", ["r", "shape:0"], ["out/0"])],
        "bound", [helper.make_tensor_value_info("gpu_0/data_0", TensorProto.FLOAT, ["n", 6]),
                  helper.make_tensor_value_info("shape:0", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("out/0", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    shape = np.array([3, 4], np.int64)
    artifact = compile_model(model, tmp_path / "art", CompileOptions(memory="buffer",
                             input_shapes={"gpu_0/data_0": [2, 6]}), bind={"shape:0": shape})
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert list(manifest["inputs"]) == ["gpu_0/data_0"] and list(manifest["bound"]) == ["shape:0"]
    x = rng.standard_normal((2, 6)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"gpu_0/data_0": x, "shape:0": shape})
    np.testing.assert_allclose(Executor(artifact, pocl_device).run([x])[0], expected[0], rtol=1e-6)


@pytest.mark.parametrize("op, indices, attrs, message", [
    ("Gather", [0, 1, 100], {"axis": 1}, "index 100 is out of range for axis 1 of size 3 (valid: -3..2)"),
    ("Gather", [[-4]], {"axis": 1}, "index -4 is out of range for axis 1"),
    ("GatherElements", np.full((1, 3, 8, 8), 8), {"axis": -1}, "index 8 is out of range for axis 3 of size 8"),
    ("GatherND", [[0, 3]], {}, "index 3 is out of range for axis 1 of size 3"),
])
def test_constant_indices_out_of_range_are_refused(tmp_path, op, indices, attrs, message):
    """A gather whose constant indices leave the tensor read memory past it, silently (the sweep of session 22):
    refused at compile time in one line naming the node."""
    from adreno.compile import compile_model
    from adreno.errors import ModelError

    graph = helper.make_graph(
        [helper.make_node(op, ["x", "idx"], ["y"], name="pick", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(indices, np.int64), "idx")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError) as refused:
        compile_model(model, tmp_path / "art")
    assert str(refused.value).startswith(f"node pick ({op}): {message}") and "\n" not in str(refused.value)


@pytest.mark.parametrize("attrs, message", [
    ({"dilations": [100, 100]}, "its output 'y' would have the negative shape [1, 4, -192, -192]"),
    ({"pads": [-5, -5, -5, -5]}, "its pads [-5, -5, -5, -5] are negative"),
])
def test_a_window_that_does_not_fit_is_one_line(tmp_path, attrs, message):
    """A conv whose dilated kernel, or negative padding, leaves no output: refused before TVM's conv compute raised
    a traceback (the sweep of session 22)."""
    from adreno.compile import compile_model
    from adreno.errors import ModelError

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)], "c",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])],  # a claim, not believed
        [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")])
    with pytest.raises(ModelError) as refused:
        compile_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "art")
    assert str(refused.value).startswith(f"node conv (Conv): {message}") and "\n" not in str(refused.value)


def test_shapes_tvm_cannot_lower_are_one_line(tmp_path):
    """The tiny model with free spatial sizes, compiled at 1x1: TVM's conv definition refuses a size its importer
    computed; one line naming --input-shape, not a traceback."""
    from adreno.frontend import zoo

    model = zoo.get_model("tiny")
    for axis in (2, 3):
        model.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = f"d{axis}"
    onnx.save(model, tmp_path / "free.onnx")
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", tmp_path / "free.onnx", "-o",
                           tmp_path / "art", "--input-shape", "input:1,3,1,1", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: TVM cannot lower the model at these shapes")


def branching_model() -> onnx.ModelProto:
    """silero-vad's form: `If` on a rate input `sr`, a branch whose Pad takes pads computed from the input's shape
    (a runtime value inside the branch), a nested `If` on a shape inside it, and a sibling `If` before it whose branch
    defines the same name `t`, a constant there (legal in ONNX: the two branches are not each other's outer scope;
    the nested `If` reads the renamed `t` from its outer scope, which must not fold to the sibling's constant)."""
    def branch(name, nodes, outputs, initializers=()):
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 4, "w"])
                                                   for o in outputs], list(initializers))

    def const(name, value):
        return numpy_helper.from_array(np.asarray(value), name)

    nested = helper.make_node("If", ["big"], ["n"], then_branch=branch("sig", [
        helper.make_node("Sigmoid", ["t"], ["n_then"])], ["n_then"]), else_branch=branch("neg", [
            helper.make_node("Neg", ["t"], ["n_else"])], ["n_else"]))
    wide = branch("wide", [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Size", ["x"], ["size"]),
                           helper.make_node("Greater", ["size", "ten"], ["big"]), nested],
                  ["n"], [const("w", np.array([[[1], [2], [-3], [4]]], np.float32)), const("ten", np.int64(10))])
    padded = branch("padded", [
        helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Slice", ["shape", "two", "three"], ["last"]),
        helper.make_node("Div", ["last", "three"], ["half"]), helper.make_node("Concat", ["zeros", "half"], ["pads"],
                                                                                axis=0),
        helper.make_node("Pad", ["x", "pads"], ["p"])], ["p"],
        [const("two", np.array([2])), const("three", np.array([3])), const("zeros", np.zeros(5, np.int64))])
    sibling_then = branch("shift", [helper.make_node("Constant", [], ["t"], value=const("t", np.float32(0.5))),
                                    helper.make_node("Add", ["x", "t"], ["s"])], ["s"])
    sibling_else = branch("abs", [helper.make_node("Abs", ["x"], ["t2"])], ["t2"])
    graph = helper.make_graph(
        [helper.make_node("Equal", ["sr", "rate"], ["wideband"]),
         helper.make_node("If", ["wideband"], ["z"], name="activation", then_branch=sibling_then,
                          else_branch=sibling_else),
         helper.make_node("If", ["wideband"], ["y"], name="select", then_branch=wide, else_branch=padded)],
        "branches", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6]),
                     helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, "w"]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 6])], [const("rate", np.int64(16000))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("rate", [16000, 8000])
def test_if_with_a_bound_condition_compiles_the_branch_it_takes(rate, tmp_path, rng, pocl_device):
    """Each rate takes its branch, nested and sibling `If`s included, and matches onnxruntime (8 kHz: the padded
    branch, its output 1x4x8; before, TVM's importer failed on "Dynamic pads")."""
    import onnxruntime as ort

    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    model = branching_model()
    sr = np.array(rate, np.int64)
    artifact = compile_model(model, tmp_path / "art", CompileOptions(memory="buffer"), bind={"sr": sr})
    x = rng.standard_normal((1, 4, 6)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "sr": sr})
    got = Executor(artifact, pocl_device).run([x])
    assert [g.shape for g in got] == [e.shape for e in expected] == [(1, 4, 6 if rate == 16000 else 8), (1, 4, 6)]
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-6, atol=1e-6)


def test_if_with_a_runtime_condition_is_one_line_naming_its_inputs(tmp_path):
    onnx.save(branching_model(), tmp_path / "branches.onnx")
    result = adreno("compile", tmp_path / "branches.onnx", "-o", tmp_path / "art", "-q", check_rc=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: node activation (If): its condition 'wideband' is known only at run time (computed from "
                     "the graph input(s) ['sr']); a compiled model takes one branch: bind the inputs that decide it "
                     "(--bind NAME=FILE.npy)"], lines


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_expand_to_an_initializer_shape_matches_onnxruntime(memory, rng, pocl_device, tmp_path):
    """PyTorch's `h.expand(-1, 2, -1)` folds to an Expand whose shape [1, 2, 1] is an initializer (a GRU encoder's
    hidden state). TVM's importer took it as a runtime shape: a traceback in the texture schedules, a refused
    `vm.builtin.tensor_to_shape` with buffers."""
    import onnxruntime as ort

    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    model = one_node("Expand", {"x": [1, 1, 4]}, {"y": [1, 2, 4]}, {"shape": np.array([1, 2, 1])})
    x = rng.standard_normal((1, 1, 4)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    artifact = compile_model(model, tmp_path / "art", CompileOptions(memory=memory))
    np.testing.assert_array_equal(Executor(artifact, pocl_device).run([x])[0], expected[0])
