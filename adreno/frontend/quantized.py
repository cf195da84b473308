"""Quantized ONNX models rewritten, before import, into the float ops our schedules compile.

What TVM 0.27's importer already converts right (checked against onnxruntime, `tests/test_quantized.py`) stays:
QuantizeLinear and DequantizeLinear of activations (per tensor and per axis, int8 and uint8, round half to even
as OpenCL's `rint`, saturation), DynamicQuantizeLinear and MatMulInteger. The rest is rewritten here:

- DequantizeLinear of a constant (a weight, a bias) folds into a float32 initializer, `(q - zero_point) * scale`
  as onnxruntime computes it. Each folded tensor is listed as a `QuantizedWeight` (the integer tensor, its scale,
  zero point and axis), so that the artifact can later store it in its integer type.
- QLinearConv, QLinearMatMul, ConvInteger and com.microsoft's QGemm are computed in the integer domain, in float
  ops: `x - x_zero_point` (a Cast and a Sub), the weight `w - w_zero_point` folded to a float constant, the float
  Conv / MatMul / Gemm (exact while every partial sum stays below 2^24 in magnitude: integers are exact in float32
  up to there), the int32 bias added as a float, then for a quantized output the accumulator times the requantize
  multiplier `x_scale * w_scale / y_scale` (float32, as onnxruntime computes it) and a QuantizeLinear of scale 1
  with the output zero point (round half to even, saturation). ConvInteger's int32 output is a Cast of the
  accumulator. These weights are listed too, with scale 1: the real scales are in the multiplier.
- com.microsoft's QOperator element-wise, pooling, concat and softmax ops (QLinearAdd, QLinearMul,
  QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool, QLinearSoftmax,
  QLinearConcat) become DequantizeLinear -> the float op -> QuantizeLinear: onnxruntime computes most of them
  through lookup tables or fixed-point ratios, so an output may differ from it by one quantization step.
- com.microsoft's DynamicQuantizeLSTM (what `quantize_dynamic` makes of every LSTM) becomes ONNX's LSTM with its
  weights dequantized to float32 constants: W and R, stored input-major ((directions, input, 4 * hidden)) with a
  scale and zero point per direction or per direction and gate column, transposed to ONNX's (directions,
  4 * hidden, input). `frontend.recurrent` unrolls it like any LSTM, and its unrolling picks a direction and
  transposes it back: the constants its MatMuls read are each direction's input-major (input, 4 * hidden) matrix,
  dequantized. So each direction is listed as a `QuantizedWeight` of its own (per tensor, or along its columns),
  and the artifact stores those constants as the int8 matrices the model has, dequantized at load like any
  quantized weight (a Relax fold into their transpose is known too): no transform of the LSTM's own, no new
  stored form for the loaders. onnxruntime also quantizes the LSTM's
  activations (X and H, to uint8 at every step) where we compute in float: `float_lstms` gives the model
  onnxruntime would run without that rounding, which `adreno.reference.reference_spread` measures it by.
- Blocked quantization (`block_size`) and channels-last QOperator forms are refused in one line naming the node.

`dequantize(model)` returns a `Dequantized` (the rewritten model, or the model itself when it is not quantized,
and its weights). It runs first in `frontend.to_relax`: before the op check (which does not know the com.microsoft
ops), before `constfold` (whose ONNX shape inference does not either, and which would fold the small weights'
DequantizeLinear without listing them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedOpError
from .decompose import NodeBuilder
from .onnx_reading import attributes, opset

MICROSOFT = "com.microsoft"
INTEGER_DOMAIN = {"QLinearConv", "QLinearMatMul", "ConvInteger", "QGemm"}
# com.microsoft QOperator op -> (the float op, positions of the (tensor, scale, zero point) inputs, positions of
# the output's (scale, zero point)); QLinearConcat's inputs are (y_scale, y_zero_point, then triples).
FLOAT_DOMAIN = {
    "QLinearAdd": ("Add", [(0, 1, 2), (3, 4, 5)], (6, 7)),
    "QLinearMul": ("Mul", [(0, 1, 2), (3, 4, 5)], (6, 7)),
    "QLinearSigmoid": ("Sigmoid", [(0, 1, 2)], (3, 4)),
    "QLinearLeakyRelu": ("LeakyRelu", [(0, 1, 2)], (3, 4)),
    "QLinearGlobalAveragePool": ("GlobalAveragePool", [(0, 1, 2)], (3, 4)),
    "QLinearAveragePool": ("AveragePool", [(0, 1, 2)], (3, 4)),
    "QLinearSoftmax": ("Softmax", [(0, 1, 2)], (3, 4)),
    "QLinearConcat": ("Concat", None, (0, 1)),
}
QUANTIZED_LSTM = "DynamicQuantizeLSTM"
QUANTIZED_OPS = {"DequantizeLinear", QUANTIZED_LSTM, *INTEGER_DOMAIN, *FLOAT_DOMAIN}


@dataclass(frozen=True)
class QuantizedWeight:
    """A constant integer tensor that became the float32 initializer `name` (or, for an LSTM's weight, a float32
    constant its unrolling reads: `name[d]`, direction d): `(values - zero_point) * scale`, with `scale` and
    `zero_point` per tensor (`axis` None) or along `axis` of `values`."""

    name: str
    values: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None

    def dequantized(self) -> np.ndarray:
        shape = [1] * self.values.ndim
        if self.axis is not None:
            shape[self.axis] = -1
        difference = self.values.astype(np.int32) - self.zero_point.astype(np.int32).reshape(shape)
        return (difference.astype(np.float32) * self.scale.astype(np.float32).reshape(shape)).astype(np.float32)


@dataclass
class Dequantized:
    """A model with its quantized weights folded to float constants and its integer ops rewritten to float ops."""

    model: object
    weights: list[QuantizedWeight] = field(default_factory=list)


def quantized_weights(model) -> list[QuantizedWeight]:
    """Every constant integer tensor of `model` that becomes a float weight when it is compiled."""
    return dequantize(model).weights


def dequantize(model) -> Dequantized:
    if not any(n.op_type in QUANTIZED_OPS for n in model.graph.node):
        return Dequantized(model)
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants = _constants(out.graph)
    version = opset(out)
    result, nodes = Dequantized(out), []
    for index, node in enumerate(out.graph.node):
        label = f"node {node.name or f'#{index}'} ({node.op_type})"
        builder = _Rewrite(out, f"quantized{index}", version, constants, label, result.weights)
        if node.op_type == QUANTIZED_LSTM and node.domain == MICROSOFT:
            builder.float_lstm(node)
        elif node.op_type == "DequantizeLinear" and node.input[0] in constants:
            builder.fold_dequantize(node)
        elif node.op_type in INTEGER_DOMAIN:
            builder.integer_domain(node)
        elif node.op_type in FLOAT_DOMAIN and node.domain == MICROSOFT:
            builder.float_domain(node)
        else:
            if node.op_type == "DequantizeLinear":
                builder.check_not_blocked(node)
            nodes.append(node)
            continue
        nodes.extend(builder.nodes)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    if not any(n.domain == MICROSOFT for n in out.graph.node):
        kept = [o for o in out.opset_import if o.domain != MICROSOFT]
        del out.opset_import[:]
        out.opset_import.extend(kept)
    return result


def float_lstms(model):
    """A copy of `model` with each DynamicQuantizeLSTM an ONNX LSTM of its dequantized weights (the rest as it is):
    what onnxruntime computes without rounding the LSTMs' activations. None when the model has none."""
    if not any(n.op_type == QUANTIZED_LSTM and n.domain == MICROSOFT for n in model.graph.node):
        return None
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants, version, nodes = _constants(out.graph), opset(out), []
    for index, node in enumerate(out.graph.node):
        if node.op_type != QUANTIZED_LSTM or node.domain != MICROSOFT:
            nodes.append(node)
            continue
        builder = _Rewrite(out, f"float_lstm{index}", version, constants, f"node {node.name or f'#{index}'}", [])
        builder.float_lstm(node)
        nodes.extend(builder.nodes)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _constants(graph) -> dict[str, np.ndarray]:
    """Initializers and Constant nodes' values by name."""
    from onnx import helper, numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(helper.get_attribute_value(node.attribute[0]))
    return values


