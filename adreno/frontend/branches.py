"""ONNX `If` nodes whose condition is known at compile time, replaced by the branch they take.

Exporters write a model's variants as `If` branches: silero-vad selects its 8 kHz or 16 kHz network on the `sr`
input and, inside, branches again on shapes (whether a state was given, the batch size). The compiled model is a
flat launch plan with no control flow, and TVM's importer cannot read what is inside a branch at compile time (a
Pad's pads computed from shapes there are "dynamic"). Once the shapes are static and the inputs that decide a
condition are bound (`--bind sr=...`), the condition is a constant (`constfold` folds it): the node becomes its
taken branch's nodes, whose own shape computations and nested `If`s fold in the next round. An `If` whose condition
stays a run-time value is refused in one line naming the graph inputs it is computed from."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import ModelError


def inline_constant_branches(graph, constants: Mapping[str, np.ndarray]) -> list:
    """Replace, in place, every `If` of `graph` whose condition is in `constants` by the nodes of the branch it
    takes (their initializers become `graph`'s, each output an Identity of the branch's output); the inlined
    branches, as they now are in `graph` (renamed where needed), whose constants the caller adds to its own."""
    from onnx import helper

    nodes, inlined, taken = [], [], _names(graph)
    for node in graph.node:
        if node.op_type != "If" or node.input[0] not in constants:
            nodes.append(node)
            continue
        attrs = {a.name: a.g for a in node.attribute}
        branch = attrs["then_branch" if bool(np.asarray(constants[node.input[0]]).reshape(-1)[0]) else "else_branch"]
        branch = _distinct_from(branch, taken)
        taken |= _names(branch)
        graph.initializer.extend(branch.initializer)
        graph.sparse_initializer.extend(branch.sparse_initializer)
        nodes.extend(branch.node)
        nodes.extend(helper.make_node("Identity", [value.name], [name], name=f"{node.name}/{name}")
                     for value, name in zip(branch.output, node.output) if name)
        inlined.append(branch)
    if inlined:
        del graph.node[:]
        graph.node.extend(nodes)
    return inlined


def check_no_runtime_branches(graph) -> None:
    """Refuse the first `If` left in `graph`: its condition is computed at run time."""
    producers = {name: node for node in graph.node for name in node.output}
    inputs = {value.name for value in graph.input}
    for index, node in enumerate(graph.node):
        if node.op_type == "If":
            deciding = graph_inputs_under(node.input[0], producers, inputs)
            raise ModelError(f"node {node.name or f'#{index}'} (If): its condition {node.input[0]!r} is known only at "
                             f"run time (computed from the graph input(s) {deciding}); a compiled model takes one "
                             "branch: bind the inputs that decide it (--bind NAME=FILE.npy)")


def graph_inputs_under(name: str, producers: dict, inputs: set[str]) -> list[str]:
    """The graph inputs that the value `name` is computed from, in the order they are met."""
    found, seen, stack = [], set(), [name]
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        if value in inputs:
            found.append(value)
        stack.extend(producers[value].input if value in producers else ())
    return found


def _names(graph) -> set[str]:
    """Every value name `graph` declares or computes (not looking inside its nodes' subgraphs)."""
    return ({v.name for v in graph.input} | {i.name for i in graph.initializer}
            | {s.values.name for s in graph.sparse_initializer} | {n for node in graph.node for n in node.output})


def _distinct_from(branch, taken: set[str]):
    """A copy of `branch` whose computed values do not reuse a name in `taken`: the ONNX spec only keeps a subgraph's
    names apart from its own outer scopes, so two sibling branches inlined into one graph may both define a name."""
    import onnx

    copy = onnx.GraphProto()
    copy.CopyFrom(branch)
    clashes = sorted(_names(copy) & taken)
    if clashes:
        used = taken | _names(copy)
        renamed = {}
        for name in clashes:
            fresh = next(f"{name}_{k}" for k in range(1, len(used) + 2) if f"{name}_{k}" not in used)
            renamed[name] = fresh
            used.add(fresh)
        _rename(copy, renamed)
    return copy


def _rename(graph, renamed: dict[str, str]) -> None:
    """Rename values in `graph` and in the subgraphs of its nodes, which may read them from their outer scope."""
    for node in graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
        for attr in node.attribute:
            for sub in (attr.g,) if attr.HasField("g") else attr.graphs:
                _rename(sub, renamed)
    for value in (*graph.output, *graph.value_info):
        value.name = renamed.get(value.name, value.name)
    for init in graph.initializer:
        init.name = renamed.get(init.name, init.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = renamed.get(sparse.values.name, sparse.values.name)
