"""ONNX value names made C identifiers before TVM's importer sees them.

ONNX names are free text (`gpu_0/data_0` in ONNX's own ResNet-50 export, `out:0` from TensorFlow converters), but
the names of graph inputs become Relax parameter names and from there the kernels' argument names in OpenCL C
(`__global float* restrict gpu_0/data_0_ptr`), which the device compiler rejects at `adreno run`. TVM 0.27's
importer only replaces `.` and prefixes a leading digit, so `identifiers` renames every value of the graph
(inputs, outputs, initializers, intermediates, those of subgraphs too) to `[A-Za-z_][A-Za-z0-9_]*`: other characters
become `_`, a leading digit gets `input_` (as TVM's importer does: `0` -> `input_0`), and names that collide after
that (`a/b` and `a_b`) get `_1`, `_2`, ... while a name that is already an identifier keeps it.

Only the graph TVM sees is renamed: the manifest, `run --input`/`--output`, `--input-shape` and `--bind` keep the
model's own names (`compiler.manifest.io_entries` maps them by position), and node names stay for error messages."""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifiers(model, shapes: dict[str, list[int]]) -> tuple:
    """(model, shapes) with every value name an identifier, unique in the model; the same objects when all are."""
    import onnx

    names = _value_names(model.graph)
    if all(_IDENTIFIER.fullmatch(name) for name in names):
        return model, shapes
    renamed = _renaming(names)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    _rename_graph(out.graph, renamed)
    return out, {renamed.get(name, name): shape for name, shape in shapes.items()}


def _value_names(graph) -> list[str]:
    """Every non-empty value name of `graph` and its subgraphs, first occurrence first."""
    names = [v.name for v in (*graph.input, *graph.output, *graph.value_info)]
    names += [t.name for t in graph.initializer] + [t.values.name for t in graph.sparse_initializer]
    for node in graph.node:
        names += [*node.input, *node.output]
        for sub in _subgraphs(node):
            names += _value_names(sub)
    return list(dict.fromkeys(name for name in names if name))


def _renaming(names: list[str]) -> dict[str, str]:
    """Name -> identifier for each name that is not one; identifiers already in the model are never taken."""
    taken = {name for name in names if _IDENTIFIER.fullmatch(name)}
    renamed = {}
    for name in names:
        if _IDENTIFIER.fullmatch(name):
            continue
        base = re.sub(r"[^A-Za-z0-9_]", "_", name)
        base = f"input_{base}" if base[0].isdigit() else base
        candidate, suffix = base, 0
        while candidate in taken:
            suffix += 1
            candidate = f"{base}_{suffix}"
        taken.add(candidate)
        renamed[name] = candidate
    return renamed


def _rename_graph(graph, renamed: dict[str, str]) -> None:
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        value.name = renamed.get(value.name, value.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = renamed.get(sparse.values.name, sparse.values.name)
    for node in graph.node:
        for field in (node.input, node.output):
            field[:] = [renamed.get(name, name) for name in field]
        for sub in _subgraphs(node):
            _rename_graph(sub, renamed)


def _subgraphs(node) -> list:
    from onnx import AttributeProto

    graphs = []
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            graphs.append(attr.g)
        elif attr.type == AttributeProto.GRAPHS:
            graphs.extend(attr.graphs)
    return graphs
