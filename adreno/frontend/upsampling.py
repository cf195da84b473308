"""A ConvTranspose whose kernel equals its stride, rewritten as a 1x1 Conv and a pixel shuffle.

With kernel == stride (and no padding, no output_padding, dilation 1, group 1) the output's kh x kw blocks do not
overlap: input pixel (h, w) alone writes block (h, w), Y[n, co, h*kh + i, w*kw + j] = b[co] + sum over ci of
X[n, ci, h, w] * W[ci, co, i, j]. That is a 1x1 Conv with Cout*kh*kw output channels, ordered (co, i, j), followed
by a Reshape to [N, Cout, kh, kw, H, W], a Transpose to [N, Cout, H, kh, W, kw] and a Reshape to
[N, Cout, H*kh, W*kw]. TVM lowers the ConvTranspose as a dilated input convolved with the flipped kernel: kh*kw
times the work, nearly all of it on the zeros between the input pixels (the upsampling heads of PP-OCR's text
detectors); the 1x1 Conv takes the register-tiled conv schedules and the shuffle is a layout kernel.

Only a ConvTranspose whose weight (and bias, if any) are initializers, whose input shape is static and whose model
reads Reshape's shape as an input (opset >= 5) is rewritten; every other one is left to the importer as it is.
"""

from __future__ import annotations

import numpy as np

from .decompose import NodeBuilder
from .onnx_reading import attributes, opset
from .rewrites import static_shapes

SPATIAL = 2  # 2-D (NCHW) only: the form the upsampling heads have


def rewrite(model, shapes: dict[str, list[int]]):
    """A copy of `model` with its pixel-shuffle ConvTransposes rewritten (see the module doc), or `model` itself
    when it has none; `shapes` are the static input shapes the compile uses."""
    weights = {t.name: t for t in model.graph.initializer}
    if opset(model) < 5 or not any(_is_pixel_shuffle(n, weights) for n in model.graph.node):
        return model
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    known, version, nodes, replaced = static_shapes(out, shapes), opset(out), [], set()
    for index, node in enumerate(out.graph.node):
        x_shape = known.get(node.input[0])
        if not _is_pixel_shuffle(node, weights) or x_shape is None or len(x_shape) != SPATIAL + 2:
            nodes.append(node)
            continue
        weight = numpy_helper.to_array(weights[node.input[1]])
        bias = numpy_helper.to_array(weights[node.input[2]]) if len(node.input) > 2 and node.input[2] else None
        builder = NodeBuilder(out, f"upsampling{index}", version)
        _pixel_shuffle(builder, node, x_shape, weight, bias)
        nodes.extend(builder.nodes)
        replaced.update(node.input[1:])
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    unused = replaced - set(_names_read(out.graph))  # the ConvTransposes' own weights, unless shared
    kept = [t for t in out.graph.initializer if t.name not in unused]
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    return out


def _is_pixel_shuffle(node, weights: dict) -> bool:
    """Whether `node` is a 2-D ConvTranspose whose kernel equals its stride, with constant weights: blocks that do
    not overlap (any auto_pad pads nothing then: its total padding is kernel - stride)."""
    if node.op_type != "ConvTranspose" or node.input[1] not in weights:
        return False
    if len(node.input) > 2 and node.input[2] and node.input[2] not in weights:
        return False
    w_dims = list(weights[node.input[1]].dims)
    attrs = attributes(node)
    kernel, strides = list(attrs.get("kernel_shape") or w_dims[2:]), list(attrs.get("strides") or [1] * SPATIAL)
    return (len(w_dims) == SPATIAL + 2 and kernel == w_dims[2:] == strides and attrs.get("group", 1) == 1
            and not any(attrs.get("pads", [])) and not any(attrs.get("output_padding", []))
            and all(d == 1 for d in attrs.get("dilations", [])) and "output_shape" not in attrs)


def _names_read(graph):
    """Every value name `graph` reads: node inputs (in subgraphs too, which may read the outer initializers) and
    graph outputs."""
    yield from (v.name for v in graph.output)
    for node in graph.node:
        yield from node.input
        for attr in node.attribute:
            for subgraph in [attr.g] if attr.HasField("g") else attr.graphs:
                yield from _names_read(subgraph)


def _pixel_shuffle(b: NodeBuilder, node, x_shape: list[int], weight: np.ndarray, bias: np.ndarray | None) -> None:
    """Append to `b` the 1x1 Conv and the shuffle that compute ConvTranspose `node` (weight [Cin, Cout, kh, kw])."""
    n, _, height, width = x_shape
    channels_in, channels_out, kh, kw = weight.shape
    # output channel (co * kh + i) * kw + j of the 1x1 conv is block position (i, j) of channel co
    inputs = [node.input[0], b.constant(weight.transpose(1, 2, 3, 0).reshape(-1, channels_in, 1, 1))]
    if bias is not None:
        inputs.append(b.constant(np.repeat(bias, kh * kw)))
    blocks = b.reshape(b.op("Conv", inputs, kernel_shape=[1, 1]), [n, channels_out, kh, kw, height, width])
    shuffled = b.op("Transpose", [blocks], perm=[0, 1, 4, 2, 5, 3])  # [N, Cout, H, kh, W, kw]
    b.reshape(shuffled, [n, channels_out, height * kh, width * kw], node.output[0])
