"""The deployable artifact: a directory a phone app (or our executors) can run without the compiler.

Layout of an artifact directory::

    manifest.json      what was compiled, for which target, by which versions; file list with sizes and SHA-256
    plan.json          the launch plan: tensors, storage plan, programs, and the ordered steps/kernels
    kernels/*.cl.gz    OpenCL C source of every program (one per lowered primitive function), gzip-compressed
                       (`zcat` reads one): unrolled kernels compress about 16x, and without it the sources
                       outweighed an fp16 model's weights' saving
    params.npz         constant tensors (weights, folded at compile time), keyed by param name
    lib.so | lib.tar   TVM host library (Relax VM executable) from `export_library`
    binaries/          program binaries bundled after the compile by `adreno cache export` (`adreno.cache.bundled`)

The launch plan is the contract between the compiler and every executor. `Plan` is its typed form;
`Artifact.load` checks that a directory is complete, unaltered, confined and from a compatible format, and that its
plan is consistent, before anything runs (`adreno.artifact.check`).
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import os
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import kernel_contract
from .check import check_files, check_manifest, check_plan, check_run_digest, confined, run_digest, sha256_file
from ..support.directory_swap import swap_into_place
from .index_checks import IndexChecks
from ..errors import AdrenoError, ArtifactError
from ..support.processes import process_alive
from .npz_files import NpzUnreadable, read_npz
from .shape_sets import ShapeSet, matching, read_shape_sets, set_manifest
from ..targets.layout import ImageSpec  # noqa: F401  (part of the contract: TensorSpec.image, Plan.images)
from .weights import StoredWeight, param_value

PLAN_FORMAT = 6  # 2: image storage (TensorSpec.image, Plan.images) for --memory texture; 3: tensors without storage
# (storage ""): empty outputs and inputs no kernel reads (adreno.frontend.empty); 4: params stored in another form
# (TensorSpec.stored: Winograd weights as their 3x3 source, fp16 weights as float16; adreno.artifact.weights), and each
# kernel source starts with its contract line (adreno.artifact.kernel_contract); 5: kernel sources gzip-compressed
# (kernel_path), so an older adreno refuses the artifact by its format instead of misreading the bytes; 6: the
# manifest's fields that decide what runs under its run_sha256 (adreno.artifact.check.run_digest), which the native
# harness checks too: an artifact without it is refused by its format, in one line
_NPY_HEADER_MAX = 64 * 1024  # an .npy header is 128 bytes here; numpy allows longer ones, never this long
MANIFEST_NAME, PLAN_NAME, PARAMS_NAME, KERNEL_DIR = "manifest.json", "plan.json", "params.npz", "kernels"
BUNDLE_DIR = "binaries"  # written into an artifact after its compile, so not among its manifest's files


def kernel_path(file_stem: str) -> str:
    """Where a program's compressed source lives in an artifact (the path `Plan.programs` gives)."""
    return f"{KERNEL_DIR}/{file_stem}.cl.gz"


@dataclass
class TensorSpec:
    """A logical tensor of the graph. kind: input | output | param | intermediate.

    scope "global" is a buffer; a texture scope comes with `image` (an ImageSpec as a dict). `fallback` says why a
    packed tensor of a texture compile stayed a buffer. storage "": no kernel touches the tensor (an output with no
    elements, whose value is zeros of its shape, or an input only such outputs read, which is not copied)."""

    name: str
    shape: list[int]
    dtype: str
    kind: str
    storage: str
    scope: str = "global"
    image: dict | None = None
    fallback: str = ""
    stored: dict | None = None  # a param's form in params.npz when it is not the param itself (adreno.artifact.weights)

    @property
    def stored_weight(self) -> StoredWeight:
        """What params.npz holds for this param (`adreno.artifact.weights.StoredWeight`)."""
        if self.stored is None:
            return StoredWeight(tuple(self.shape), self.dtype)
        return StoredWeight.from_json(self.stored)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def random_inputs(specs, seed: int = 0, ranges: dict[str, tuple[int, int]] | None = None) -> list[np.ndarray]:
    """Seeded inputs for the given tensor specs: standard-normal floats; integers (and bools) uniform in the range
    `ranges` gives for the tensor's name (an artifact's `value_ranges`), else in {0, 1}
    (`adreno.frontend.input_values` says why). The same seed gives the same inputs on every host, which is why a
    farm agent makes a measurement's inputs itself from the seed a client sends."""
    rng = np.random.default_rng(seed)
    ranges = ranges or {}
    return [rng.standard_normal(s.shape).astype(s.dtype) if np.dtype(s.dtype).kind in "fc"
            else rng.integers(*ranges.get(s.name, (0, 2)), size=s.shape).astype(s.dtype) for s in specs]


