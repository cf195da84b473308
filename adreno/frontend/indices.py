"""Constant indices of gathers and scatters checked against the data they index, at compile time.

ONNX leaves an index outside [-size, size) undefined, and onnxruntime refuses it at run time. A kernel does not
check: a gather reads whatever memory lies past the tensor (the output is silently garbage), a scatter writes
there. When the indices are constants (an initializer, or folded), the compiler knows them: one out of range is
refused in one line naming the node, the index and the axis. Indices computed at run time cannot be checked here.
"""

from __future__ import annotations

import numpy as np

from .onnx_reading import attributes
from ..errors import ModelError

AXIS_OPS = {"Gather": (0, 1), "GatherElements": (0, 1), "ScatterElements": (0, 1)}  # op -> (data, indices) inputs
TUPLE_OPS = {"GatherND": (0, 1), "ScatterND": (0, 1)}  # the indices' last axis holds tuples over leading axes


def check_constant_indices(graph, shapes: dict[str, tuple], constants: dict[str, np.ndarray]) -> None:
    """Refuse the first gather or scatter whose constant indices fall outside the data they index."""
    for position, node in enumerate(graph.node):
        kind = AXIS_OPS.get(node.op_type) or TUPLE_OPS.get(node.op_type)
        if kind is None or len(node.input) <= kind[1] or node.input[kind[1]] not in constants:
            continue
        data = node.input[kind[0]]
        shape = shapes.get(data) or (constants[data].shape if data in constants else None)
        if shape is None:
            continue
        indices = np.asarray(constants[node.input[kind[1]]]).astype(np.int64)
        attrs = _int_attributes(node)
        found = (_axis_problem(indices, shape, attrs.get("axis", 0)) if node.op_type in AXIS_OPS
                 else _tuple_problem(indices, shape, attrs.get("batch_dims", 0)))
        if found:
            raise ModelError(f"node {node.name or f'#{position}'} ({node.op_type}): {found}; ONNX leaves such an "
                             "index undefined and a kernel would read or write outside the tensor")


def _axis_problem(indices: np.ndarray, shape: tuple, axis: int) -> str | None:
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        return None  # the importer refuses a bad axis with its own message
    return _out_of_range(indices, shape[axis], f"axis {axis}")


def _tuple_problem(indices: np.ndarray, shape: tuple, batch_dims: int) -> str | None:
    if indices.ndim == 0 or batch_dims + indices.shape[-1] > len(shape):
        return None
    for column in range(indices.shape[-1]):
        axis = batch_dims + column
        problem = _out_of_range(indices[..., column], shape[axis], f"axis {axis}")
        if problem:
            return problem
    return None


def _out_of_range(values: np.ndarray, size: int, where: str) -> str | None:
    bad = values[(values < -size) | (values >= size)]
    if bad.size == 0:
        return None
    return f"index {int(bad.flat[0])} is out of range for {where} of size {size} (valid: {-size}..{size - 1})"


def _int_attributes(node) -> dict[str, int]:
    return {name: int(value) for name, value in attributes(node).items() if name in ("axis", "batch_dims")}
