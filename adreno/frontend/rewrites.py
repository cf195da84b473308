"""ONNX forms that TVM 0.27's importer reads wrongly, rewritten before import into equivalent forms it reads right.

- ConvTranspose with `output_shape`: the importer ignores the attribute and returns the natural output size (the
  ONNX node case convtranspose_output_shape: 9x7 instead of 10x8). It becomes explicit `pads` (the output is
  cropped) or a larger `output_padding` (the output grows at its end), as the ONNX spec and onnxruntime resolve it:
  an odd total padding crops the extra row at the start, or at the end for SAME_UPPER.
- PRelu of opset < 7 with a slope of shape [C]: before opset 7 that slope is per channel (axis 1); the importer
  applies a 1-D slope to the last axis, and fails its shape assertion (PyTorch's PReLU_2d_multiparam). The slope
  becomes [C, 1, ..., 1], which broadcasts over axis 1 in every opset.
- Expand with its shape an initializer: the importer makes initializers parameters, and Expand, unlike Reshape or
  Tile, does not look a parameter's value up; it takes its dynamic path, an output of symbolic shape that no kernel
  lowers (a traceback in the texture schedules; `vm.builtin.tensor_to_shape` refused with buffers). PyTorch's
  `expand(-1, 2, -1)` folds to such a shape (arabic-name-romanizer's GRU encoder). The shape becomes a Constant node.

- Resize (4-D, nearest, linear or cubic, without an ROI): TVM computes source coordinates from the size
  ratio in/out, ONNX from the scale: with `scales` 0.6 on a 4-wide axis ONNX samples at (x + 0.5) / 0.6 - 0.5 and
  TVM at (x + 0.5) * 2 - 0.5; and TVM's rounded ratio (2/7) moves nearest's exact half-way points (2 -> 7,
  round_prefer_floor). Nearest becomes a Gather per resized axis with the source indices computed here in float32
  as onnxruntime computes them; linear and cubic become a MatMul per resized axis with the interpolation matrix
  (`interpolation_matrix`: linear: clamped coordinates, two taps; cubic: four taps, edge-padded or
  `exclude_outside`; with `antialias=1` a downsampling filter stretched by 1 / scale, as the ONNX reference
  defines it). Those TVM gets right (an integer output = input x scale) stay, but for antialias and the
  half_pixel_symmetric mode, which TVM 0.27 lacks: those are always rewritten, or refused in one line where the
  rewrite does not apply. align_corners divides by the unrounded resized length (input x scale) as the ONNX
  reference does (onnxruntime 1.32 divides by the rounded one).

`rewrite(model, shapes)` returns a rewritten copy (the caller's model is untouched) or the model itself when nothing
applies; `shapes` (`InferredShapes`) give the values' static shapes (the ConvTranspose input sizes, the Resize
inputs), inferred once for the import-time rewrites that read them.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError, UnsupportedOpError
from .onnx_reading import attributes, opset


def rewrite(model, shapes: InferredShapes):
    convt = [n for n in model.graph.node if n.op_type == "ConvTranspose" and "output_shape" in attributes(n)]
    prelu = [n for n in model.graph.node if n.op_type == "PRelu"] if opset(model) < 7 else []
    resize = [n for n in model.graph.node if n.op_type == "Resize"]
    weights = _initializers(model)
    expand = [n for n in model.graph.node if n.op_type == "Expand" and n.input[1] in weights]
    if not convt and not prelu and not resize and not expand:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    known = shapes.of(out)
    nodes = []
    for i, node in enumerate(out.graph.node):
        if node.op_type == "ConvTranspose" and "output_shape" in attributes(node):
            _explicit_pads(node, known, node.name or f"#{i}")
        elif node.op_type == "PRelu" and prelu:
            _per_channel_slope(out, node, len(known.get(node.input[0], [0] * 4)))
        elif node.op_type == "Resize":
            nodes.extend(_exact_resize(out, node, known, f"resize{i}") or [node])
            continue
        elif node.op_type == "Expand" and node.input[1] in weights:
            nodes.append(_constant_shape(node, weights[node.input[1]], f"expand{i}_shape"))
        nodes.append(node)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    shapes.replaced(convt + prelu + resize + expand)
    return out


def _set_ints(node, name: str, values: list[int]) -> None:
    import onnx

    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, onnx.helper.make_attribute(name, [int(v) for v in values])])


def _initializers(model) -> dict:
    return {t.name: t for t in model.graph.initializer}


def static_shapes(model, shapes: dict[str, list[int]]) -> dict[str, list[int]]:
    """Shapes of the graph's values, inferred from the static input `shapes`."""
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for inp in probe.graph.input:
        if inp.name in shapes:
            dims = inp.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[inp.name]):
                dim.Clear()
                dim.dim_value = int(size)
    inferred = onnx.shape_inference.infer_shapes(probe)
    found = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            found[value.name] = [d.dim_value for d in dims]
    found.update({t.name: list(t.dims) for t in model.graph.initializer})
    return found


