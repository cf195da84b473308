"""Builders and runners shared by the schedule tests: small conv graphs in ONNX, compiled with our schedules, run on
PoCL and compared with onnxruntime; a recorder that proves which of our rules claimed which function."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import onnx

from adreno.conv_layers import Layer as ConvCase  # one conv layer description for the tests and the benchmarks
from adreno.conv_layers import layer_model, layer_params
from adreno.options import Host, Memory, Schedules, Staging
from adreno.schedules import family as schedule_family
from adreno.schedules.family import Refused


def conv_model(case: ConvCase, seed: int = 0) -> onnx.ModelProto:
    """`case` as a one-layer ONNX model with seeded weights (the conv benchmarks build the same)."""
    return layer_model(case, layer_params(case, seed))


def model_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    from adreno.reference import onnxruntime_session

    session = onnxruntime_session(model.SerializeToString())
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
    for name in families:
        family = schedule_family(name)
        original = family.apply

        def wrapped(func, ctx, _original=original, _family=family):
            sch = _original(func, ctx)
            if sch is not None and not isinstance(sch, Refused):
                claims[_family.name].append(_family.workload_key(func))
            return sch

        monkeypatch.setattr(family, "apply", wrapped)
    yield claims


def checked_claims(model: onnx.ModelProto, out_dir, monkeypatch, *families: str, inputs=None, rtol: float = 1e-4):
    """`compile_and_run` the model (on `model_inputs` unless `inputs`), assert its first output is close to
    onnxruntime's, and return (the artifact, the workload keys each of `families` scheduled: `record_claims`)."""
    inputs = model_inputs(model) if inputs is None else inputs
    with record_claims(monkeypatch, *families) as claims:
        artifact, outputs = compile_and_run(model, out_dir, inputs)
    assert_close(outputs[0], reference(model, inputs)[0], rtol=rtol)
    return artifact, claims


def compile_and_run(model: onnx.ModelProto, out_dir, inputs: dict[str, np.ndarray], schedules: str = "adreno"):
    """Compile for buffer memory with direct convs (these are the NCHW buffer schedules; textures are
    tests/test_texture.py's, Winograd tests/schedules/test_winograd.py's) and the families' rule defaults (what a
    test that sets `default_config` means to compile), and run."""
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    artifact = compile_model(model, out_dir, CompileOptions(target="adreno-740", schedules=schedules, memory="buffer",
                                                            winograd="off", defaults="rule"))
    ex = Executor(artifact)
    return artifact, ex.run([inputs[n] for n in ex.artifact.plan.inputs])


def check_against_onnxruntime(model: onnx.ModelProto, out_dir, memory: str, rtol: float = 1e-4, **options):
    """Compile `model` for `memory` (CompileOptions `options` on top), run it on seeded inputs and assert every output
    matches onnxruntime's; returns the artifact path."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.opencl.executor import Executor

    artifact = compile_model(model, out_dir, CompileOptions(target="adreno-740", memory=memory, **options))
    inputs = model_inputs(model)
    ex = Executor(artifact)
    outputs = ex.run([inputs[n] for n in ex.artifact.plan.inputs])
    for out, ref in zip(outputs, reference(model, inputs), strict=True):
        assert_close(out, ref, rtol)
    return artifact


def primitive_function(model: onnx.ModelProto, name: str, memory: Memory = Memory.BUFFER):
    """The unscheduled fused PrimFunc of `model` whose name starts with `name` (what a family's `apply` sees), and
    the context of an adreno-740 compile."""
    from adreno.compile import lower_relax
    from adreno.compiler.plan import kernel_calls
    from adreno.frontend.importer import to_relax

    ctx = context("adreno-740", host=Host.NATIVE)
    lowered = lower_relax(to_relax(model), ctx, schedules=Schedules.NONE, memory=memory)
    found = [func for _, gv, func in kernel_calls(lowered) if gv.name_hint.startswith(name)]
    assert found, f"no function {name}* in {[gv.name_hint for _, gv, _ in kernel_calls(lowered)]}"
    return found[0], ctx


def context(name: str = "adreno-740", host: Host = Host.ANDROID, staging: Staging = Staging.AUTO):
    """The `ScheduleContext` of a compile for the table device `name` (no tuned knobs)."""
    from adreno.targets import devices
    from adreno.schedules.context import ScheduleContext

    return ScheduleContext.for_device(devices.get_device(name), host=host, staging=staging)
