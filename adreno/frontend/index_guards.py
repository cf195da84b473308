"""Run-time indices made safe and checked: a gather or scatter never reads or writes outside its tensor.

ONNX makes an index outside [-n, n-1] an error (onnxruntime refuses the input); TVM's kernels do not check, so a
Gather given index 2 into a 2-row table returns whatever memory lies past the table (on a phone: past a GPU buffer
or image), and a scatter writes there. Constant indices are checked at compile time (`indices`); this rewrite
covers those computed at run time. Before each index-taking node it inserts ONNX ops that
- replace an index outside [-n, n-1] (outside [0, n-1] where the op has no negative indices) by 0, which is in range:
  the kernel reads and writes inside the tensor whatever the input (the safe fallback); an in-range negative index
  stays, for TVM's importer to wrap as the spec says (it does for every op that allows them; `frontend.scatter_nd`
  wraps ScatterND's itself);
- reduce "was any index of this node outside" to one int32, and concatenate these flags, one per guarded node, into
  an extra graph output, `OUTPUT` (a single flag is the output itself).
The executors, TVM's runtime path and the native harness read that output after a run and fail in one line naming
the first flagged node (`adreno.artifact.index_checks`); the manifest lists the nodes in flag order. Everything stays
ONNX, so both memories, both runtimes and the harness lower and run it like any other op: no kernel of ours changes.

OneHot is not here: ONNX defines its out-of-range index (every output element is off_value), which its rewrite as a
comparison (`frontend.one_hot`) computes. An index-taking op whose indices are constants is not guarded:
its indices were checked at compile time, and TVM's importer wraps negative ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .onnx_reading import attributes

OUTPUT = "adreno_index_errors"  # the extra graph output: int32 [guarded nodes], 1 where a node saw a bad index


@dataclass(frozen=True)
class IndexOp:
    """Where an op's indices are and what bounds them: `data` is the input (or, with `data_is_output`, the output)
    whose axes the indices select; `tuple_axes`: the indices' last axis holds a tuple over leading axes (from
    `batch_dims`) instead of one index into `axis`; `flat`: one index into the whole flattened tensor; `wraps`:
    ONNX defines negative indices (counted from the end)."""
    data: int
    indices: int
    tuple_axes: bool = False
    flat: bool = False
    wraps: bool = True
    data_is_output: bool = False


INDEX_OPS = {
    "Gather": IndexOp(0, 1), "GatherElements": IndexOp(0, 1), "ScatterElements": IndexOp(0, 1),
    "Scatter": IndexOp(0, 1), "GatherND": IndexOp(0, 1, tuple_axes=True), "ScatterND": IndexOp(0, 1, tuple_axes=True),
    # MaxPool's flattened argmax positions into the unpooled output; RoiAlign's batch index of each box
    "MaxUnpool": IndexOp(0, 1, flat=True, wraps=False, data_is_output=True), "RoiAlign": IndexOp(0, 2, wraps=False),
}


@dataclass
class GuardedNodes:
    """The nodes whose run-time indices `guard` checks, in the order of their flags in `OUTPUT`: each a dict with the
    node's label (its name, or #position), its op, the sizes its indices range over and whether negative ones wrap
    (`adreno.artifact.index_checks` says the valid range in the error)."""
    nodes: list[dict] = field(default_factory=list)


def guard(model, guarded: GuardedNodes):
    """A copy of `model` (static input shapes: `constfold.prepare`'s) whose index-taking nodes with run-time indices
    read safe indices and report bad ones in the graph output `OUTPUT` (recorded in `guarded`), or `model` itself
    when no node takes run-time indices."""
    constants = {t.name for t in model.graph.initializer}
    targets = [(position, node) for position, node in enumerate(model.graph.node)
               if node.op_type in INDEX_OPS and len(node.input) > INDEX_OPS[node.op_type].indices
               and node.input[INDEX_OPS[node.op_type].indices] not in constants]
    if not targets:
        return model
    import onnx
    from onnx import TensorProto, helper

    values = _values(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants, flags, inserted = [], [], {}
    for position, node in targets:
        spec = INDEX_OPS[node.op_type]
        index_name = node.input[spec.indices]
        sizes = _bounds(node, spec, values)
        if sizes is None or index_name not in values:
            continue  # no static shape: TVM's importer refuses the node itself
        dtype = helper.tensor_dtype_to_np_dtype(values[index_name][1])
        guard_values = _GuardValues(f"adreno_guard{position}", index_name, np.asarray(sizes, dtype), spec.wraps)
        out.graph.node[position].input[spec.indices] = guard_values.safe
        inserted[position] = guard_values.nodes()
        constants += guard_values.constants()
        flags.append(guard_values.flag)
        guarded.nodes.append({"node": node.name or f"#{position}", "op": node.op_type, "sizes": list(sizes),
                              "wraps": spec.wraps})
    if not flags:
        return model
    ordered = []
    for position, node in enumerate(out.graph.node):
        ordered.extend(inserted.get(position, []))
        ordered.append(node)
    if len(flags) > 1:
        ordered.append(helper.make_node("Concat", flags, [OUTPUT], axis=0))
    else:  # one flag: the output itself, no copy
        ordered[-1 - next(i for i, n in enumerate(reversed(ordered)) if flags[0] in n.output)].output[0] = OUTPUT
    del out.graph.node[:]
    out.graph.node.extend(ordered)
    out.graph.initializer.extend(constants)
    out.graph.output.append(helper.make_tensor_value_info(OUTPUT, TensorProto.INT32, [len(flags)]))
    return out


def _values(model) -> dict[str, tuple[list[int], int]]:
    """Name -> (static shape, ONNX element type) of each value whose shape ONNX's inference knows completely."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    found = {t.name: (list(t.dims), t.data_type) for t in model.graph.initializer}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tensor = value.type.tensor_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            found[value.name] = ([d.dim_value for d in tensor.shape.dim], tensor.elem_type)
    return found


def _bounds(node, spec: IndexOp, values: dict[str, tuple[list[int], int]]) -> list[int] | None:
    """The sizes the node's indices range over: one (an axis, or the flattened tensor) or, for a tuple, one per
    position of the indices' last axis."""
    data = (node.output if spec.data_is_output else node.input)[spec.data]
    if data not in values or node.input[spec.indices] not in values:
        return None
    shape, index_shape = values[data][0], values[node.input[spec.indices]][0]
    attrs = attributes(node)
    if spec.flat:
        return [int(np.prod(shape))]
    if spec.tuple_axes:
        start = int(attrs.get("batch_dims", 0))
        if not index_shape or start + index_shape[-1] > len(shape):
            return None  # malformed: TVM's importer refuses it
        return [int(s) for s in shape[start:start + index_shape[-1]]]
    axis = int(attrs.get("axis", 0))
    axis = axis + len(shape) if axis < 0 else axis
    return [int(shape[axis])] if 0 <= axis < len(shape) else None


@dataclass(frozen=True)
class _GuardValues:
    """The ONNX nodes and constants of one node's guard, in the indices' own type (no cast of the indices): two
    chains over the raw indices, so that each fuses into its consumer (TVM's FuseOps fuses a chain of elementwise
    ops into the one op that reads it): the safe indices into the gather or scatter, the flag into its reduction.
    Negative indices stay for TVM's importer to wrap (it does, for every op that allows them)."""
    prefix: str
    indices: str
    sizes: np.ndarray  # one per axis of a tuple index (broadcast over the indices' last axis), else one
    wraps: bool

    @property
    def safe(self) -> str:
        return f"{self.prefix}_safe"

    @property
    def flag(self) -> str:
        return f"{self.prefix}_flag"

    def constants(self) -> list:
        from onnx import numpy_helper

        sizes = self.sizes if self.sizes.size > 1 else self.sizes.reshape(())
        low = -sizes if self.wraps else np.zeros_like(sizes)
        values = {"sizes": sizes, "low": low, "zero": np.zeros((), sizes.dtype), "all": np.array([-1], np.int64)}
        return [numpy_helper.from_array(value, f"{self.prefix}_{name}") for name, value in values.items()]

    def nodes(self) -> list:
        from onnx import TensorProto, helper

        p = self.prefix
        return [*self._outside("s"), helper.make_node("Where", [f"{p}_s_bad", f"{p}_zero", self.indices], [self.safe]),
                *self._outside("f"), helper.make_node("Cast", [f"{p}_f_bad"], [f"{p}_f_int"], to=TensorProto.INT32),
                helper.make_node("Reshape", [f"{p}_f_int", f"{p}_all"], [f"{p}_f_flat"]),
                helper.make_node("ReduceMax", [f"{p}_f_flat"], [self.flag], keepdims=1)]

    def _outside(self, chain: str) -> list:
        """Nodes computing `{prefix}_{chain}_bad`: the index is below its low bound or not below its size."""
        from onnx import helper

        p, c = self.prefix, f"{self.prefix}_{chain}"
        return [helper.make_node("Less", [self.indices, f"{p}_low"], [f"{c}_below"]),
                helper.make_node("Less", [self.indices, f"{p}_sizes"], [f"{c}_inside"]),
                helper.make_node("Not", [f"{c}_inside"], [f"{c}_above"]),
                helper.make_node("Or", [f"{c}_below", f"{c}_above"], [f"{c}_bad"])]
