"""The interpolation matrices of `adreno.frontend.rewrites` against ONNX's reference implementation: a Resize and its
rewrite (Gathers / MatMuls with the matrices) evaluated by `onnx.reference.ReferenceEvaluator` give the same values,
for linear and cubic, antialias, half_pixel_symmetric, exclude_outside, scales and sizes, down and up. Numpy only:
no compile, no device."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from adreno.frontend.rewrites import InferredShapes, interpolation_matrix, rewrite

X_SHAPE = [1, 2, 9, 7]


def resize_model(scales=None, sizes=None, **attrs):
    weights = {"scales": np.array(scales, np.float32)} if scales else {"sizes": np.array(sizes, np.int64)}
    inputs = ["x", "", *weights] if scales else ["x", "", "", *weights]
    graph = helper.make_graph(
        [helper.make_node("Resize", inputs, ["y"], **attrs)], "resize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, n) for n, w in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


CASES = {
    "linear-antialias-scales-0.6": dict(scales=[1, 1, 0.6, 0.6], mode="linear", antialias=1),
    "linear-antialias-sizes-4x3": dict(sizes=[1, 2, 4, 3], mode="linear", antialias=1),
    "linear-antialias-upsample": dict(scales=[1, 1, 1.5, 2.5], mode="linear", antialias=1),
    "cubic-antialias-scales-0.35": dict(scales=[1, 1, 0.35, 0.5], mode="cubic", antialias=1),
    "cubic-antialias-sizes-exclude": dict(sizes=[1, 2, 3, 5], mode="cubic", antialias=1, exclude_outside=1,
                                          cubic_coeff_a=-0.5),
    "linear-half-pixel-symmetric-down": dict(scales=[1, 1, 0.6, 0.7], mode="linear",
                                             coordinate_transformation_mode="half_pixel_symmetric"),
    "linear-half-pixel-symmetric-up": dict(scales=[1, 1, 2.3, 1.7], mode="linear",
                                           coordinate_transformation_mode="half_pixel_symmetric"),
    "cubic-half-pixel-symmetric-antialias": dict(scales=[1, 1, 0.45, 0.7], mode="cubic", antialias=1,
                                                 coordinate_transformation_mode="half_pixel_symmetric"),
    "nearest-half-pixel-symmetric": dict(scales=[1, 1, 0.6, 1.7], mode="nearest",
                                         coordinate_transformation_mode="half_pixel_symmetric"),
    "cubic-align-corners": dict(scales=[1, 1, 0.8, 1.3], mode="cubic", coordinate_transformation_mode="align_corners"),
}


@pytest.mark.parametrize("attrs", CASES.values(), ids=CASES.keys())
def test_rewrite_matches_the_onnx_reference(attrs):
    model = resize_model(**attrs)
    rewritten = rewrite(model, InferredShapes({"x": X_SHAPE}))
    assert "Resize" not in [n.op_type for n in rewritten.graph.node]  # the form TVM lacks is gone
    x = np.random.default_rng(0).standard_normal(X_SHAPE).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ReferenceEvaluator(rewritten).run(None, {"x": x})[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [0.3, 0.4, 0.5])
def test_antialias_rows_sum_to_one_and_widen_the_filter(mode, scale):
    """Each output averages over about support / scale inputs: more taps than without antialias, weights sum 1."""
    length, resized = 20, int(20 * scale)
    source = (np.arange(resized, dtype=np.float32) + 0.5) / np.float32(scale) - 0.5
    plain = interpolation_matrix(source, length, mode)
    wide = interpolation_matrix(source, length, mode, scale)
    np.testing.assert_allclose(wide.sum(axis=1), 1, rtol=1e-6)
    middle = resized // 2
    assert np.count_nonzero(wide[middle]) > np.count_nonzero(plain[middle])
