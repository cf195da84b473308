"""Rewrite the forms of Upsample and Resize that TVM 0.27's importer misreads into the one form it handles.

TVM's importer has one Resize converter, written for opset 18's full-rank inputs (X, roi, scales, sizes); its
Upsample converter reads the scales from an attribute, which only opset 7 has. So, once every parameter is a
constant (`constfold`):
- Upsample(X, scales) (opset 9), or Upsample(X) with a `scales` attribute (opsets 7, 8; the importer's own
  converter rounds nearest's coordinates instead of flooring them), becomes Resize(X, "", scales) with Upsample's
  coordinates (asymmetric, floor);
- opset 10's Resize(X, scales) gets the empty roi its inputs lack;
- Resize with an `axes` attribute gets full-rank scales, sizes and roi (the other axes unchanged);
- Resize with sizes and keep_aspect_ratio_policy not_larger/not_smaller gets the sizes the policy gives."""

from __future__ import annotations

import numpy as np

from .onnx_reading import attributes


def canonicalise(graph, constants: dict[str, np.ndarray], shapes: dict[str, tuple]) -> None:
    """Rewrite the graph's Upsample and Resize nodes in place (see the module doc)."""
    for node in graph.node:
        if node.op_type == "Upsample" and len(node.input) == 1:  # opsets 7, 8: scales is an attribute
            _scales_input(graph, node, constants)
        if node.op_type == "Upsample" and len(node.input) > 1 and node.input[1] in constants:
            _upsample_to_resize(node)
        if node.op_type != "Resize":
            continue
        if len(node.input) == 2:  # opset 10: (X, scales)
            node.input.insert(1, "")
        rank = len(shapes.get(node.input[0], ()))
        if rank:
            _full_rank(graph, node, constants, shapes[node.input[0]])


def _scales_input(graph, node, constants: dict[str, np.ndarray]) -> None:
    """Opset 7's `scales` attribute as opset 9's constant input (an attribute-less node is left to the checks)."""
    from onnx import numpy_helper

    scales = attributes(node).get("scales")
    if scales is None:
        return
    name = f"{node.name or node.output[0]}_scales"
    value = np.array(scales, np.float32)
    graph.initializer.append(numpy_helper.from_array(value, name))
    constants[name] = value
    node.input.append(name)


def _upsample_to_resize(node) -> None:
    from onnx import helper

    mode = attributes(node).get("mode", b"nearest")
    node.op_type = "Resize"
    node.input.insert(1, "")
    del node.attribute[:]
    node.attribute.extend([helper.make_attribute("mode", mode),
                           helper.make_attribute("coordinate_transformation_mode", "asymmetric"),
                           helper.make_attribute("nearest_mode", "floor")])


def _full_rank(graph, node, constants: dict[str, np.ndarray], in_shape: tuple) -> None:
    from onnx import numpy_helper

    attrs = attributes(node)
    rank = len(in_shape)
    axes = [a % rank for a in attrs.get("axes", range(rank))]
    policy = attrs.get("keep_aspect_ratio_policy", b"stretch").decode()
    if list(axes) == list(range(rank)) and policy == "stretch":
        return
    names = list(node.input) + [""] * (4 - len(node.input))
    values = [constants.get(name) if name else None for name in names]
    if any(name and value is None for name, value in zip(names[1:], values[1:])):
        return  # runtime parameters: refused by constfold.check_compile_time_inputs
    roi, scales, sizes = values[1:]
    new = {}
    if roi is not None and roi.size:
        full = np.array([0.0] * rank + [1.0] * rank, dtype=roi.dtype)
        for i, axis in enumerate(axes):
            full[axis], full[rank + axis] = roi[i], roi[len(axes) + i]
        new[1] = full
    if scales is not None and scales.size:
        full = np.ones(rank, dtype=scales.dtype)
        full[axes] = scales
        new[2] = full
    if sizes is not None and sizes.size:
        full = np.array(in_shape, dtype=np.int64)
        if policy == "stretch":
            full[axes] = sizes
        else:  # one scale for every axis, the largest that fits (not_larger) or the smallest that covers
            ratios = [sizes[i] / in_shape[axis] for i, axis in enumerate(axes)]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            full[axes] = [int(np.floor(scale * in_shape[axis] + 0.5)) for axis in axes]
        new[3] = full
    for position, value in new.items():
        name = f"{node.name or node.output[0]}_full_rank_{position}"
        graph.initializer.append(numpy_helper.from_array(value, name))
        constants[name] = value
        names[position] = name
    while names and not names[-1]:
        names.pop()
    del node.input[:]
    node.input.extend(names)
    kept = [a for a in node.attribute if a.name not in ("axes", "keep_aspect_ratio_policy")]
    del node.attribute[:]
    node.attribute.extend(kept)
