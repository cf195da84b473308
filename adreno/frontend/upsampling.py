"""A ConvTranspose rewritten as one regular Conv and a pixel shuffle (the sub-pixel decomposition).

Per spatial axis, a ConvTranspose with stride s and kernel k (dilation 1) writes its full output F (length
s*(H-1) + k) as F[s*h + i] += X[h] * W[i]. Output position s*q + r (phase r < s) then only gets the taps
i = r + s*m, from input h = q - m: F[s*q + r] = sum over m < T of X[q - m] * W[r + s*m], with T = ceil(k/s) and
W zero past k. That is a regular convolution (correlation) of X, padded by T-1 in front, with the T-tap sub-kernel
W[r + s*(T-1-t)], t < T. All s*s phases of a 2-D one are ONE Conv with Cout*sh*sw output channels, ordered
(co, rh, rw), and kernel Th x Tw; a Reshape to [N, Cout, sh, sw, Qh, Qw], a Transpose to [N, Cout, Qh, sh, Qw, sw]
and a Reshape to [N, Cout, Qh*sh, Qw*sw] interleave the phases, and a Slice crops that to the ConvTranspose's output
(F from pads_begin, s*(H-1) + output_padding + k - pads_begin - pads_end long; past F's end it is 0 + bias).
The Conv computes only the q the crop keeps: from q0 = pads_begin // s, its front padding T-1-q0.

With kernel == stride (no padding: the upsampling heads of PP-OCR's text detectors) T is 1, the Conv 1x1 and the
crop nothing. TVM lowers a ConvTranspose as its zero-dilated input convolved with the flipped kernel: s*s times the
work, most of it on the zeros (3x3 s2: 36 multiply-adds per input pixel and channel pair where the Conv does 16);
the Conv takes the register-tiled conv schedules and the shuffle is one layout kernel.

Only the forms `tests/test_upsampling.py` checks against onnxruntime are rewritten: 2-D, group 1, dilation 1, a
weight (and bias, if any) that is an initializer or Constant node, a static input shape, explicit pads below the
kernel (or auto_pad with kernel == stride, which pads nothing), output_padding below the stride, no output_shape,
and a model whose Reshape reads its shape as an input (opset >= 5). Every other one is left to the importer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decompose import NodeBuilder
from .onnx_reading import attributes, opset
from .rewrites import InferredShapes, constant

SPATIAL = 2  # 2-D (NCHW) only: the form the upsampling heads and decoders have


@dataclass(frozen=True)
class Axis:
    """One spatial axis of the rewrite: the Conv's `taps`, its padding (`before`, `after`) and its number of
    `outputs`, and the crop of the shuffled Conv output (`start`, `length`) that is the ConvTranspose's output."""

    stride: int
    taps: int
    before: int
    after: int
    outputs: int
    start: int
    length: int

    def cropped(self) -> bool:
        return self.start != 0 or self.stride * self.outputs != self.length


