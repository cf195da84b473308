"""The values a seeded random run may give an integer input: the rule `adreno run` draws by, found at compile time.

A model's float inputs take any value, but an integer input is usually an index (token ids into an embedding
table, token types into a table of two) or a flag (an attention mask): a random draw past the table makes the
reference's Gather refuse the input (onnxruntime) and makes our kernels read outside the table, so `run --check`
could not tell a right artifact from a wrong one. The rule, stated in `adreno run --help`:

- an integer input whose values reach the index operand of a Gather, GatherElements or GatherND (through ops that
  move values without changing them: Cast, Reshape, Unsqueeze, Squeeze, Flatten, Identity, Expand, Transpose, Slice,
  Concat, Tile) is drawn in [0, n), n the smallest size of the axes it indexes;
- every other integer or bool input is drawn in {0, 1}: a mask or a flag, the two cases each comparison and
  mask in the graph tells apart.

The manifest records the range of each integer input (`values`: [low, high), high exclusive); `--input` gives
any values instead."""

from __future__ import annotations

# ops whose output holds (some of) the input's values unchanged, for the input at index 0 (all inputs of Concat)
_MOVES_VALUES = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand", "Transpose", "Slice",
                 "Tile", "Concat"}
# onnx.TensorProto's element types UINT8, INT8, UINT16, INT16, INT32, INT64, BOOL, UINT32, UINT64, as numbers: our
# modules load no onnx at import (tests/test_architecture.py), and `adreno.compile` imports this one
_INTEGER_TYPES = {2, 3, 4, 5, 6, 7, 9, 12, 13}
FLAG_RANGE = (0, 2)  # an integer input that indexes nothing: a mask or a flag


def integer_ranges(model, inputs: list) -> dict[str, tuple[int, int]]:
    """[low, high) of each integer or bool input among `inputs` (ValueInfoProtos of `model`'s graph, an ONNX
    ModelProto), by name."""
    integer = [i.name for i in inputs if i.type.tensor_type.elem_type in _INTEGER_TYPES]
    if not integer:
        return {}
    dims = _known_dims(model)
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, position))
    ranges = {}
    for name in integer:
        sizes = _indexed_sizes(name, consumers, dims)
        ranges[name] = (0, min(sizes)) if sizes else FLAG_RANGE
    return ranges


def _indexed_sizes(name: str, consumers: dict, dims: dict) -> list[int]:
    """The sizes of the axes the values of tensor `name` index (followed through value-moving ops)."""
    sizes, seen, frontier = [], {name}, [name]
    while frontier:
        for node, position in consumers.get(frontier.pop(), []):
            if node.op_type in _MOVES_VALUES and (position == 0 or node.op_type == "Concat"):
                for output in node.output:
                    if output not in seen:
                        seen.add(output)
                        frontier.append(output)
            elif position == 1 and node.op_type in ("Gather", "GatherElements", "GatherND"):
                sizes.extend(_axis_sizes(node, dims.get(node.input[0])))
    return [s for s in sizes if s > 0]


def _axis_sizes(node, data_dims: list[int | None] | None) -> list[int]:
    """The sizes of the data axes a gather node's indices select along (unknown sizes left out)."""
    if not data_dims:
        return []
    if node.op_type == "GatherND":  # each index row selects along the leading axes (after the batch dims)
        batch = next((a.i for a in node.attribute if a.name == "batch_dims"), 0)
        return [d for d in data_dims[batch:] if d]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    if not -len(data_dims) <= axis < len(data_dims):
        return []
    size = data_dims[axis]
    return [size] if size else []


def _known_dims(model) -> dict[str, list[int | None]]:
    """The dimensions known before shapes are given: initializers', Constant nodes' and those shape inference
    finds (a dynamic dimension is None)."""
    import onnx
    from onnx import numpy_helper

    dims: dict[str, list[int | None]] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
        for info in list(inferred.value_info) + list(inferred.input):
            shape = info.type.tensor_type.shape
            dims[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in shape.dim]
    except (onnx.shape_inference.InferenceError, ValueError):  # the initializers and Constants still say the tables
        pass
    for init in model.graph.initializer:
        dims[init.name] = list(init.dims)
    for node in model.graph.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                dims[node.output[0]] = list(numpy_helper.to_array(value).shape)
    return dims
