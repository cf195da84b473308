"""The numerical reference: the artifact's source model run in onnxruntime on the same inputs."""

from __future__ import annotations

import hashlib

import numpy as np

from .artifact.format import Artifact
from .errors import ArtifactError, ModelError
from .frontend.importer import load_model
from .frontend.quantized import float_lstms
from .options import Precision


def reference_model(artifact: Artifact, override: str | None = None):
    """The ONNX model an artifact was compiled from: `override` (a path or zoo name) if given, else the bundled
    model or the file recorded in the manifest, which must still be the file that was compiled."""
    source = artifact.manifest.get("model_source", {})
    if override:
        model, _ = load_model(override)
        return model
    if "zoo" in source:
        from .frontend import zoo  # inside: loads onnx at import

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
    reference needs correctness, not speed. Its log is left out, errors included: its warnings (an old opset, an
    optimizer that gives up) do not concern the user, and a refusal reaches the user once, as our one-line error
    quoting it whole (`onnxruntime_outputs`), not also as onnxruntime's own log line before it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only: an error is raised, and quoted by the caller
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
        raise ModelError(f"onnxruntime cannot load the reference model: {_one_line(err)}") from None
    bound = bound or {}
    names = [i.name for i in session.get_inputs()]
    feed = {name: bound[name] for name in names if name in bound}
    free = [n for n in names if n not in bound]
    if len(free) != len(inputs):
        raise ModelError(f"the reference model takes {len(free)} inputs {free}, the artifact {len(inputs)}: is it "
                         "the model that was compiled?")
    try:
        import onnxruntime as ort

        quiet = ort.RunOptions()
        quiet.log_severity_level = 4  # its refusal is quoted below, once
        return session.run(None, {**feed, **dict(zip(free, inputs))}, quiet)
    except (ort_errors.Fail, ort_errors.InvalidArgument, ort_errors.RuntimeException,
            ort_errors.NotImplemented) as err:
        raise ModelError(f"onnxruntime refuses the reference run on the artifact's inputs: {_one_line(err)}") from None


def _one_line(err: Exception) -> str:
    """onnxruntime's whole message, its lines joined: quoted as it is, not cut, with nothing guessed about it."""
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or type(err).__name__


# `adreno run --check`'s default tolerance relative to the output's largest magnitude, by the artifact's image
# precision: fp32 kernels differ from onnxruntime by rounding only; half-float images (`--precision fp16`) round every
# stored activation to 11 bits (MobileNetV2: 1.8% of the largest output), bounded at 5% (docs/guide.md, fp16 storage).
RTOL = {Precision.FP32: 1e-3, Precision.FP16: 5e-2}


def default_rtol(artifact: Artifact) -> float:
    return RTOL[Precision(artifact.manifest.get("precision", Precision.FP32))]


def tolerance(row: dict, rtol: float, atol: float) -> float:
    """A `compare` row's tolerance: atol + rtol * max |reference|, plus `SPREAD_FACTOR` times the reference's own
    spread where it has one (`reference_spread`: dynamically quantized models)."""
    return atol + rtol * row["max_abs_ref"] + SPREAD_FACTOR * (row.get("spread") or 0.0)


def within(row: dict, rtol: float, atol: float) -> bool:
    """Whether a `compare` row passes: same shape, and max abs error within its `tolerance`."""
    return row["problem"] is None and row["max_abs_error"] <= tolerance(row, rtol, atol)