def axis(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, output_padding: int) -> Axis | None:
    """The rewrite of one spatial axis of input length `size` (see the module doc), or None outside the verified
    forms: pads in [0, kernel), output_padding in [0, stride), a non-empty output."""
    if not (0 <= pad_begin < kernel and 0 <= pad_end < kernel and 0 <= output_padding < stride):
        return None
    length = stride * (size - 1) + output_padding + kernel - pad_begin - pad_end
    if length <= 0:
        return None
    taps, first = -(-kernel // stride), pad_begin // stride
    last = -(-(pad_begin + length) // stride)  # one past the last q the crop reads
    return Axis(stride, taps, taps - 1 - first, last - size, last - first, pad_begin - stride * first, length)


def rewrite(model, shapes: InferredShapes):
    """A copy of `model` with its ConvTransposes rewritten (see the module doc), or `model` itself when none can
    be; `shapes` give its values' static shapes."""
    if opset(model) < 5 or not any(n.op_type == "ConvTranspose" for n in model.graph.node):
        return model
    known = shapes.of(model)
    plans = {index: plan for index, node in enumerate(model.graph.node)
             if node.op_type == "ConvTranspose" and (plan := _plan(model, node, known.get(node.input[0])))}
    if not plans:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    version, nodes, replaced = opset(out), [], set()
    for index, node in enumerate(out.graph.node):
        if index not in plans:
            nodes.append(node)
            continue
        builder = NodeBuilder(out, f"upsampling{index}", version)
        _sub_pixel(builder, node, *plans[index])
        nodes.extend(builder.nodes)
        replaced.update(node.input[1:])
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    _drop_unused(out.graph, replaced)
    shapes.replaced([model.graph.node[index] for index in plans])
    return out


def _plan(model, node, x_shape: list[int] | None) -> tuple | None:
    """(batch, weight, bias or None, the two `Axis`) for a ConvTranspose of the rewritten forms, else None."""
    weight = constant(model, node.input[1])
    has_bias = len(node.input) > 2 and bool(node.input[2])
    bias = constant(model, node.input[2]) if has_bias else None
    if weight is None or weight.ndim != SPATIAL + 2 or (has_bias and bias is None):
        return None
    if x_shape is None or len(x_shape) != SPATIAL + 2 or x_shape[1] != weight.shape[0]:
        return None
    attrs, kernel = attributes(node), list(weight.shape[2:])
    strides = list(attrs.get("strides") or [1] * SPATIAL)
    pads = list(attrs.get("pads") or [0] * 2 * SPATIAL)
    output_padding = list(attrs.get("output_padding") or [0] * SPATIAL)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad != "NOTSET":  # VALID pads nothing; SAME_* pads kernel - stride + output_padding in all
        if auto_pad != "VALID" and (kernel != strides or any(output_padding)):
            return None
        pads = [0] * 2 * SPATIAL
    if (list(attrs.get("kernel_shape") or kernel) != kernel or attrs.get("group", 1) != 1
            or any(d != 1 for d in attrs.get("dilations", [])) or "output_shape" in attrs):
        return None
    axes = [axis(x_shape[2 + d], kernel[d], strides[d], pads[d], pads[SPATIAL + d], output_padding[d])
            for d in range(SPATIAL)]
    return None if None in axes else (x_shape[0], weight, bias, axes)


def _sub_pixel(b: NodeBuilder, node, batch: int, weight: np.ndarray, bias: np.ndarray | None,
               axes: list[Axis]) -> None:
    """Append to `b` the Conv, shuffle and crop that compute ConvTranspose `node` (weight [Cin, Cout, kh, kw])."""
    channels_in, channels_out, kh, kw = weight.shape
    (sh, sw), (th, tw), (qh, qw) = [a.stride for a in axes], [a.taps for a in axes], [a.outputs for a in axes]
    padded = np.zeros((channels_in, channels_out, th * sh, tw * sw), weight.dtype)
    padded[:, :, :kh, :kw] = weight
    # tap r + s*m as axes [Cin, Cout, m_h, r_h, m_w, r_w]; the Conv reads tap m at kernel position T-1-m
    phases = padded.reshape(channels_in, channels_out, th, sh, tw, sw)[:, :, ::-1, :, ::-1, :]
    inputs = [node.input[0], b.constant(np.ascontiguousarray(
        phases.transpose(1, 3, 5, 0, 2, 4).reshape(-1, channels_in, th, tw)))]
    if bias is not None:
        inputs.append(b.constant(np.repeat(bias, sh * sw)))
    crops = [(2 + d, a) for d, a in enumerate(axes) if a.cropped()]
    shuffled = sh * sw > 1
    value = b.op("Conv", inputs, None if shuffled or crops else node.output[0], kernel_shape=[th, tw],
                 pads=[axes[0].before, axes[1].before, axes[0].after, axes[1].after])
    if shuffled:  # output channel (co * sh + rh) * sw + rw is phase (rh, rw) of channel co
        phased = b.reshape(value, [batch, channels_out, sh, sw, qh, qw])
        interleaved = b.op("Transpose", [phased], perm=[0, 1, 4, 2, 5, 3])  # [N, Cout, Qh, sh, Qw, sw]
        value = b.reshape(interleaved, [batch, channels_out, qh * sh, qw * sw], None if crops else node.output[0])
    for position, (dim, a) in enumerate(crops, start=1):
        value = b.slice(value, a.start, a.start + a.length, dim, node.output[0] if position == len(crops) else None)


def _drop_unused(graph, replaced: set[str]) -> None:
    """Drop the rewritten ConvTransposes' own weights, initializers or Constant nodes, unless something else reads
    them."""
    unused = replaced - set(_names_read(graph))
    kept = [t for t in graph.initializer if t.name not in unused]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = [n for n in graph.node if not (n.op_type == "Constant" and n.output[0] in unused)]
    del graph.node[:]
    graph.node.extend(nodes)


def _names_read(graph):
    """Every value name `graph` reads: node inputs (in subgraphs too, which may read the outer initializers) and
    graph outputs."""
    yield from (v.name for v in graph.output)
    for node in graph.node:
        yield from node.input
        for attr in node.attribute:
            for subgraph in [attr.g] if attr.HasField("g") else attr.graphs:
                yield from _names_read(subgraph)
