"""Several static shapes in one artifact: the shape sets a compile was given, how the manifest lists them, and which
one an input runs.

A shape set is one static shape for each input the user named (`--input-shape NAME:DIMS`). On the command line the
flags are read in order: naming an input that the current set already has starts the next set, and every set must
name the same inputs, so that `--input-shape x:1,3,48,160 --input-shape x:1,3,48,320` is two sets of one input and
`--input-shape ids:1,8 --input-shape mask:1,8 --input-shape ids:1,16 --input-shape mask:1,16` two sets of two
inputs varying together. Inputs whose shapes are static in the model are named in none.

An artifact of one set is laid out as always (`adreno.artifact.format`). An artifact of several (written by
`adreno.compile_shapes`) shares what does not depend on the shapes and keeps the rest per set::

    manifest.json            the model, target and versions once; `shape_sets` lists each set (below)
    params.npz               the weights, once: a param of the same name and stored bytes in every set is one member
    kernels/*.cl.gz          every set's programs, a program of identical source (contract line included) once
    shapes/<i>/plan.json     set i's launch plan (there is no top-level plan.json: an adreno or a harness that knows
                             no shape sets refuses the artifact instead of running one set as if it were the model)
    shapes/<i>/lib.so|.tar   set i's host library

Each `shape_sets` entry is {"plan": path, "manifest": {the `SET_FIELDS` of that set's compile}}. `Artifact.load`
opens one set (the first by default) and reads the manifest as the shared fields overlaid with the set's, so
every executor runs a set as it runs a one-set artifact; `matching` picks the set whose input shapes equal the
given arrays' exactly, and an input of another shape is one line listing the artifact's sets. Padding a request
to the next shape is the app's choice, not ours (docs/shapes.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AdrenoError, ArtifactError
from .index_checks import MANIFEST_KEY as INDEX_CHECKS

SHAPES_DIR = "shapes"
# the manifest fields that differ between the sets of one artifact (what each set's compile wrote)
SET_FIELDS = ("inputs", "outputs", "host_library", "host_params", "kernels", "textures", "refused", "weight_storage",
              "tuned_kernels", "records_elsewhere", "records_skipped", "model_defaults", "empty_outputs",
              "orchestration", "compile_seconds", INDEX_CHECKS)


def parse_shape_sets(items: list[str] | None, flag: str = "--input-shape") -> list[dict[str, list[int]]]:
    """The shape sets of repeated `NAME:DIMS` flags (see the module doc); [{}] when none is given."""
    sets: list[dict[str, list[int]]] = [{}]
    for item in items or []:
        name, sep, dims = item.rpartition(":")
        try:
            shape = [int(d) for d in dims.replace("x", ",").split(",") if d]
        except ValueError:
            shape = []
        if not sep or not name or not shape:
            raise AdrenoError(f"{flag} {item!r}: expected NAME:D0,D1,... e.g. input:1,3,224,224")
        if name in sets[-1]:
            sets.append({})
        sets[-1][name] = shape
    first = set(sets[0])
    for index, shapes in enumerate(sets[1:], start=2):
        if set(shapes) != first:
            raise AdrenoError(f"{flag}: shape set {index} names {sorted(shapes)}, the first names {sorted(first)}; "
                              "give every input that varies a shape in each set (an input named again starts the "
                              "next set)")
    labels = [label(s) for s in sets]
    repeated = next((text for i, text in enumerate(labels) if text in labels[:i]), None)
    if repeated:
        raise AdrenoError(f"{flag}: the shape set {repeated} is given twice")
    return sets


def label(shapes: dict[str, list[int]]) -> str:
    """A shape set in a few characters: `x 1x3x48x160` (inputs separated by commas)."""
    return ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items())


@dataclass(frozen=True)
class ShapeSet:
    """One set of an artifact: where its plan is and its own manifest fields."""

    plan: str
    manifest: dict

    def input_shapes(self) -> dict[str, list[int]]:
        """The shape of each input (model names) in this set."""
        return {name: entry["shape"] for name, entry in self.manifest["inputs"].items()}

    def label(self) -> str:
        return label(self.input_shapes())


def read_shape_sets(manifest: dict, where) -> list[ShapeSet]:
    """The manifest's shape sets ([] for an artifact of one set); a malformed list is an `ArtifactError`."""
    entries = manifest.get("shape_sets")
    if entries is None:
        return []
    try:
        sets = [ShapeSet(entry["plan"], {k: v for k, v in entry["manifest"].items() if k in SET_FIELDS})
                for entry in entries]
        for shape_set in sets:
            if not isinstance(shape_set.plan, str) or not all(
                    isinstance(e["shape"], list) for e in shape_set.manifest["inputs"].values()):
                raise TypeError("a plan path or an input shape")
    except (KeyError, TypeError, AttributeError) as err:
        raise ArtifactError(f"{where}: its shape_sets are malformed ({type(err).__name__}: {str(err)[:80]}); "
                            "recompile the model") from None
    if len(sets) < 2:
        raise ArtifactError(f"{where}: its shape_sets list {len(sets)} set(s); an artifact of several lists two or "
                            "more: recompile the model")
    return sets


def set_manifest(manifest: dict, shape_set: ShapeSet, index: int, count: int) -> dict:
    """The manifest as one set reads it: the shared fields overlaid with the set's, and which set it is."""
    return {**manifest, **shape_set.manifest, "shape_set": {"index": index, "of": count, "label": shape_set.label(),
                                                            "inputs": shape_set.input_shapes()}}


def matching(sets: list[ShapeSet], shapes: dict[str, tuple]) -> int:
    """The index of the set whose input shapes equal `shapes` ({model input name: shape}, an input the set has
    and `shapes` lacks is not compared: `ordered_inputs` names what is missing); else one line listing the sets."""
    for index, shape_set in enumerate(sets):
        if all(list(shapes[name]) == shape for name, shape in shape_set.input_shapes().items() if name in shapes):
            return index
    given = label({name: list(shape) for name, shape in shapes.items()})
    raise AdrenoError(f"no shape set of this artifact takes {given}; it was compiled for "
                      f"{'; '.join(s.label() for s in sets)} (pad the input to one of them, or compile its shape "
                      "with another --input-shape)")
