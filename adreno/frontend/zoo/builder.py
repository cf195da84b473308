"""The graph builder of the bundled models (`adreno.frontend.zoo`): ONNX (opset 17) with seeded random weights, each op
also evaluated in numpy so that the weights can be calibrated; nothing is downloaded.

Conv and Gemm weights are He-normal (std sqrt(2 / fan_in)). Every convolution is followed by a real
inference-mode BatchNormalization, as in the published architectures: gamma ~1, small beta, and running
statistics calibrated the way training would leave them, i.e. measured on a seeded N(0, 1) calibration image
while the graph is built (each op is also evaluated in numpy). So every BN normalizes what actually reaches it
and activations stay O(1) through the whole network, as in a trained model. Running statistics are rounded to
float16 precision so that BLAS rounding differences between machines (almost always) leave the weights unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper


OPSET, IR_VERSION = 17, 8  # IR 8 is the IR of opset 17: loadable by every onnxruntime that runs opset 17


def _windows(x: np.ndarray, kernel: int, stride: int, pad: int, fill: float) -> np.ndarray:
    """(N, C, H, W) -> (N, C, Ho, Wo, k, k) sliding windows of the padded input."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    return sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]


def _conv2d(x: np.ndarray, w: np.ndarray, stride: int, pad: int, group: int) -> np.ndarray:
    """Grouped 2-D convolution (ONNX Conv semantics) as one batched im2col matmul per group."""
    (n, _, _, _), (cout, cin_g, k, _) = x.shape, w.shape
    win = _windows(x, k, stride, pad, 0.0)
    ho, wo = win.shape[2:4]
    cols = win.reshape(n, group, cin_g, ho, wo, k, k).transpose(0, 1, 3, 4, 2, 5, 6).reshape(n, group, ho * wo, -1)
    out = cols @ w.reshape(group, cout // group, -1).transpose(0, 2, 1)  # (n, group, ho*wo, cout/group)
    return out.transpose(0, 1, 3, 2).reshape(n, cout, ho, wo)


class GraphBuilder:
    """Appends ONNX nodes and seeded initializers, evaluating each op in numpy on a calibration image.

    Each method returns the name of the value it produced; `values[name]` holds its calibration activation.
    """

    def __init__(self, seed: int, input_name: str, input_shape: tuple[int, ...]):
        self.rng, self.nodes, self.initializers, self.input_name = np.random.default_rng(seed), [], [], input_name
        self.values = {input_name: self.rng.standard_normal(input_shape, dtype=np.float32)}
        self.relu6_bounds: list[str] | None = None

    def param(self, prefix: str, value: np.ndarray, dtype=np.float32) -> str:
        name = f"{prefix}_{len(self.initializers)}"
        self.values[name] = np.asarray(value, dtype=dtype)
        self.initializers.append(numpy_helper.from_array(self.values[name], name))
        return name

    def node(self, op: str, inputs: list[str], value: np.ndarray, output: str | None = None, **attrs) -> str:
        output = output or f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [output], name=f"{op}_{len(self.nodes)}", **attrs))
        self.values[output] = value.astype(np.float32)
        return output

    def evaluated(self, op: str, inputs: list[str], **attrs) -> str:
        """A node whose calibration value ONNX's reference implementation computes (for ops without a numpy line
        here: LSTM)."""
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph([helper.make_node(op, inputs, ["y"], **attrs)], op,
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in inputs],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        value = ReferenceEvaluator(probe).run(None, {n: self.values[n] for n in inputs})[0]
        return self.node(op, inputs, value, **attrs)

    def he_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / np.prod(shape[1:])))

    def conv(self, x: str, cout: int, kernel: int, stride: int = 1, group: int = 1, pad: int | None = None,
             bias: bool = False) -> str:
        """Conv with 'same' padding unless `pad` is given; bias-free by default (a BN follows)."""
        pad = kernel // 2 if pad is None else pad
        w = self.he_normal((cout, self.values[x].shape[1] // group, kernel, kernel))
        out, inputs = _conv2d(self.values[x], w, stride, pad, group), [x, self.param("conv_w", w)]
        if bias:
            b = 0.1 * self.rng.standard_normal(cout)
            out, inputs = out + b.reshape(1, cout, 1, 1), [*inputs, self.param("conv_b", b)]
        return self.node("Conv", inputs, out, kernel_shape=[kernel, kernel], strides=[stride, stride],
                         pads=[pad] * 4, group=group)

    def bn(self, x: str) -> str:
        """Inference BatchNormalization whose running mean/var are the statistics of its calibration input."""
        v, c = self.values[x], self.values[x].shape[1]
        gamma, beta = 1.0 + 0.1 * self.rng.standard_normal(c), 0.05 * self.rng.standard_normal(c)
        mean, var = v.mean((0, 2, 3)), np.maximum(v.var((0, 2, 3)), 1e-3)
        mean, var = mean.astype(np.float16).astype(np.float32), var.astype(np.float16).astype(np.float32)
        scale = (gamma / np.sqrt(var + 1e-5)).reshape(1, c, 1, 1)
        out = (v - mean.reshape(1, c, 1, 1)) * scale + beta.reshape(1, c, 1, 1)
        params = zip(("bn_gamma", "bn_beta", "bn_mean", "bn_var"), (gamma, beta, mean, var))
        return self.node("BatchNormalization", [x, *(self.param(p, a) for p, a in params)], out, epsilon=1e-5)

    def conv_bn(self, x: str, cout: int, kernel: int, stride: int = 1, group: int = 1) -> str:
        return self.bn(self.conv(x, cout, kernel, stride, group))

    def relu(self, x: str, output: str | None = None) -> str:
        return self.node("Relu", [x], np.maximum(self.values[x], 0), output)

    def relu6(self, x: str) -> str:
        """ReLU6 as opset-17 Clip, whose bounds are inputs (one shared pair of scalar initializers)."""
        self.relu6_bounds = self.relu6_bounds or [self.param("clip_min", 0.0), self.param("clip_max", 6.0)]
        return self.node("Clip", [x, *self.relu6_bounds], np.clip(self.values[x], 0, 6))

    def add(self, a: str, b: str) -> str: return self.node("Add", [a, b], self.values[a] + self.values[b])

    def mul(self, a: str, b: str) -> str: return self.node("Mul", [a, b], self.values[a] * self.values[b])

    def sigmoid(self, x: str) -> str: return self.node("Sigmoid", [x], 1 / (1 + np.exp(-self.values[x])))

    def silu(self, x: str) -> str:
        """SiLU (swish) as exporters write it: x * Sigmoid(x)."""
        return self.mul(x, self.sigmoid(x))

    def squeeze_excite(self, x: str, squeezed: int, inner: Callable[[str], str] | None = None,
                       gate: Callable[[str], str] | None = None) -> str:
        """x * gate(conv1x1(inner(conv1x1(GlobalAveragePool(x))))), the 1x1 convs with biases (no BN); `inner`
        SiLU and `gate` Sigmoid unless given (EfficientNet's; MobileNetV3 has ReLU and HardSigmoid)."""
        c = self.values[x].shape[1]
        y = self.node("GlobalAveragePool", [x], self.values[x].mean(axis=(2, 3), keepdims=True))
        for cout, act in ((squeezed, inner or self.silu), (c, gate or self.sigmoid)):
            y = act(self.conv(y, cout, 1, bias=True))
        return self.mul(x, y)

    def reshape(self, x: str, shape: list[int]) -> str:
        return self.node("Reshape", [x, self.param("shape", shape, np.int64)], self.values[x].reshape(shape))

    def transpose(self, x: str, perm: list[int]) -> str:
        return self.node("Transpose", [x], self.values[x].transpose(perm), perm=perm)

    def matmul(self, a: str, b: str) -> str:
        return self.node("MatMul", [a, b], self.values[a] @ self.values[b])

    def linear(self, x: str, cout: int) -> str:
        """MatMul by a (features, cout) weight of std sqrt(1 / features), then Add a bias: PyTorch's Linear
        on a tensor of rank > 2 as it exports it."""
        features = self.values[x].shape[-1]
        w = self.rng.standard_normal((features, cout), dtype=np.float32) * np.float32(np.sqrt(1.0 / features))
        y = self.matmul(x, self.param("fc_w", w))
        return self.add(y, self.param("fc_b", 0.1 * self.rng.standard_normal(cout)))

    def maxpool(self, x: str, kernel: int, stride: int, pad: int = 0) -> str:
        return self.node("MaxPool", [x], _windows(self.values[x], kernel, stride, pad, -np.inf).max(axis=(4, 5)),
                         kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4)

    def pooled_row(self, x: str) -> str:
        """GlobalAveragePool -> Flatten: the (1, channels) feature row of a map."""
        pooled = self.node("GlobalAveragePool", [x], self.values[x].mean(axis=(2, 3), keepdims=True))
        return self.node("Flatten", [pooled], self.values[pooled].reshape(1, -1), axis=1)

    def classifier(self, x: str, classes: int, output: str | None = None) -> str:
        """GlobalAveragePool -> Flatten -> Gemm(channels -> classes)."""
        return self.gemm(self.pooled_row(x), classes, output)

    def gemm(self, x: str, cout: int, output: str | None = None) -> str:
        """Gemm(features -> cout) of a (1, features) row, He-normal weight and a bias."""
        w, b = self.he_normal((cout, self.values[x].shape[1])), 0.1 * self.rng.standard_normal(cout)
        return self.node("Gemm", [x, self.param("fc_w", w), self.param("fc_b", b)], self.values[x] @ w.T + b,
                         output, transB=1)

    def softmax(self, x: str, output: str | None = None, axis: int = 1) -> str:
        v = self.values[x]
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return self.node("Softmax", [x], e / e.sum(axis=axis, keepdims=True), output, axis=axis)

    def model(self, name: str, output: str) -> onnx.ModelProto:
        inp, out = (helper.make_tensor_value_info(n, TensorProto.FLOAT, self.values[n].shape)
                    for n in (self.input_name, output))
        graph = helper.make_graph(self.nodes, name, [inp], [out], self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="adreno.zoo")
        model.ir_version = IR_VERSION
        return model


@dataclass(frozen=True)
class ModelSpec:
    """A bundled model: its input/output contract and `topology(builder, input, output_name)`, which adds its nodes."""
    name: str
    description: str
    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    topology: Callable[[GraphBuilder, str, str], str]

    def build(self, seed: int = 0) -> onnx.ModelProto:
        """The ONNX model with weights (and calibration image) drawn from `seed`."""
        g = GraphBuilder(seed, self.input_name, self.input_shape)
        return g.model(self.name, self.topology(g, self.input_name, self.output_name))