@dataclass
class KernelArg:
    """One kernel argument: a step argument (by index), a per-step workspace, or a scalar."""

    arg: int | None = None
    workspace: int | None = None
    scalar: float | int | None = None
    dtype: str | None = None


@dataclass
class KernelLaunch:
    """One OpenCL kernel launch: OpenCL global size = groups x local (per dimension)."""

    name: str
    args: list[KernelArg]
    global_size: list[int]
    local_size: list[int]
    local_mem_bytes: int = 0  # dynamic __local memory passed as the last argument, 0 if none


@dataclass
class Step:
    """One call of a lowered primitive function: its tensors and the kernels it launches, in order."""

    func: str
    program: str
    op: str
    args: list[str]
    kernels: list[KernelLaunch]
    workspaces: list[int] = field(default_factory=list)  # byte sizes of temporary global buffers


@dataclass
class Plan:
    """The launch plan of a compiled model."""

    inputs: list[str]
    outputs: list[str]
    tensors: dict[str, TensorSpec]
    storage: dict[str, int]  # storage id -> bytes; intermediates share storage where lifetimes allow
    programs: dict[str, str]  # program name -> kernel source path (relative to the artifact)
    steps: list[Step]
    images: dict[str, dict] = field(default_factory=dict)  # storage id -> ImageSpec (as a dict) of image storage
    format: int = PLAN_FORMAT

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Plan":
        if data.get("format") != PLAN_FORMAT:
            raise ArtifactError(f"launch plan format {data.get('format')!r} is not supported "
                                f"(this adreno reads format {PLAN_FORMAT}); recompile the model")
        steps = [Step(**{**s, "kernels": [KernelLaunch(**{**k, "args": [KernelArg(**a) for a in k["args"]]})
                                          for k in s["kernels"]]}) for s in data["steps"]]
        tensors = {n: TensorSpec(**t) for n, t in data["tensors"].items()}
        return cls(data["inputs"], data["outputs"], tensors, data["storage"], data["programs"], steps,
                   data.get("images", {}), data["format"])

    def kernel_count(self) -> int:
        return sum(len(s.kernels) for s in self.steps)

    def texture_summary(self) -> dict:
        """Counts and bytes of image vs buffer tensors, and the packed tensors that fell back (with why)."""
        image_tensors = [t for t in self.tensors.values() if t.image is not None]
        return {
            "image_tensors": len(image_tensors),
            "image_storage": len(self.images),
            "image_bytes": sum(ImageSpec(**i).nbytes for i in self.images.values()),
            "buffer_bytes": sum(n for s, n in self.storage.items() if s not in self.images),
            "fallbacks": {t.name: t.fallback for t in self.tensors.values() if t.fallback},
        }


