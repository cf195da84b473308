"""The Python API: compile a model, run and check the artifact, tune, in a notebook or a script.

    import adreno
    artifact = adreno.compile("tiny", memory="texture", output="build/tiny")
    outputs = artifact.run()      # the CLI's seeded random inputs (seed 0), or a list / {name: array}
    artifact.check()              # raises adreno.errors.OutputMismatchError unless onnxruntime agrees

`adreno/__init__.py` re-exports `compile`, `load`, `tune` and `Artifact` lazily, so `import adreno` (and
`adreno --help`) loads none of this. Modes are the enums of `adreno.options` (`Memory`, `Precision`, ...); a caller
may pass the member or its value ("texture"), which `CompileOptions` converts once, at this boundary. Every refusal
is an `adreno.errors.AdrenoError` with a one-line message, as the CLI prints it.

This is a thin layer over what the CLI runs: `compile_model` with the build check, the launch-plan `Executor`
through the program cache, and `adreno.tune.session.open_tuner`. `adreno run` takes its inputs (`model_inputs`) and
its `--check` (`check_outputs`) from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .artifact.format import Artifact as StoredArtifact
from .artifact.format import random_inputs
from .artifact.shape_sets import parse_shape_sets
from .errors import AdrenoError, OutputMismatchError
from .options import CompileOptions, Host, Memory, Precision
from .runners.interface import Runner

Inputs = Sequence[np.ndarray] | Mapping[str, np.ndarray] | None


def default_output(model: str | os.PathLike) -> Path:
    """Where a compile writes when no output is given: `build/<model name>` (the CLI's default too)."""
    return Path("build") / Path(str(model)).stem


def compile(model: str | os.PathLike, *, target: str = "adreno-740",  # noqa: A001 - adreno.compile is the API's name
            memory: Memory | str | None = None, precision: Precision | str = Precision.FP32,
            records: str | os.PathLike | None = None, output: str | os.PathLike | None = None,
            host: Host | str = Host.ANDROID, build_check: bool = True,
            input_shapes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, Sequence[int]]] | None = None,
            jobs: int | None = None) -> Artifact:
    """Compile `model` (a bundled model name, see `adreno models`, or an .onnx path) for `target` into the artifact
    directory `output` (default `build/<model name>`, written completely or not at all) and return it opened.

    `memory`: `Memory.TEXTURE` or `Memory.BUFFER` (or "texture"/"buffer"); None lets `records` decide (texture unless
    they hold buffer kernels only). `precision`: `Precision.FP16` stores images as half floats (texture only).
    `records`: a records file of `adreno.tune` whose best config per kernel is used. `host`: the CPU of the host
    library (android, or native for this machine). `build_check`: build the kernels on a local OpenCL device at the
    end, through the program cache, as `adreno compile` does. `input_shapes`: {input name: shape} for inputs whose
    shape the model leaves open (`--input-shape`), or a list of such sets: one artifact holding every set, `run`
    choosing the set its inputs match (docs/shapes.md); `jobs`: how many sets compile at once (default one per
    core). Raises `AdrenoError` (a `ModelError` for a model the pipeline cannot take, `KernelBuildError` when a
    kernel does not build)."""
    sets = input_shapes if isinstance(input_shapes, Sequence) else [input_shapes or {}]
    # the CLI's rules and one-line refusals (every set names the same inputs, no set twice), on the same items
    shape_sets = parse_shape_sets([f"{name}:{','.join(map(str, shape))}" for shapes in sets
                                   for name, shape in shapes.items()], flag="input_shapes")
    options = CompileOptions(target=target, memory=memory, precision=precision, host=host, input_shapes=shape_sets[0],
                             records=None if records is None else str(records))  # a bad mode: before TVM loads
    from .compiler.build_check import BuildCheck  # inside: adreno --help does not need it
    from .cache import ProgramCache  # inside: loads pyopencl at import
    from .compile import compile_model  # inside: loads TVM and onnx
    from .compile_shapes import compile_shape_sets  # inside: loads TVM and onnx

    output = default_output(model) if output is None else output
    check = BuildCheck(ProgramCache()) if build_check else None
    if len(shape_sets) > 1:
        return load(compile_shape_sets(model, output, options, shape_sets, build_check=check, jobs=jobs)[0])
    return load(compile_model(model, output, options, build_check=check))


