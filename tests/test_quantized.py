"""Quantized ONNX models on PoCL, against onnxruntime: ONNX's own node cases of the quantized ops, the `tiny` zoo
model quantized by onnxruntime.quantization (dynamic, QDQ and QOperator; per tensor and per channel), the weight
listing of `adreno.frontend.quantized`, and its refusals.

Tolerance (docs/quantized.md): integer node outputs exactly; a static model's dequantized output within one output
quantization step (a float accumulation rounded on the other side of a .5 boundary moves a value one step) with at
least half the elements equal; a dynamic model's float output within `adreno run --check`'s 1e-4 + 1e-3 max|ref|."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.frontend import zoo
from adreno.compile import compile_model
from adreno.frontend.quantized import quantized_weights
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import onnxruntime_outputs
from tests.quantized_models import STATIC_STEPS, Agreement, Recipe, calibration_feeds, output_steps, quantize

NODE_CASES = ["test_qlinearconv", "test_qlinearmatmul_2D_uint8_float32", "test_qlinearmatmul_3D_int8_float32",
              "test_convinteger_with_padding", "test_convinteger_without_padding", "test_matmulinteger",
              "test_dynamicquantizelinear", "test_dynamicquantizelinear_max_adjusted", "test_quantizelinear",
              "test_quantizelinear_axis", "test_dequantizelinear", "test_dequantizelinear_axis"]


def _node_cases() -> dict:
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in node.collect_testcases() if c.name in NODE_CASES or c.name.endswith("_blocked")}


CASES = _node_cases()


def with_constant_parameters(case):
    """The case with every input but the first (the data) an initializer, as quantizers write them."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, expected = case.data_sets[0]
    names = [i.name for i in model.graph.input]
    kept = model.graph.input[0]
    model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), n) for n, v in zip(names[1:], inputs[1:]))
    del model.graph.input[1:]
    assert model.graph.input[0] == kept
    return model, np.asarray(inputs[0]), [np.asarray(e) for e in expected]


@pytest.mark.parametrize("memory", ["texture", "buffer"])
@pytest.mark.parametrize("name", NODE_CASES)
def test_onnx_node_cases_compute_exactly(name, memory, pocl_device, tmp_path):
    model, x, expected = with_constant_parameters(CASES[name])
    got = Executor(compile_model(model, tmp_path / "a", CompileOptions(memory=memory)), pocl_device).run([x])
    for value, want in zip(got, expected):
        assert value.dtype == want.dtype and value.shape == want.shape
        np.testing.assert_array_equal(value, want)


