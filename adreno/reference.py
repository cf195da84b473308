"""The numerical reference: the artifact's source model run in onnxruntime on the same inputs."""

from __future__ import annotations

import hashlib

import numpy as np

from .artifact import Artifact
from .errors import ArtifactError, ModelError
from .options import Precision


def reference_model(artifact: Artifact, override: str | None = None):
    """The ONNX model an artifact was compiled from: `override` (a path or zoo name) if given, else the bundled
    model or the file recorded in the manifest, which must still be the file that was compiled."""
    from .frontend.importer import load_model

    source = artifact.manifest.get("model_source", {})
    if override:
        model, _ = load_model(override)
        return model
    if "zoo" in source:
        from .frontend import zoo

        return zoo.get_model(source["zoo"], seed=source.get("seed", 0))
    if "path" in source:
        model, _ = load_model(source["path"])
        if hashlib.sha256(model.SerializeToString()).hexdigest() != artifact.manifest.get("model_sha256"):
            raise ArtifactError(f"{source['path']} changed since {artifact.path} was compiled; recompile, or pass "
                                "the original model with --reference")
        return model
    raise ArtifactError(f"{artifact.path} does not record its source model; pass it with --reference MODEL.onnx")


def onnxruntime_session(model_bytes: bytes):
    """An onnxruntime CPU session with one intra-op and one inter-op thread. onnxruntime's default thread pool keeps
    spinning threads after a run; a PoCL executor compiling and running kernels in the same process afterwards
    segfaulted in about half the runs (PP-OCR cls, `tools/bench_conv.py --prepare`), and never with one thread. A
    reference needs correctness, not speed."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def onnxruntime_outputs(model, inputs: list[np.ndarray], bound: dict[str, np.ndarray] | None = None) \
        -> list[np.ndarray]:
    """Run `model` in onnxruntime (CPU) on `inputs`, given in the order of the model's graph inputs but those in
    `bound` (an artifact's `bound_inputs`: the values compiled in), which get their bound values."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

    try:
        session = onnxruntime_session(model.SerializeToString())
    except (ort_errors.Fail, ort_errors.InvalidGraph, ort_errors.InvalidArgument, ort_errors.InvalidProtobuf,
            ort_errors.NotImplemented) as err:
        raise ModelError(f"onnxruntime cannot load the reference model: {err}") from None
    bound = bound or {}
    names = [i.name for i in session.get_inputs()]
    feed = {name: bound[name] for name in names if name in bound}
    free = [n for n in names if n not in bound]
    if len(free) != len(inputs):
        raise ModelError(f"the reference model takes {len(free)} inputs {free}, the artifact {len(inputs)}: is it "
                         "the model that was compiled?")
    try:
        return session.run(None, {**feed, **dict(zip(free, inputs))})
    except (ort_errors.Fail, ort_errors.InvalidArgument, ort_errors.RuntimeException,
            ort_errors.NotImplemented) as err:
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise ModelError(f"onnxruntime cannot run the reference model on the artifact's inputs ({first[:160]}): "
                         "is it the model that was compiled?") from None


# `adreno run --check`'s default tolerance relative to the output's largest magnitude, by the artifact's image
# precision: fp32 kernels differ from onnxruntime by rounding only; half-float images (`--precision fp16`) round every
# stored activation to 11 bits (MobileNetV2: 1.8% of the largest output), bounded at 5% (see README, fp16 storage).
RTOL = {Precision.FP32: 1e-3, Precision.FP16: 5e-2}


def default_rtol(artifact: Artifact) -> float:
    return RTOL[Precision(artifact.manifest.get("precision", Precision.FP32))]


def within(row: dict, rtol: float, atol: float) -> bool:
    """Whether a `compare` row passes: same shape, and max abs error <= atol + rtol * max |reference|."""
    return row["problem"] is None and row["max_abs_error"] <= atol + rtol * row["max_abs_ref"]


def compare(outputs: list[np.ndarray], reference: list[np.ndarray]) -> list[dict]:
    """Per output: max abs error, max relative error (to the reference's largest magnitude), and the max
    magnitude, for the tolerance line `adreno run --check` prints. An output whose shape differs from the
    reference's (or that has no reference, or a reference without an output) has a `problem` and no errors."""
    rows = []
    for index in range(max(len(outputs), len(reference))):
        out = outputs[index] if index < len(outputs) else None
        ref = reference[index] if index < len(reference) else None
        scale = float(np.max(np.abs(ref))) if ref is not None and ref.size else 0.0
        row = {"max_abs_error": None, "max_rel_error": None, "max_abs_ref": scale, "problem": None}
        if out is None or ref is None:
            row["problem"] = "the artifact has no such output" if out is None else "onnxruntime has no such output"
        elif out.shape != ref.shape:
            row["problem"] = f"shape {list(out.shape)}, onnxruntime's {list(ref.shape)}"
        else:
            err = float(np.max(np.abs(out.astype(np.float64) - ref))) if out.size else 0.0
            row.update(max_abs_error=err, max_rel_error=err / scale if scale else err)
        rows.append(row)
    return rows
