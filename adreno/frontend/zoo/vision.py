"""Mobile vision blocks newer than MobileNetV2, small enough to compile in well under a minute, with the ops their
PyTorch exports contain: MobileViT (attention over unfolded patches: LayerNormalization, batched MatMul, scale,
Softmax over the last axis, SiLU MLP), MobileNetV3-small (squeeze-and-excitation gated by HardSigmoid, HardSwish)
and ConvNeXt (depthwise 7x7, LayerNormalization over the channels between two Transposes, GELU in its Erf form,
layer scale, residual). Every model takes batch 1.
"""
from __future__ import annotations

from functools import partial
from math import erf

import numpy as np

from .builder import GraphBuilder
from .cnn import inverted_residual

_erf = np.vectorize(erf, otypes=[np.float32])


def hardswish(g: GraphBuilder, x: str) -> str:
    v = g.values[x]
    return g.node("HardSwish", [x], v * np.clip(v + 3, 0, 6) / 6)


def hardsigmoid(g: GraphBuilder, x: str) -> str:
    """PyTorch's Hardsigmoid as it exports it: HardSigmoid(alpha=1/6, beta=0.5)."""
    return g.node("HardSigmoid", [x], np.clip(g.values[x] / 6 + 0.5, 0, 1), alpha=1 / 6, beta=0.5)


def gelu(g: GraphBuilder, x: str) -> str:
    """Exact GELU as PyTorch (opset < 20) exports it: x * 0.5 * (1 + Erf(x / sqrt(2)))."""
    scaled = g.node("Div", [x, g.param("sqrt2", np.sqrt(2.0))], g.values[x] / np.float32(np.sqrt(2.0)))
    shifted = g.add(g.node("Erf", [scaled], _erf(g.values[scaled])), g.param("one", 1.0))
    return g.mul(g.mul(x, shifted), g.param("half", 0.5))


def layer_norm(g: GraphBuilder, x: str) -> str:
    """LayerNormalization over the last axis, gamma ~1 and a small beta."""
    v, c = g.values[x], g.values[x].shape[-1]
    gamma, beta = 1.0 + 0.1 * g.rng.standard_normal(c), 0.05 * g.rng.standard_normal(c)
    out = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5) * gamma + beta
    return g.node("LayerNormalization", [x, g.param("ln_gamma", gamma), g.param("ln_beta", beta)], out, axis=-1,
                  epsilon=1e-5)


def layer_norm_channels(g: GraphBuilder, x: str) -> str:
    """LayerNorm over the channels of an NCHW map, the way a channels-last PyTorch LayerNorm exports it."""
    return g.transpose(layer_norm(g, g.transpose(x, [0, 2, 3, 1])), [0, 3, 1, 2])


def concat_channels(g: GraphBuilder, a: str, b: str) -> str:
    return g.node("Concat", [a, b], np.concatenate([g.values[a], g.values[b]], axis=1), axis=1)


# ------------------------------------------------------------------------------------------------------ MobileViT


def attention(g: GraphBuilder, x: str, heads: int) -> str:
    """Multi-head self-attention over (B, N, d): per-head Q, K, V projections, Q K^T scaled by 1 / sqrt(d_head),
    Softmax over the keys, times V, heads merged and projected."""
    batch, tokens, dim = g.values[x].shape
    head = dim // heads

    def split(y: str, perm: list[int]) -> str:  # (B, N, d) -> (B, h, N, dh) or, for K, (B, h, dh, N)
        return g.transpose(g.reshape(g.linear(y, dim), [batch, tokens, heads, head]), perm)

    q, k, v = split(x, [0, 2, 1, 3]), split(x, [0, 2, 3, 1]), split(x, [0, 2, 1, 3])
    scores = g.mul(g.matmul(q, k), g.param("scale", 1 / np.sqrt(head)))
    merged = g.transpose(g.matmul(g.softmax(scores, axis=-1), v), [0, 2, 1, 3])
    return g.linear(g.reshape(merged, [batch, tokens, dim]), dim)


def transformer_layer(g: GraphBuilder, x: str, heads: int) -> str:
    """Pre-norm encoder layer: x + attention(LN(x)), then + MLP(LN(.)) with a 2x SiLU hidden layer (MobileViT's)."""
    x = g.add(x, attention(g, layer_norm(g, x), heads))
    dim = g.values[x].shape[-1]
    return g.add(x, g.linear(g.silu(g.linear(layer_norm(g, x), 2 * dim)), dim))


