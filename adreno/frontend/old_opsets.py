"""Ops of opsets 1..9 whose parameters were attributes, in the forms TVM 0.27's importer converts correctly.

TVM's importer picks, for each op, its converter of the newest version <= the model's opset, or its oldest when the
model's opset is older than all of them. Where that converter reads a later opset's inputs, the old attribute form
fails or is silently wrong:
- Slice of opset < 10 (`starts`, `ends`, `axes` attributes): the only converter, opset 13's, reads them as inputs
  and fails with `Cannot cast <class 'NoneType'> to list of Expr`. They become int64 initializers, inputs 1-3
  (`axes` defaults to 0 .. len(starts) - 1 as in opset 1; no steps before opset 10).
- Pad of opset 1 (`paddings`): the converter of opsets 2-10 reads `pads`, the same numbers under opset 2's name.
- Scatter (opsets 9-10; opset 11 renamed it ScatterElements, same inputs and meaning): where its indices are smaller
  than its data, the importer's Scatter converter builds a scatter_nd, whose TVM kernel the launch plan cannot place
  (`frontend.scatter_nd`); as ScatterElements (the importer takes its oldest converter) it lowers.
The other attribute forms the importer converts right and stay (`tests/test_old_opsets.py` checks each against
onnxruntime): Pad of opsets 2-10 (`pads`, `value`, the three modes), Split before 13 (`split`), Squeeze and
Unsqueeze before 13 (`axes`), the reductions' `axes` attribute. Upsample of opsets 7 and 8 (`scales` attribute),
which the importer's nearest sampling rounds wrongly, becomes a Resize with opset 9's (`canonical`); opset 1's
experimental Upsample (`height_scale`, `width_scale`), which no runtime runs, is refused (`frontend`).

`current_forms` runs last before the import, after `constfold`, `onnx_rewrites` and `onnx_decompose`: those use
ONNX's shape inference, which reads a node by the model's opset and knows no shapes past a Slice of the new form."""

from __future__ import annotations

import numpy as np

from .onnx_reading import attributes


def current_forms(model):
    """A copy of `model` with its old Slice, Pad and Scatter nodes in the forms the importer reads, or `model` itself
    when it has none."""
    old = [n for n in model.graph.node if (n.op_type == "Slice" and _has(n, "starts"))
           or (n.op_type == "Pad" and _has(n, "paddings")) or n.op_type == "Scatter"]
    if not old:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    taken = {t.name for t in out.graph.initializer} | {v for n in out.graph.node for v in (*n.input, *n.output)}
    for node in out.graph.node:
        if node.op_type == "Slice" and _has(node, "starts"):
            _slice_inputs(out.graph, node, taken)
        elif node.op_type == "Pad" and _has(node, "paddings"):
            for attr in node.attribute:
                if attr.name == "paddings":
                    attr.name = "pads"
        elif node.op_type == "Scatter":
            node.op_type = "ScatterElements"
    return out


def _has(node, name: str) -> bool:
    return any(a.name == name for a in node.attribute)


def _slice_inputs(graph, node, taken: set) -> None:
    from onnx import numpy_helper

    attrs = attributes(node)
    starts, ends = list(attrs["starts"]), list(attrs["ends"])
    axes = list(attrs.get("axes", range(len(starts))))
    for label, values in (("starts", starts), ("ends", ends), ("axes", axes)):
        name = _fresh(f"{node.output[0]}_{label}", taken)
        graph.initializer.append(numpy_helper.from_array(np.array(values, np.int64), name))
        node.input.append(name)
    del node.attribute[:]


def _fresh(name: str, taken: set) -> str:
    candidate, suffix = name, 0
    while candidate in taken:
        suffix += 1
        candidate = f"{name}_{suffix}"
    taken.add(candidate)
    return candidate
