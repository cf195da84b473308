"""Validation of an artifact before anything of it runs: files, paths and the launch plan.

An artifact is code and data a runtime trusts: a plan whose launch sizes or storage do not fit its kernels makes
the OpenCL driver write out of bounds (a segfault, or silently wrong outputs), and a path in it can name any file.
So `Artifact.load` checks, each failure an `ArtifactError` of one line:

- files: every file the manifest lists is a regular file inside the directory (no `..`, no absolute path, no
  symlink leading out) whose size and SHA-256 equal the manifest's (skipped by `adreno run --unchecked`, which
  says so);
- the plan (`check_plan`): names resolve (inputs, outputs, storage, programs, steps' tensors), dtypes are known,
  storage holds its tensors (buffer bytes, image geometry), kernel arguments index their step's tensors and
  workspaces, launch sizes are positive with the global size a multiple of the local one;
- the manifest (`check_manifest`, and last `check_run_digest`): the fields executors read have their types and
  agree with the plan, and the fields that decide what runs are the ones it was sealed with (`run_digest`);

and the executor adds the device's limits (`check_launches`). The manifest is the root of trust: one who rewrites
it (and its hashes) can ship any kernel source, which is code; these checks catch damage and inconsistency, the
hashes any change to a listed file."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from ..errors import ArtifactError
from .index_checks import IndexChecks
from ..targets.layout import image_dims
from ..options import Precision
from .weights import WeightTransform

DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "bool"}
SCOPES = {"global", "global.texture", "global.texture-nhwc", "global.texture-weight"}
CHANNEL_TYPES = {"float32", "float16"}
KINDS = {"input", "output", "param", "intermediate"}
PRECISIONS = {p.value for p in Precision}
MAX_ELEMENTS = 1 << 40  # a tensor or launch beyond this is damage, not a model
MAX_LAUNCH_ITEMS = (1 << 31) - 1  # TVM's OpenCL kernels index work-items with int: a larger launch wraps around


def confined(root: Path, rel) -> Path:
    """`root / rel` when `rel` is a relative path that stays inside `root` (symlinks resolved); else ArtifactError."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise ArtifactError(f"{root}: file name {rel!r} is not a relative path; recompile the model")
    if os.path.isabs(rel) or ".." in Path(rel).parts:
        raise ArtifactError(f"{root}: path {rel!r} leads outside the artifact; refusing it")
    path = root / rel
    if not path.resolve().is_relative_to(root.resolve()):
        raise ArtifactError(f"{root}: {rel!r} is a link leading outside the artifact; refusing it")
    return path