@dataclass
class Artifact:
    """A loaded artifact directory: of an artifact of several shape sets (`adreno.artifact.shape_sets`), one set, whose
    plan `plan` is and whose fields `manifest` has."""

    path: Path
    manifest: dict
    plan: Plan
    shape_sets: list[ShapeSet] = field(default_factory=list)  # [] for an artifact of one set
    shape_set: int = 0

    @classmethod
    def load(cls, path: str | os.PathLike, checked: bool = True, shape_set: int = 0) -> "Artifact":
        """Open and validate an artifact directory (`adreno.artifact.check`); every problem is an `ArtifactError`
        that says what to do. `checked=False` skips the comparison of the files' SHA-256 with the manifest's.
        `shape_set`: the set to open of an artifact of several (`for_inputs` picks the one an input needs)."""
        path = Path(path)
        if not path.is_dir():
            raise ArtifactError(f"{path}: no such artifact directory (create one with `adreno compile`)")
        manifest = _read_json(path / MANIFEST_NAME)
        if not isinstance(manifest, dict) or manifest.get("plan_format") != PLAN_FORMAT:
            manifest = manifest if isinstance(manifest, dict) else {}
            raise ArtifactError(f"{path} was written by adreno {manifest.get('adreno_version', '?')} with plan format "
                                f"{manifest.get('plan_format')!r}; this adreno reads format {PLAN_FORMAT}: "
                                "recompile it")
        check_files(path, manifest, hashes=checked)
        return cls._open_set(path, manifest, read_shape_sets(manifest, path / MANIFEST_NAME), shape_set)

    @classmethod
    def _open_set(cls, path: Path, manifest: dict, sets: list[ShapeSet], index: int) -> "Artifact":
        """The artifact as shape set `index` reads it (its plan checked against the files the manifest lists)."""
        plan_name, written = PLAN_NAME, manifest
        if sets:
            if not 0 <= index < len(sets):
                raise AdrenoError(f"{path} has {len(sets)} shape sets, no set {index}")
            plan_name = sets[index].plan
            manifest = set_manifest(manifest, sets[index], index, len(sets))
        unlisted = {plan_name, PARAMS_NAME} - set(manifest["files"])
        if unlisted:
            raise ArtifactError(f"{path}: the manifest does not list {', '.join(sorted(unlisted))}; "
                                "recompile the model")
        try:
            plan = Plan.from_json(_read_json(confined(path, plan_name)))
            check_plan(plan, path, set(manifest["files"]))
            check_manifest(plan, manifest)
            artifact = cls(path, manifest, plan, sets, index)
            kernel_contract.check(plan, artifact.kernel_source)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise ArtifactError(f"{path / plan_name} is malformed ({type(err).__name__}: {str(err)[:120]}); "
                                "recompile the model") from None
        check_run_digest(path, written)  # last: an edit the checks above name is refused in their words
        return artifact

    def for_inputs(self, shapes: dict[str, tuple]) -> "Artifact":
        """The shape set whose inputs have exactly `shapes` ({model input name: shape}); another shape is one line
        listing the sets (for an artifact of one set: its shapes). A plan tensor's name stands for its input's, as
        in `ordered_inputs`."""
        model_name = {t: n for n, t in zip(self.input_names(), self.plan.inputs)}
        shapes = {model_name.get(name, name): shape for name, shape in shapes.items()}
        if not self.shape_sets:
            if isinstance(self.manifest.get("inputs"), dict):  # a kernel's artifact (`tune.builder`) records none
                matching([ShapeSet(PLAN_NAME, self.manifest)], shapes)
            return self
        index = matching(self.shape_sets, shapes)
        if index == self.shape_set:
            return self
        manifest = _read_json(self.path / MANIFEST_NAME)  # the shared fields (self.manifest holds a set's)
        return self._open_set(self.path, manifest, self.shape_sets, index)

    def kernel_source(self, program: str) -> str:
        path = confined(self.path, self.plan.programs[program])
        try:
            return gzip.decompress(path.read_bytes()).decode()
        except (gzip.BadGzipFile, EOFError, zlib.error, UnicodeDecodeError):
            raise ArtifactError(f"{self.path}: kernel source of {program} ({path.name}) is not gzip-compressed "
                                "text; recompile the model") from None

    def params(self) -> dict[str, np.ndarray]:
        """The constant tensors, keyed by tensor name, as the kernels read them: each rebuilt from its stored form
        (`adreno.artifact.weights`: Winograd weights are transformed here, float16 ones widened)."""
        stored = self.stored_params()
        tensors = self.plan.tensors

        def value(item):
            name, array = item
            return name, param_value(name, tensors[name].shape, tensors[name].dtype, tensors[name].stored_weight, array)

        # numpy's array arithmetic releases the GIL: the Winograd transforms of a start run on every core
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            return dict(pool.map(value, stored.items()))

    def stored_params(self) -> dict[str, np.ndarray]:
        """params.npz as it is stored, keyed by param name (see `params`)."""
        try:
            self._check_params_index()
            params = read_npz(self.path / PARAMS_NAME, self.plan.tensors)  # other shape sets' params unread
        except NpzUnreadable as err:
            raise ArtifactError(f"{err}; recompile the model") from None
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as err:
            raise ArtifactError(f"{self.path / PARAMS_NAME} cannot be read ({type(err).__name__}: "
                                f"{str(err)[:80]}); recompile the model") from None
        wanted = [n for n, t in self.plan.tensors.items() if t.kind == "param"]
        missing = [n for n in wanted if n not in params]
        if missing:
            raise ArtifactError(f"{self.path / PARAMS_NAME} lacks params {missing[:5]}; recompile the model")
        return params

    def _check_params_index(self) -> None:
        """Each member of params.npz, as its zip index declares it, is no larger than its param's bytes plus an
        .npy header, checked before anything is decompressed (a tiny zip can declare gigabytes)."""
        tensors = self.plan.tensors
        with zipfile.ZipFile(self.path / PARAMS_NAME) as archive:
            for member in archive.infolist():
                spec = tensors.get(member.filename.removesuffix(".npy"))
                if spec is None and self.shape_sets:
                    continue  # another set's param, never read with this set's (`stored_params`)
                if spec is None or spec.kind != "param":
                    raise ArtifactError(f"{self.path / PARAMS_NAME} holds {member.filename!r}, which is no param of "
                                        "the plan; recompile the model")
                stored = spec.stored_weight
                if member.file_size > stored.nbytes + _NPY_HEADER_MAX:
                    raise ArtifactError(f"{self.path / PARAMS_NAME}: {member.filename} declares {member.file_size} "
                                        f"bytes, param {spec.name} is stored as {list(stored.shape)} {stored.dtype}, "
                                        f"{stored.nbytes} bytes; recompile the model")

    def input_specs(self) -> list[TensorSpec]:
        return [self.plan.tensors[n] for n in self.plan.inputs]

    def input_names(self) -> list[str]:
        """The model's own (ONNX) names of the inputs, in `input_specs` order."""
        return self._model_names("inputs", self.plan.inputs)

    def output_names(self) -> list[str]:
        """The model's own (ONNX) names of the outputs, in the plan's output order (the index flags are none)."""
        return self._model_names("outputs", self.index_checks.model_outputs(self.plan.outputs))

    @property
    def index_checks(self) -> IndexChecks:
        """The run-time index checks (`adreno.artifact.index_checks`): an executor's `run` passes its outputs through
        them."""
        return IndexChecks.of(self.manifest, self.plan.outputs)

    def bound_inputs(self) -> dict[str, np.ndarray]:
        """The graph inputs baked into the compile (`adreno.frontend.bind`; `--bind`), by name: no longer inputs."""
        try:
            return {name: np.asarray(entry["value"], dtype=entry["dtype"]).reshape(entry["shape"])
                    for name, entry in self.manifest.get("bound", {}).items()}
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise ArtifactError(f"{self.path / MANIFEST_NAME}: its bound inputs are malformed ({type(err).__name__}: "
                                f"{str(err)[:80]}); recompile the model") from None

    def ordered_inputs(self, arrays: dict) -> list:
        """The arrays of a {name: array} mapping in input order. Keys are the model's own input names; the plan's
        tensor names (which differ only for inputs the importer renamed) work too. A bound input may be given too
        (a case's own input file): only with its bound value."""
        for name, value in self.bound_inputs().items():
            given = np.asarray(arrays.get(name, value))
            if given.shape != value.shape or given.dtype.kind not in "biufc" or not np.array_equal(
                    given, value, equal_nan=value.dtype.kind in "fc"):
                raise AdrenoError(f"input {name!r} was bound at compile time to {_describe(value)}; the given value "
                                  f"{_describe(given)} differs: recompile with --bind")
        names = self.input_names()
        keys = [name if name in arrays else tensor for name, tensor in zip(names, self.plan.inputs)]
        missing = [name for name, key in zip(names, keys) if key not in arrays]
        if missing:
            raise AdrenoError(f"missing inputs {missing}; the model takes {names} (given {sorted(arrays)})")
        return [arrays[key] for key in keys]

    def value_ranges(self) -> dict[str, tuple[int, int]]:
        """[low, high) of each integer input a random run draws, by plan tensor (the manifest's `values`,
        `adreno.frontend.input_values`); an artifact of an older adreno has none (then {0, 1} are drawn)."""
        ranges = {}
        for name, entry in self.manifest.get("inputs", {}).items():
            values = entry.get("values") if isinstance(entry, dict) else None
            if values is None:
                continue
            if not (isinstance(values, list) and len(values) == 2 and all(type(v) is int for v in values)
                    and values[0] < values[1]):
                raise ArtifactError(f"{self.path / MANIFEST_NAME}: input {name!r} has values {values!r}, not an "
                                    "integer range [low, high); recompile the model")
            ranges[entry.get("tensor", name)] = tuple(values)
        return ranges

    def _model_names(self, key: str, tensors: list[str]) -> list[str]:
        by_tensor = {entry.get("tensor", name): name for name, entry in self.manifest.get(key, {}).items()}
        return [by_tensor.get(t, t) for t in tensors]