def compare(outputs: list[np.ndarray], reference: list[np.ndarray], spread: list[float] | None = None) -> list[dict]:
    """Per output: max abs error, max relative error (to the reference's largest magnitude), the max magnitude and
    the reference's own spread (`reference_spread`, None where steady), for the tolerance line `adreno run --check`
    prints. An output whose shape differs from the reference's (or that has no reference, or a reference without an
    output) has a `problem` and no errors."""
    rows = []
    for index in range(max(len(outputs), len(reference))):
        out = outputs[index] if index < len(outputs) else None
        ref = reference[index] if index < len(reference) else None
        scale = float(np.max(np.abs(ref))) if ref is not None and ref.size else 0.0
        row = {"max_abs_error": None, "max_rel_error": None, "max_abs_ref": scale, "problem": None,
               "spread": spread[index] if spread is not None and index < len(spread) else None}
        if out is None or ref is None:
            row["problem"] = "the artifact has no such output" if out is None else "onnxruntime has no such output"
        elif out.shape != ref.shape:
            row["problem"] = f"shape {list(out.shape)}, onnxruntime's {list(ref.shape)}"
        else:
            err = float(np.max(np.abs(out.astype(np.float64) - ref))) if out.size else 0.0
            row.update(max_abs_error=err, max_rel_error=err / scale if scale else err)
        rows.append(row)
    return rows


# How far one ulp moves a dynamically quantized model's output. DynamicQuantizeLinear derives each layer's scale from
# the data and rounds every activation to a step of it, so a value one ulp off onnxruntime's (a fused multiply-add,
# another summation order) lands on the neighbouring step now and then, and those flips compound through the layers:
# onnxruntime's own ResNet-18 logits move by 0.025-0.034 (0.6-0.8% of their largest magnitude) when a single
# intermediate tensor is scaled by 1 +- 2^-23. A check of such a model cannot be tighter than that: it allows
# SPREAD_FACTOR times the change one nudge of every DynamicQuantizeLinear input makes (0.028 on ResNet-18). 1.5, because
# single-tensor nudges of the same size vary by a third between tensors, and no more, because a real bug must still
# fail: Winograd transforms of its integer convs (now refused, `adreno.compiler.winograd.eligible`) moved the logits by
# 0.054.
ULP_NUDGES = (1.0 + 2.0 ** -23, 1.0 - 2.0 ** -24)
SPREAD_FACTOR = 1.5


def reference_spread(model, inputs: list[np.ndarray], bound: dict[str, np.ndarray] | None = None,
                     reference: list[np.ndarray] | None = None) -> list[float] | None:
    """Per output, the largest change of onnxruntime's own result when its dynamically quantized activations round
    otherwise: the float input of every DynamicQuantizeLinear scaled by one ulp (`ULP_NUDGES`, one run each), and
    every DynamicQuantizeLSTM computed without quantizing its activations (`frontend.quantized.float_lstms`: our
    LSTM computes them in float; onnxruntime's rounding moves a small LSTM's outputs by about 1% of their largest
    magnitude). None for a model with neither, whose reference is steady. `reference`: the unmoved outputs, when
    already computed."""
    variants = [_nudged(model, factor) for factor in ULP_NUDGES] \
        if any(node.op_type == "DynamicQuantizeLinear" for node in model.graph.node) else []
    unrounded = float_lstms(model)
    variants += [unrounded] if unrounded is not None else []
    if not variants:
        return None
    reference = reference if reference is not None else onnxruntime_outputs(model, inputs, bound)
    spread = [0.0] * len(reference)
    for variant in variants:
        moved_outputs = onnxruntime_outputs(variant, inputs, bound)
        for index, (moved, ref) in enumerate(zip(moved_outputs, reference)):
            if moved.shape == ref.shape and moved.size:
                change = np.abs(moved.astype(np.float64) - ref.astype(np.float64))
                spread[index] = max(spread[index], float(np.max(change)))
    return spread


def _nudged(model, factor: float):
    """A copy of `model` whose DynamicQuantizeLinear nodes quantize their input times `factor`."""
    import onnx
    from onnx import helper, numpy_helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    constant = "adreno_ulp_nudge"
    graph.initializer.append(numpy_helper.from_array(np.array(factor, np.float32), constant))
    nodes = []
    for index, node in enumerate(graph.node):
        if node.op_type == "DynamicQuantizeLinear":
            moved = f"{node.input[0]}_adreno_nudged_{index}"
            nodes.append(helper.make_node("Mul", [node.input[0], constant], [moved]))
            node.input[0] = moved
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return copy
