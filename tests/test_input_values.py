"""`run --check` on a model with integer inputs draws valid ones: token ids within the embedding table, token types
within theirs, a mask 0 or 1 (`adreno.frontend.input_values`); `--input` gives any values instead."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.format import TensorSpec, random_inputs
from adreno.frontend.input_values import integer_ranges
from tests.test_cli import adreno
from tests.dynamic_models import TYPES, VOCAB, bert_like


def test_the_ranges_follow_the_values_to_the_tables_they_index():
    model = bert_like()
    assert integer_ranges(model, list(model.graph.input)) == {
        "input_ids": (0, VOCAB), "token_type_ids": (0, TYPES), "attention_mask": (0, 2)}


def test_an_index_reaches_its_table_through_value_moving_ops_and_the_smallest_table_wins():
    """ids -> Cast -> Unsqueeze -> Gather along axis 1 of a [3, 7] table, and straight into a table of 5 rows."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
         helper.make_node("Unsqueeze", ["ids32", "zero"], ["ids2"]),
         helper.make_node("Gather", ["wide", "ids2"], ["a"], axis=1),
         helper.make_node("Gather", ["short", "ids"], ["b"]),
         helper.make_node("Cast", ["flag"], ["c"], to=TensorProto.FLOAT)],
        "indices", [helper.make_tensor_value_info("ids", TensorProto.INT64, [4]),
                    helper.make_tensor_value_info("flag", TensorProto.BOOL, [4]),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "abc"],
        [numpy_helper.from_array(np.zeros((3, 7), np.float32), "wide"),
         numpy_helper.from_array(np.zeros((5, 2), np.float32), "short"),
         numpy_helper.from_array(np.array([0], np.int64), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert integer_ranges(model, list(model.graph.input)) == {"ids": (0, 5), "flag": (0, 2)}
    ids, flag, x = random_inputs([TensorSpec("ids", [4000], "int64", "input", "0"),
                                  TensorSpec("flag", [4000], "bool", "input", "1"),
                                  TensorSpec("x", [4], "float32", "input", "2")], 3, {"ids": (0, 5)})
    assert set(np.unique(ids)) == set(range(5)) and flag.dtype == bool and flag.any() and not flag.all()
    assert x.dtype == np.float32


@pytest.fixture(scope="module")
def bert_artifact(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert")
    onnx.save(bert_like(), root / "bert.onnx")
    shapes = [arg for name in ("input_ids", "attention_mask", "token_type_ids")
              for arg in ("--input-shape", f"{name}:1,8")]
    adreno("compile", root / "bert.onnx", "-o", root / "art", "-q", "--memory", "buffer", *shapes)
    return root / "art"


def test_check_of_ids_mask_and_types_passes(bert_artifact):
    entries = json.loads((bert_artifact / "manifest.json").read_text())["inputs"]
    assert {n: e["values"] for n, e in entries.items()} == {
        "input_ids": [0, VOCAB], "attention_mask": [0, 2], "token_type_ids": [0, TYPES]}
    result = json.loads(adreno("run", bert_artifact, "--check", "--repeat", "1", "--json", "--seed", "5").stdout)
    assert result["check"]["ok"], result["check"]
    assert "an integer input that indexes a Gather" in " ".join(adreno("run", "--help").stdout.split())


def test_input_overrides_the_drawn_values(bert_artifact, tmp_path):
    """Values the rule never draws (the last token id, a mask of all ones) still run and check through --input."""
    np.savez(tmp_path / "in.npz", input_ids=np.full((1, 8), VOCAB - 1), attention_mask=np.ones((1, 8), np.int64),
             token_type_ids=np.ones((1, 8), np.int64))
    result = json.loads(adreno("run", bert_artifact, "--check", "--repeat", "1", "--json", "--input",
                               tmp_path / "in.npz", "--output", tmp_path / "out.npz").stdout)
    assert result["check"]["ok"]
    hidden = np.load(tmp_path / "out.npz")["hidden"]
    assert np.allclose(hidden, hidden[:, :1]), "every position attends the same tokens: the same output"
