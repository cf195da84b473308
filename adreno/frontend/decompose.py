"""ONNX forms TVM 0.27's importer has no converter for, decomposed before import into ops the compiler schedules.

- BatchNormalization with training_mode=1 (opset >= 14): Y is normalised with the batch's own statistics (mean and
  population variance over every axis but the channels, ReduceMean), and the running_mean / running_var outputs
  are `input * momentum + batch statistic * (1 - momentum)`, as the ONNX reference computes them.
- MaxPool (2-D) with its second output, the argmax Indices: Y stays a MaxPool. The indices come from the K =
  kh x kw taps of every window: the input padded with -inf and flattened per channel, one Gather with a constant
  index table takes every window's taps (N x C x K x OH x OW; one op, so the fused kernel's name stays short for
  any kernel size), ArgMax over the taps (the first of equal maxima, the reference's scan order:
  rows, then columns); the flat input index of tap k at output (oh, ow) of channel (n, c) is a constant part per
  channel and per output position plus a constant per tap, so a Gather of the taps' offsets and two broadcast Adds
  finish it (int64): ((n C + c) H + h) W + w for storage_order 0, (n C + c) H W + h + w H for storage_order 1.
  A window whose maximum is -inf may name a padded tap (the reference skips padding).
- LayerNormalization whose Mean or InvStdDev output is used (the importer computes Y but returns placeholder zeros
  for those two): ReduceMean over the normalised axes [axis, rank), the centred value, its mean square, InvStdDev =
  1 / Sqrt(variance + epsilon), Y = centred x InvStdDev x Scale (+ B); Mean and InvStdDev keep the reduced axes as
  1, as the spec's shapes say. It computes in the input's type (stash_type float32 is that type for float32
  models). A LayerNormalization whose only output is Y stays one node (TVM's layer_norm).
- LSTM, GRU and RNN: unrolled at the compiled sequence length into MatMuls and gate arithmetic
  (`adreno.frontend.recurrent`).

`decompose(model, shapes)` returns a rewritten copy, or the model itself when nothing applies; `shapes`
(`rewrites.InferredShapes`) give the values' static shapes. Forms it cannot decompose (1-D/3-D pools, unknown
shapes, opset < 10) are refused in one line naming the node.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOpError
from .onnx_reading import attributes, opset
from .recurrent import RECURRENT_OPS, unroll
from .rewrites import InferredShapes


def decompose(model, shapes: InferredShapes):
    targets = [n for n in model.graph.node
               if _training_batchnorm(n) or _maxpool_with_indices(n) or _layernorm_with_statistics(n)
               or n.op_type in RECURRENT_OPS]
    if not targets:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    known = shapes.of(out)
    version = opset(out)
    nodes = []
    for index, node in enumerate(out.graph.node):
        label = f"node {node.name or f'#{index}'} ({node.op_type})"
        builder = NodeBuilder(out, f"decomposed{index}", version)
        if _training_batchnorm(node):
            _batchnorm_training(builder, node, known, label)
        elif _maxpool_with_indices(node):
            _maxpool_indices(builder, node, known, label)
        elif _layernorm_with_statistics(node):
            _layernorm(builder, node, known, label)
        elif node.op_type in RECURRENT_OPS:
            unroll(builder, node, known, label)
        else:
            nodes.append(node)
            continue
        nodes.extend(builder.nodes)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    shapes.replaced(targets)
    return out


def _training_batchnorm(node) -> bool:
    return node.op_type == "BatchNormalization" and bool(attributes(node).get("training_mode", 0))


def _maxpool_with_indices(node) -> bool:
    return node.op_type == "MaxPool" and len(node.output) > 1 and bool(node.output[1])


def _layernorm_with_statistics(node) -> bool:
    return node.op_type == "LayerNormalization" and any(node.output[1:])


class NodeBuilder:
    """Appends nodes and constant initializers with unique names (`prefix`_1, `prefix`_2, ...), for the passes
    that replace one node by several (here and `onnx_quantized`)."""

    def __init__(self, model, prefix: str, opset: int):
        self.model, self.prefix, self.opset, self.nodes, self.count = model, prefix, opset, [], 0

    def name(self) -> str:
        self.count += 1
        return f"{self.prefix}_{self.count}"

    def constant(self, value) -> str:
        from onnx import numpy_helper

        name = self.name()
        self.model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        from onnx import helper

        output = output or self.name()
        self.nodes.append(helper.make_node(op_type, inputs, [output], **attrs))
        return output

    def reduce_mean(self, value: str, axes: list[int], output: str | None = None) -> str:
        """ReduceMean keeping the reduced axes; `axes` became an input in opset 18."""
        if self.opset >= 18:
            return self.op("ReduceMean", [value, self.constant(np.array(axes, np.int64))], output, keepdims=1)
        return self.op("ReduceMean", [value], output, axes=axes, keepdims=1)

    def reshape(self, value: str, shape: list[int], output: str | None = None) -> str:
        return self.op("Reshape", [value, self.constant(np.array(shape, np.int64))], output)

    def slice(self, value: str, start: int, end: int, axis: int, output: str | None = None) -> str:
        """value[start:end] along `axis`; starts, ends and axes became inputs in opset 10."""
        if self.opset < 10:
            return self.op("Slice", [value], output, starts=[start], ends=[end], axes=[axis])
        bounds = [self.constant(np.array([v], np.int64)) for v in (start, end, axis)]
        return self.op("Slice", [value, *bounds], output)

    def clip(self, value: str, low: float, high: float) -> str:
        """Clip to [low, high]; the bounds became inputs in opset 11."""
        if self.opset < 11:
            return self.op("Clip", [value], min=low, max=high)
        return self.op("Clip", [value, self.constant(np.float32(low)), self.constant(np.float32(high))])


def _batchnorm_training(b: NodeBuilder, node, shapes: dict, label: str) -> None:
    x_shape = shapes.get(node.input[0])
    if x_shape is None or len(x_shape) < 2 or b.opset < 14:
        raise UnsupportedOpError(f"{label}: training mode is computed for opset >= 14 and an input of static shape "
                                 "only; export the model for inference (PyTorch: model.eval())")
    attrs = attributes(node)
    epsilon, momentum = float(attrs.get("epsilon", 1e-5)), float(attrs.get("momentum", 0.9))
    x, scale, bias, running_mean, running_var = node.input[:5]
    channels, rank = x_shape[1], len(x_shape)
    axes, per_channel = [0, *range(2, rank)], [channels, *[1] * (rank - 2)]
    mean = b.reduce_mean(x, axes)  # 1 x C x 1 ...
    centred = b.op("Sub", [x, mean])
    var = b.reduce_mean(b.op("Mul", [centred, centred]), axes)
    std = b.op("Sqrt", [b.op("Add", [var, b.constant(np.float32(epsilon))])])
    normalised = b.op("Div", [centred, std])
    scaled = b.op("Mul", [normalised, b.reshape(scale, per_channel)])
    b.op("Add", [scaled, b.reshape(bias, per_channel)], node.output[0])
    keep, take = b.constant(np.float32(momentum)), b.constant(np.float32(1 - momentum))
    for position, (old, batch) in enumerate([(running_mean, mean), (running_var, var)], start=1):
        if len(node.output) > position and node.output[position]:
            blended = b.op("Mul", [b.reshape(batch, [channels]), take])
            b.op("Add", [b.op("Mul", [old, keep]), blended], node.output[position])


def _layernorm(b: NodeBuilder, node, shapes: dict, label: str) -> None:
    x_shape = shapes.get(node.input[0])
    if x_shape is None:
        raise UnsupportedOpError(f"{label}: its Mean/InvStdDev outputs are computed for an input of static shape "
                                 "only; give --input-shape, or use only its first output")
    attrs, rank = attributes(node), len(x_shape)
    axes = list(range(int(attrs.get("axis", -1)) % rank, rank))
    statistics = [*node.output[1:3], "", ""][:2]  # Mean, InvStdDev: "" when unused
    mean = b.reduce_mean(node.input[0], axes, statistics[0] or None)
    centred = b.op("Sub", [node.input[0], mean])
    variance = b.reduce_mean(b.op("Mul", [centred, centred]), axes)
    epsilon = b.constant(np.float32(attrs.get("epsilon", 1e-5)))
    inverse = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [variance, epsilon])])], statistics[1] or None)
    bias = node.input[2] if len(node.input) > 2 else ""
    scaled = b.op("Mul", [b.op("Mul", [centred, inverse]), node.input[1]], None if bias else node.output[0])
    if bias:
        b.op("Add", [scaled, bias], node.output[0])


def _maxpool_indices(b: NodeBuilder, node, shapes: dict, label: str) -> None:
    x_shape = shapes.get(node.input[0])
    if x_shape is None or len(x_shape) != 4 or b.opset < 10:
        raise UnsupportedOpError(f"{label}: its argmax indices are computed for a 2-D pool of static shape in opset "
                                 ">= 10 only; export it without them")
    attrs = attributes(node)
    n, c, height, width = x_shape
    (kh, kw), strides = attrs["kernel_shape"], attrs.get("strides", [1, 1])
    dilations = attrs.get("dilations", [1, 1])
    out_h, out_w = out_size = _output_size(attrs, x_shape[2:])
    begin = _begin_pads(attrs, x_shape[2:], out_size)
    extent = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip((out_h, out_w), strides, (kh, kw), dilations)]
    end = [max(0, e - p - size) for e, p, size in zip(extent, begin, (height, width))]
    b.op("MaxPool", [node.input[0]], node.output[0], **{k: v for k, v in attrs.items() if k != "storage_order"})
    padded = node.input[0]
    if any(begin) or any(end):
        pads = b.constant(np.array([0, 0, *begin, 0, 0, *end], np.int64))
        padded = b.op("Pad", [padded, pads, b.constant(np.float32(-np.inf))])
    padded_w = width + begin[1] + end[1]
    flat = b.reshape(padded, [n, c, -1])  # N x C x (padded H * padded W)
    tap_h = (np.arange(kh) * dilations[0])[:, None].repeat(kw, 1).ravel()  # each tap's offset in its window
    tap_w = (np.arange(kw) * dilations[1])[None, :].repeat(kh, 0).ravel()
    rows = np.arange(out_h) * strides[0]  # each window's first row and column, padded
    cols = np.arange(out_w) * strides[1]
    where = (rows[None, :, None] + tap_h[:, None, None]) * padded_w + cols[None, None, :] + tap_w[:, None, None]
    stacked = b.op("Gather", [flat, b.constant(where.astype(np.int64))], axis=2)  # N x C x K x OH x OW
    offsets = tap_h * width + tap_w if not attrs.get("storage_order", 0) else tap_h + tap_w * height
    chosen = b.op("ArgMax", [stacked], axis=2, keepdims=0)  # N x C x OH x OW, int64
    tap_offset = b.op("Gather", [b.constant(np.array(offsets, np.int64)), chosen], axis=0)
    rows, cols = rows[:, None] - begin[0], cols[None, :] - begin[1]  # unpadded
    position = rows * width + cols if not attrs.get("storage_order", 0) else rows + cols * height
    channel = (np.arange(n * c) * height * width).reshape(n, c, 1, 1)
    with_position = b.op("Add", [tap_offset, b.constant(position.astype(np.int64))])
    b.op("Add", [with_position, b.constant(channel.astype(np.int64))], node.output[1])


def _output_size(attrs: dict, in_size: list[int]) -> list[int]:
    """The pooled size per spatial axis as the ONNX reference and onnxruntime compute it: with ceil_mode, a window
    that would start in the end padding is dropped (ONNX's shape inference keeps it)."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    windows = [(k - 1) * d + 1 for k, d in zip(attrs["kernel_shape"], dilations)]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        return [(i - 1) // s + 1 for i, s in zip(in_size, strides)]
    pads = [0, 0, 0, 0] if auto == "VALID" else list(attrs.get("pads", [0, 0, 0, 0]))
    sizes = []
    for axis, (i, s, window) in enumerate(zip(in_size, strides, windows)):
        span = i + pads[axis] + pads[axis + 2] - window
        out = (-(-span // s) if attrs.get("ceil_mode", 0) else span // s) + 1
        sizes.append(out - 1 if attrs.get("ceil_mode", 0) and (out - 1) * s >= i + pads[axis] else out)
    return sizes


def _begin_pads(attrs: dict, in_size: list[int], out_size: list[int]) -> list[int]:
    """The padding before each spatial axis, explicit or from auto_pad."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        kernel, strides = attrs["kernel_shape"], attrs.get("strides", [1, 1])
        dilations = attrs.get("dilations", [1, 1])
        totals = [max(0, (o - 1) * s + (k - 1) * d + 1 - i)
                  for i, o, s, k, d in zip(in_size, out_size, strides, kernel, dilations)]
        return [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in totals]
    if auto == "VALID":
        return [0, 0]
    return list(attrs.get("pads", [0, 0, 0, 0])[:2])
