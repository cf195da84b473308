"""ScatterND rewritten as a ScatterElements over rows: the form whose TVM kernel lowers for Adreno.

TVM 0.27 legalizes ScatterND for GPUs to a kernel that transposes its indices in an unscheduled block before its
hand-written, thread-bound part: the launch plan cannot place the transpose (it would run in a host loop), and in the
texture path it took the buffers' symbolic offsets as arguments. ScatterElements' kernel is one thread-bound function
(`adreno.schedules.thread_bound`). ScatterND(data, indices [..., k], updates) writes slices of
`inner = prod(data.shape[k:])` elements at the rows `indices` select among the `outer = prod(data.shape[:k])` leading
positions; so it is, exactly:

    rows  = sum_j wrap(indices[..., j]) * stride_j          (stride_j = prod(data.shape[j+1:k]), one row per tuple)
    out   = ScatterElements(Reshape(data, [outer, inner]), Expand(Reshape(rows, [U, 1]), [U, inner]),
                            Reshape(updates, [U, inner]), axis=0, reduction)   -> Reshape to data.shape

with the same reduction (none, add, mul from opset 16, max and min from 18: the same opsets allow it for both ops).
The kernel walks each column's rows in order, so repeated indices accumulate under a reduction as onnxruntime does.
Run after `index_guards` (whose safe indices are in range, negative ones still to wrap), so the new row indices are
in range by construction and are not guarded again.
"""

from __future__ import annotations

import numpy as np

from .onnx_reading import attributes, opset
from .rewrites import static_shapes


def rewrite(model):
    """A copy of `model` with every ScatterND of static shapes rewritten as above, or `model` when it has none."""
    if not any(node.op_type == "ScatterND" for node in model.graph.node):
        return model
    import onnx

    shapes = static_shapes(model, {})
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes, constants = [], []
    for position, node in enumerate(out.graph.node):
        data, indices = shapes.get(node.input[0]) if node.input else None, None
        if node.op_type == "ScatterND" and data is not None:
            indices = shapes.get(node.input[1])
        if indices is None or not indices or indices[-1] > len(data):
            nodes.append(node)  # not a ScatterND, or shapes unknown: left to the importer, which refuses them
            continue
        rows, values = _row_scatter(node, data, indices, f"adreno_scatter_nd{position}", opset(model) >= 13)
        nodes += rows
        constants += values
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(constants)
    return out


def _row_scatter(node, data: list[int], indices: list[int], prefix: str, axes_input: bool) -> tuple[list, list]:
    """The nodes and constants computing `node`'s output as a row ScatterElements (`axes_input`: the model's opset
    gives ReduceSum its axes as an input)."""
    from onnx import helper, numpy_helper

    k = indices[-1]
    outer, inner = int(np.prod(data[:k], dtype=np.int64)), int(np.prod(data[k:], dtype=np.int64))
    count = int(np.prod(indices[:-1], dtype=np.int64))
    strides = [int(np.prod(data[j + 1:k], dtype=np.int64)) for j in range(k)]
    values = {"sizes": np.array(data[:k], np.int64), "strides": np.array(strides, np.int64),
              "zero": np.array(0, np.int64), "table": np.array([outer, inner], np.int64),
              "column": np.array([count, 1], np.int64), "block": np.array([count, inner], np.int64),
              "shape": np.array(data, np.int64), "last": np.array([-1], np.int64)}
    constants = [numpy_helper.from_array(v, f"{prefix}_{name}") for name, v in values.items()]
    c = {name: f"{prefix}_{name}" for name in values}
    v = lambda name: f"{prefix}_{name}"  # noqa: E731
    reduction = attributes(node).get("reduction")
    data_in, index_in, updates_in = node.input[:3]
    nodes = [
        helper.make_node("Cast", [index_in], [v("int64")], to=7),  # int64: the strides' type
        helper.make_node("Less", [v("int64"), c["zero"]], [v("negative")]),
        helper.make_node("Add", [v("int64"), c["sizes"]], [v("shifted")]),
        helper.make_node("Where", [v("negative"), v("shifted"), v("int64")], [v("wrapped")]),
        helper.make_node("Mul", [v("wrapped"), c["strides"]], [v("terms")]),
        # the row of each tuple: its terms summed (ReduceSum's axes are an input from opset 13, before an attribute)
        helper.make_node("ReduceSum", [v("terms"), c["last"]], [v("rows")], keepdims=0) if axes_input else
        helper.make_node("ReduceSum", [v("terms")], [v("rows")], keepdims=0, axes=[-1]),
        helper.make_node("Reshape", [v("rows"), c["column"]], [v("row_column")]),
        helper.make_node("Expand", [v("row_column"), c["block"]], [v("row_block")]),
        helper.make_node("Reshape", [data_in, c["table"]], [v("table_in")]),
        helper.make_node("Reshape", [updates_in, c["block"]], [v("updates")]),
        helper.make_node("ScatterElements", [v("table_in"), v("row_block"), v("updates")], [v("table_out")], axis=0,
                         **({"reduction": reduction} if reduction is not None else {})),
        helper.make_node("Reshape", [v("table_out"), c["shape"]], [node.output[0]], name=node.name),
    ]
    return nodes, constants
