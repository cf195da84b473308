"""Texture kernels run on the local OpenCL device (PoCL: images emulated in software), checked against
onnxruntime/numpy: every kind of kernel the texture pipeline emits, odd channel counts, the buffer fallback of a
tensor too large for an image, and whole models (fp32, and fp16 image storage within a documented tolerance)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.artifact.format import Artifact
from adreno.compile import compile_model
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import onnxruntime_outputs

# fp16 image storage (CL_HALF_FLOAT, 11-bit mantissa) of every activation and weight, fp32 arithmetic: measured
# max |error| / max |reference| is about 2% on MobileNetV2 (0.056 on outputs of magnitude 3.0); the bound leaves room.
FP16_RELATIVE_TOLERANCE = 0.05


def _graph(nodes, x_shape, y_shape, weights, name="g"):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              [numpy_helper.from_array(w.astype(np.float32), n) for n, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _run(model, tmp_path, pocl_device, precision="fp32", seed=0):
    path = compile_model(model, tmp_path / "art", CompileOptions(memory="texture", host="native", precision=precision))
    artifact = Artifact.load(path)
    spec = artifact.plan.tensors[artifact.plan.inputs[0]]
    x = np.random.default_rng(seed).standard_normal(spec.shape).astype(np.float32)
    out = Executor(artifact, device=pocl_device).run([x])[0]
    ref = onnxruntime_outputs(model, [x])[0]
    return artifact, out, ref


def _image_ops(artifact) -> set[str]:
    plan = artifact.plan
    return {s.op for s in plan.steps if any(plan.tensors[a].image for a in s.args)}


@pytest.mark.parametrize("cin,cout,stride", [(3, 10, 1), (10, 3, 2), (8, 16, 1)])
def test_conv(cin, cout, stride, tmp_path, pocl_device):
    rng = np.random.default_rng(cin * 100 + cout)
    w, b = rng.standard_normal((cout, cin, 3, 3)), rng.standard_normal(cout)
    oh = (13 + 2 - 3) // stride + 1
    model = _graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[stride, stride])],
                   [1, cin, 13, 13], [1, cout, oh, oh], {"w": w, "b": b})
    artifact, out, ref = _run(model, tmp_path, pocl_device)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert {"pack", "conv2d", "unpack"} <= _image_ops(artifact)
    assert not artifact.manifest["textures"]["fallbacks"]


def test_depthwise_pointwise_relu_add_pool_mean(tmp_path, pocl_device):
    """Depthwise conv, 1x1 conv, ReLU, residual add, max pool and global average pool, all inside one region."""
    rng = np.random.default_rng(7)
    c = 10
    weights = {"dw": rng.standard_normal((c, 1, 3, 3)), "pw": rng.standard_normal((c, c, 1, 1)),
               "s": rng.standard_normal((1, c, 1, 1))}
    nodes = [helper.make_node("Conv", ["x", "dw"], ["a"], pads=[1, 1, 1, 1], group=c),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "pw"], ["p"]),
             helper.make_node("Mul", ["p", "s"], ["m"]),
             helper.make_node("Add", ["m", "a"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["q"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["q"], ["y"])]
    model = _graph(nodes, [1, c, 12, 12], [1, c, 1, 1], weights)
    artifact, out, ref = _run(model, tmp_path, pocl_device)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    plan = artifact.plan
    assert sum(s.op == "pack" for s in plan.steps) == 1 and sum(s.op == "unpack" for s in plan.steps) == 1
    assert {"conv2d", "max_pool"} <= _image_ops(artifact)


def test_tensor_too_large_for_an_image_falls_back_to_a_buffer(tmp_path, pocl_device):
    """A 1 x 20000 activation exceeds 16384 pixels in every activation scope: it stays a buffer, with the reason
    in the plan, and the result is still right."""
    rng = np.random.default_rng(11)
    model = _graph([helper.make_node("Conv", ["x", "w"], ["y"])], [1, 4, 1, 20000], [1, 4, 1, 20000],
                   {"w": rng.standard_normal((4, 4, 1, 1))})
    artifact, out, ref = _run(model, tmp_path, pocl_device)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    fallbacks = artifact.manifest["textures"]["fallbacks"]
    assert fallbacks and all("exceeds the image limits" in why for why in fallbacks.values())
    big = [t for t in artifact.plan.tensors.values() if t.shape == [1, 1, 1, 20000, 4]]
    assert big and all(t.image is None and t.scope == "global" for t in big)
    assert any(t.image for t in artifact.plan.tensors.values())  # the weight still is an image


@pytest.mark.parametrize("name", ["mobilenetv2"])  # ResNet-18 in images: tests/native/test_runtime_tvm.py
def test_model_end_to_end(name, tmp_path, pocl_device):
    from adreno.frontend import zoo

    model = zoo.get_model(name)
    artifact, out, ref = _run(model, tmp_path, pocl_device)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
    summary = artifact.manifest["textures"]
    assert summary["image_tensors"] > 50 and not summary["fallbacks"]
    assert sum(s.op == "pack" for s in artifact.plan.steps) == 1


def test_fp16_storage_mobilenetv2(tmp_path, pocl_device):
    from adreno.frontend import zoo

    model = zoo.get_model("mobilenetv2")
    artifact, out, ref = _run(model, tmp_path, pocl_device, precision="fp16")
    assert all(i["channel_type"] == "float16" for i in artifact.plan.images.values())
    rel = float(np.abs(out - ref).max() / np.abs(ref).max())
    assert rel < FP16_RELATIVE_TOLERANCE, rel
    assert rel > 1e-5  # the storage really is half precision