class InferredShapes:
    """The static shapes of a model's values (`static_shapes`) for the import-time rewrites that read them (`rewrite`,
    `upsampling.rewrite`, `decompose.decompose`, in that order): ONNX shape inference over the whole model (a copy of
    it, weights included), run when the first of them needs it and passed on to the next, so a model that needs all
    three infers once.

    A rewrite replaces nodes by others that compute the same outputs under the same names (each is checked against
    onnxruntime), and the values it adds are read by its own nodes only: the shapes of the values a later rewrite
    looks up stand. Not where a replaced node's output had no inferred shape: its replacement may be inferable where
    it was not (a ConvTranspose whose output_shape lists N and C, which ONNX's inference refuses, becomes explicit
    pads, which it infers), and the values after it gain shapes. Then the next rewrite infers again, as it would over
    the model it is given."""

    def __init__(self, inputs: dict[str, list[int]]):
        self.inputs, self._known = inputs, None

    def of(self, model) -> dict[str, list[int]]:
        """The shapes of `model`'s values: `model` is the first rewrite's input or the model the last one returned."""
        if self._known is None:
            self._known = static_shapes(model, self.inputs)
        return self._known

    def replaced(self, nodes) -> None:
        """A rewrite replaced or changed (some of) `nodes`: if one of their outputs had no shape, the next `of` infers
        again."""
        if self._known is not None and any(name and name not in self._known for n in nodes for name in n.output):
            self._known = None


