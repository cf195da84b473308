"""The C++ harness rebuilds params from params.npz's stored forms (`native/harness/weight_forms.cc`: Winograd
weights transformed at load, float16 weights widened, int8 weights dequantized, an integer op's 8-bit weight widened
to int32) exactly as Python does (`adreno.artifact.weights`): the launch-plan executor, TVM's runtime and the
harness give bit-identical outputs on the same artifact."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.artifact.format import Artifact
from adreno.native.vm_executor import VmExecutor
from adreno.opencl.executor import Executor
from adreno.artifact.weights import WeightTransform

from ..winograd_net import winograd_net
from .harness_cli import report, run_harness


@pytest.mark.parametrize("memory, precision, tile", [("buffer", "fp32", 4), ("texture", "fp32", 2),
                                                     ("texture", "fp16", 4)])
def test_every_loader_rebuilds_the_stored_weights_bit_for_bit(memory, precision, tile, tmp_path):
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    path = compile_model(winograd_net(head=precision == "fp16"), tmp_path / "art", CompileOptions(
        memory=memory, precision=precision, winograd=f"f{tile}", host="native"))
    artifact = Artifact.load(path)
    forms = [t.stored_weight for t in artifact.plan.tensors.values() if t.kind == "param"]
    assert sum(f.transform is WeightTransform.winograd(tile) for f in forms) == 2
    assert any(f.dtype == "float16" for f in forms) == (precision == "fp16")
    _assert_loaders_agree(artifact, path, "x", np.random.default_rng(5).standard_normal((1, 64, 16, 16))
                          .astype(np.float32), tmp_path)


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_every_loader_dequantizes_the_int8_weights_bit_for_bit(memory, tmp_path):
    """An artifact of a model quantized by onnxruntime (per-channel QDQ: int8 weights with a scale and zero point
    per output channel) gives the same outputs through the three loaders; in texture memory the int8 conv weights
    are packed to OIHW4o at load (after the dequantization), and the fc's int8 weight is transposed at load into
    the (K, N) constant Relax folds a Gemm's weight into."""
    from adreno.frontend import zoo
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    from ..quantized_models import Recipe, calibration_feeds, quantize

    model = zoo.get_model("tiny")
    quantized = quantize(model, Recipe.QDQ_PER_CHANNEL, calibration_feeds(model, 2))
    path = compile_model(quantized, tmp_path / "art", CompileOptions(memory=memory, host="native"))
    artifact = Artifact.load(path)
    forms = [t.stored_weight for t in artifact.plan.tensors.values() if t.kind == "param"]
    int8 = [f for f in forms if f.quantization is not None and f.quantization.axis == 0 and f.dtype == "int8"]
    assert sum(f.packed == (memory == "texture") and f.transform is WeightTransform.NONE for f in int8) == 3
    assert [f.transform for f in int8 if len(f.shape) == 2] == [WeightTransform.TRANSPOSE]  # the fc, transposed
    _assert_loaders_agree(artifact, path, "input", calibration_feeds(quantized, 1, seed=3)[0]["input"], tmp_path)


def test_every_loader_widens_a_matmul_integer_weight_exactly(tmp_path):
    """MatMulInteger's uint8 B (zero point per column) is stored as the model's 8-bit tensor, not as the int32
    `B - zero_point` constant the kernel reads, and widened at load; the int32 output equals onnxruntime's exactly
    although its sums pass 2^24 (where a float32 accumulation would round), through the three loaders."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.reference import onnxruntime_outputs

    rows, depth, columns = 4, 1024, 24
    rng = np.random.default_rng(6)
    b = rng.integers(200, 256, (depth, columns), dtype=np.uint8)
    zero = rng.integers(0, 4, columns, dtype=np.uint8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "", "b_zero"], ["y"])], "mmi",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [rows, depth])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [rows, columns])],
        [numpy_helper.from_array(b, "b"), numpy_helper.from_array(zero, "b_zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = compile_model(model, tmp_path / "art", CompileOptions(memory="buffer", host="native"))
    artifact = Artifact.load(path)
    [weight] = [t for t in artifact.plan.tensors.values() if t.kind == "param" and t.stored_weight.quantization]
    stored = weight.stored_weight
    assert (stored.dtype, stored.shape, weight.dtype) == ("uint8", (depth, columns), "int32")
    assert stored.quantization.zero_point == tuple(int(z) for z in zero) and stored.quantization.unit_scale
    assert artifact.manifest["weight_storage"]["dtypes"] == {"uint8": 1}
    assert np.array_equal(artifact.params()[weight.name], b.astype(np.int32) - zero.astype(np.int32))
    a = rng.integers(200, 256, (rows, depth), dtype=np.uint8)
    want = onnxruntime_outputs(model, [a])[0]
    assert np.abs(want).max() > 2**24 and np.any(want % 2)  # beyond float32's exact integers
    assert np.array_equal(Executor(artifact).run([a])[0], want)
    _assert_loaders_agree(artifact, path, "a", a, tmp_path)


def _assert_loaders_agree(artifact, path, name, x, tmp_path):
    """The launch-plan executor, TVM's runtime and the C++ harness give the same (nonzero) output for input x."""
    planned = Executor(artifact).run([x])[0]
    through_tvm = VmExecutor(artifact).run([x])[0]
    harness = report(run_harness(path, {name: x}, tmp_path / "out"))
    from_harness = np.load(harness["outputs"][next(iter(artifact.manifest["outputs"]))])
    assert np.abs(planned).max() > 0
    assert np.array_equal(through_tvm, planned)
    assert np.array_equal(from_harness, planned)
