"""Graph inputs bound at compile time (`--bind NAME=FILE.npy`, `--bind FILE.npz`, `compile_model(..., bind=)`).

The kernels are specialised on a Reshape's shape, a Resize's scales, a Slice's starts, a Pad's pads: a model that
takes them as graph inputs cannot be compiled for a static-shape phone until their values are known. Binding gives
those values without editing the model: each bound input becomes an initializer (its value baked in) before the
shape folding (`constfold.prepare`), after its dtype and shape are checked against the input's declaration. The
artifact's manifest records every bound value (`bound_entries`), the bound input is no longer an artifact input, and
`adreno run` accepts an input file that still holds it only when the value is the bound one (`Artifact.ordered_inputs`).

Bound values are parameters, not data: at most `MAX_ELEMENTS` elements each (what the shape folding evaluates), so
the manifest shows them in full; a larger constant belongs in the model as an initializer.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .constfold import MAX_ELEMENTS
from ..errors import AdrenoError, ModelError

USAGE = "expected NAME=FILE.npy (one input) or FILE.npz (its arrays keyed by input name)"


def add_bind_argument(parser) -> None:
    """The `--bind` option of every command that imports a model (`compile`, `tune`)."""
    parser.add_argument("--bind", action="append", metavar="NAME=FILE.npy|FILE.npz",
                        help="bake the value of a graph input into the compile: a parameter the kernels are "
                        "specialised on (a Reshape's shape, a Resize's scales, a Slice's starts, a Pad's pads, an If's "
                        "condition) "
                        "that the model takes as an input; dtype and shape must match the input's declaration, "
                        f"at most {MAX_ELEMENTS} elements (repeatable)")


def read_bind(items: list[str] | None) -> dict[str, np.ndarray]:
    """The arrays the `--bind` items name, by input name (not yet checked against a model: `bind_inputs` does)."""
    values: dict[str, np.ndarray] = {}
    for item in items or []:
        name, sep, file = item.partition("=")
        if sep and not name:
            raise AdrenoError(f"--bind {item!r}: {USAGE}")
        arrays = _load(item, file if sep else name, npy=bool(sep))
        if sep:
            arrays = {name: arrays}
        twice = sorted(set(arrays) & set(values))
        if twice:
            raise AdrenoError(f"--bind {item!r}: input {twice[0]!r} is bound twice")
        values.update(arrays)
    return values


def _load(item: str, file: str, npy: bool):
    path = Path(file)
    if not path.is_file():
        raise AdrenoError(f"--bind {item!r}: no such file {file!r}")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise AdrenoError(f"--bind {item!r}: cannot read {file} as .npy/.npz ({str(err).splitlines()[0]})") from None
    if isinstance(loaded, np.ndarray):
        if not npy:
            raise AdrenoError(f"--bind {item!r}: {file} is one array; name the input it binds: --bind NAME={file}")
        return loaded
    with loaded:
        if npy:
            raise AdrenoError(f"--bind {item!r}: {file} is an .npz archive; bind its arrays by their names as "
                              f"--bind {file}")
        try:
            return {key: loaded[key] for key in loaded.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise AdrenoError(f"--bind {item!r}: cannot read {file} ({str(err).splitlines()[0]})") from None


def bind_inputs(model, values: Mapping | None) -> tuple:
    """(a copy of `model` whose inputs named in `values` are initializers of those values, the bound arrays).

    Each value must have the dtype the input declares and its shape (a dynamic dimension takes any size); an
    unknown name, a mismatch, more than `MAX_ELEMENTS` elements or binding every input is a `ModelError` of one
    line."""
    if not values:
        return model, {}
    import onnx
    from onnx import numpy_helper

    from .importer import graph_inputs  # inside: adreno --help does not need it

    declared = {i.name: i for i in graph_inputs(model)}
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise ModelError(f"--bind names {unknown}, but the model's inputs are {list(declared)}")
    if len(values) == len(declared):
        raise ModelError(f"--bind binds every input of the model ({list(declared)}): at least one must stay a "
                         "run-time input (the compiler makes no model of constant outputs)")
    bound = {name: _checked(declared[name], np.asarray(value)) for name, value in values.items()}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = [i for i in copy.graph.input if i.name not in bound]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    copy.graph.initializer.extend(numpy_helper.from_array(array, name) for name, array in bound.items())
    return copy, bound


def _checked(declaration, array: np.ndarray) -> np.ndarray:
    from onnx import helper

    tensor = declaration.type.tensor_type
    name = declaration.name
    if array.size > MAX_ELEMENTS:
        raise ModelError(f"--bind {name}: {array.size} elements; a bound input is a parameter of at most "
                         f"{MAX_ELEMENTS} (shape, scales, axes, pads): make a larger constant an initializer")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)) if tensor.elem_type else array.dtype
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim] \
        if tensor.HasField("shape") else None
    fits = dims is None or (len(dims) == array.ndim and all(d in (None, s) for d, s in zip(dims, array.shape)))
    if array.dtype != dtype or not fits:
        declared = "any shape" if dims is None else f"shape {['?' if d is None else d for d in dims]}"
        raise ModelError(f"--bind {name}: the array is {array.dtype} of shape {list(array.shape)}, the model "
                         f"declares {dtype} of {declared}; convert it first (e.g. np.save(FILE, a.astype("
                         f"np.{dtype.name})))")
    return array


def bound_entries(bound: Mapping[str, np.ndarray]) -> dict:
    """The manifest's record of the bound inputs: name -> dtype, shape and the value (nested lists)."""
    return {name: {"dtype": str(a.dtype), "shape": list(a.shape), "value": a.tolist()} for name, a in bound.items()}

