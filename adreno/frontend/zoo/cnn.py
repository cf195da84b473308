"""The convolutional bundled models: ResNet-18 (and one of its blocks), MobileNetV2, an EfficientNet-style SE
stack, a CRNN text recogniser and `tiny`, the smallest model of the test suite."""
from __future__ import annotations

import numpy as np

from .builder import GraphBuilder


def basic_block(g: GraphBuilder, x: str, cout: int, stride: int, output: str | None = None) -> str:
    """ResNet basic block: conv3x3-bn-relu-conv3x3-bn, plus an identity or 1x1/stride conv+BN shortcut, add, relu."""
    y = g.conv_bn(g.relu(g.conv_bn(x, cout, 3, stride)), cout, 3)
    shortcut = x if stride == 1 and g.values[x].shape[1] == cout else g.conv_bn(x, cout, 1, stride)
    return g.relu(g.add(shortcut, y), output)


def resnet18(g: GraphBuilder, x: str, output: str) -> str:
    x = g.maxpool(g.relu(g.conv_bn(x, 64, 7, stride=2)), 3, 2, pad=1)
    for stage, cout in enumerate([64, 128, 256, 512]):
        x = basic_block(g, basic_block(g, x, cout, 2 if stage else 1), cout, 1)
    return g.classifier(x, 1000, output)


# MobileNetV2 inverted-residual settings: expansion t, output channels c, repeats n, first stride s.
MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                        (6, 320, 1, 1)]


def inverted_residual(g: GraphBuilder, x: str, cout: int, stride: int, expand: int) -> str:
    """1x1 expand conv+BN+ReLU6 (none when t=1), 3x3 depthwise conv+BN+ReLU6, 1x1 linear project conv+BN, residual."""
    cin = g.values[x].shape[1]
    y = g.relu6(g.conv_bn(x, cin * expand, 1)) if expand != 1 else x
    y = g.conv_bn(g.relu6(g.conv_bn(y, cin * expand, 3, stride, group=cin * expand)), cout, 1)
    return g.add(x, y) if stride == 1 and cin == cout else y


def mobilenetv2(g: GraphBuilder, x: str, output: str) -> str:
    x = g.relu6(g.conv_bn(x, 32, 3, stride=2))
    for t, c, n, s in MOBILENETV2_SETTINGS:
        for i in range(n):
            x = inverted_residual(g, x, c, s if i == 0 else 1, t)
    return g.classifier(g.relu6(g.conv_bn(x, 1280, 1)), 1000, output)


# EfficientNet-style MBConv blocks: expansion t, output channels c, kernel k, stride s.
EFFICIENTNET_SETTINGS = [(1, 16, 3, 1), (4, 24, 3, 2), (4, 24, 3, 1), (4, 40, 5, 2)]


def _mbconv(g: GraphBuilder, x: str, cout: int, kernel: int, stride: int, expand: int) -> str:
    """1x1 expand conv+BN+SiLU (none when t=1), kxk depthwise conv+BN+SiLU, squeeze-and-excitation (squeezed to a
    quarter of the block's input channels), 1x1 linear project conv+BN, residual when the shape allows."""
    cin = g.values[x].shape[1]
    y = g.silu(g.conv_bn(x, cin * expand, 1)) if expand != 1 else x
    y = g.silu(g.conv_bn(y, cin * expand, kernel, stride, group=cin * expand))
    y = g.conv_bn(g.squeeze_excite(y, max(1, cin // 4)), cout, 1)
    return g.add(x, y) if stride == 1 and cin == cout else y


def efficientnet(g: GraphBuilder, x: str, output: str) -> str:
    x = g.silu(g.conv_bn(x, 16, 3, stride=2))
    for t, c, k, s in EFFICIENTNET_SETTINGS:
        x = _mbconv(g, x, c, k, s, t)
    return g.classifier(g.relu6(g.conv_bn(x, 128, 1)), 100, output)


def crnn(g: GraphBuilder, x: str, output: str) -> str:
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
    x = g.transpose(g.reshape(x, [n, c, steps]), [2, 0, 1])  # T x N x C
    hidden, bound = CRNN_HIDDEN, 1 / np.sqrt(CRNN_HIDDEN)
    weights = [g.param(name, g.rng.uniform(-bound, bound, shape)) for name, shape in (
        ("lstm_w", (2, 4 * hidden, c)), ("lstm_r", (2, 4 * hidden, hidden)), ("lstm_b", (2, 8 * hidden)))]
    y = g.evaluated("LSTM", [x, *weights], hidden_size=hidden, direction="bidirectional")  # T x 2 x N x hidden
    y = g.reshape(g.transpose(y, [0, 2, 1, 3]), [steps, n, 2 * hidden])
    w, b = g.he_normal((CRNN_CLASSES, 2 * hidden)).T, 0.1 * g.rng.standard_normal(CRNN_CLASSES)  # fan-in 2 hidden
    logits = g.add(g.matmul(y, g.param("fc_w", w)), g.param("fc_b", b))
    return g.softmax(logits, output, axis=2)


CRNN_HIDDEN, CRNN_CLASSES = 64, 37  # 26 letters, 10 digits and the CTC blank


def tiny(g: GraphBuilder, x: str, output: str) -> str:
    x = g.maxpool(g.relu(g.conv_bn(x, 16, 3)), 2, 2)
    y = g.conv_bn(g.relu6(g.conv_bn(x, 16, 3, group=16)), 16, 1)
    return g.softmax(g.classifier(g.add(x, y), 10), output)
