"""The last resort (`adreno.schedules.last_resort`): dlight's reduction rules keep a schedule only when it fits the
device; what they fail or get wrong falls through to the next rule, is named in the manifest's `refused` list, and
the compiled model still matches onnxruntime on PoCL."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.format import Artifact
from adreno.targets.devices import get_device
from tests.conftest import single_op_model
from tests.schedules.sched_helpers import check_against_onnxruntime


def stem_then_mean(size: int):
    """A 3x3 stride-2 SAME_UPPER stem conv (3 -> 8 channels) then ReduceMean over every axis (no axes: a scalar)."""
    weight = np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
             helper.make_node("ReduceMean", ["c"], ["y"], keepdims=0)]
    graph = helper.make_graph(nodes, "stem_mean", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [1, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _refused(artifact) -> list[str]:
    return [r for r in Artifact.load(artifact).manifest["refused"] if r.startswith("last_resort")]


def _local_bytes(artifact) -> list[int]:
    """The bytes of every `__local` array the artifact's kernels declare."""
    loaded = Artifact.load(artifact)
    sources = [loaded.kernel_source(program) for program in loaded.plan.programs]
    declared = [line.strip() for source in sources for line in source.splitlines()
                if line.strip().startswith("__local ")]
    arrays = [re.fullmatch(r"__local (\w+) \w+\[(\d+)\];", line).groups() for line in declared]
    return [{"float": 4, "int": 4, "half": 2}[dtype] * int(count) for dtype, count in arrays]


@pytest.mark.parametrize("size,memory", [(32, "buffer"), (16, "texture")])
def test_a_stem_conv_then_a_global_mean_compiles_and_matches(tmp_path, size, memory):
    """dlight's Reduction fails inside its rfactor on this mean (the compile failed), its GeneralReduction leaves the
    reduction loops on the host (2,048 launches of a one-work-item kernel, which the plan refuses): both refused, by
    name, and dlight's Fallback runs the mean."""
    artifact = check_against_onnxruntime(stem_then_mean(size), tmp_path / memory, memory)
    refused = _refused(artifact)
    assert len(refused) == 2, refused
    assert "'Reduction'" in refused[0] and "InternalError" in refused[0]
    assert "'GeneralReduction'" in refused[1] and "reduction loops stay on the host" in refused[1]


def test_a_reduction_over_the_local_memory_falls_back(tmp_path):
    """dlight's Reduction sums 64x64 floats with a 256-work-item cross-thread reduction: 1 KiB of local memory, kept
    on adreno-740 (32 KiB) and refused on the same device with 512 bytes, where no kernel declares local memory."""
    model = single_op_model("ReduceSum", {"x": [64, 64]}, keepdims=0)
    kept = check_against_onnxruntime(model, tmp_path / "740", "buffer")
    assert _refused(kept) == [] and _local_bytes(kept) == [1024]
    small = replace(get_device("adreno-740"), local_memory_bytes=512)
    refused = check_against_onnxruntime(model, tmp_path / "small", "buffer", facts=small)
    assert "'Reduction'}: 1024 bytes of local memory per work-group, more than the device's 512" in \
        _refused(refused)[0]
    assert _local_bytes(refused) == []
