"""The conv layer tables and the naive OpenCL baseline (`adreno.conv_layers`, `adreno.baseline`), and
tools/bench_conv.py as a user runs it: every column's output checked before it is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adreno.baseline import run_naive
from adreno.conv_layers import TOL, WINOGRAD_TOL, Layer, conv_layers, layer_model, layer_params, max_error
from tests.conftest import without_tvm

ROOT = Path(__file__).resolve().parents[2]


def test_layer_tables():
    r18 = conv_layers("resnet18")
    assert len(r18) == 15 and sum(layer.count for layer in r18) == 20  # 20 convs in ResNet-18
    assert r18[0].label() == "conv7x7/s2 3->64 @224x224+relu"
    mb = conv_layers("mobilenetv2")
    assert any(layer.groups == layer.c > 1 and layer.stride == 2 for layer in mb)
    assert {layer.act for layer in mb} >= {"clip6", "none"}


def test_layers_and_baseline_need_neither_tvm_nor_onnx(no_tvm_path):
    """A GPU machine with only numpy and pyopencl regenerates a layer's tensors and runs the baseline."""
    code = ("import sys; from adreno.baseline import run_naive; from adreno.conv_layers import Layer, layer_params; "
            "p = layer_params(Layer(1, 4, 5, 5, 8, 3)); print(sorted(p), [m for m in ('tvm', 'onnx') if m in "
            "sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=without_tvm(no_tvm_path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == "['beta', 'gamma', 'mean', 'var', 'w', 'x'] []".split()


@pytest.mark.parametrize("layer", [Layer(1, 8, 9, 9, 16, 3, 2, (1, 1, 1, 1), name="a"),
                                   Layer(1, 8, 7, 7, 8, 3, 1, (1, 1, 1, 1), groups=8, epilogue="bn_clip", name="b")],
                         ids=["conv", "dw"])
def test_naive_kernel_matches_onnxruntime(layer, pocl_device):
    from onnxruntime import InferenceSession

    p = layer_params(layer)
    model = layer_model(layer, p)
    ref = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": p["x"]})[0]
    ms, err = run_naive(layer, p, lambda out: max_error(out, ref), pocl_device, repeat=2)
    assert ms is not None and ms > 0 and err <= TOL
    wrong = run_naive(layer, p, lambda out: max_error(out + 1.0, ref), pocl_device, repeat=2)
    assert wrong[0] is None and wrong[1] > TOL  # a mismatch is reported, not timed


def test_texture_columns_time_the_layers_own_checked_kernels(tmp_path):
    """`tools/bench_conv.py --memory texture`: the direct and Winograd columns of a layer compiled for images match
    onnxruntime and are timed without the packing of its NCHW input and the unpacking of its output."""
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_conv.py"), "--model", "tiny", "--layers", "1",
                           "--memory", "texture", "--skip", "tvm,naive", "--repeat", "2", "--device", "pocl",
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    table = json.loads(out.read_text())
    assert table["memory"] == "texture" and table["columns"] == ["adreno", "winograd"]
    (row,) = table["layers"]
    assert row["layer"] == "conv3x3/s1 3->16 @32x32+relu"
    assert row["errors"]["adreno"] <= TOL and row["errors"]["winograd"] <= WINOGRAD_TOL
    for col in ("adreno", "winograd"):
        assert row["ms"][col] > 0
        kernels = row["kernels"][col]
        assert not any("pack_nchw4c" in name for name in kernels["timed"])
        assert sorted(kernels["untimed"]) == ["pack_nchw4c_kernel", "unpack_nchw4c_kernel"]  # there, not in the time
        assert any("winograd" in name for name in kernels["timed"]) == (col == "winograd")
