"""LSTM, GRU and RNN, unrolled before import (adreno/frontend/recurrent.py), compiled with textures and with buffers and
run on PoCL: ONNX's own node cases against their expected outputs, models built here (bidirectional, initial states,
peepholes, Y_h / Y_c, clip, input_forget, linear_before_reset, activations) and the zoo's CRNN against
onnxruntime; the forms it refuses are refused in one line naming the node.

Each group of cases is one graph (its nodes side by side, names prefixed), so a memory costs one compile."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.errors import UnsupportedOpError

MEMORIES = ["texture", "buffer"]
NODE_CASES = ("test_lstm_defaults", "test_lstm_with_initial_bias", "test_lstm_with_peepholes", "test_lstm_batchwise",
              "test_lstm_reverse", "test_lstm_bidirectional", "test_gru_defaults", "test_gru_seq_length",
              "test_gru_with_initial_bias", "test_gru_batchwise", "test_gru_bidirectional",
              "test_simple_rnn_defaults", "test_simple_rnn_with_initial_bias", "test_simple_rnn_batchwise",
              "test_simple_rnn_bidirectional", "test_rnn_seq_length")
ATOL, RTOL = 1e-4, 1e-3  # adreno run --check's


def _run(model, inputs: dict, memory: str, tmp_path) -> list[np.ndarray]:
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    artifact = compile_model(model, tmp_path / memory, CompileOptions(memory=memory))
    executor = Executor(artifact, "pocl")
    _assert_weights_stored_once(executor.artifact)
    return executor.run(executor.artifact.ordered_inputs(inputs))


def _assert_weights_stored_once(artifact) -> None:
    """No two params hold the same stored member in the same form and scope: an unrolled step's copy of a weight
    (each step's transposed recurrent weight is a constant of its own in Relax) is the one param they all read."""
    from adreno.artifact.weights import content_digest

    tensors, seen = artifact.plan.tensors, {}
    for name, member in artifact.stored_params().items():
        key = (content_digest(member), tensors[name].stored_weight, tensors[name].scope)
        assert key not in seen, f"params {seen.get(key)} and {name} are the same weight, stored twice"
        seen[key] = name


def _assert_close(outputs: list, expected: list, names: list[str]) -> None:
    assert len(outputs) == len(expected)
    for out, ref, name in zip(outputs, expected, names):
        assert out.shape == ref.shape, name
        error, tolerance = float(np.abs(out - ref).max()), ATOL + RTOL * float(np.abs(ref).max())
        assert error <= tolerance, f"{name}: max |error| {error:.3g} > {tolerance:.3g}"


def _side_by_side(parts: list) -> onnx.ModelProto:
    """One model of the (prefix, single-node model) `parts`, every name prefixed."""
    nodes, inputs, outputs, inits = [], [], [], []
    for prefix, model in parts:
        rename = lambda name: f"{prefix}_{name}" if name else ""  # noqa: E731
        for node in model.graph.node:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = rename(node.name or node.op_type)
            copy.input[:] = [rename(n) for n in node.input]
            copy.output[:] = [rename(n) for n in node.output]
            nodes.append(copy)
        for values, target in ((model.graph.input, inputs), (model.graph.output, outputs)):
            for value in values:
                copy = onnx.ValueInfoProto()
                copy.CopyFrom(value)
                copy.name = rename(value.name)
                target.append(copy)
        for init in model.graph.initializer:
            copy = onnx.TensorProto()
            copy.CopyFrom(init)
            copy.name = rename(init.name)
            inits.append(copy)
    opset = max(o.version for _, m in parts for o in m.opset_import if o.domain in ("", "ai.onnx"))
    return helper.make_model(helper.make_graph(nodes, "recurrent", inputs, outputs, inits),
                             opset_imports=[helper.make_opsetid("", opset)])


def _node_cases() -> tuple:
    """ONNX's node cases as one model; sequence_lens (all equal to the length) is an initializer, as exports have
    it. Returns the model, its inputs and the cases' expected outputs."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = {c.name: c for c in node.collect_testcases() if c.name in NODE_CASES}
    assert set(cases) == set(NODE_CASES), "this onnx wheel lacks some recurrent node cases"
    parts, feeds, expected = [], {}, []
    for index, name in enumerate(NODE_CASES):
        case = cases[name]
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        values, outputs = case.data_sets[0]
        given = dict(zip((i.name for i in model.graph.input), values))
        if "sequence_lens" in given:
            kept = [i for i in model.graph.input if i.name != "sequence_lens"]
            del model.graph.input[:]
            model.graph.input.extend(kept)
            model.graph.initializer.append(numpy_helper.from_array(given.pop("sequence_lens"), "sequence_lens"))
        parts.append((f"c{index}", model))
        feeds.update({f"c{index}_{k}": np.asarray(v) for k, v in given.items()})
        expected += [np.asarray(o) for o in outputs]
    return _side_by_side(parts), feeds, expected


@pytest.mark.parametrize("memory", ["texture"])  # buffers: the built models below; both: CRNN
def test_onnx_node_cases_match_their_expected_outputs(memory, tmp_path):
    model, feeds, expected = _node_cases()
    _assert_close(_run(model, feeds, memory, tmp_path), expected, [o.name for o in model.graph.output])


def _recurrent(op: str, name: str, rng, steps=4, batch=2, size=3, hidden=5, direction="bidirectional",
               states=True, peepholes=False, bias=True, outputs=("Y", "Y_h", "Y_c"), **attrs):
    """A one-node model of `op` with seeded weights as initializers, and its inputs."""
    gates, directions = {"LSTM": 4, "GRU": 3, "RNN": 1}[op], 2 if direction == "bidirectional" else 1
    weight = lambda n, shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), n)  # noqa: E731
    inits = [weight("W", (directions, gates * hidden, size)), weight("R", (directions, gates * hidden, hidden))]
    inits += [weight("B", (directions, 2 * gates * hidden))] if bias else []
    inits += [weight("P", (directions, 3 * hidden))] if peepholes else []
    feeds = {"X": rng.standard_normal((steps, batch, size)).astype(np.float32)}
    names = ["X", "W", "R", "B" if bias else "", "", "", "", "P" if peepholes else ""]
    if states:
        for position, state in ((5, "initial_h"), (6, "initial_c")):
            if position == 5 or op == "LSTM":
                names[position] = state
                feeds[state] = rng.standard_normal((directions, batch, hidden)).astype(np.float32)
    while not names[-1]:
        names.pop()
    outputs = [o for o in outputs if op == "LSTM" or o != "Y_c"]
    node = helper.make_node(op, names, outputs, name=name, hidden_size=hidden, direction=direction, **attrs)
    shapes = {"Y": (steps, directions, batch, hidden), "Y_h": (directions, batch, hidden),
              "Y_c": (directions, batch, hidden)}
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                                             for k, v in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs if o],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), feeds


BUILT = {  # name: (op, options)
    "lstm_bidirectional_states": ("LSTM", {}),
    "lstm_peepholes": ("LSTM", {"peepholes": True}),
    "lstm_reverse_zero_state_no_bias": ("LSTM", {"direction": "reverse", "states": False, "bias": False}),
    "lstm_clip_input_forget": ("LSTM", {"clip": 0.4, "input_forget": 1}),
    "lstm_activations": ("LSTM", {"activations": ["Relu", "Tanh", "Softsign"] * 2}),
    "lstm_only_y_c": ("LSTM", {"outputs": ("", "", "Y_c")}),
    "gru_linear_before_reset": ("GRU", {"linear_before_reset": 1}),
    "gru_reverse_states": ("GRU", {"direction": "reverse"}),
    "gru_zero_state_before_reset": ("GRU", {"states": False, "linear_before_reset": 1}),
    "rnn_relu": ("RNN", {"activations": ["Relu", "Softplus"]}),
}


@pytest.mark.parametrize("memory", ["buffer"])  # images: the ONNX node cases above; both: CRNN
def test_built_models_match_onnxruntime(memory, tmp_path):
    from adreno.reference import onnxruntime_session

    rng = np.random.default_rng(5)
    parts, feeds = [], {}
    for name, (op, options) in BUILT.items():
        model, inputs = _recurrent(op, name, rng, **options)
        parts.append((name, model))
        feeds.update({f"{name}_{k}": v for k, v in inputs.items()})
    model = _side_by_side(parts)
    expected = onnxruntime_session(model.SerializeToString()).run(None, feeds)
    _assert_close(_run(model, feeds, memory, tmp_path), expected, [o.name for o in model.graph.output])


@pytest.mark.parametrize("memory", MEMORIES)
def test_crnn_matches_onnxruntime(memory, tmp_path):
    from adreno.frontend import zoo
    from adreno.reference import onnxruntime_session

    model, spec = zoo.get_model("crnn"), zoo.MODELS["crnn"]
    feeds = {spec.input_name: np.random.default_rng(2).standard_normal(spec.input_shape).astype(np.float32)}
    expected = onnxruntime_session(model.SerializeToString()).run(None, feeds)
    _assert_close(_run(model, feeds, memory, tmp_path), expected, [spec.output_name])


REFUSED = {  # options of a one-node LSTM: what the one-line refusal names
    "short sequences": ({"lengths": [4, 3]}, "sequence_lens ([4, 3])"),
    "activation parameters": ({"activations": ["HardSigmoid", "Tanh", "Tanh"] * 2, "activation_alpha": [0.3]},
                              "attribute activation_alpha"),
    "unknown activation": ({"activations": ["Affine", "Tanh", "Tanh"] * 2}, "attribute activations="),
    "sequence_lens at run time": ({"lengths": "input"}, "sequence_lens input is the graph input"),
}


def _refused_model(options: dict):
    options = dict(options)
    lengths = options.pop("lengths", None)
    model, feeds = _recurrent("LSTM", "rec", np.random.default_rng(0), **options)
    if lengths is not None:
        node = model.graph.node[0]
        node.input[4] = "lengths"
        if lengths == "input":
            model.graph.input.append(helper.make_tensor_value_info("lengths", TensorProto.INT32, [2]))
        else:
            model.graph.initializer.append(numpy_helper.from_array(np.array(lengths, np.int32), "lengths"))
    return model


@pytest.mark.parametrize("name", list(REFUSED))
def test_unsupported_forms_are_refused_naming_the_node(name):
    from adreno.errors import ModelError
    from adreno.frontend.importer import to_relax

    options, named = REFUSED[name]
    with pytest.raises(ModelError) as info:
        to_relax(_refused_model(options))
    message = str(info.value)
    assert "\n" not in message and message.startswith("node rec (LSTM)") and named in message, message
    assert isinstance(info.value, UnsupportedOpError) or "--bind" in message


def test_cli_refusal_is_one_line_exit_2(tmp_path):
    path = tmp_path / "short.onnx"
    onnx.save(_refused_model({"lengths": [4, 3]}), path)
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", str(path), "-o", str(tmp_path / "out"),
                           "-q"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: node rec (LSTM)") and "sequence_lens" in lines[0], lines
