"""Models quantized by `onnxruntime.quantization` as users quantize theirs, and the agreement measure of their
outputs with onnxruntime's run of the same quantized model (`tests/test_quantized.py`, `tools/quantized_models.py`).

A float model is first pre-processed (`quant_pre_process`: shape inference and onnxruntime's graph optimisation,
which folds BatchNormalization into the convs), then quantized by one `Recipe`; static recipes calibrate on seeded
N(0, 1) inputs."""

from __future__ import annotations

import enum
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


# A statically quantized model's dequantized output is within this many of its quantization steps of onnxruntime's,
# with the same top class (docs/quantized.md, "Tolerance, and why"): tests/test_quantized.py, tools/conformance.py.
STATIC_STEPS = 12


class Recipe(enum.StrEnum):
    DYNAMIC = "dynamic"  # quantize_dynamic, int8 weights: ConvInteger, MatMulInteger, DynamicQuantizeLinear
    DYNAMIC_UINT8 = "dynamic-uint8"  # the same with uint8 weights
    QDQ = "qdq"  # quantize_static, QuantizeLinear/DequantizeLinear around float ops, per-tensor, uint8 activations
    QDQ_PER_CHANNEL = "qdq-per-channel"  # the same, per-channel weights, int8 activations
    QOPERATOR = "qoperator"  # quantize_static, QLinearConv, QGemm and com.microsoft QLinearAdd, ...
    QOPERATOR_PER_CHANNEL = "qoperator-per-channel"


def quantize(model, recipe: Recipe, calibration: list[dict[str, np.ndarray]]):
    """`model` (an onnx.ModelProto) quantized by `recipe`, calibrated on `calibration` (feeds) when static."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(calibration)

        def get_next(self):
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory() as tmp:
        source, prepared, quantized = (str(Path(tmp) / f"{n}.onnx") for n in ("float", "prepared", "quantized"))
        onnx.save(model, source)
        quant_pre_process(source, prepared, skip_symbolic_shape=True)
        if recipe in (Recipe.DYNAMIC, Recipe.DYNAMIC_UINT8):
            weights = QuantType.QInt8 if recipe is Recipe.DYNAMIC else QuantType.QUInt8
            quantize_dynamic(prepared, quantized, weight_type=weights)
        else:
            per_channel = recipe in (Recipe.QDQ_PER_CHANNEL, Recipe.QOPERATOR_PER_CHANNEL)
            quantize_static(prepared, quantized, Reader(),
                            quant_format=QuantFormat.QDQ if recipe.name.startswith("QDQ") else QuantFormat.QOperator,
                            per_channel=per_channel,
                            activation_type=QuantType.QInt8 if per_channel else QuantType.QUInt8)
        return onnx.load(quantized)


def calibration_feeds(model, count: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """`count` seeded N(0, 1) feeds of `model`'s (static-shape, float) inputs."""
    rng = np.random.default_rng(seed)
    inputs = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in model.graph.input]
    return [{name: rng.standard_normal(shape).astype(np.float32) for name, shape in inputs} for _ in range(count)]


def output_steps(model) -> dict[str, float]:
    """The quantization step (scale) of each graph output that a per-tensor DequantizeLinear produces."""
    from onnx import numpy_helper

    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    return {n.output[0]: float(constants[n.input[1]]) for n in model.graph.node
            if n.op_type == "DequantizeLinear" and n.output[0] in outputs and n.input[1] in constants
            and constants[n.input[1]].size == 1}


@dataclass(frozen=True)
class Agreement:
    """How our output agrees with onnxruntime's: the largest difference, in output steps where the output is a
    dequantized tensor, and the fraction of elements that are equal."""

    max_abs: float
    max_steps: float | None
    exact_fraction: float

    @classmethod
    def of(cls, ours: np.ndarray, reference: np.ndarray, step: float | None) -> Agreement:
        difference = np.abs(ours.astype(np.float64) - reference.astype(np.float64))
        return cls(float(difference.max()), float(difference.max() / step) if step else None,
                   float(np.mean(difference == 0)))


PPOCR_CLS = ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192))  # in the rapidocr-onnxruntime wheel


def float_model(name: str):
    """A float model by name: a bundled zoo model, or `ppocr-cls`, PP-OCR's mobile text-direction classifier
    (a real exported CNN, from the `rapidocr-onnxruntime` wheel) with its input fixed at 1x3x48x192."""
    import importlib.util

    import onnx

    from adreno.frontend import zoo

    if name != "ppocr-cls":
        return zoo.get_model(name)
    file, shape = PPOCR_CLS
    model = onnx.load(str(Path(importlib.util.find_spec("rapidocr_onnxruntime").origin).parent / "models" / file))
    for dim, size in zip(model.graph.input[0].type.tensor_type.shape.dim, shape):
        dim.Clear()
        dim.dim_value = size
    return model
