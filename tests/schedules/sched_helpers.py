"""Builders and runners shared by the schedule tests: small conv graphs in ONNX, compiled with our schedules, run on
PoCL and compared with onnxruntime; a recorder that proves which of our rules claimed which function."""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class ConvCase:
    """One conv layer to test: NCHW input (n, c, h, w), o output channels, k x k kernel, and what follows it.

    epilogue: "none" | "bias" | "bn_relu" | "bn" | "bn_clip" | "bias_residual_relu" (conv + bias + skip input, ReLU)
    pads: (top, left, bottom, right)."""

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

    @property
    def out_hw(self) -> tuple[int, int]:
        span = self.dilation * (self.k - 1) + 1
        return ((self.h + self.pads[0] + self.pads[2] - span) // self.stride + 1,
                (self.w + self.pads[1] + self.pads[3] - span) // self.stride + 1)

    def id(self) -> str:
        p = "".join(map(str, self.pads)) if len(set(self.pads)) > 1 else str(self.pads[0])
        return (f"n{self.n}c{self.c}x{self.h}x{self.w}-o{self.o}k{self.k}s{self.stride}p{p}"
                f"{f'd{self.dilation}' if self.dilation > 1 else ''}{f'g{self.groups}' if self.groups > 1 else ''}"
                f"-{self.epilogue}")


def conv_model(case: ConvCase, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    cig = case.c // case.groups
    oh, ow = case.out_hw
    w = rng.standard_normal((case.o, cig, case.k, case.k)).astype(np.float32) * np.float32(
        np.sqrt(2.0 / (cig * case.k * case.k)))
    inits = [numpy_helper.from_array(w, "w")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [case.n, case.c, case.h, case.w])]
    conv_inputs = ["x", "w"]
    if case.epilogue.startswith("bias"):
        inits.append(numpy_helper.from_array(rng.standard_normal(case.o).astype(np.float32), "bias"))
        conv_inputs.append("bias")
    nodes = [helper.make_node("Conv", conv_inputs, ["conv"], kernel_shape=[case.k, case.k],
                              strides=[case.stride] * 2, pads=[case.pads[0], case.pads[1], case.pads[2], case.pads[3]],
                              dilations=[case.dilation] * 2, group=case.groups)]
    last = "conv"
    if case.epilogue.startswith("bn"):
        for name, value in (("gamma", 1 + 0.1 * rng.standard_normal(case.o)), ("beta", 0.1 * rng.standard_normal(case.o)),
                            ("mean", 0.1 * rng.standard_normal(case.o)), ("var", 0.5 + rng.random(case.o))):
            inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        nodes.append(helper.make_node("BatchNormalization", ["conv", "gamma", "beta", "mean", "var"], ["bn"]))
        last = "bn"
    if case.epilogue.endswith("residual_relu"):
        inputs.append(helper.make_tensor_value_info("skip", TensorProto.FLOAT, [case.n, case.o, oh, ow]))
        nodes.append(helper.make_node("Add", [last, "skip"], ["sum"]))
        last = "sum"
    if case.epilogue.endswith("relu"):
        nodes.append(helper.make_node("Relu", [last], ["act"]))
        last = "act"
    elif case.epilogue.endswith("clip"):
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["act"]))
        last = "act"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "conv_case", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [case.n, case.o, oh, ow])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def model_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def assert_close(out: np.ndarray, ref: np.ndarray, rtol: float = 1e-4) -> None:
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(out - ref).max())
    assert out.shape == ref.shape
    assert err <= rtol * scale, f"max |diff| {err:.3e} > {rtol:.0e} * {scale:.3g}"


@contextmanager
def record_claims(monkeypatch, *families: str):
    """Record, per family, the workload keys of the functions its `apply` scheduled (returned a schedule for)."""
    claims: dict[str, list[str]] = {f: [] for f in families}
    for family in families:
        module = importlib.import_module(f"adreno.schedules.{family}")
        original = module.apply

        def wrapped(func, target, config=None, _original=original, _family=family):
            sch = _original(func, target, config)
            if sch is not None:
                claims[_family].append(module_workload_key(_family, func))
            return sch

        monkeypatch.setattr(module, "apply", wrapped)
    yield claims


def module_workload_key(family: str, func) -> str:
    return importlib.import_module(f"adreno.schedules.{family}").workload_key(func)


def compile_and_run(model: onnx.ModelProto, out_dir, inputs: dict[str, np.ndarray], schedules: str = "adreno"):
    """Compile for buffer memory with direct convs (these are the NCHW buffer schedules; textures are
    tests/test_texture.py's, Winograd tests/schedules/test_winograd.py's) and run."""
    from adreno.compile import CompileOptions, compile_model
    from adreno.opencl.executor import Executor

    artifact = compile_model(model, out_dir, CompileOptions(target="adreno-740", schedules=schedules, memory="buffer",
                                                            winograd="off"))
    ex = Executor(artifact)
    return artifact, ex.run([inputs[n] for n in ex.artifact.plan.inputs])
