"""Outputs with no elements (a Slice past the end, a split of size 0, a reshape to 0 rows) and the inputs only they
read: no kernel computes them.

A kernel over nothing has no launch size, and TVM's lowering divides by the zero extent, so TVM never sees them:
`drop` takes the graph outputs whose computed shape has a 0 out of the graph (with the nodes only they need, and the
graph inputs nothing else reads when those are empty or when nothing is left to compute) and records them; `complete`
puts them back into the launch plan as tensors without storage (`storage` ""), in the model's input and output
order. An executor returns zeros of the recorded shape and dtype for such an output (there are none to return) and
checks, but does not copy, such an input. A value computed from empty inputs alone (a reduction over an empty axis:
its identity) was folded to a constant before (`constfold`), so those inputs are unread too. An empty tensor that
another node still reads is refused in one line (`constfold.check_not_empty`).

The shapes are ONNX's shape inference's, computed from the inputs without the outputs' declared shapes, so a model
that only claims an empty output is not believed."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..artifact.format import Plan, TensorSpec
from ..errors import ModelError


@dataclass
class EmptyTensors:
    """What `drop` took out of the graph TVM sees: ONNX name -> (shape, numpy dtype name)."""

    outputs: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)  # inputs nothing computed reads (their values are ignored)

    def drop(self, model, shapes: dict[str, tuple]) -> None:
        """Take the empty outputs, the nodes only they need and the inputs then unread (if empty, or all when no
        output is left) out of `model` (in place); `shapes` are the computed static shapes."""
        graph = model.graph
        shapes = {**{t.name: tuple(t.dims) for t in graph.initializer}, **shapes}  # folded outputs are initializers
        empty = [o for o in graph.output if 0 in shapes.get(o.name, (1,))]
        kept = [o for o in graph.output if o not in empty]
        needed, nodes = {o.name for o in kept}, []
        for node in reversed(graph.node):
            if needed & set(node.output):
                nodes.append(node)
                needed |= set(node.input)
        unread = [i for i in graph.input if i.name not in needed and (not kept or 0 in shapes.get(i.name, (1,)))]
        if not empty and not unread:
            return
        self.outputs.update({o.name: (list(shapes[o.name]), _dtype(o)) for o in empty})
        self.inputs.update({i.name: (list(shapes[i.name]), _dtype(i)) for i in unread})
        for container, values in ((graph.output, kept), (graph.node, nodes[::-1]),
                                  (graph.input, [i for i in graph.input if i.name not in self.inputs])):
            del container[:]
            container.extend(values)

    def complete(self, plan: Plan | None, inputs: list[str], outputs: list[str]) -> Plan:
        """`plan` (of the graph TVM saw; None when nothing was left to compute) with the dropped tensors back in
        place: `inputs` and `outputs` are the model's ONNX names, in order."""
        plan = plan or Plan([], [], {}, {}, {}, [])
        kept_inputs = [n for n in inputs if n not in self.inputs]
        kept_outputs = [n for n in outputs if n not in self.outputs]
        if len(kept_inputs) != len(plan.inputs) or len(kept_outputs) != len(plan.outputs):
            raise ModelError(f"the imported model has {len(plan.inputs)} inputs and {len(plan.outputs)} outputs, "
                             f"the ONNX graph {len(kept_inputs)} and {len(kept_outputs)} besides its empty tensors")
        plan.inputs = self._merged(plan, inputs, iter(plan.inputs), self.inputs, "input")
        plan.outputs = self._merged(plan, outputs, iter(plan.outputs), self.outputs, "output")
        return plan

    @staticmethod
    def _merged(plan: Plan, names: list[str], computed, dropped: dict, kind: str) -> list[str]:
        merged = []
        for index, name in enumerate(names):
            if name not in dropped:
                merged.append(next(computed))
                continue
            tensor = f"{'unread_input' if kind == 'input' else 'empty_output'}_{index}"
            shape, dtype = dropped[name]
            plan.tensors[tensor] = TensorSpec(tensor, shape, dtype, kind, "")
            merged.append(tensor)
        return merged


def unclaimed(model):
    """A copy of `model` whose outputs declare no shapes (for shape inference to compute them)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for output in copy.graph.output:
        output.type.tensor_type.ClearField("shape")
    return copy


def _dtype(value) -> str:
    from onnx import helper

    return str(helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