def _describe(array: np.ndarray) -> str:
    """An array's values on one line, elided past a dozen elements (for error messages)."""
    if array.size <= 12:
        return str(array.tolist())
    flat = array.ravel().tolist()
    return f"[{', '.join(map(str, flat[:3]))}, ..., {', '.join(map(str, flat[-3:]))}] of shape {list(array.shape)}"


def _check_replaceable(final: Path, given) -> None:
    """`-o` writes only into a missing directory, an empty one, or an earlier artifact: never over a user's other
    files, which replacing the directory would delete. An earlier artifact is a directory whose manifest is one of
    ours (it lists the files the compile wrote) and which holds nothing else but what `adreno cache export` adds:
    a `manifest.json` of another tool, or a file a user put beside an artifact's, makes it a directory to keep."""
    if not final.exists():
        return
    if not final.is_dir():
        raise ArtifactError(f"{given} exists and is not a directory: choose another -o")
    try:
        entries = {entry.name for entry in final.iterdir()}
    except OSError as err:
        raise ArtifactError(f"cannot read {given}: {err.strerror or err}") from None
    if not entries:
        return
    written = _artifact_entries(final / MANIFEST_NAME)
    if written is None:
        raise ArtifactError(f"{given} is a directory with other files in it (not an earlier artifact: no manifest "
                            "of adreno's): choose a new or empty -o, nothing was written")
    others = sorted(entries - written - {MANIFEST_NAME, BUNDLE_DIR})
    if others:
        raise ArtifactError(f"{given} holds an earlier artifact and files of its own ({', '.join(others[:3])}"
                            f"{', ...' if len(others) > 3 else ''}), which replacing it would delete: move them or "
                            "choose another -o, nothing was written")