def file_entries(root: Path, manifest: dict) -> dict[str, dict]:
    """The manifest's file list {relative path: {"bytes", "sha256"}}, every path confined to `root`."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise ArtifactError(f"{root}: the manifest has no file hashes (written by an older adreno, or damaged); "
                            "recompile the model")
    for rel in files:
        confined(root, rel)
    return files


def check_files(root: Path, manifest: dict, hashes: bool = True) -> None:
    """Every listed file exists as a regular file; with `hashes`, of its size and SHA-256 (without: a file edited
    by hand still runs, if the plan checks pass)."""
    files = file_entries(root, manifest)
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise ArtifactError(f"{root} is incomplete, missing: {', '.join(sorted(missing))}; recompile the model")
    if hashes:
        wrong = [f for f, entry in files.items() if (root / f).stat().st_size != entry.get("bytes")]
        if wrong:
            raise ArtifactError(f"{root}: files changed since compile (size differs): {', '.join(sorted(wrong))}")
        wrong = [f for f, entry in files.items() if sha256_file(root / f) != entry.get("sha256")]
        if wrong:
            raise ArtifactError(f"{root}: files changed since compile (SHA-256 differs): {', '.join(sorted(wrong))}"
                                "; recompile the model (or run it with --unchecked at your own risk)")


# The manifest's fields that decide what runs: the format, the host library and the weights its `main` takes (their
# order), the model's inputs and outputs (which tensor each name is, its shape and dtype), the precision, and the
# files with their hashes. `run_digest` covers them, so one edited field (two host_params swapped: other outputs at
# exit 0, issue 46) is a refusal; the native harness computes the same digest (native/harness/integrity.cc).
RUN_FIELDS = ("plan_format", "host_library", "host_params", "inputs", "outputs", "precision", "files")


def run_digest(manifest: dict) -> str:
    """SHA-256 of the RUN_FIELDS the manifest has, as canonical JSON (keys sorted, no spaces, ASCII with \\u
    escapes): a form the harness writes byte for byte from its own JSON values. The fields hold no floats."""
    fields = {key: manifest[key] for key in RUN_FIELDS if key in manifest}
    if "shape_sets" in manifest:  # an artifact of several sets: each set's plan and its own fields of RUN_FIELDS
        fields["shape_sets"] = [{"plan": entry["plan"],
                                 "manifest": {k: v for k, v in entry["manifest"].items() if k in RUN_FIELDS}}
                                for entry in manifest["shape_sets"]]
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()) \
        .hexdigest()


def check_run_digest(root: Path, manifest: dict) -> None:
    """The manifest's fields that decide what runs are the ones it was sealed with (`run_digest`). `manifest` is the
    file as written (for an artifact of several shape sets, the shared fields with every set's, never one set's
    overlay)."""
    try:
        digest = run_digest(manifest)
    except (TypeError, ValueError, RecursionError, KeyError, AttributeError):
        digest = None
    if manifest.get("run_sha256") != digest:
        raise ArtifactError(f"{root / 'manifest.json'}: the fields that decide what runs ({', '.join(RUN_FIELDS)}) "
                            "differ from their run_sha256: edited or damaged; recompile the model")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fail(what: str) -> None:
    raise ArtifactError(f"launch plan: {what}; recompile the model")


def _ints(values, what: str, low: int = 0) -> list[int]:
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= low
                                               for v in values):
        _fail(f"{what} {values!r} is not a list of integers >= {low}")
    if math.prod(values) > MAX_ELEMENTS:
        _fail(f"{what} {values} is too large")
    return values


def _check_stored(name: str, t) -> None:
    """A param's stored form (`adreno.artifact.weights`) names a known dtype, a shape of ints, and a transform that
    gives the param's shape (a Winograd source is an (O, C, 3, 3) weight, a packed one an (O, I, KH, KW) weight for
    OIHW4o, a transposed one the 2-D transpose); a quantized one is int8 / uint8 with a scale and zero point per
    tensor or per index of its axis; the param is float32, or int32 widened from such a member
    (`StoredWeight.gives`)."""
    _ints(t.stored["shape"], f"tensor {name} stored shape")
    stored = t.stored_weight  # KeyError / ValueError: malformed
    if t.kind != "param" or stored.dtype not in DTYPES:
        _fail(f"tensor {name}: a stored form for a {t.kind} of dtype {stored.dtype!r}")
    quantization = stored.quantization
    if quantization is not None and (stored.dtype not in ("int8", "uint8") or not quantization.fits(stored.shape)):
        _fail(f"param {name}: an int8 / uint8 weight with one scale and zero point per tensor or per index of its "
              f"axis is stored as {list(stored.shape)} {stored.dtype} with {len(quantization.scale)} scales")
    if not stored.gives(t.dtype):
        _fail(f"param {name} ({t.dtype}): its stored form ({stored.dtype}) does not give its dtype (a stored form "
              "gives a float32 param, or an int32 one from an int8 / uint8 member of scale 1, widened)")
    if not stored.yields(t.shape):
        form = {WeightTransform.NONE: "weight", WeightTransform.TRANSPOSE: "transposed weight"}.get(
            stored.transform, f"{stored.transform.value} weight")
        _fail(f"param {name}: a {form}{' packed' if stored.packed else ''} stored as {list(stored.shape)} does not "
              f"give its shape {t.shape}")


def check_plan(plan, root: Path, listed: set[str]) -> None:
    """The plan is consistent with itself and with the files the manifest lists (see the module doc). A field of
    the wrong JSON type surfaces as TypeError, AttributeError, KeyError or ValueError (`Artifact.load` says
    "malformed")."""
    storage, images = plan.storage, plan.images
    if not all(isinstance(x, dict) for x in (storage, images, plan.tensors, plan.programs)) or not all(
            isinstance(x, list) for x in (plan.inputs, plan.outputs, plan.steps,
                                          *(y for s in plan.steps for y in (s.args, s.kernels, s.workspaces)),
                                          *(k.args for s in plan.steps for k in s.kernels))):
        _fail("a field has the wrong type (objects and lists swapped)")
    if not plan.outputs:
        _fail("it has no outputs (an artifact that computes nothing)")
    for sid, nbytes in storage.items():
        _ints([nbytes], f"storage {sid} size")
    for name in [*plan.inputs, *plan.outputs]:
        if name not in plan.tensors:
            _fail(f"input/output {name!r} is not a tensor")
    for name, t in plan.tensors.items():
        _ints(t.shape, f"tensor {name} shape")
        if t.dtype not in DTYPES or t.kind not in KINDS or t.scope not in SCOPES:
            _fail(f"tensor {name}: unknown dtype, kind or scope ({t.dtype!r}, {t.kind!r}, {t.scope!r})")
        if t.stored is not None:
            _check_stored(name, t)
        if t.storage == "" and t.image is None and (t.kind == "input" or t.kind == "output" and not t.nbytes):
            continue  # no kernel touches it (_check_step: no step names it)
        if t.storage not in storage:
            _fail(f"tensor {name} lives in unknown storage {t.storage!r}")
        if (t.image is None) != (t.storage not in images):
            _fail(f"tensor {name}: buffer/image storage mismatch")
        if t.image is None:
            if storage[t.storage] < t.nbytes:
                _fail(f"storage {t.storage} holds {storage[t.storage]} bytes, tensor {name} needs {t.nbytes}")
            continue
        _check_image(name, t, images[t.storage], image_dims)
    for sid, image in images.items():
        if sid not in storage:
            _fail(f"image {sid} has no storage entry")
    for program, rel in plan.programs.items():
        if rel not in listed:
            _fail(f"program {program} source {rel!r} is not among the manifest's files")
        confined(root, rel)
    for index, step in enumerate(plan.steps):
        _check_step(plan, index, step)


def check_manifest(plan, manifest: dict) -> None:
    """The manifest's fields that executors read agree with the plan and have their types: the model's inputs and
    outputs are the plan's (the tensor, shape and dtype recorded for each, in order: a plan edited to return
    another tensor would be read as the model's output), the host library's params are plan params, the
    precision is one adreno writes, and the model source names a bundled model (with an integer seed) or a path.
    The manifest's own hash is nobody's to check, so an edited one is refused here, not in a traceback later."""
    model_outputs = IndexChecks.of(manifest, plan.outputs).model_outputs(plan.outputs)  # not the index flags
    for key, tensors in (("inputs", plan.inputs), ("outputs", model_outputs)):
        if key == "inputs" and key not in manifest:  # a kernel's artifact (`tune.builder`): inputs named as tensors
            continue
        recorded = manifest.get(key)
        if not isinstance(recorded, dict):
            _fail(f"the manifest records no {key}")
        if len(recorded) != len(tensors):
            _fail(f"{len(tensors)} {key}, the manifest records {len(recorded)}")
        for (name, entry), tensor in zip(recorded.items(), tensors):
            spec = plan.tensors[tensor]
            if not isinstance(entry, dict) or entry.get("tensor", name) != tensor or entry.get("shape") != spec.shape \
                    or entry.get("dtype") != spec.dtype:
                _fail(f"{key[:-1]} {name!r} is {tensor} {spec.shape} {spec.dtype}, the manifest records {entry!r}")
    params = manifest.get("host_params") or []
    if not isinstance(params, list) or any(getattr(plan.tensors.get(p), "kind", None) != "param" for p in params):
        _fail(f"the manifest's host_params {str(params)[:80]} are not params of the plan")
    if manifest.get("precision", "fp32") not in PRECISIONS:
        _fail(f"the manifest's precision {manifest.get('precision')!r} is not one of {sorted(PRECISIONS)}")
    source = manifest.get("model_source", {})
    if not isinstance(source, dict) or not isinstance(source.get("zoo", ""), str) \
            or not isinstance(source.get("path", ""), str) or type(source.get("seed", 0)) is not int:
        _fail(f"the manifest's model_source {source!r} is not a bundled model and seed, or a path")
    if not isinstance(manifest.get("bound", {}), dict):
        _fail("the manifest's bound inputs are not a table of names")


def _check_image(name: str, tensor, image, image_dims) -> None:
    if not isinstance(image, dict) or image != tensor.image:
        _fail(f"tensor {name}: its image differs from its storage's")
    if image.get("scope") != tensor.scope or image.get("channel_type") not in CHANNEL_TYPES \
            or image.get("channel_order") != "RGBA":
        _fail(f"tensor {name}: image scope, channel type or order {image!r} is not supported")
    if len(tensor.shape) != 5 or tensor.shape[-1] != 4:
        _fail(f"tensor {name}: an image tensor must be packed 5-D with 4 lanes, not {tensor.shape}")
    dims = [image.get("width"), image.get("height"), image.get("layers")]
    if dims != list(image_dims(tensor.shape, tensor.scope)):
        _fail(f"tensor {name} of shape {tensor.shape} does not fit its {dims} image")


def _check_step(plan, index: int, step) -> None:
    where = f"step {index} ({step.func})"
    if step.program not in plan.programs:
        _fail(f"{where} runs unknown program {step.program!r}")
    if not all(a in plan.tensors and plan.tensors[a].storage for a in step.args):
        _fail(f"{where} names unknown tensors or tensors without storage")
    _ints(step.workspaces, f"{where} workspaces")
    for launch in step.kernels:
        what = f"{where} kernel {launch.name}"
        if not isinstance(launch.name, str) or not launch.name.isidentifier():
            _fail(f"{where}: kernel name {launch.name!r}")
        glob = _ints(launch.global_size, f"{what} global size", 1)
        local = _ints(launch.local_size, f"{what} local size", 1)
        if not 1 <= len(glob) <= 3 or len(glob) != len(local) or any(g % w for g, w in zip(glob, local)):
            _fail(f"{what}: global size {glob} is not a multiple of local size {local}")
        _ints([launch.local_mem_bytes], f"{what} local memory")
        for arg in launch.args:
            _check_arg(what, arg, step)


def _check_arg(what: str, arg, step) -> None:
    chosen = [v for v in (arg.arg, arg.workspace, arg.scalar) if v is not None]
    if len(chosen) != 1 or isinstance(chosen[0], bool):
        _fail(f"{what}: an argument must be one of a tensor index, a workspace or a scalar")
    if arg.arg is not None and not (isinstance(arg.arg, int) and 0 <= arg.arg < len(step.args)):
        _fail(f"{what}: argument index {arg.arg!r} beyond the step's {len(step.args)} tensors")
    if arg.workspace is not None and not (isinstance(arg.workspace, int) and 0 <= arg.workspace < len(step.workspaces)):
        _fail(f"{what}: workspace {arg.workspace!r} beyond the step's {len(step.workspaces)}")
    if arg.scalar is not None and (arg.dtype not in DTYPES or not isinstance(arg.scalar, (int, float))
                                   or not np.isfinite(arg.scalar)):
        _fail(f"{what}: scalar {arg.scalar!r} of dtype {arg.dtype!r}")


def check_launches(plan, device) -> None:
    """Every launch and buffer fits `device` (a pyopencl Device): work-group size and dimensions, local memory,
    the largest allocation."""
    name = device.name.strip()
    sizes = device.max_work_item_sizes
    for step in plan.steps:
        for launch in step.kernels:
            local = launch.local_size
            if len(local) > device.max_work_item_dimensions or math.prod(local) > device.max_work_group_size \
                    or any(w > s for w, s in zip(local, sizes)):
                raise ArtifactError(f"kernel {launch.name}: work-group {local} exceeds {name}'s limits "
                                    f"({device.max_work_group_size} work-items, {list(sizes)})")
            if math.prod(launch.global_size) > MAX_LAUNCH_ITEMS:
                raise ArtifactError(f"kernel {launch.name}: global size {launch.global_size} is beyond the "
                                    f"{MAX_LAUNCH_ITEMS} work-items its 32-bit indices address; recompile the model")
            if launch.local_mem_bytes > device.local_mem_size:
                raise ArtifactError(f"kernel {launch.name}: {launch.local_mem_bytes} B of local memory, {name} has "
                                    f"{device.local_mem_size}")
    largest = max([*plan.storage.values(), *(w for s in plan.steps for w in s.workspaces)], default=0)
    if largest > device.max_mem_alloc_size:
        raise ArtifactError(f"a {largest} B buffer exceeds {name}'s largest allocation {device.max_mem_alloc_size} B")
