"""A small conv net whose 3x3 convs Winograd can replace (C, O >= 64, 16x16 maps; O = 66 pads a packed pixel),
optionally with a classifier head (its Gemm weight a buffer, not an image)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def winograd_net(seed: int = 0, head: bool = False) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"
    for i, (cin, cout) in enumerate([(64, 66), (66, 64)]):
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (9 * cin))).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x = f"r{i}"
    shape = [1, 64, 16, 16]
    if head:
        inits += [numpy_helper.from_array((rng.standard_normal((10, 64)) * 0.1).astype(np.float32), "fc_w"),
                  numpy_helper.from_array(np.zeros(10, np.float32), "fc_b")]
        nodes += [helper.make_node("GlobalAveragePool", [x], ["pooled"]),
                  helper.make_node("Flatten", ["pooled"], ["flat"]),
                  helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1)]
        x, shape = "logits", [1, 10]
    graph = helper.make_graph(nodes, "winograd_net",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