def _artifact_entries(manifest: Path) -> set[str] | None:
    """The top-level names of the files an artifact's manifest lists; None when `manifest` is not an artifact's
    (missing, unreadable, not JSON, or without the fields every adreno compile writes)."""
    try:
        data = json.loads(manifest.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or "plan_format" not in data or "adreno_version" not in data:
        return None
    return {str(name).split("/", 1)[0] for name in files}


_PARKED = ".parked"  # the suffix of an earlier artifact set aside while its replacement moves in


def _tmp_prefix(final: Path) -> str:
    """The name prefix of the temporary siblings a writer of `final` makes (its build and the replaced artifact);
    the writer's pid follows, so a later writer knows which ones a killed compile left behind."""
    return f".{final.name}.adreno-tmp."


def _recover_stale_siblings(final: Path) -> None:
    """Settle the temporary siblings of `final` whose writing process no longer runs (a compile killed mid-write):
    a parked earlier artifact (`_PARKED`: the writer was killed between the two renames of `swap_into_place`'s
    fallback) goes back to `final` when `final` is missing, is removed when `final` is an artifact (it was
    replaced), and is kept otherwise; any other sibling (a build, or what an exchange swapped out) is removed."""
    prefix = _tmp_prefix(final)
    for sibling in sorted(final.parent.glob(f"{prefix}*")):
        pid = sibling.name[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or process_alive(int(pid)) or not sibling.is_dir() or sibling.is_symlink():
            continue
        if sibling.name.endswith(_PARKED):
            if not os.path.lexists(final):
                os.rename(sibling, final)
            elif _artifact_entries(final / MANIFEST_NAME) is not None:
                shutil.rmtree(sibling, ignore_errors=True)
            continue
        shutil.rmtree(sibling, ignore_errors=True)


def _read_json(path: Path) -> dict:
    """The JSON of a regular file inside the artifact (never a FIFO, a device, or a link leading out)."""
    try:
        if not confined(path.parent, path.name).is_file():
            raise FileNotFoundError(path)
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{path.parent} is not a complete artifact: {path.name} is missing; "
                            "recompile the model") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ArtifactError(f"{path} is corrupt ({type(err).__name__}: {str(err)[:80]}); recompile the model") from None


class ArtifactWriter:
    """Writes an artifact into a temporary sibling directory and moves it into place only when complete,
    so a failed compile never leaves a partial artifact behind (and never destroys the previous one)."""

    def __init__(self, final_path: str | os.PathLike):
        if not str(final_path).strip():
            raise ArtifactError("the artifact directory (-o) is empty: give a directory to write")
        self.final_path = Path(final_path).resolve()
        try:
            if self.final_path.parent.is_dir():
                _recover_stale_siblings(self.final_path)  # first: a parked artifact goes back before the check
        except OSError as err:
            raise ArtifactError(f"cannot tidy the earlier writes of {final_path}: {err.strerror or err}") from None
        _check_replaceable(self.final_path, final_path)
        try:
            self.final_path.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f"{_tmp_prefix(self.final_path)}{os.getpid()}.",
                                             dir=self.final_path.parent))
        except OSError as err:
            raise ArtifactError(f"cannot create the artifact directory {final_path}: {err.strerror or err}"
                                f"{f' ({err.filename})' if err.filename else ''}") from None
        (self.tmp / KERNEL_DIR).mkdir()

    def write_text(self, rel: str, text: str) -> None:
        (self.tmp / rel).write_text(text)

    def write_kernels(self, plan: Plan, sources: dict[str, str]) -> None:
        """The programs' OpenCL sources, each stamped with what it was lowered for (`adreno.artifact.kernel_contract`)
        and compressed with a zero timestamp, so that the same source gives the same bytes (and SHA-256)."""
        for name, source in kernel_contract.stamped(plan, sources).items():
            (self.tmp / plan.programs[name]).write_bytes(gzip.compress(source.encode(), compresslevel=9, mtime=0))

    def write_json(self, rel: str, data: dict) -> None:
        self.write_text(rel, json.dumps(data, indent=1, sort_keys=False) + "\n")

    def write_params(self, params: dict[str, np.ndarray]) -> None:
        np.savez(self.tmp / PARAMS_NAME, **params)

    def commit(self, manifest: dict) -> Path:
        """Record every file with its size and SHA-256 in the manifest, then atomically replace the final
        directory."""
        self.seal(manifest)
        return self.install()

    def seal(self, manifest: dict) -> Path:
        """Write the manifest (every file with its size and SHA-256): the temporary directory is then a complete
        artifact, which a check can load (`adreno.compiler.build_check`) before `install` moves it into place."""
        files = {str(p.relative_to(self.tmp)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
                 for p in sorted(self.tmp.rglob("*")) if p.is_file()}
        sealed = {**manifest, "plan_format": PLAN_FORMAT, "files": files}
        self.write_json(MANIFEST_NAME, {**sealed, "run_sha256": run_digest(sealed)})
        return self.tmp

    def install(self) -> Path:
        """Put the sealed temporary directory at the final path, which names the earlier artifact or this one at
        every instant (`swap_into_place`), then remove the earlier one."""
        previous = swap_into_place(self.tmp, self.final_path, self.tmp.with_name(self.tmp.name + _PARKED))
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        return self.final_path

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "ArtifactWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """A failed write leaves nothing (the temporary directory goes, the earlier artifact stays); a write the
        file system refused (a full disk, a quota, a read-only mount) is one ArtifactError line."""
        if exc_type is not None:
            self.abort()
        if isinstance(exc, OSError):
            raise ArtifactError(f"cannot write the artifact {self.final_path}: {exc.strerror or exc}"
                                f"{f' ({exc.filename})' if exc.filename else ''}; nothing was written"
                                f"{', the earlier artifact is kept' if self.final_path.exists() else ''}") from None