def load(path: str | os.PathLike, *, device: str | int | None = None) -> Artifact:
    """Open the artifact directory `path` (every file checked against its manifest); `device`: the local OpenCL
    device `run` and `check` use (as `adreno run --device`: pocl, gpu or an index; default pocl). Raises
    `ArtifactError` for a directory that is incomplete, damaged or from another version."""
    return Artifact(StoredArtifact.load(path), device)


class Artifact:
    """A compiled model on a local OpenCL device: `run` it, `check` it against onnxruntime.

    The device and its programs (built through the program cache, as `adreno run` builds them) are opened on the
    first `run` and kept until `close` (or the end of a `with` block)."""

    def __init__(self, stored: StoredArtifact, device: str | int | None = None):
        """`stored`: the opened directory (`adreno.artifact.format.Artifact`); `device`: as `load`'s."""
        self.stored = stored
        self.device = device
        self._executors: dict[int, object] = {}  # by shape set: an app switching shapes builds each set's once

    @property
    def path(self) -> Path:
        return self.stored.path

    @property
    def input_names(self) -> list[str]:
        return self.stored.input_names()

    @property
    def output_names(self) -> list[str]:
        return self.stored.output_names()

    def run(self, inputs: Inputs = None, *, seed: int = 0) -> list[np.ndarray]:
        """The model's outputs, in `output_names` order, for `inputs`: arrays in input order, a {name: array}
        mapping, or None for the seeded random inputs `adreno run --seed` uses."""
        stored = shape_set_of(self.stored, inputs)
        return self._run(stored, model_inputs(stored, inputs, seed))

    def check(self, inputs: Inputs = None, *, seed: int = 0, rtol: float | None = None, atol: float = 1e-4) -> dict:
        """Run on `inputs` (as `run` takes them) and compare each output with onnxruntime's run of the model the
        artifact was compiled from, within `atol` + `rtol` x max |reference| (`rtol` default: the precision's, as
        `adreno run --check`). Returns the comparison (`ok`, per output errors); raises `OutputMismatchError` when
        an output is off."""
        stored = shape_set_of(self.stored, inputs)
        arrays = model_inputs(stored, inputs, seed)
        result = check_outputs(stored, arrays, self._run(stored, arrays), rtol=rtol, atol=atol)
        if not result["ok"]:
            worst = [f"output {i}: {row['problem'] or 'max abs error %.3g' % row['max_abs_error']}"
                     for i, row in enumerate(result["outputs"])]
            raise OutputMismatchError(f"{self.path} does not match onnxruntime (rtol {result['rtol']}, atol "
                                      f"{result['atol']}): {'; '.join(worst)}")
        return result

    def close(self) -> None:
        """Release the device's programs and buffers (a later `run` opens them again)."""
        self._executors.clear()

    def __enter__(self) -> Artifact:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"adreno.Artifact({str(self.path)!r})"

    def _run(self, stored: StoredArtifact, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Run shape set `stored` (of `self.stored`) on its executor, made at the set's first run and kept."""
        executor = self._executors.get(stored.shape_set)
        if executor is None:
            from .cache import ProgramCache  # inside: loads pyopencl at import
            from .opencl.executor import Executor  # inside: loads pyopencl at import

            executor = self._executors[stored.shape_set] = Executor(stored, self.device, cache=ProgramCache())
        return executor.run(arrays)


def shape_set_of(artifact: StoredArtifact, inputs: Inputs, where: str = "inputs") -> StoredArtifact:
    """The shape set of `artifact` that `inputs` take (`adreno.artifact.shape_sets`): the one their shapes match exactly
    (a sequence is in input order); the artifact as opened for None (the random inputs). Another shape is one line
    listing the sets, `where` naming the inputs."""
    if inputs is None:
        return artifact
    arrays = inputs.items() if isinstance(inputs, Mapping) else zip(artifact.input_names(), inputs)
    try:
        return artifact.for_inputs({name: np.shape(array) for name, array in arrays})
    except AdrenoError as err:
        raise AdrenoError(f"{where}: {err}") from None


def model_inputs(artifact: StoredArtifact, inputs: Inputs, seed: int = 0, where: str = "inputs") -> list[np.ndarray]:
    """`inputs` as the list the executor takes: None gives the seeded random inputs (`random_inputs`), a mapping is
    ordered by the model's input names, a sequence is taken in input order. Each array must hold its input's dtype
    without loss (`lossless_input`); `where` names them in a refusal (the CLI: `--input FILE`)."""
    specs = artifact.input_specs()
    if inputs is None:
        return random_inputs(specs, seed, artifact.value_ranges())
    if isinstance(inputs, Mapping):
        try:
            ordered = artifact.ordered_inputs(dict(inputs))
        except AdrenoError as err:
            raise AdrenoError(f"{where}: {err}") from None
    else:
        ordered = [np.asarray(array) for array in inputs]
        if len(ordered) != len(specs):
            raise AdrenoError(f"{where}: {len(ordered)} arrays for the {len(specs)} inputs "
                              f"{', '.join(artifact.input_names())}")
    for spec, array in zip(specs, ordered):
        lossless_input(spec, array, where)
    return ordered


def lossless_input(spec, array: np.ndarray, where: str) -> None:
    """Refuse an input array `spec`'s dtype cannot take without a silent change: a non-numeric dtype (strings,
    objects; booleans are numbers here: they would be dropped), values the dtype does not hold exactly (int64 above
    2**24 in float32, fractions for an integer input), non-numbers. A float64 array becomes float32 by rounding, as
    every framework does."""
    dtype = np.dtype(spec.dtype)
    if array.dtype.kind not in "biuf":
        raise AdrenoError(f"{where}: {spec.name} is {array.dtype}, the model takes {dtype}: convert it first")
    if not (array.dtype.kind == dtype.kind == "f") and not np.array_equal(array.astype(dtype).astype(array.dtype),
                                                                        array):
        raise AdrenoError(f"{where}: {spec.name} holds {array.dtype} values that {dtype} cannot represent "
                          "exactly; convert it first")


def check_outputs(artifact: StoredArtifact, inputs: list[np.ndarray], outputs: list[np.ndarray],
                  reference: str | None = None, rtol: float | None = None, atol: float = 1e-4) -> dict:
    """Compare `outputs` (the artifact's run on `inputs`) with onnxruntime's run of `reference` (default: the model
    the artifact was compiled from) on the same inputs: {"ok", "outputs": per-output rows of
    `adreno.reference.compare`, "rtol", "atol"}; `rtol` None: the artifact's precision's default."""
    # inside: loads onnx and onnxruntime
    from .reference import compare, default_rtol, onnxruntime_outputs, reference_model, reference_spread, within

    model = reference_model(artifact, reference)
    expected = onnxruntime_outputs(model, inputs, artifact.bound_inputs())
    spread = reference_spread(model, inputs, artifact.bound_inputs(), expected)
    rows = compare(outputs, expected, spread)
    rtol = default_rtol(artifact) if rtol is None else rtol
    return {"ok": all(within(row, rtol, atol) for row in rows), "outputs": rows, "rtol": rtol, "atol": atol}


def tune(model: str | os.PathLike, *, trials: int = 64, records: str | os.PathLike = "records.jsonl",
         runner: Runner | None = None,
         tracker: str | None = None, key: str = "pocl-cpu", target: str = "adreno-740",
         memory: Memory | str = Memory.TEXTURE, precision: Precision | str = Precision.FP32,
         device: str | int | None = None, batch: int = 8, seed: int = 0):  # -> adreno.tune.tuner.TuneReport
    """Tune `model`'s kernels for `target`: `trials` new measurements in all (`batch` candidates measured per
    round, so a run measures whole rounds), each appended to `records` (an existing file is resumed), as
    `adreno tune` does. Where they are measured: on the farm's devices of `key` with `tracker`
    ("HOST:PORT", as `adreno tune --tracker`), else on the local OpenCL `device` (pocl, gpu or an index; records
    keyed by its fingerprint) through `runner` (an `adreno.runners.interface.Runner` of that device, e.g. a
    `LocalRunner`; default an isolated local runner, each measurement in a child process with a time limit).
    Returns the `adreno.tune.tuner.TuneReport` (per task: trials, default and best ms; not annotated, since its
    module loads TVM); `adreno.compile(model, records=records)` then uses the best configs."""
    from .records import Database  # inside: adreno --help does not need it
    from .tune.builder import Builder  # inside: loads TVM
    from .tune.extract import extract_tasks  # inside: loads TVM and onnx
    from .tune.session import open_tuner  # inside: loads TVM

    if trials < 1 or batch < 1:
        raise AdrenoError(f"trials and batch must be at least 1, not {trials} and {batch}")
    tasks = extract_tasks(model, CompileOptions(target=target, memory=memory, precision=precision))
    builder = Builder()
    tuner = open_tuner(tasks, Database(Path(records)), target=target, device=device, tracker=tracker, key=key,
                       runner=runner, builder=builder, batch=batch, seed=seed)
    tuner.closing.append(builder.close)
    try:
        return tuner.tune(trials)
    finally:
        tuner.close()
