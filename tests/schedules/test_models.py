"""Whole ResNet-18 and MobileNetV2 compiled with our schedules: outputs match onnxruntime and every conv function
of the model was scheduled by one of our families (none fell back to TVM's cross-thread-reduction schedule)."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.frontend import zoo
from tests.schedules.sched_helpers import checked_claims
from tests.kernel_files import kernel_sources


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2"])
def test_model_matches_onnxruntime_with_our_schedules(name, tmp_path, monkeypatch):
    model = zoo.get_model(name)
    spec = zoo.MODELS[name]
    x = np.random.default_rng(7).standard_normal(spec.input_shape).astype(np.float32)
    artifact, claims = checked_claims(model, tmp_path / name, monkeypatch, "conv2d_direct", "depthwise",
                                      inputs={spec.input_name: x})
    conv_programs = sorted(kernel_sources(artifact, "*conv2d*"))
    claimed = len(claims["conv2d_direct"]) + len(claims["depthwise"])
    assert conv_programs and claimed == len(conv_programs), (claims, conv_programs)
    if name == "mobilenetv2":
        assert claims["depthwise"], "no depthwise conv was claimed by the depthwise family"
