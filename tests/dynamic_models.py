"""A BERT-style text model built with onnx.helper (no torch here): token ids, an attention mask and token types as
integer inputs of a dynamic length, embedding Gathers and one masked self-attention, with seeded weights."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB, TYPES, HIDDEN = 50, 2, 16


def bert_like(length: int | str = "sequence") -> onnx.ModelProto:
    """input_ids, attention_mask, token_type_ids of shape [1, length] (int64) -> hidden states [1, length, 16]:
    word and type embeddings (Gather), q/k/v projections, scores masked by (1 - mask) * -10000, softmax."""
    rng = np.random.default_rng(0)

    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)

    constants = [weight("word_embeddings", VOCAB, HIDDEN), weight("type_embeddings", TYPES, HIDDEN),
                 weight("wq", HIDDEN, HIDDEN), weight("wk", HIDDEN, HIDDEN), weight("wv", HIDDEN, HIDDEN),
                 numpy_helper.from_array(np.array([1], np.int64), "axis_1"),
                 numpy_helper.from_array(np.array(1.0, np.float32), "one"),
                 numpy_helper.from_array(np.array(-10000.0, np.float32), "masked"),
                 numpy_helper.from_array(np.array(HIDDEN ** -0.5, np.float32), "scale")]
    node = helper.make_node
    nodes = [
        node("Gather", ["word_embeddings", "input_ids"], ["words"]),
        node("Gather", ["type_embeddings", "token_type_ids"], ["types"]),
        node("Add", ["words", "types"], ["x"]),
        node("MatMul", ["x", "wq"], ["q"]), node("MatMul", ["x", "wk"], ["k"]), node("MatMul", ["x", "wv"], ["v"]),
        node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], ["qk"]), node("Mul", ["qk", "scale"], ["scores"]),
        node("Unsqueeze", ["attention_mask", "axis_1"], ["mask3"]),
        node("Cast", ["mask3"], ["mask_f"], to=TensorProto.FLOAT),
        node("Sub", ["one", "mask_f"], ["inverted"]), node("Mul", ["inverted", "masked"], ["bias"]),
        node("Add", ["scores", "bias"], ["biased"]), node("Softmax", ["biased"], ["attention"], axis=-1),
        node("MatMul", ["attention", "v"], ["hidden"]),
    ]
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, length])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    graph = helper.make_graph(nodes, "bert_like", ids,
                              [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, length, HIDDEN])],
                              constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
