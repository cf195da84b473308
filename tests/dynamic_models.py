"""Models with dynamic input sizes, built with onnx.helper (no torch here), seeded weights: a BERT-style text model
(token ids, an attention mask and token types of a dynamic length: embedding Gathers, one masked self-attention) and
a PP-OCR-rec-style recogniser (a text line of a dynamic width: convs pooled to height 1, the width as a sequence,
an LSTM, per-step character probabilities as CTC decodes them)."""

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


OCR_HEIGHT, OCR_CLASSES = 8, 11  # 10 characters and the CTC blank


def ocr_like(width: int | str = "width") -> onnx.ModelProto:
    """x [1, 3, 8, width] -> probs [width / 4, 1, 11]: conv 3x3 (8) ReLU, max pool 2x2, conv 3x3 (16) ReLU, max pool
    (4, 2) to height 1, Squeeze, Transpose to T x 1 x 16, an LSTM (16), MatMul + Add, Softmax."""
    rng = np.random.default_rng(1)

    def weight(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    hidden = 16
    constants = [weight("conv1_w", 8, 3, 3, 3), weight("conv1_b", 8, scale=0.1), weight("conv2_w", 16, 8, 3, 3),
                 weight("conv2_b", 16, scale=0.1), weight("lstm_w", 1, 4 * hidden, 16),
                 weight("lstm_r", 1, 4 * hidden, hidden), weight("lstm_b", 1, 8 * hidden, scale=0.1),
                 weight("fc_w", hidden, OCR_CLASSES), weight("fc_b", OCR_CLASSES, scale=0.1),
                 numpy_helper.from_array(np.array([2], np.int64), "axis_2"),
                 numpy_helper.from_array(np.array([1], np.int64), "axis_1")]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1]), node("Relu", ["c1"], ["r1"]),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1]), node("Relu", ["c2"], ["r2"]),
        node("MaxPool", ["r2"], ["p2"], kernel_shape=[OCR_HEIGHT // 2, 2], strides=[OCR_HEIGHT // 2, 2]),
        node("Squeeze", ["p2", "axis_2"], ["features"]),
        node("Transpose", ["features"], ["sequence"], perm=[2, 0, 1]),
        node("LSTM", ["sequence", "lstm_w", "lstm_r", "lstm_b"], ["y"], hidden_size=hidden),
        node("Squeeze", ["y", "axis_1"], ["states"]),
        node("MatMul", ["states", "fc_w"], ["logits0"]), node("Add", ["logits0", "fc_b"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=2),
    ]
    steps = width // 4 if isinstance(width, int) else "steps"
    graph = helper.make_graph(nodes, "ocr_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               [1, 3, OCR_HEIGHT, width])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [steps, 1, OCR_CLASSES])],
                              constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
