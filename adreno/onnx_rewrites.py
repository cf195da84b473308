"""ONNX forms that TVM 0.27's importer reads wrongly, rewritten before import into equivalent forms it reads right.

- ConvTranspose with `output_shape`: the importer ignores the attribute and returns the natural output size (the
  ONNX node case convtranspose_output_shape: 9x7 instead of 10x8). It becomes explicit `pads` (the output is
  cropped) or a larger `output_padding` (the output grows at its end), as the ONNX spec and onnxruntime resolve it:
  an odd total padding crops the extra row at the start, or at the end for SAME_UPPER.
- PRelu of opset < 7 with a slope of shape [C]: before opset 7 that slope is per channel (axis 1); the importer
  applies a 1-D slope to the last axis, and fails its shape assertion (PyTorch's PReLU_2d_multiparam). The slope
  becomes [C, 1, ..., 1], which broadcasts over axis 1 in every opset.

`rewrite(model, shapes)` returns a rewritten copy (the caller's model is untouched) or the model itself when nothing
applies; `shapes` are the static input shapes the compile uses (for the ConvTranspose input sizes).
"""

from __future__ import annotations

import numpy as np

from .errors import ModelError


def rewrite(model, shapes: dict[str, list[int]]):
    convt = [n for n in model.graph.node if n.op_type == "ConvTranspose" and _attr(n, "output_shape") is not None]
    prelu = [n for n in model.graph.node if n.op_type == "PRelu"] if _opset(model) < 7 else []
    if not convt and not prelu:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    known = _static_shapes(out, shapes)
    for i, node in enumerate(out.graph.node):
        if node.op_type == "ConvTranspose" and _attr(node, "output_shape") is not None:
            _explicit_pads(node, known, node.name or f"#{i}")
        elif node.op_type == "PRelu" and prelu:
            _per_channel_slope(out, node, len(known.get(node.input[0], [0] * 4)))
    return out


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _attr(node, name: str):
    import onnx

    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), None)


def _set_ints(node, name: str, values: list[int]) -> None:
    import onnx

    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, onnx.helper.make_attribute(name, [int(v) for v in values])])


def _initializers(model) -> dict:
    return {t.name: t for t in model.graph.initializer}


def _static_shapes(model, shapes: dict[str, list[int]]) -> dict[str, list[int]]:
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
    for value in [*inferred.graph.input, *inferred.graph.value_info]:
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            found[value.name] = [d.dim_value for d in dims]
    found.update({t.name: list(t.dims) for t in model.graph.initializer})
    return found


def _explicit_pads(node, shapes: dict[str, list[int]], label: str) -> None:
    x_shape, w_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    if x_shape is None or w_shape is None:
        raise ModelError(f"ConvTranspose node {label}: its output_shape needs static input and weight shapes; give "
                         "the input's shape with --input-shape")
    spatial = len(x_shape) - 2
    kernel = _attr(node, "kernel_shape") or w_shape[2:]
    strides = _attr(node, "strides") or [1] * spatial
    dilations = _attr(node, "dilations") or [1] * spatial
    output_padding = list(_attr(node, "output_padding") or [0] * spatial)
    wanted = list(_attr(node, "output_shape"))[-spatial:]
    auto_pad = _attr(node, "auto_pad")
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
