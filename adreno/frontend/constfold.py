"""Compile-time evaluation of an ONNX graph's shape computations, once its input shapes are static.

Exporters (PaddlePaddle's, PyTorch's) write a reshape's target shape as a small graph over the tensor's runtime
shape: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, often with Cast, Slice, Mul or ConstantOfShape on the way.
TVM's importer keeps such subgraphs symbolic and then refuses the Reshape ("requires the input new shape to be
Shape"). With every input shape fixed (`--input-shape`), each of these values is a constant: ONNX's shape inference
gives the shapes, and a node whose inputs are all known (small) constants is evaluated with ONNX's reference
evaluator. Folded values become initializers; the nodes that computed them are dropped.

The same pass then finds the parameters an Adreno kernel needs at compile time (a Pad's pads, a Resize's sizes,
...) that are still runtime values, and refuses them with one line naming the node and what to do."""

from __future__ import annotations

import numpy as np

from .branches import check_no_runtime_branches, graph_inputs_under, inline_constant_branches
from .canonical import canonicalise
from .empty import unclaimed
from .indices import check_constant_indices
from .onnx_reading import attributes, opset
from ..errors import ModelError

# A node is folded only while its constant inputs and outputs stay this small (shape vectors, scales, axes):
# weights are left to TVM, which folds their preprocessing itself.
MAX_ELEMENTS = 4096
# Ops never evaluated at compile time (nondeterministic).
UNFOLDABLE = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
              "If", "Loop", "Scan"}
