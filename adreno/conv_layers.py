"""The distinct conv layers of a zoo model and one-layer ONNX models of them, with seeded weights: what the conv
benchmarks (`tools/bench_conv.py`, `tools/bench_memory.py`), the occupancy table (`tools/occupancy_table.py`) and the
schedule tests share.

numpy only at import time: a GPU machine without TVM or onnx (`tools/gpu_bundle.py`) regenerates a layer's tensors
with `layer_params` and checks outputs with `max_error`; onnx is imported by the functions that build models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ModelError
from .frontend.importer import conv_nodes
from .workload import ConvWorkload

TOL = 1e-4  # a layer's output matches when max |out - ref| <= TOL * max(1, max |ref|) (`max_error`)
WINOGRAD_TOL = 1e-3  # fp32 Winograd rounds more than a direct conv


@dataclass
class Layer:
    """One conv layer and what follows it (the schedule tests build their cases from this class too).

    epilogue: "none" | "bias" | "bn" | "bn_relu" | "bn_clip" (ReLU6) | "bias_residual_relu" (conv + bias + a second
    input `skip`, then ReLU); pads: (top, left, bottom, right). `name` and `count` (how often the model has the layer)
    label benchmark rows; the benchmark's own columns (naive kernel, torch) take the BN epilogues with symmetric
    padding that `conv_layers` produces."""

    n: int
    c: int
    h: int
    w: int
    o: int
    k: int
    stride: int = 1
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: int = 1
    groups: int = 1
    epilogue: str = "bn_relu"
    name: str = ""
    count: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        span = self.dilation * (self.k - 1) + 1
        return ((self.h + self.pads[0] + self.pads[2] - span) // self.stride + 1,
                (self.w + self.pads[1] + self.pads[3] - span) // self.stride + 1)

    @property
    def oh(self) -> int:
        return self.out_hw[0]

    @property
    def ow(self) -> int:
        return self.out_hw[1]

    @property
    def pad(self) -> int:
        return self.pads[0]

    @property
    def act(self) -> str:
        """The activation after the conv: "relu", "clip6" or "none"."""
        return "relu" if self.epilogue.endswith("relu") else "clip6" if self.epilogue.endswith("clip") else "none"

    @property
    def flops(self) -> int:
        return 2 * self.n * self.o * self.oh * self.ow * (self.c // self.groups) * self.k * self.k

    def id(self) -> str:
        p = "".join(map(str, self.pads)) if len(set(self.pads)) > 1 else str(self.pads[0])
        return (f"n{self.n}c{self.c}x{self.h}x{self.w}-o{self.o}k{self.k}s{self.stride}p{p}"
                f"{f'd{self.dilation}' if self.dilation > 1 else ''}{f'g{self.groups}' if self.groups > 1 else ''}"
                f"-{self.epilogue}")

    def workload(self, dtype: str = "float32") -> ConvWorkload:
        """The conv as the schedules see it (no epilogue: it does not change which knobs are good)."""
        return ConvWorkload(self.n, self.c, self.h, self.w, self.o, self.k, self.k, self.oh, self.ow,
                            (self.stride,) * 2, (self.dilation,) * 2, self.pads, self.groups, dtype)

    def label(self) -> str:
        kind = "dw" if self.groups > 1 and self.groups == self.c else ("g" if self.groups > 1 else "")
        return (f"{kind}conv{self.k}x{self.k}/s{self.stride} {self.c}->{self.o} @{self.h}x{self.w}"
                f"{'' if self.act == 'none' else '+' + self.act}")


def conv_layers(model_name: str) -> list[Layer]:
    """The distinct Conv layers of a zoo model, each with the BatchNormalization and activation after it and how
    many times the model has it, named L0, L1, ... in order of first appearance. A `Layer` is square (kernel, stride,
    dilation); a model with another conv is refused rather than described wrongly."""
    from .frontend import zoo  # inside: loads onnx at import

    model = zoo.get_model(model_name)
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    found: dict[str, Layer] = {}
    for node, attrs, (n, c, h, w), (o, _, k, kw), _ in conv_nodes(model):
        if k != kw or any(len(set(attrs.get(a, [1]))) > 1 for a in ("strides", "dilations")):
            raise ModelError(f"{model_name}: conv {node.name!r} is not square (kernel, stride or dilation)")
        epilogue, out = "none", node.output[0]
        after = consumers.get(out, [])
        if len(after) == 1 and after[0].op_type == "BatchNormalization":
            epilogue, out = "bn", after[0].output[0]
            after = consumers.get(out, [])
        if epilogue == "bn" and len(after) == 1 and after[0].op_type in ("Relu", "Clip"):
            epilogue += "_relu" if after[0].op_type == "Relu" else "_clip"
        layer = Layer(n, c, h, w, o, k, attrs.get("strides", [1])[0], tuple(attrs.get("pads", [0] * 4)),
                      attrs.get("dilations", [1])[0], attrs.get("group", 1), epilogue)
        if layer.id() in found:
            found[layer.id()].count += 1
        else:
            layer.name = f"L{len(found)}"
            found[layer.id()] = layer
    return list(found.values())


def layer_params(layer: Layer, seed: int = 0) -> dict[str, np.ndarray]:
    """The layer's tensors by ONNX name, seeded, numpy only (a TVM-less machine regenerates them): weight `w`
    (He-normal), `bias` or BN statistics per the epilogue, input `x` and, for a residual epilogue, `skip`."""
    rng = np.random.default_rng(seed)
    cig = layer.c // layer.groups
    weight = rng.standard_normal((layer.o, cig, layer.k, layer.k), dtype=np.float32)
    p = {"w": weight * np.float32(math.sqrt(2.0 / (cig * layer.k * layer.k)))}
    if layer.epilogue.startswith("bias"):
        p["bias"] = rng.standard_normal(layer.o, dtype=np.float32)
    if layer.epilogue.startswith("bn"):
        p["gamma"] = (1.0 + 0.1 * rng.standard_normal(layer.o)).astype(np.float32)
        p["beta"] = (0.05 * rng.standard_normal(layer.o)).astype(np.float32)
        p["mean"] = (0.1 * rng.standard_normal(layer.o)).astype(np.float32)
        p["var"] = (0.5 + rng.random(layer.o)).astype(np.float32)
    p["x"] = rng.standard_normal((layer.n, layer.c, layer.h, layer.w), dtype=np.float32)
    if layer.epilogue.endswith("residual_relu"):
        p["skip"] = rng.standard_normal((layer.n, layer.o, layer.oh, layer.ow), dtype=np.float32)
    return p


def layer_model(layer: Layer, p: dict[str, np.ndarray]):
    """The layer as a one-layer ONNX model (inputs `x` and, for a residual epilogue, `skip`; output `y`) with the
    weights of `p` (`layer_params`)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def value(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    weights = [k for k in ("w", "bias", "gamma", "beta", "mean", "var") if k in p]
    inits = [numpy_helper.from_array(p[k], k) for k in weights]
    inputs = [value("x", p["x"].shape)]
    nodes = [helper.make_node("Conv", ["x", "w"] + (["bias"] if "bias" in p else []), ["conv"],
                              kernel_shape=[layer.k] * 2, strides=[layer.stride] * 2, pads=list(layer.pads),
                              dilations=[layer.dilation] * 2, group=layer.groups)]
    last = "conv"
    if "gamma" in p:
        nodes.append(helper.make_node("BatchNormalization", [last, "gamma", "beta", "mean", "var"], ["bn"],
                                      epsilon=1e-5))
        last = "bn"
    if "skip" in p:
        inputs.append(value("skip", p["skip"].shape))
        nodes.append(helper.make_node("Add", [last, "skip"], ["sum"]))
        last = "sum"
    if layer.act == "relu":
        nodes.append(helper.make_node("Relu", [last], ["act"]))
        last = "act"
    elif layer.act == "clip6":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["act"]))
        last = "act"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, layer.name or "conv_layer", inputs,
                              [value("y", (layer.n, layer.o, layer.oh, layer.ow))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def folded_bn(p: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Inference BatchNormalization of `p` (`layer_params`) as a per-channel (scale, shift) after the conv."""
    scale = (p["gamma"] / np.sqrt(p["var"] + 1e-5)).astype(np.float32)
    return scale, (p["beta"] - p["mean"] * scale).astype(np.float32)


def max_error(out: np.ndarray, ref: np.ndarray) -> float:
    """max |out - ref| relative to max(1, max |ref|): what TOL and WINOGRAD_TOL bound."""
    return float(np.abs(out - ref).max() / max(1.0, float(np.abs(ref).max())))
