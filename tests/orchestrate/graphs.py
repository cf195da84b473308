"""Small ONNX graphs with the composite operators fission splits, built with onnx.helper and seeded weights."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, weights, opset=20):
    """A checked model; every graph here keeps its input's shape at the output."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, inputs[0][1]) for n in outputs],
                              [numpy_helper.from_array(w, n) for n, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _w(rng, *shape):
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def layernorm_gelu_matmul(seed=0):
    """A transformer MLP: LayerNorm over the channels, MatMul, Gelu, MatMul."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["n", "w1"], ["h"]), helper.make_node("Gelu", ["h"], ["a"]),
             helper.make_node("MatMul", ["a", "w2"], ["y"])]
    return _model(nodes, [("x", [1, 16, 32])], ["y"],
                  {"g": _w(rng, 32) + 1, "b": _w(rng, 32), "w1": _w(rng, 32, 64), "w2": _w(rng, 64, 32)})


def attention(seed=0):
    """Single-head attention: softmax(q k^T * scale) v over 16 tokens of width 32."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    return _model(nodes, [("x", [1, 16, 32])], ["y"],
                  {"wq": _w(rng, 32, 32), "wk": _w(rng, 32, 32), "wv": _w(rng, 32, 32),
                   "scale": np.array(32 ** -0.5, np.float32)})


def se_hardswish(seed=0):
    """MobileNetV3's squeeze-and-excitation with HardSigmoid, then HardSwish, then a SiLU written as x*sigmoid(x)."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node("Conv", ["p", "w1", "b1"], ["r"]),
             helper.make_node("Relu", ["r"], ["rr"]), helper.make_node("Conv", ["rr", "w2", "b2"], ["e"]),
             helper.make_node("HardSigmoid", ["e"], ["es"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["x", "es"], ["se"]), helper.make_node("HardSwish", ["se"], ["hs"]),
             helper.make_node("Sigmoid", ["hs"], ["sg"]), helper.make_node("Mul", ["hs", "sg"], ["y"])]
    return _model(nodes, [("x", [1, 16, 8, 8])], ["y"],
                  {"w1": _w(rng, 4, 16, 1, 1), "b1": _w(rng, 4), "w2": _w(rng, 16, 4, 1, 1), "b2": _w(rng, 16)})


def softmax_any_axis(seed=0):
    """Softmax over axis 1 of a 4-D tensor, then LogSoftmax over the last axis."""
    del seed
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=1), helper.make_node("LogSoftmax", ["s"], ["y"], axis=-1)]
    return _model(nodes, [("x", [2, 5, 3, 7])], ["y"], {})


GRAPHS = {"layernorm_gelu_matmul": layernorm_gelu_matmul, "attention": attention, "se_hardswish": se_hardswish,
          "softmax_any_axis": softmax_any_axis}