def _input(node, position: int) -> str:
    return node.input[position] if len(node.input) > position else ""


class _Rewrite(NodeBuilder):
    """The replacement of one quantized node; `label` names the node in refusals."""

    def __init__(self, model, prefix, opset, constants, label, weights):
        super().__init__(model, prefix, opset)
        self.constants, self.label, self.weights = constants, label, weights

    def value(self, name: str, what: str) -> np.ndarray:
        if name not in self.constants:
            raise UnsupportedOpError(f"{self.label}: its {what} ({name!r}) must be a constant (an initializer); "
                                     "quantize the model with static scales")
        return self.constants[name]

    def check_not_blocked(self, node) -> None:
        if attributes(node).get("block_size", 0):
            raise UnsupportedOpError(f"{self.label} uses blocked quantization (block_size), which is not supported; "
                                     "quantize per tensor or per channel")

    def fold_dequantize(self, node) -> None:
        self.check_not_blocked(node)
        values, scale = self.constants[node.input[0]], self.value(node.input[1], "scale")
        zero_point = self.zero_point(_input(node, 2), values.dtype)
        axis = int(attributes(node).get("axis", 1)) % max(values.ndim, 1) if scale.size > 1 else None
        self.add_weight(node.output[0], values, scale.reshape(-1) if axis is not None else scale.reshape(()),
                        zero_point.reshape(-1) if axis is not None else zero_point.reshape(()), axis)

    def add_weight(self, name: str, values, scale, zero_point, axis) -> str:
        from onnx import numpy_helper

        weight = QuantizedWeight(name, values, scale, zero_point, axis)
        self.weights.append(weight)
        self.model.graph.initializer.append(numpy_helper.from_array(weight.dequantized(), name))
        self.constants[name] = weight.dequantized()
        return name

    def integer(self, name: str, zero_point: str) -> str:
        """`name - zero_point` as float32 (exact: both are small integers)."""
        value = self.op("Cast", [name], to=1)
        return self.op("Sub", [value, self.op("Cast", [zero_point], to=1)]) if zero_point else value

    def zero_point(self, name: str, dtype) -> np.ndarray:
        """The constant zero point `name`, or 0 when the node has none."""
        return self.value(name, "zero point") if name else np.zeros((), dtype)

    def integer_weight(self, name: str, zero_point: str, axis: int) -> str:
        """The weight minus its zero point (per tensor, or along `axis`) as float32: a constant, listed as a
        `QuantizedWeight` of scale 1; a run-time weight only with one zero point for the whole tensor."""
        if name not in self.constants:
            if zero_point and np.size(self.value(zero_point, "weight zero point")) > 1:
                raise UnsupportedOpError(f"{self.label}: a weight computed at run time needs a single zero point; "
                                         "make the weight an initializer")
            return self.integer(name, zero_point)
        values = self.constants[name]
        zero = self.zero_point(zero_point, values.dtype)
        per_axis = zero.size > 1
        return self.add_weight(self.name(), values, np.ones(zero.size if per_axis else (), np.float32),
                               zero.reshape(-1) if per_axis else zero.reshape(()), axis if per_axis else None)

    def integer_domain(self, node) -> None:
        attrs = attributes(node)
        if node.op_type == "ConvInteger":  # x, w, x_zero_point, w_zero_point -> int32
            x, w = self.integer(node.input[0], _input(node, 2)), self.integer_weight(node.input[1], _input(node, 3), 0)
            self.op("Cast", [self.op("Conv", [x, w], **attrs)], node.output[0], to=6)
            return
        if node.op_type == "QGemm":  # A, a_s, a_zp, B, b_s, b_zp, C?, y_s?, y_zp?  (alpha, transA, transB)
            a_scale, b_scale, y_scale, y_zero = node.input[1], node.input[4], _input(node, 7), _input(node, 8)
            b_axis = 0 if attrs.get("transB", 0) else 1
            operands = [self.integer(node.input[0], node.input[2]),
                        self.integer_weight(node.input[3], node.input[5], b_axis)]
            gemm = {k: v for k, v in attrs.items() if k in ("transA", "transB")}
            alpha = np.float32(attrs.get("alpha", 1.0))
            kind, bias = "Gemm", _input(node, 6)
        else:  # QLinearConv / QLinearMatMul: x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp[, B]
            a_scale, b_scale, y_scale, y_zero = node.input[1], node.input[4], node.input[6], node.input[7]
            kind = "Conv" if node.op_type == "QLinearConv" else "MatMul"
            weight_rank = np.ndim(self.constants.get(node.input[3], np.zeros((1, 1))))
            b_axis = 0 if kind == "Conv" else weight_rank - 1
            operands = [self.integer(node.input[0], node.input[2]),
                        self.integer_weight(node.input[3], node.input[5], b_axis)]
            gemm, alpha, bias = attrs, np.float32(1.0), _input(node, 8)
        if bias:
            operands.append(self.constant(self.constants[bias].astype(np.float32)) if bias in self.constants
                            else self.op("Cast", [bias], to=1))
        if kind == "MatMul" and bias:  # no bias input to MatMul (QLinearMatMul has none anyway)
            raise UnsupportedOpError(f"{self.label} has a bias input, which QLinearMatMul does not define")
        accumulator = self.op(kind, operands, **gemm)
        multiplier = alpha * self.value(a_scale, "input scale").astype(np.float32) * \
            self.value(b_scale, "weight scale").astype(np.float32).reshape(-1)
        if y_scale:
            multiplier = multiplier / self.value(y_scale, "output scale").astype(np.float32)
        if kind == "Conv" and multiplier.size > 1:
            multiplier = multiplier.reshape(-1, *[1] * (weight_rank - 2))
        scaled = self.op("Mul", [accumulator, self.constant(multiplier.astype(np.float32))],
                         None if y_scale else node.output[0])
        if y_scale:
            self.op("QuantizeLinear", [scaled, self.constant(np.float32(1.0)), y_zero], node.output[0])

    def float_lstm(self, node) -> None:
        """DynamicQuantizeLSTM (X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale,
        R_zero_point) as ONNX's LSTM (X, W, R, B, sequence_lens, initial_h, initial_c, P), the same attributes."""
        from onnx import helper

        inputs = [*node.input, *[""] * (12 - len(node.input))]
        weights = [self.lstm_weight(inputs[1], inputs[8], inputs[9], "W"),
                   self.lstm_weight(inputs[2], inputs[10], inputs[11], "R")]
        operands = [inputs[0], *weights, *inputs[3:8]]
        while operands[-1] == "":
            operands.pop()
        self.nodes.append(helper.make_node("LSTM", operands, list(node.output), **attributes(node)))

    def lstm_weight(self, name: str, scale: str, zero_point: str, what: str) -> str:
        """A quantized LSTM weight (directions, rows, 4 * hidden) dequantized with its scale and zero point per
        direction (directions,) or per direction and column (directions, 4 * hidden), as ONNX's float32
        (directions, 4 * hidden, rows). Each direction's (rows, 4 * hidden) matrix is listed as a weight (see the
        module doc): its dequantized values are the ones below, element for element."""
        stored = self.value(name, f"{what} weight")
        values = stored.astype(np.int32)
        scales = self.value(scale, f"{what} scale").astype(np.float32)
        zero = self.zero_point(zero_point, np.int32).astype(np.int32)
        directions, columns = (values.shape[0], values.shape[2]) if values.ndim == 3 else (0, 0)
        if not directions or scales.size not in (directions, directions * columns) \
                or zero.size not in (1, directions, directions * columns):
            raise UnsupportedOpError(f"{self.label}: its {what} weight {list(values.shape)} with scale "
                                     f"{list(scales.shape)} is not (directions, rows, 4 * hidden) quantized per "
                                     "direction or per column")

        def along_columns(v):  # (directions,) or (directions, columns) against (directions, rows, columns)
            return v.reshape(directions, 1, -1) if v.size > 1 else v.reshape(())

        dequantized = (values - along_columns(zero)).astype(np.float32) * along_columns(scales)
        per_column = max(scales.size, zero.size) > directions
        for d in range(directions):
            scale_d, zero_d = (np.broadcast_to(v.reshape(directions, -1) if v.size > 1 else v.reshape(1, 1),
                                               (directions, columns if per_column else 1))[d] for v in (scales, zero))
            self.weights.append(QuantizedWeight(f"{name}[{d}]", stored[d], scale_d if per_column else scale_d[0],
                                                zero_d if per_column else zero_d[0], 1 if per_column else None))
        return self.constant(np.ascontiguousarray(dequantized.transpose(0, 2, 1)))

    def float_domain(self, node) -> None:
        op, triples, (y_scale, y_zero) = FLOAT_DOMAIN[node.op_type]
        attrs = attributes(node)
        if attrs.pop("channels_last", 0):
            raise UnsupportedOpError(f"{self.label} is channels-last, which is not supported; quantize the model "
                                     "from its channels-first (NCHW) form")
        if triples is None:  # QLinearConcat: y_scale, y_zero_point, then (tensor, scale, zero point) per input
            triples = [(i, i + 1, i + 2) for i in range(2, len(node.input), 3)]
        floats = [self.op("DequantizeLinear", [node.input[t], node.input[s], _input(node, z)][:3 if _input(node, z)
                          else 2]) for t, s, z in triples]
        softmax_opset = attrs.pop("opset", 13)
        if op == "Softmax" and softmax_opset < 13:  # opset 1-12 semantics: over the flattened axes from `axis`
            shape = self.op("Shape", [floats[0]])
            flat = self.op("Flatten", floats, axis=attrs.get("axis", 1))
            result = self.op("Reshape", [self.op("Softmax", [flat], axis=1), shape])
        else:
            result = self.op(op, floats, **attrs)
        outputs = [result, node.input[y_scale], _input(node, y_zero)]
        self.op("QuantizeLinear", outputs if outputs[2] else outputs[:2], node.output[0])