def mobilevit_block(g: GraphBuilder, x: str, dim: int, layers: int, heads: int, patch: int = 2) -> str:
    """Local 3x3 conv+BN+SiLU and 1x1 conv to `dim`; unfold into (pixels per patch, patches, dim); transformer
    layers and a LayerNorm; fold back to the map; 1x1 conv+BN+SiLU back to the channels; concat with the block's
    input and fuse with a 3x3 conv+BN+SiLU."""
    _, c, h, w = g.values[x].shape
    rows, cols = h // patch, w // patch
    y = g.conv(g.silu(g.conv_bn(x, c, 3)), dim, 1)
    y = g.transpose(g.reshape(y, [dim, rows, patch, cols, patch]), [2, 4, 1, 3, 0])
    y = g.reshape(y, [patch * patch, rows * cols, dim])
    for _ in range(layers):
        y = transformer_layer(g, y, heads)
    y = g.transpose(g.reshape(layer_norm(g, y), [patch, patch, rows, cols, dim]), [4, 2, 0, 3, 1])
    y = g.silu(g.conv_bn(g.reshape(y, [1, dim, h, w]), c, 1))
    return g.silu(g.conv_bn(concat_channels(g, x, y), c, 3))


def mobilevit(g: GraphBuilder, x: str, output: str) -> str:
    """MobileViT-XS-style at 64x64, cut to compile fast: stem, MobileNetV2 blocks (one with a residual), a
    MobileViT block at 8x8 and one at 4x4, one transformer layer each."""
    x = g.silu(g.conv_bn(x, 16, 3, stride=2))
    for cout, stride in ((16, 1), (24, 2), (32, 2)):
        x = inverted_residual(g, x, cout, stride, 2)
    x = inverted_residual(g, mobilevit_block(g, x, 48, 1, heads=2), 48, 2, 2)
    x = mobilevit_block(g, x, 64, 1, heads=2)
    return g.classifier(g.silu(g.conv_bn(x, 96, 1)), 100, output)


# ------------------------------------------------------------------------------------------------- MobileNetV3


# MobileNetV3-small bottlenecks (the first six of the published table): kernel, expanded channels, output
# channels, squeeze-and-excitation, HardSwish (else ReLU), stride.
MOBILENETV3_SMALL_SETTINGS = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
                              (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 120, 48, True, True, 1)]


def bottleneck(g: GraphBuilder, x: str, kernel: int, expanded: int, cout: int, se: bool, hard_swish: bool,
               stride: int) -> str:
    """1x1 expand conv+BN+act (none when nothing expands), kxk depthwise conv+BN+act, SE (squeezed to a quarter,
    rounded to 8, ReLU inside, HardSigmoid gate), 1x1 project conv+BN, residual when the shape allows."""
    act = partial(hardswish, g) if hard_swish else g.relu
    cin = g.values[x].shape[1]
    y = act(g.conv_bn(x, expanded, 1)) if expanded != cin else x
    y = act(g.conv_bn(y, expanded, kernel, stride, group=expanded))
    if se:
        y = g.squeeze_excite(y, max(8, (expanded // 4 + 4) // 8 * 8), inner=g.relu, gate=partial(hardsigmoid, g))
    y = g.conv_bn(y, cout, 1)
    return g.add(x, y) if stride == 1 and cin == cout else y


def mobilenetv3_small(g: GraphBuilder, x: str, output: str) -> str:
    """Stem conv+BN+HardSwish, the bottlenecks, 1x1 head conv+BN+HardSwish, pool, Gemm 256 + HardSwish, Gemm."""
    x = hardswish(g, g.conv_bn(x, 16, 3, stride=2))
    for setting in MOBILENETV3_SMALL_SETTINGS:
        x = bottleneck(g, x, *setting)
    row = g.pooled_row(hardswish(g, g.conv_bn(x, 288, 1)))
    return g.gemm(hardswish(g, g.gemm(row, 256)), 100, output)


# ---------------------------------------------------------------------------------------------------- ConvNeXt


def convnext_block(g: GraphBuilder, x: str) -> str:
    """Depthwise 7x7 conv (bias), channels-last LayerNorm, Linear to 4x, GELU, Linear back, layer scale, back to
    NCHW, residual."""
    c = g.values[x].shape[1]
    y = g.transpose(g.conv(x, c, 7, group=c, bias=True), [0, 2, 3, 1])
    y = g.linear(gelu(g, g.linear(layer_norm(g, y), 4 * c)), c)
    y = g.mul(y, g.param("layer_scale", 0.5 + 0.1 * g.rng.standard_normal(c)))
    return g.add(x, g.transpose(y, [0, 3, 1, 2]))


def convnext(g: GraphBuilder, x: str, output: str) -> str:
    """Patchify stem (4x4 stride 4) + LayerNorm, 2 blocks at 32 channels, LayerNorm + 2x2 stride-2 downsampling,
    2 blocks at 64, GlobalAveragePool, LayerNorm, Gemm head."""
    x = layer_norm_channels(g, g.conv(x, 32, 4, stride=4, pad=0, bias=True))
    x = convnext_block(g, convnext_block(g, x))
    x = g.conv(layer_norm_channels(g, x), 64, 2, stride=2, pad=0, bias=True)
    x = convnext_block(g, convnext_block(g, x))
    return g.gemm(layer_norm(g, g.pooled_row(x)), 100, output)