def _explicit_pads(node, shapes: dict[str, list[int]], label: str) -> None:
    x_shape, w_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    if x_shape is None or w_shape is None:
        raise ModelError(f"ConvTranspose node {label}: its output_shape needs static input and weight shapes; give "
                         "the input's shape with --input-shape")
    spatial = len(x_shape) - 2
    attrs = attributes(node)
    kernel = attrs.get("kernel_shape") or w_shape[2:]
    strides = attrs.get("strides") or [1] * spatial
    dilations = attrs.get("dilations") or [1] * spatial
    output_padding = list(attrs.get("output_padding") or [0] * spatial)
    wanted = list(attrs["output_shape"])[-spatial:]
    auto_pad = attrs.get("auto_pad")
    same_upper = (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) == "SAME_UPPER"
    begin, end = [], []
    for i in range(spatial):
        natural = strides[i] * (x_shape[2 + i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
        total = natural - wanted[i]
        if total < 0:  # the output grows at its end: rows that only the bias reaches
            output_padding[i] -= total
            total = 0
        head = total // 2 if same_upper else total - total // 2
        begin.append(head)
        end.append(total - head)
    kept = [a for a in node.attribute if a.name not in ("output_shape", "auto_pad")]
    del node.attribute[:]
    node.attribute.extend(kept)
    _set_ints(node, "pads", begin + end)
    _set_ints(node, "output_padding", output_padding)


def _per_channel_slope(model, node, x_rank: int) -> None:
    from onnx import numpy_helper

    weights = _initializers(model)
    slope = weights.get(node.input[1])
    if slope is None or len(slope.dims) != 1 or slope.dims[0] == 1:
        return
    array = numpy_helper.to_array(slope)
    name = f"{slope.name}_per_channel"
    if name not in weights:
        model.graph.initializer.append(numpy_helper.from_array(
            np.ascontiguousarray(array.reshape(array.shape[0], *[1] * max(x_rank - 2, 0))), name))
    node.input[1] = name


def _constant_shape(node, shape, name: str):
    """A Constant node `name` holding the initializer `shape`, which `node` now reads instead."""
    import onnx

    node.input[1] = name
    return onnx.helper.make_node("Constant", [], [name], value=shape)


def constant(model, name: str):
    """The value of an initializer or Constant node output `name`, or None."""
    from onnx import numpy_helper

    found = _initializers(model).get(name)
    if found is not None:
        return numpy_helper.to_array(found)
    node = next((n for n in model.graph.node if n.op_type == "Constant" and n.output[0] == name), None)
    value = None if node is None else attributes(node).get("value")
    return None if value is None else numpy_helper.to_array(value)


def _text(node, name: str, default: str) -> str:
    value = attributes(node).get(name)
    return default if value is None else value.decode() if isinstance(value, bytes) else value


def _exact_resize(model, node, shapes: dict[str, list[int]], prefix: str) -> list | None:
    """The nodes that replace a Resize TVM would compute wrongly (see the module doc), or None to keep it."""
    from onnx import helper, numpy_helper

    attrs, x_shape, mode = attributes(node), shapes.get(node.input[0]), _text(node, "mode", "nearest")
    coords = _text(node, "coordinate_transformation_mode", "half_pixel")
    antialias = bool(attrs.get("antialias")) and mode != "nearest"
    roi = constant(model, node.input[1]) if len(node.input) > 1 and node.input[1] else None
    label = f"node {node.name or '#' + prefix[len('resize'):]} (Resize)"
    if attrs.get("antialias") and mode == "nearest":
        raise UnsupportedOpError(f"{label}: antialias=1 with mode nearest is undefined in ONNX; use antialias=0")
    if _resizes_batch_or_channel(model, node, x_shape):
        raise UnsupportedOpError(f"{label} resizes the batch or channel axis, which TVM 0.27's Resize leaves as they "
                                 "are; resize the spatial axes only")
    ours = antialias or coords == "half_pixel_symmetric"  # forms TVM 0.27 lacks: only this rewrite computes them
    if x_shape is None or len(x_shape) != 4 or coords == "tf_crop_and_resize" or (roi is not None and roi.size):
        return _refused(label, ours, "a 4-D input of static shape and no roi")
    axes = [a % 4 for a in (attrs.get("axes") or range(4))]
    scales = constant(model, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    sizes = constant(model, node.input[3]) if len(node.input) > 3 and node.input[3] else None
    given = scales if scales is not None and scales.size else sizes
    if given is None or given.size != len(axes):
        return _refused(label, ours, "constant scales or sizes")
    full = np.array(x_shape, np.float32 if given is scales else np.int64)
    full[axes] = given
    x_dims = np.array(x_shape, np.float32)
    policy = _text(node, "keep_aspect_ratio_policy", "stretch")
    if given is scales:
        scales = full.astype(np.float32)
        out_shape = [int(d * s) for d, s in zip(x_dims, scales)]
    elif policy == "stretch":
        out_shape = [int(v) for v in full]
        scales = np.array(out_shape, np.float32) / x_dims
    else:  # one scale for the given axes: the largest that fits (not_larger) or the smallest that covers them
        ratios = np.array(sizes, np.float32) / x_dims[axes]
        scale = ratios.min() if policy == "not_larger" else ratios.max()
        scales = np.ones(4, np.float32)
        scales[axes] = scale
        out_shape = [int(d * s + np.float32(0.5)) if i in axes else int(d)
                     for i, (d, s) in enumerate(zip(x_dims, scales))]
    if out_shape[:2] != x_shape[:2]:
        return _refused(label, ours, "batch and channel axes left unresized")
    if mode != "nearest" and not ours and all(float(o) == float(np.float32(i) * s)
                                              for i, o, s in zip(x_shape[2:], out_shape[2:], scales[2:])):
        return None  # the size ratio is the scale: TVM's coordinates are ONNX's
    rounding = _text(node, "nearest_mode", "round_prefer_floor")
    nodes, value = [], node.input[0]
    for axis in (2, 3):
        source = _source_coordinates(x_shape[axis], out_shape[axis], scales[axis], coords)
        if mode == "nearest":
            index = np.clip(_nearest(source, rounding), 0, x_shape[axis] - 1).astype(np.int64)
            if np.array_equal(index, np.arange(x_shape[axis])):
                continue
            model.graph.initializer.append(numpy_helper.from_array(index, f"{prefix}_index{axis}"))
            op = helper.make_node("Gather", [value, f"{prefix}_index{axis}"], [f"{prefix}_axis{axis}"], axis=axis)
        else:
            matrix = interpolation_matrix(source, x_shape[axis], mode, float(scales[axis]) if antialias else 1.0,
                                          attrs.get("cubic_coeff_a") or -0.75, bool(attrs.get("exclude_outside")))
            if matrix.shape[0] == matrix.shape[1] and np.array_equal(matrix, np.eye(len(matrix), dtype=np.float32)):
                continue
            name = f"{prefix}_weights{axis}"
            model.graph.initializer.append(numpy_helper.from_array(matrix if axis == 2 else matrix.T.copy(), name))
            inputs = [name, value] if axis == 2 else [value, name]
            op = helper.make_node("MatMul", inputs, [f"{prefix}_axis{axis}"])
        nodes.append(op)
        value = op.output[0]
    if not nodes:
        return [helper.make_node("Identity", [node.input[0]], [node.output[0]])]
    nodes[-1].output[0] = node.output[0]
    return nodes


def _resizes_batch_or_channel(model, node, x_shape: list[int] | None) -> bool:
    """Whether the full-rank constant scales or sizes (`canonical` made them full rank) change axis 0 or 1: TVM's
    converter resizes the spatial axes only and would return them unchanged, a wrong shape."""
    if x_shape is None or attributes(node).get("axes") is not None:
        return False
    scales = constant(model, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    sizes = constant(model, node.input[3]) if len(node.input) > 3 and node.input[3] else None
    if scales is not None and scales.size == len(x_shape):
        return bool(np.any(scales[:2] != 1))
    return sizes is not None and sizes.size == len(x_shape) and [int(v) for v in sizes[:2]] != list(x_shape[:2])


def _refused(label: str, ours: bool, needs: str) -> None:
    """Keep the Resize for TVM's importer (None), unless its form is one only this rewrite computes."""
    if ours:
        raise UnsupportedOpError(f"{label}: antialias and half_pixel_symmetric are computed for {needs} only; "
                                 "export the model with those")


def _source_coordinates(length: int, resized: int, scale, mode: str) -> np.ndarray:
    """Where each output position samples the input, in float32 as onnxruntime computes it."""
    x, s, f = np.arange(resized, dtype=np.float32), np.float32(scale), np.float32
    if mode == "align_corners":  # over the unrounded resized length, as the ONNX reference divides
        exact = f(length) * s
        return x * f(length - 1) / (exact - f(1)) if exact != 1 else np.zeros(resized, f)
    if mode == "asymmetric":
        return x / s
    if mode == "tf_half_pixel_for_nn":
        return (x + f(0.5)) / s
    if mode == "pytorch_half_pixel" and resized == 1:
        return np.zeros(1, f)
    if mode == "half_pixel_symmetric":
        adjustment = f(resized) / (s * f(length))
        return f(length) / f(2) * (f(1) - adjustment) + (x + f(0.5)) / s - f(0.5)
    return (x + f(0.5)) / s - f(0.5)  # half_pixel, pytorch_half_pixel


def _nearest(source: np.ndarray, rounding: str) -> np.ndarray:
    floor = np.floor(source)
    half = source == floor + np.float32(0.5)
    if rounding == "floor":
        return floor
    if rounding == "ceil":
        return np.ceil(source)
    nearest = np.floor(source + np.float32(0.5))
    return np.where(half, floor if rounding == "round_prefer_floor" else floor + 1, nearest)


def interpolation_matrix(source: np.ndarray, length: int, mode: str, scale: float = 1.0, a: float = -0.75,
                         exclude_outside: bool = False) -> np.ndarray:
    """(resized, length) weights that resample an axis of `length` at the `source` coordinates, as the ONNX
    reference defines them: linear (the triangle filter) or cubic (Keys' kernel with coefficient `a`) over the
    taps around each coordinate, edge indices repeated, or dropped and the rest renormalised with
    `exclude_outside`. A `scale` below 1 (antialias while downsampling) stretches the filter by 1 / scale, so each
    output averages every input it covers; the weights are then normalised to sum 1."""
    support = 1 if mode == "linear" else 2  # the kernel's half-width in taps at scale 1
    scale = min(scale, 1.0)
    first = int(np.floor(-support / scale)) + 1  # the first tap's offset from the coordinate's left neighbour
    offsets = np.arange(first, 1 - first + 1)  # an even number of taps: first .. -first + 1
    source = source.astype(np.float64)
    left = np.ceil(source).astype(np.int64) - 1  # an integer coordinate is the right tap of its pair (ratio 1)
    distance = np.abs((offsets[None, :] - (source - left)[:, None]) * scale)
    if mode == "linear":
        weights = np.clip(1 - distance, 0, 1)
    else:
        near = ((a + 2) * distance - (a + 3)) * distance * distance + 1
        far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a
        weights = np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))
    if scale < 1:
        weights /= weights.sum(axis=1, keepdims=True)
    taps = left[:, None] + offsets[None, :]
    if exclude_outside:
        weights = np.where((taps >= 0) & (taps < length), weights, 0.0)
        total = weights.sum(axis=1, keepdims=True)
        weights /= np.where(total == 0, 1.0, total)
    matrix = np.zeros((len(source), length), np.float64)
    rows = np.repeat(np.arange(len(source)), len(offsets))
    np.add.at(matrix, (rows, np.clip(taps, 0, length - 1).ravel()), weights.ravel())
    return matrix.astype(np.float32)
