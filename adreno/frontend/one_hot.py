"""OneHot rewritten as a comparison with the class numbers: no TVM one_hot, whose import and kernel get it wrong.

TVM 0.27's OneHot converter passes the `values` as Python floats, so its one_hot kernel computes and returns float64
(no float64 on most Adreno GPUs, and not the model's float32: the app harness refuses the dtype); it hands a float
`depth` or float indices (ONNX casts both to int64) to relax's one_hot, which takes integers, and fails; a negative
axis raises an IndexError inside it (the node cases onehot_with_axis, onehot_with_negative_axis). With `depth` and
`values` constants (`constfold.COMPILE_TIME_INPUTS`) OneHot is, in the values' own dtype:

    index = Cast(indices, int64); index = Where(index < 0, index + depth, index)      (ONNX wraps negative ones)
    out   = Where(Reshape(index, shape with a 1 at axis) == classes, on_value, off_value)

where `classes` is 0 .. depth-1 laid along `axis`. An index outside -depth .. depth-1 equals no class: its row is all
off_value, which is what ONNX defines (no error, so `index_guards` leaves OneHot alone). Elementwise only: one fused
kernel in either memory.
"""

from __future__ import annotations

import numpy as np

from .onnx_reading import attributes


def rewrite(model, inferred):
    """A copy of `model` with every OneHot of static index shape and constant depth and values rewritten as above,
    or `model` itself when it has none (`inferred`: `rewrites.InferredShapes`, read only when there is one)."""
    if not any(node.op_type == "OneHot" for node in model.graph.node):
        return model
    import onnx
    from onnx import numpy_helper

    shapes = inferred.of(model)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes, constants, replaced = [], [], []
    for position, node in enumerate(out.graph.node):
        if node.op_type != "OneHot" or node.input[0] not in shapes \
                or not all(name in weights for name in node.input[1:3]):
            nodes.append(node)  # not a OneHot, or its depth or values at run time: refused by `constfold`
            continue
        depth = int(np.asarray(weights[node.input[1]]).reshape(-1)[0])  # ONNX: cast to int64
        values = np.asarray(weights[node.input[2]])
        comparison, tables = _comparison(node, shapes[node.input[0]], depth, values, f"adreno_one_hot{position}")
        nodes += comparison
        constants += tables
        replaced.append(node)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(constants)
    inferred.replaced(replaced)
    return out


def _comparison(node, index_shape: list[int], depth: int, values: np.ndarray, prefix: str) -> tuple[list, list]:
    from onnx import TensorProto, helper, numpy_helper

    rank = len(index_shape) + 1
    axis = attributes(node).get("axis", -1)
    axis = axis + rank if axis < 0 else axis
    laid = [1] * rank
    laid[axis] = depth
    tables = {"depth": np.array(depth, np.int64), "zero": np.array(0, np.int64),
              "shape": np.array([*index_shape[:axis], 1, *index_shape[axis:]], np.int64),
              "classes": np.arange(depth, dtype=np.int64).reshape(laid),
              "off": values.reshape(-1)[0:1].reshape(()), "on": values.reshape(-1)[1:2].reshape(())}
    v = {name: f"{prefix}_{name}" for name in (*tables, "index", "negative", "shifted", "wrapped", "column", "hit")}
    nodes = [helper.make_node("Cast", [node.input[0]], [v["index"]], to=TensorProto.INT64),
             helper.make_node("Less", [v["index"], v["zero"]], [v["negative"]]),
             helper.make_node("Add", [v["index"], v["depth"]], [v["shifted"]]),
             helper.make_node("Where", [v["negative"], v["shifted"], v["index"]], [v["wrapped"]]),
             helper.make_node("Reshape", [v["wrapped"], v["shape"]], [v["column"]]),
             helper.make_node("Equal", [v["column"], v["classes"]], [v["hit"]]),
             helper.make_node("Where", [v["hit"], v["on"], v["off"]], [node.output[0]], name=node.name)]
    return nodes, [numpy_helper.from_array(value, v[name]) for name, value in tables.items()]