def test_rounding_half_to_even_and_saturation(pocl_device, tmp_path):
    x = np.arange(-300, 300, 0.5, dtype=np.float32).reshape(1, 4, 10, 30)  # x / 2 hits every .5
    scale, zero = np.array([2.0, 0.5, 1.0, 4.0], np.float32), np.array([3, -2, 0, 127], np.int8)
    graph = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)], "q",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, x.shape)],
                              [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zero, "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    want = onnxruntime_outputs(model, [x])[0]
    assert (want == 127).any() and (want == -128).any()
    got = Executor(compile_model(model, tmp_path / "a", CompileOptions(memory="buffer")), pocl_device).run([x])[0]
    np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def tiny_quantized():
    model = zoo.get_model("tiny")
    calibration = calibration_feeds(model, 2)
    return {recipe: quantize(model, recipe, calibration) for recipe in Recipe}


@pytest.mark.parametrize("memory", ["texture", "buffer"])
@pytest.mark.parametrize("recipe", list(Recipe))
def test_tiny_quantized_by_onnxruntime_matches_it(recipe, memory, tiny_quantized, pocl_device, tmp_path):
    model = tiny_quantized[recipe]
    x = calibration_feeds(model, 1, seed=7)[0]["input"]
    got = Executor(compile_model(model, tmp_path / "a", CompileOptions(memory=memory)), pocl_device).run([x])[0]
    want = onnxruntime_outputs(model, [x])[0]
    step = output_steps(model).get(model.graph.output[0].name)
    agreement = Agreement.of(got, want, step)
    if recipe in (Recipe.DYNAMIC, Recipe.DYNAMIC_UINT8):
        assert step is None and agreement.max_abs <= 1e-4 + 1e-3 * np.abs(want).max(), agreement
    else:
        # onnxruntime disagrees with itself by up to 10 output steps on this model (its QDQ run with and without
        # graph optimizations: docs/quantized.md), so steps are bounded by that, and the class must agree
        assert step is not None and agreement.max_steps <= STATIC_STEPS, agreement
        assert int(np.argmax(got)) == int(np.argmax(want))


def test_weights_are_listed_with_their_scales(tiny_quantized):
    model = tiny_quantized[Recipe.QDQ_PER_CHANNEL]
    weights = {w.name: w for w in quantized_weights(model)}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert convs and all(n.input[1] in weights for n in convs)
    for node in convs:
        weight = weights[node.input[1]]
        assert weight.values.dtype == np.int8 and weight.axis == 0
        assert weight.scale.shape == (weight.values.shape[0],)
        dq = next(n for n in model.graph.node if n.output[0] == node.input[1])
        graph = helper.make_graph([dq], "dq", [], [helper.make_tensor_value_info(dq.output[0], TensorProto.FLOAT,
                                                                                 None)],
                                  [t for t in model.graph.initializer if t.name in dq.input])
        reference = helper.make_model(graph, opset_imports=model.opset_import)
        reference.ir_version = model.ir_version
        np.testing.assert_array_equal(weight.dequantized(), onnxruntime_outputs(reference, [])[0])
    operator_weights = quantized_weights(tiny_quantized[Recipe.QOPERATOR])  # integer domain: scale 1
    assert operator_weights and all(np.all(w.scale == 1) for w in operator_weights)


def test_an_int32_param_is_widened_only_from_a_unit_scale():
    """MatMulInteger's 8-bit B is listed as an integer weight; an int32 param is rebuilt from an 8-bit member as
    `int32(q) - zero_point` (transposed too), and a member that would change an integer op's weight (a scale other
    than 1, a packing) is refused in one line rather than rounded into int32."""
    from adreno.artifact.weights import Quantization, StoredWeight, WeightTransform, param_value
    from adreno.errors import ArtifactError

    model, _, _ = with_constant_parameters(CASES["test_matmulinteger"])
    [weight] = quantized_weights(model)
    assert weight.integer and weight.values.dtype == np.uint8 and np.all(weight.scale == 1)
    q = np.array([[0, 7, 255], [3, 1, 200]], np.uint8)
    widened = Quantization((1.0, 1.0), (3, 250), 0)
    want = q.astype(np.int32) - np.array([[3], [250]], np.int32)
    stored = StoredWeight((2, 3), "uint8", WeightTransform.TRANSPOSE, quantization=widened)
    value = param_value("p", [3, 2], "int32", stored, q)
    assert value.dtype == np.int32 and np.array_equal(value, want.T)
    for form in (StoredWeight((2, 3), "uint8", quantization=Quantization((1.0, 0.5), (3, 250), 0)),
                 StoredWeight((2, 3), "uint8", packed=True, quantization=widened)):
        with pytest.raises(ArtifactError, match=r"param p \(int32\): its stored form \(uint8\) does not give"):
            param_value("p", [2, 3], "int32", form, q)


def test_a_quantized_weight_the_compile_changed_is_counted_as_stored_wide():
    """A quantized weight whose every form the compile changed (here: folded with another constant, so no param
    holds its dequantized value) is stored as the floats the kernels read: correct, larger, and counted, never
    silent. One that a param holds, as it is or transposed, is not counted."""
    from adreno.artifact.weights import QuantizedWeights

    rng = np.random.default_rng(3)
    kept, folded = (rng.integers(-128, 128, (4, 6), dtype=np.int8) for _ in range(2))
    weights = QuantizedWeights()
    for q in (kept, folded, kept):  # the same tensor twice is one weight
        weights.record(q, np.float32(0.05), np.int8(0), None)
    assert weights.stored_wide() == 2
    assert weights.source_of(np.ascontiguousarray((kept.astype(np.float32) * np.float32(0.05)).T)) is not None
    assert weights.source_of(folded.astype(np.float32) * np.float32(0.05) + np.float32(1.0)) is None
    assert weights.stored_wide() == 1


def _compile_cli(model, tmp_path):
    onnx.save(model, tmp_path / "m.onnx")
    return subprocess.run([sys.executable, "-m", "adreno.cli", "compile", str(tmp_path / "m.onnx"), "-o",
                           str(tmp_path / "art"), "-q"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _lstm_model():
    inputs = ["x", "w", "r", "b", "", "", "", "", "", "", "", ""]
    node = helper.make_node("DynamicQuantizeLSTM", inputs, ["y"], name="my_lstm", domain="com.microsoft",
                            hidden_size=4)
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 1, 4])],
                              [numpy_helper.from_array(np.zeros((1, 3, 16), np.int8), "w"),
                               numpy_helper.from_array(np.zeros((1, 4, 16), np.int8), "r"),
                               numpy_helper.from_array(np.zeros((1, 32), np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("make, message", [
    (_lstm_model, "node my_lstm (DynamicQuantizeLSTM): its W scale ('') must be a constant"),
    (lambda: with_constant_parameters(CASES["test_dequantizelinear_blocked"])[0],
     "(DequantizeLinear) uses blocked quantization (block_size)"),
], ids=["dynamic-quantize-lstm", "blocked"])
def test_refusals_are_one_line_naming_the_node(make, message, tmp_path):
    proc = _compile_cli(make(), tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


@pytest.mark.parametrize("memory", ["texture", "buffer"])
@pytest.mark.parametrize("recipe", [Recipe.QDQ, Recipe.DYNAMIC_UINT8, Recipe.QOPERATOR_PER_CHANNEL])
def test_artifact_stores_the_integer_weights(recipe, memory, tiny_quantized, pocl_device, tmp_path):
    """Each conv weight, and the fc weight of a static recipe (Gemm: Relax folds it into its transpose, which is
    transposed back at load), is stored in its integer type with its scales (docs/weights.md) and dequantized at
    load to the float32 values the compile folded, packed to OIHW4o in texture memory (the model still matches
    onnxruntime). The dynamic recipe's fc is a MatMulInteger: its uint8 weight is stored as it is and widened at load
    to the int32 `w - w_zp` its kernel reads."""
    import json

    from adreno.artifact.format import Artifact
    from adreno.targets.layout import pack_oihw4o

    model = tiny_quantized[recipe]
    compile_model(model, tmp_path / "a", CompileOptions(memory=memory))
    storage = json.loads((tmp_path / "a" / "manifest.json").read_text())["weight_storage"]
    integer = "uint8" if recipe is Recipe.DYNAMIC_UINT8 else "int8"
    count = 4
    assert storage["quantized"] == storage["dtypes"][integer] == count and "int32" not in storage["dtypes"]
    assert storage["quantized_stored_wide"] == 0, "every quantized weight was found among the params"
    assert storage["stored_bytes"] < storage["param_bytes"]
    artifact = Artifact.load(tmp_path / "a")
    stored, params = artifact.stored_params(), artifact.params()
    weights = quantized_weights(model)
    assert sum(w.integer for w in weights) == (recipe is Recipe.DYNAMIC_UINT8)
    values = [w.dequantized().astype(np.int32) if w.integer else w.dequantized() for w in weights]  # scale 1: exact
    folded = {v.tobytes() for v in values}
    if memory == "texture":  # conv weights packed as the texture planner packs them (depthwise: I kept)
        folded = {pack_oihw4o(v, depthwise).tobytes() for v in values if v.ndim == 4
                  for depthwise in {False, v.shape[1] == 1}} | {v.tobytes() for v in values if v.ndim == 2}
    folded |= {np.ascontiguousarray(v.T).tobytes() for v in values if v.ndim == 2}
    quantized = [n for n, t in artifact.plan.tensors.items() if t.kind == "param" and t.stored_weight.quantization]
    assert len(quantized) == count
    for name in quantized:
        param = artifact.plan.tensors[name]
        assert str(stored[name].dtype) == integer and str(params[name].dtype) == param.dtype
        assert param.dtype == ("int32" if len(param.shape) == 2 and recipe is Recipe.DYNAMIC_UINT8 else "float32")
        assert params[name].tobytes() in folded
    x = calibration_feeds(model, 1, seed=7)[0]["input"]
    got = Executor(artifact, pocl_device).run([x])[0]
    want = onnxruntime_outputs(model, [x])[0]
    step = output_steps(model).get(model.graph.output[0].name)
    agreement = Agreement.of(got, want, step)
    if step is None:
        assert agreement.max_abs <= 1e-4 + 1e-3 * np.abs(want).max(), agreement
    else:
        assert agreement.max_steps <= STATIC_STEPS and int(np.argmax(got)) == int(np.argmax(want)), agreement


def test_dynamic_models_long_fused_kernels_are_named_short_for_pocl(tiny_quantized, tmp_path):
    """A dynamically quantized model fuses DynamicQuantizeLinear's arithmetic into long-named functions in texture
    memory (ResNet-18's up to 306 characters); PoCL fails to link a kernel named past about 250 ("Final linking of
    kernel ... failed", docs/quantized.md), so every kernel is named by `adreno.compiler.plan.short_name` (at most
    124)."""
    from adreno.artifact.format import Artifact

    path = compile_model(tiny_quantized[Recipe.DYNAMIC], tmp_path / "a", CompileOptions(memory="texture"))
    steps = Artifact.load(path).plan.steps
    assert max(len(s.func) for s in steps) > 120  # the rule shortens these
    assert max(len(k.name) for s in steps for k in s.kernels) <= 124


def _conv_integer_model(rng, channels=64, size=16):
    w = rng.integers(-127, 128, (channels, channels, 3, 3), dtype=np.int8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "ci", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                           (1, channels, size, size))],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.uint8(7), "xz")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_conv_integer_stays_exact_where_winograd_is_forced(memory, pocl_device, tmp_path):
    """A 3x3 ConvInteger is Winograd-eligible by shape, but its integer sums must be exact (the Cast to int32
    truncates, so Winograd's rounding made n - 1 of 44% of a ResNet-18 layer's outputs): the rewrite refuses
    integer-valued weights even under `--winograd f4`, and the int32 output equals onnxruntime's."""
    rng = np.random.default_rng(3)
    model = _conv_integer_model(rng)
    x = rng.integers(0, 256, (1, 64, 16, 16), dtype=np.uint8)
    artifact = compile_model(model, tmp_path / "a", CompileOptions(memory=memory, winograd="f4"))
    got = Executor(artifact, pocl_device).run([x])[0]
    np.testing.assert_array_equal(got, onnxruntime_outputs(model, [x])[0])
    import json

    funcs = [step["func"] for step in json.loads((artifact / "plan.json").read_text())["steps"]]
    assert funcs and not any("winograd" in name for name in funcs), funcs


def test_dynamic_models_are_checked_against_onnxruntimes_own_spread(tiny_quantized):
    """`adreno run --check` widens its tolerance for a model with DynamicQuantizeLinear by onnxruntime's own change
    under one-ulp nudges of every DynamicQuantizeLinear input (`reference_spread`); a static or float model keeps the
    plain tolerance."""
    from adreno.reference import _nudged, reference_spread, tolerance

    dynamic = tiny_quantized[Recipe.DYNAMIC]
    x = calibration_feeds(dynamic, 1, seed=7)[0]["input"]
    spread = reference_spread(dynamic, [x])
    assert spread is not None and len(spread) == len(dynamic.graph.output) and all(s >= 0 for s in spread)
    nudged = _nudged(dynamic, 1.0 + 2.0 ** -23)
    count = sum(n.op_type == "DynamicQuantizeLinear" for n in dynamic.graph.node)
    assert sum(n.op_type == "Mul" for n in nudged.graph.node) == count + sum(
        n.op_type == "Mul" for n in dynamic.graph.node)
    onnx.checker.check_model(nudged)
    assert reference_spread(tiny_quantized[Recipe.QDQ], [x]) is None
    assert reference_spread(zoo.get_model("tiny"), [x]) is None
    row = {"max_abs_ref": 2.0, "spread": 0.01}
    assert tolerance(row, 1e-3, 1e-4) == pytest.approx(1e-4 + 2e-3 + 1.5 * 0.01)
    assert tolerance({"max_abs_ref": 2.0, "spread": None}, 1e-3, 1e-4) == pytest.approx(1e-4 + 2e-3)


def test_a_dynamic_models_convs_take_our_schedules(tiny_quantized, pocl_device, monkeypatch, tmp_path):
    """ConvInteger's rescale multiplies its two scales inside the conv's function, a block without loops after the
    conv. Our conv families inline it and take the conv: without them TVM's fallback gave every output its own
    256-work-item work-group (the dynamic ResNet-18 in buffer memory: 6.3 s a run on PoCL, now 0.23 s)."""
    from adreno.artifact.format import Artifact
    from tests.schedules.sched_helpers import record_claims

    model = tiny_quantized[Recipe.DYNAMIC]
    with record_claims(monkeypatch, "conv2d_direct", "depthwise", "conv2d_1x1") as claims:
        out = compile_model(model, tmp_path / "a", CompileOptions(memory="buffer"))
    convs = {s.func for s in Artifact.load(out).plan.steps if s.op == "conv2d"}
    claimed = [key for keys in claims.values() for key in keys]
    assert convs and len(claimed) == len(convs), (sorted(convs), claims)
    x = calibration_feeds(model, 1, seed=7)[0]["input"]
    got, want = Executor(out, pocl_device).run([x])[0], onnxruntime_outputs(model, [x])[0]
    assert np.abs(got - want).max() <= 1e-4 + 1e-3 * np.abs(want).max()