# op type -> positions of the inputs that select shapes, axes or padding: the kernels are specialised on them, so
# they must be constants. Reductions take `axes` as input 1 from opset 13 (ReduceSum) or 18 (the rest).
COMPILE_TIME_INPUTS = {
    "Reshape": (1,), "Pad": (1, 2, 3), "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3), "Upsample": (1,),
    "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,),
    "TopK": (1,), "Range": (0, 1, 2), "OneHot": (1, 2), "LSTM": (4,), "GRU": (4,), "RNN": (4,),
    **{op: (1,) for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
}


def prepare(model, shapes: dict[str, list[int]], empty=None):
    """A copy of `model` ready for TVM's importer: initializers listed as graph inputs (IR version 3) are no longer
    inputs, the inputs have the static `shapes`, shape subgraphs are folded to constants, Upsample and Resize are
    in the form the importer reads (`canonical`), every compile-time parameter is a constant, no tensor is empty
    and no constant gather or scatter index is out of range (`indices`; else `ModelError`): with an
    `empty.EmptyTensors` given, empty outputs (and the inputs only they read) are moved there instead of refused.
    An `If` whose condition folds is replaced by the branch it takes (`branches`); one that does not is refused."""
    model = _with_static_inputs(model, shapes)
    constants = {**_empty_inputs(model), **_initial_constants(model.graph)}
    # fold, re-infer shapes, fold again, to a fixed point: each round reaches one Reshape further into the graph (a
    # chain of `x = Reshape(f(x), Shape(f(x)))` links takes one round per link) and removes at least one node, or
    # inlines an If (at most one per node of the model and of its branches): the graph's size bounds the rounds
    unfoldable: set[str] = set()  # nodes whose constant inputs gave no small value: not evaluated again
    for _ in range(_node_count(model.graph) + 1):
        static = _static_shapes(model)
        folded = _fold_round(model, constants, static, unfoldable)
        inlined = inline_constant_branches(model.graph, constants)
        for branch in inlined:
            constants.update(_initial_constants(branch))
        if not folded and not inlined:
            break
    check_no_runtime_branches(model.graph)
    canonicalise(model.graph, constants, static)
    check_compile_time_inputs(model.graph, constants)
    computed = _inferred_shapes(unclaimed(model))  # the outputs' declared shapes are not believed
    if empty is not None:
        empty.drop(model, _without_negative(computed))
    check_not_empty(model.graph, static, constants)
    check_constant_indices(model.graph, static, constants)
    check_no_negative_sizes(model, computed)
    return model


def _node_count(graph) -> int:
    """The nodes of `graph` and of every subgraph (If branches) in it."""
    from onnx import AttributeProto

    return sum(1 + sum(_node_count(a.g) for a in node.attribute if a.type == AttributeProto.GRAPH)
               for node in graph.node)


def _with_static_inputs(model, shapes: dict[str, list[int]]):
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    weights = {init.name for init in graph.initializer}
    kept = [i for i in graph.input if i.name not in weights]
    del graph.input[:]
    graph.input.extend(kept)
    if copy.ir_version < 4:  # from IR 4 on, initializers need not be inputs (what we just made true)
        copy.ir_version = 4
    for inp in graph.input:
        if inp.name in shapes:
            dims = inp.type.tensor_type.shape.dim
            del dims[:]
            for size in shapes[inp.name]:
                dims.add().dim_value = int(size)
    return copy


def _initial_constants(graph) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            value = _constant_node_value(node)
            if value is not None:
                constants[node.output[0]] = value
    return constants


def _empty_inputs(model) -> dict[str, np.ndarray]:
    """The graph inputs with no elements, as values: an empty tensor's value is known, so what is computed from it
    alone (a reduction over an empty axis: its identity) folds to a constant instead of being refused."""
    from onnx import helper

    values = {}
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        shape = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
        if 0 in shape and -1 not in shape:
            dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            values[value.name] = np.zeros(shape, dtype=dtype)
    return values


def _constant_node_value(node):
    from onnx import helper, numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name in ("value_float", "value_int", "value_floats", "value_ints"):
            value = helper.get_attribute_value(attr)
            return np.array(value, dtype=np.float32 if "float" in attr.name else np.int64)
    return None  # sparse or string constants: left to the importer


def _static_shapes(model) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every value ONNX's shape inference knows completely (no negative size among them)."""
    return _without_negative(_inferred_shapes(model))


def _without_negative(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    return {name: shape for name, shape in shapes.items() if min(shape, default=0) >= 0}


def _inferred_shapes(model) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every value ONNX's shape inference gives every size of, negative ones included."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return {}
    shapes = {}
    for info in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        tensor = info.type.tensor_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[info.name] = tuple(d.dim_value for d in tensor.shape.dim)
    return shapes


def check_no_negative_sizes(model, shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse the first node whose output ONNX's shape inference sizes negative (`shapes`, from the model without
    its outputs' declared shapes): a conv or pool window (with its dilation) larger than its padded input, or
    padding that removes more than the input has. TVM's lowering would raise on it deep in its conv compute, long
    after the import."""
    for index, node in enumerate(model.graph.node):
        pads = attributes(node).get("pads", [])
        if node.op_type != "Pad" and min(pads, default=0) < 0:  # ONNX's shape inference gives up on them
            raise ModelError(f"node {node.name or f'#{index}'} ({node.op_type}): its pads {list(pads)} are negative; "
                             "crop the input with a Slice instead")
        for name in node.output:
            if min(shapes.get(name, ()), default=0) < 0:
                inputs = [list(shapes[i]) for i in node.input[:1] if i in shapes]
                raise ModelError(f"node {node.name or f'#{index}'} ({node.op_type}): its output {name!r} would have "
                                 f"the negative shape {list(shapes[name])}"
                                 f"{f' from its input of shape {inputs[0]}' if inputs else ''}; its window, padding "
                                 "or dilation does not fit its input")


def _fold_round(model, constants: dict[str, np.ndarray], shapes: dict[str, tuple], unfoldable: set[str]) -> bool:
    """Fold every node whose value is now known (`shapes`: the static shapes before this round); True if any was.
    A node whose inputs are all constants but whose value is not (too large, or an op the evaluator lacks) is added
    to `unfoldable` (by its first output) and skipped in later rounds: its inputs will not change."""
    from onnx import numpy_helper

    graph = model.graph
    version = opset(model, 13)
    kept, folded = [], []
    for node in graph.node:
        skip = node.op_type == "Constant" or (node.output and node.output[0] in unfoldable)
        values = None if skip else _evaluate(node, constants, shapes, version)
        if values is None:
            if not skip and node.output and all(n in constants for n in node.input if n):
                unfoldable.add(node.output[0])
            kept.append(node)
            continue
        folded.append(node)
        constants.update(zip(node.output, values))
    if not folded:
        return False
    used = {name for node in kept for name in node.input} | {o.name for o in graph.output}
    existing = {init.name for init in graph.initializer}
    for node in folded:
        for name in node.output:
            if name in used and name not in existing:
                graph.initializer.append(numpy_helper.from_array(np.asarray(constants[name]), name))
    del graph.node[:]
    graph.node.extend(kept)
    return True


def _evaluate(node, constants: dict[str, np.ndarray], shapes: dict[str, tuple], opset: int):
    """The node's output values if they can be known at compile time and are small, else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type in UNFOLDABLE:
        return None
    if node.op_type in ("Shape", "Size") and node.input[0] in shapes:
        return [_shape_value(node, shapes[node.input[0]])]
    inputs = [name for name in node.input if name]
    if not all(name in constants for name in inputs):
        return None
    if sum(np.asarray(constants[name]).size for name in inputs) > MAX_ELEMENTS:
        return None
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    # a one-node model, not the bare node: the evaluator picks the op's implementation by the model's opset
    graph = helper.make_graph([node], "fold", [helper.make_value_info(n, helper.TypeProto()) for n in inputs],
                              [helper.make_value_info(n, helper.TypeProto()) for n in node.output])
    try:
        evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
        outputs = evaluator.run(None, {n: constants[n] for n in inputs})
    except Exception:  # noqa: BLE001 - an op the reference evaluator lacks or rejects stays in the graph for TVM
        return None
    outputs = [np.asarray(value) for value in outputs]
    if len(outputs) != len(node.output) or any(value.size > MAX_ELEMENTS for value in outputs):
        return None
    return outputs


def _shape_value(node, shape: tuple) -> np.ndarray:
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    attrs = attributes(node)
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return np.array(shape[start:end], dtype=np.int64)


def check_compile_time_inputs(graph, constants: dict[str, np.ndarray]) -> None:
    """Refuse the first node whose shape/axes/padding parameter is still a runtime value."""
    import onnx

    graph_inputs = {i.name for i in graph.input}
    for index, node in enumerate(graph.node):
        for position in COMPILE_TIME_INPUTS.get(node.op_type, ()):
            if position >= len(node.input) or not node.input[position] or node.input[position] in constants:
                continue
            value = node.input[position]
            try:
                label = onnx.defs.get_schema(node.op_type).inputs[position].name
            except (onnx.defs.SchemaError, IndexError):
                label = f"#{position}"
            if value in graph_inputs:
                what = (f"is the graph input {value!r}; bind its value at compile time with --bind "
                        f"{value}=FILE.npy (or make it an initializer)")
            else:
                producers = {name: node for node in graph.node for name in node.output}
                sources = graph_inputs_under(value, producers, graph_inputs)
                what = (f"({value!r}) is computed from the values of the graph input"
                        f"{'s' if len(sources) > 1 else ''} {', '.join(map(repr, sources))}; bind "
                        f"{'them' if len(sources) > 1 else 'it'} at compile time with --bind NAME=FILE.npy if "
                        "fixed: the compiler needs this value at compile time"
                        if sources else f"({value!r}) depends on run-time data no graph input gives; make it an "
                        "initializer of the model (its value baked in): the compiler needs it at compile time")
            raise ModelError(f"node {node.name or f'#{index}'} ({node.op_type}): its {label} input {what}")


def check_not_empty(graph, shapes: dict[str, tuple], constants: dict[str, np.ndarray]) -> None:
    """Refuse a graph in which a computed tensor or an input that is read has no elements (a Slice past the end, a
    split of size 0): a kernel over nothing has no launch size, and TVM's lowering divides by the zero extent
    (`adreno.frontend.empty` takes empty outputs out of the graph before). Empty constants (a Resize's roi) are
    parameters, not tensors a kernel computes."""
    inputs = {i.name for i in graph.input}
    for index, node in enumerate(graph.node):
        label = f"node {node.name or f'#{index}'} ({node.op_type})"
        for name in node.input:
            if name in inputs and 0 in shapes.get(name, ()):
                raise ModelError(f"{label}: its input {name!r} is empty (shape {list(shapes[name])}); an empty "
                                 "tensor can only be a graph output or an input that only empty outputs read")
        for name in node.output:
            if name not in constants and 0 in shapes.get(name, ()):
                raise ModelError(f"{label}: its output {name!r} is empty (shape {list(shapes[name])}) and is not "
                                 "only a graph output; remove the empty tensor from the model")
