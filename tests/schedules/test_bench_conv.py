"""tools/bench_conv.py: its layer table and its naive OpenCL kernel (the baseline every timing is checked like)."""

from __future__ import annotations

import pytest

from tests.schedules.tools_bench import bench_conv


def test_layer_tables():
    r18 = bench_conv.conv_layers("resnet18")
    assert len(r18) == 15 and sum(layer.count for layer in r18) == 20  # 20 convs in ResNet-18
    assert r18[0].label() == "conv7x7/s2 3->64 @224x224+relu"
    mb = bench_conv.conv_layers("mobilenetv2")
    assert any(layer.groups == layer.c > 1 and layer.stride == 2 for layer in mb)
    assert {layer.act for layer in mb} >= {"clip6", "none"}


@pytest.mark.parametrize("layer", [bench_conv.Layer(1, 8, 9, 9, 16, 3, 2, (1, 1, 1, 1), name="a"),
                                   bench_conv.Layer(1, 8, 7, 7, 8, 3, 1, (1, 1, 1, 1), groups=8, epilogue="bn_clip",
                                                    name="b")], ids=["conv", "dw"])
def test_naive_kernel_matches_onnxruntime(layer, pocl_device):
    from onnxruntime import InferenceSession

    p = bench_conv.layer_params(layer)
    model = bench_conv.layer_model(layer, p)
    ref = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": p["x"]})[0]
    ms, err = bench_conv.run_naive(layer, p, lambda out: bench_conv.max_error(out, ref), pocl_device, repeat=2)
    assert ms is not None and err <= bench_conv.TOL


@pytest.mark.parametrize("winograd", ["off", "f4"])
def test_texture_columns_time_the_layers_own_checked_kernels(winograd, pocl_device, tmp_path):
    """`--memory texture`: the layer compiled for images matches onnxruntime and is timed without the packing of
    its NCHW input and the unpacking of its output."""
    from onnxruntime import InferenceSession

    from adreno.opencl.executor import Executor

    layer = bench_conv.Layer(1, 16, 8, 8, 16, 3, 1, (1, 1, 1, 1), name="t")
    p = bench_conv.layer_params(layer)
    model = bench_conv.layer_model(layer, p)
    ref = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": p["x"]})[0]
    ms, err = bench_conv.run_compiled(model, layer, p["x"], ref, "adreno", pocl_device, 2, tmp_path,
                                      winograd=winograd, tol=bench_conv.WINOGRAD_TOL, memory="texture")
    assert ms is not None and 0 < ms and err <= bench_conv.WINOGRAD_TOL
    (art,) = tmp_path.iterdir()
    ex = Executor(art, device=pocl_device)
    assert ex.artifact.manifest["memory"] == "texture"
    assert any("pack_nchw4c" in s.func for s in ex.artifact.plan.steps)  # there, but not in the time
    assert any("winograd" in s.func for s in ex.artifact.plan.steps) == (winograd == "f4")
