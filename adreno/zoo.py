"""Bundled example models, built in code as ONNX (opset 17) with seeded random weights; nothing is downloaded.

Conv and Gemm weights are He-normal (std sqrt(2 / fan_in)). Every convolution is followed by a real
inference-mode BatchNormalization, as in the published architectures: gamma ~1, small beta, and running
statistics calibrated the way training would leave them, i.e. measured on a seeded N(0, 1) calibration image
while the graph is built (each op is also evaluated in numpy). So every BN normalizes what actually reaches it
and activations stay O(1) through the whole network, as in a trained model. Running statistics are rounded to
float16 precision so that BLAS rounding differences between machines (almost always) leave the weights unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

from adreno.errors import ModelError

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


class _GraphBuilder:
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

    def conv(self, x: str, cout: int, kernel: int, stride: int = 1, group: int = 1) -> str:
        """Bias-free conv (a BN follows) with 'same' padding."""
        w = self.he_normal((cout, self.values[x].shape[1] // group, kernel, kernel))
        out = _conv2d(self.values[x], w, stride, kernel // 2, group)
        return self.node("Conv", [x, self.param("conv_w", w)], out, kernel_shape=[kernel, kernel],
                         strides=[stride, stride], pads=[kernel // 2] * 4, group=group)

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

    def squeeze_excite(self, x: str, squeezed: int) -> str:
        """x * Sigmoid(conv1x1(SiLU(conv1x1(GlobalAveragePool(x))))), the 1x1 convs with biases (no BN)."""
        c = self.values[x].shape[1]
        y = self.node("GlobalAveragePool", [x], self.values[x].mean(axis=(2, 3), keepdims=True))
        for cout, act in ((squeezed, self.silu), (c, self.sigmoid)):
            w, b = self.he_normal((cout, self.values[y].shape[1], 1, 1)), 0.1 * self.rng.standard_normal(cout)
            out = _conv2d(self.values[y], w, 1, 0, 1) + b.reshape(1, cout, 1, 1)
            y = act(self.node("Conv", [y, self.param("conv_w", w), self.param("conv_b", b)], out, kernel_shape=[1, 1]))
        return self.mul(x, y)

    def maxpool(self, x: str, kernel: int, stride: int, pad: int = 0) -> str:
        return self.node("MaxPool", [x], _windows(self.values[x], kernel, stride, pad, -np.inf).max(axis=(4, 5)),
                         kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4)

    def classifier(self, x: str, classes: int, output: str | None = None) -> str:
        """GlobalAveragePool -> Flatten -> Gemm(channels -> classes)."""
        pooled = self.node("GlobalAveragePool", [x], self.values[x].mean(axis=(2, 3), keepdims=True))
        flat = self.node("Flatten", [pooled], self.values[pooled].reshape(1, -1), axis=1)
        w, b = self.he_normal((classes, self.values[flat].shape[1])), 0.1 * self.rng.standard_normal(classes)
        return self.node("Gemm", [flat, self.param("fc_w", w), self.param("fc_b", b)], self.values[flat] @ w.T + b,
                         output, transB=1)

    def softmax(self, x: str, output: str | None = None) -> str:
        e = np.exp(self.values[x] - self.values[x].max(axis=1, keepdims=True))
        return self.node("Softmax", [x], e / e.sum(axis=1, keepdims=True), output, axis=1)

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
    topology: Callable[[_GraphBuilder, str, str], str]

    def build(self, seed: int = 0) -> onnx.ModelProto:
        """The ONNX model with weights (and calibration image) drawn from `seed`."""
        g = _GraphBuilder(seed, self.input_name, self.input_shape)
        return g.model(self.name, self.topology(g, self.input_name, self.output_name))


def _basic_block(g: _GraphBuilder, x: str, cout: int, stride: int, output: str | None = None) -> str:
    """ResNet basic block: conv3x3-bn-relu-conv3x3-bn, plus an identity or 1x1/stride conv+BN shortcut, add, relu."""
    y = g.conv_bn(g.relu(g.conv_bn(x, cout, 3, stride)), cout, 3)
    shortcut = x if stride == 1 and g.values[x].shape[1] == cout else g.conv_bn(x, cout, 1, stride)
    return g.relu(g.add(shortcut, y), output)


def _resnet18(g: _GraphBuilder, x: str, output: str) -> str:
    x = g.maxpool(g.relu(g.conv_bn(x, 64, 7, stride=2)), 3, 2, pad=1)
    for stage, cout in enumerate([64, 128, 256, 512]):
        x = _basic_block(g, _basic_block(g, x, cout, 2 if stage else 1), cout, 1)
    return g.classifier(x, 1000, output)


# MobileNetV2 inverted-residual settings: expansion t, output channels c, repeats n, first stride s.
MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                        (6, 320, 1, 1)]


def _inverted_residual(g: _GraphBuilder, x: str, cout: int, stride: int, expand: int) -> str:
    """1x1 expand conv+BN+ReLU6 (none when t=1), 3x3 depthwise conv+BN+ReLU6, 1x1 linear project conv+BN, residual."""
    cin = g.values[x].shape[1]
    y = g.relu6(g.conv_bn(x, cin * expand, 1)) if expand != 1 else x
    y = g.conv_bn(g.relu6(g.conv_bn(y, cin * expand, 3, stride, group=cin * expand)), cout, 1)
    return g.add(x, y) if stride == 1 and cin == cout else y


def _mobilenetv2(g: _GraphBuilder, x: str, output: str) -> str:
    x = g.relu6(g.conv_bn(x, 32, 3, stride=2))
    for t, c, n, s in MOBILENETV2_SETTINGS:
        for i in range(n):
            x = _inverted_residual(g, x, c, s if i == 0 else 1, t)
    return g.classifier(g.relu6(g.conv_bn(x, 1280, 1)), 1000, output)


# EfficientNet-style MBConv blocks: expansion t, output channels c, kernel k, stride s.
EFFICIENTNET_SETTINGS = [(1, 16, 3, 1), (4, 24, 3, 2), (4, 24, 3, 1), (4, 40, 5, 2)]


def _mbconv(g: _GraphBuilder, x: str, cout: int, kernel: int, stride: int, expand: int) -> str:
    """1x1 expand conv+BN+SiLU (none when t=1), kxk depthwise conv+BN+SiLU, squeeze-and-excitation (squeezed to a
    quarter of the block's input channels), 1x1 linear project conv+BN, residual when the shape allows."""
    cin = g.values[x].shape[1]
    y = g.silu(g.conv_bn(x, cin * expand, 1)) if expand != 1 else x
    y = g.silu(g.conv_bn(y, cin * expand, kernel, stride, group=cin * expand))
    y = g.conv_bn(g.squeeze_excite(y, max(1, cin // 4)), cout, 1)
    return g.add(x, y) if stride == 1 and cin == cout else y


def _efficientnet(g: _GraphBuilder, x: str, output: str) -> str:
    x = g.silu(g.conv_bn(x, 16, 3, stride=2))
    for t, c, k, s in EFFICIENTNET_SETTINGS:
        x = _mbconv(g, x, c, k, s, t)
    return g.classifier(g.relu6(g.conv_bn(x, 128, 1)), 100, output)


def _crnn(g: _GraphBuilder, x: str, output: str) -> str:
    """CRNN text recogniser (Shi et al.): conv-bn-relu stages pooled to height 1, the width as a sequence (T x 1 x
    C), a bidirectional LSTM (PyTorch's init: uniform within 1 / sqrt(hidden)), a per-step linear classifier and
    softmax over the characters."""
    for cout, (pool_h, pool_w) in zip((32, 64, 96, 128), ((2, 2), (2, 2), (2, 1), (4, 1))):
        x = g.relu(g.conv_bn(x, cout, 3))
        v = g.values[x]
        n, c, h, w = v.shape
        pooled = v.reshape(n, c, h // pool_h, pool_h, w // pool_w, pool_w).max(axis=(3, 5))
        x = g.node("MaxPool", [x], pooled, kernel_shape=[pool_h, pool_w], strides=[pool_h, pool_w])
    n, c, _, steps = g.values[x].shape
    x = g.node("Reshape", [x, g.param("shape", [n, c, steps], np.int64)], g.values[x].reshape(n, c, steps))
    x = g.node("Transpose", [x], g.values[x].transpose(2, 0, 1), perm=[2, 0, 1])  # T x N x C
    hidden, bound = CRNN_HIDDEN, 1 / np.sqrt(CRNN_HIDDEN)
    weights = [g.param(name, g.rng.uniform(-bound, bound, shape)) for name, shape in (
        ("lstm_w", (2, 4 * hidden, c)), ("lstm_r", (2, 4 * hidden, hidden)), ("lstm_b", (2, 8 * hidden)))]
    y = g.evaluated("LSTM", [x, *weights], hidden_size=hidden, direction="bidirectional")  # T x 2 x N x hidden
    y = g.node("Transpose", [y], g.values[y].transpose(0, 2, 1, 3), perm=[0, 2, 1, 3])
    y = g.node("Reshape", [y, g.param("shape", [steps, n, 2 * hidden], np.int64)],
               g.values[y].reshape(steps, n, 2 * hidden))
    w, b = g.he_normal((CRNN_CLASSES, 2 * hidden)).T, 0.1 * g.rng.standard_normal(CRNN_CLASSES)  # fan-in 2 hidden
    logits = g.node("MatMul", [y, g.param("fc_w", w)], g.values[y] @ w)
    logits = g.node("Add", [logits, g.param("fc_b", b)], g.values[logits] + b)
    e = np.exp(g.values[logits] - g.values[logits].max(axis=2, keepdims=True))
    return g.node("Softmax", [logits], e / e.sum(axis=2, keepdims=True), output, axis=2)


CRNN_HIDDEN, CRNN_CLASSES = 64, 37  # 26 letters, 10 digits and the CTC blank


def _tiny(g: _GraphBuilder, x: str, output: str) -> str:
    x = g.maxpool(g.relu(g.conv_bn(x, 16, 3)), 2, 2)
    y = g.conv_bn(g.relu6(g.conv_bn(x, 16, 3, group=16)), 16, 1)
    return g.softmax(g.classifier(g.add(x, y), 10), output)


MODELS: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("resnet18", "ResNet-18 (ImageNet topology, 1000 classes)", "input", (1, 3, 224, 224),
              "logits", (1, 1000), _resnet18),
    ModelSpec("mobilenetv2", "MobileNetV2, width 1.0 (inverted residuals, depthwise convs, ReLU6)", "input",
              (1, 3, 224, 224), "logits", (1, 1000), _mobilenetv2),
    ModelSpec("resnet18_block", "one ResNet basic block at 64x56x56 (conv-bn-relu-conv-bn-add-relu)", "input",
              (1, 64, 56, 56), "output", (1, 64, 56, 56), lambda g, x, output: _basic_block(g, x, 64, 1, output)),
    ModelSpec("efficientnet_se", "EfficientNet-style: 4 MBConv blocks with squeeze-and-excitation, SiLU, ReLU6 head, "
              "100 classes", "input", (1, 3, 96, 96), "logits", (1, 100), _efficientnet),
    ModelSpec("crnn", "CRNN text recogniser: 4 conv-bn-relu-maxpool stages to height 1, bidirectional LSTM (64), "
              "per-step linear + softmax over 37 characters", "input", (1, 1, 32, 100), "probs",
              (25, 1, CRNN_CLASSES), _crnn),
    ModelSpec("tiny", "small test model: conv, BN, maxpool, depthwise+ReLU6, 1x1 conv, residual, GAP, gemm, softmax",
              "input", (1, 3, 32, 32), "probs", (1, 10), _tiny),
]}


def list_models() -> list[ModelSpec]:
    """All bundled models, in table order."""
    return list(MODELS.values())


def get_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """Build the bundled model `name` with weights drawn from `seed`."""
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; bundled models: {', '.join(MODELS)}")
    return MODELS[name].build(seed)


def save_model(name: str, path: str | Path, seed: int = 0) -> Path:
    """Build the bundled model `name` and write it to `path` as an .onnx file; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(get_model(name, seed), path)
    return path
