"""The mobile vision models of the zoo (MobileViT-, MobileNetV3-small- and ConvNeXt-style) compile in both memories
and match onnxruntime within `adreno run --check`'s tolerance on PoCL; each holds the blocks it is named for."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from adreno.frontend import zoo
from adreno.options import Memory

VISION = ["mobilevit_xs", "mobilenetv3_small", "convnext"]


def _activation_matmuls(model) -> int:
    """MatMuls whose both operands are computed (attention's Q K^T and P V), not a weight."""
    weights = {t.name for t in model.graph.initializer}
    return sum(n.op_type == "MatMul" and not weights & set(n.input) for n in model.graph.node)


def test_models_hold_their_blocks():
    vit, v3, convnext = (zoo.get_model(name) for name in VISION)
    ops = {name: Counter(n.op_type for n in m.graph.node) for name, m in zip(VISION, (vit, v3, convnext))}
    assert _activation_matmuls(vit) == 4  # two attention layers, Q K^T and P V each
    assert ops["mobilevit_xs"]["LayerNormalization"] == 6 and ops["mobilevit_xs"]["Concat"] == 2
    softmax_axes = [a.i for n in vit.graph.node if n.op_type == "Softmax" for a in n.attribute]
    assert softmax_axes == [-1, -1]
    assert ops["mobilenetv3_small"]["HardSwish"] >= 5 and ops["mobilenetv3_small"]["HardSigmoid"] == 4
    assert ops["convnext"]["Erf"] == 4 and ops["convnext"]["LayerNormalization"] == 7
    depthwise_7x7 = [n for n in convnext.graph.node if n.op_type == "Conv"
                     and {(a.name, tuple(a.ints) or a.i) for a in n.attribute} >= {("kernel_shape", (7, 7))}
                     and any(a.name == "group" and a.i > 1 for a in n.attribute)]
    assert len(depthwise_7x7) == 4


@pytest.mark.parametrize("memory", [Memory.TEXTURE, Memory.BUFFER], ids=lambda m: m.value)
@pytest.mark.parametrize("name", VISION)
def test_compiles_and_matches_onnxruntime(name, memory, tmp_path):
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions
    from adreno.reference import onnxruntime_session

    model, spec = zoo.get_model(name), zoo.MODELS[name]
    x = np.random.default_rng(5).standard_normal(spec.input_shape).astype(np.float32)
    executor = Executor(compile_model(model, tmp_path / name, CompileOptions(memory=memory)), "pocl")
    (out,) = executor.run(executor.artifact.ordered_inputs({spec.input_name: x}))
    (ref,) = onnxruntime_session(model.SerializeToString()).run(None, {spec.input_name: x})
    assert out.shape == ref.shape == spec.output_shape
    error, tolerance = float(np.abs(out - ref).max()), 1e-4 + 1e-3 * float(np.abs(ref).max())
    assert error <= tolerance, f"{name} [{memory.value}]: max |error| {error:.3g} > {tolerance:.3g}"
