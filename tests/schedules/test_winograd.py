"""Winograd F(2x2, 3x3) and F(4x4, 3x3): the transform matrices against a direct conv (numpy), the Relax rewrite
(eligibility, selection rule, tuned override, fusion of the epilogue into the output transform), and compiled
models on PoCL against onnxruntime, with our three stage schedules claiming every stage.

Tolerance: max |out - ref| <= 1e-3 * max(1, max |ref|) for both tiles (fp32 Winograd rounds more than a direct conv:
the F(4x4) matrices hold entries up to 8 and 1/24; measured errors are ~1e-6 relative for F(2x2) and 1e-6..1e-5 for
F(4x4) on these shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.compiler import winograd
from adreno.options import Winograd
from adreno.schedules import conv2d_winograd
from tests.schedules.sched_helpers import ConvCase, assert_close, conv_model, model_inputs, record_claims, reference
from tests.schedules.sched_helpers import context
from tests.kernel_files import kernel_sources

RTOL = 1e-3


def winograd_conv(x: np.ndarray, w: np.ndarray, m: int, padding=(1, 1, 1, 1)) -> np.ndarray:
    """Winograd conv in numpy (float64), for checking the matrices against a direct conv."""
    bt, g, at = winograd.matrices(m)
    alpha = m + 2
    n, c, h, wd = x.shape
    top, left, bottom, right = padding
    oh, ow = h + top + bottom - 2, wd + left + right - 2
    nh, nw = winograd.tiles(oh, ow, m)
    xp = np.zeros((n, c, nh * m + 2, nw * m + 2))
    xp[:, :, top:top + h, left:left + wd] = x
    u = np.einsum("ar,ocrs,bs->aboc", g, w.astype(np.float64), g)
    y = np.zeros((n, w.shape[0], nh * m, nw * m))
    for ty in range(nh):
        for tx in range(nw):
            d = xp[:, :, ty * m:ty * m + alpha, tx * m:tx * m + alpha]
            v = np.einsum("ar,ncrs,bs->abnc", bt, d, bt)
            mm = np.einsum("aboc,abnc->abno", u, v)
            y[:, :, ty * m:ty * m + m, tx * m:tx * m + m] = np.einsum("ia,abno,jb->noij", at, mm, at)
    return y[:, :, :oh, :ow]


def _direct(x, w, pads):
    n, c, h, wd = x.shape
    t, left, b, r = pads
    xp = np.zeros((n, c, h + t + b, wd + left + r))
    xp[:, :, t:t + h, left:left + wd] = x
    oh, ow = h + t + b - 2, wd + left + r - 2
    y = np.zeros((n, w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y


@pytest.mark.parametrize("m", [2, 4])
def test_transform_matrices_match_direct_conv(m):
    rng = np.random.default_rng(0)
    for shape, pads in [((2, 5, 7, 9), (1, 1, 1, 1)), ((1, 3, 8, 8), (0, 0, 0, 0)), ((1, 4, 6, 5), (1, 0, 2, 1))]:
        x = rng.standard_normal(shape)
        w = rng.standard_normal((6, shape[1], 3, 3))
        np.testing.assert_allclose(winograd_conv(x, w, m, pads), _direct(x, w, pads), atol=1e-11)
    u = winograd.transform_weight(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), m)
    assert u.shape == (m + 2, m + 2, 8, 4) and u.dtype == np.float32


CASES = [
    ConvCase(1, 16, 14, 14, 16, 3, 1, (1, 1, 1, 1)),                                # BN folded to bias + ReLU
    ConvCase(1, 64, 28, 28, 64, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu"),  # residual add fused
    ConvCase(2, 64, 7, 7, 64, 3, 1, (1, 1, 1, 1)),                                  # batch 2, ragged F(4) tiles
    ConvCase(1, 64, 14, 14, 32, 3, 1, (1, 1, 1, 1), epilogue="bias"),
    ConvCase(2, 16, 14, 14, 24, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu"),
    ConvCase(1, 8, 10, 9, 8, 3, 1, (0, 1, 2, 0), epilogue="bn"),                    # asymmetric padding, odd sizes
]


def _stage_names(memory: str) -> list[str]:
    return sorted(s + (conv2d_winograd.PACKED if memory == "texture" else "") for s in conv2d_winograd.STAGES)


@pytest.mark.parametrize("memory", ["buffer", "texture"])
@pytest.mark.parametrize("mode", ["f2", "f4"])
@pytest.mark.parametrize("case", CASES, ids=ConvCase.id)
def test_winograd_matches_onnxruntime(case, mode, memory, tmp_path, monkeypatch):
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    model = conv_model(case)
    inputs = model_inputs(model)
    with record_claims(monkeypatch, "conv2d_winograd", "conv2d_direct", "conv2d_texture") as claims:
        artifact = compile_model(model, tmp_path / "a", CompileOptions(target="adreno-740", winograd=mode,
                                                                     memory=memory))
    ex = Executor(artifact)
    out = ex.run([inputs[n] for n in ex.artifact.plan.inputs])[0]
    assert_close(out, reference(model, inputs)[0], rtol=RTOL)
    stages = sorted(k.split("|")[0] for k in claims["conv2d_winograd"])
    assert stages == _stage_names(memory), claims
    assert not claims["conv2d_direct"] and not claims["conv2d_texture"]
    programs = sorted(stem.split("__tex")[0] for stem in kernel_sources(artifact) if "pack_nchw4c" not in stem)
    assert len(programs) == 3, programs  # input transform, GEMM, output transform with the epilogue fused in
    if memory == "texture":  # V, M, U and the output are images; the model's NCHW input and output buffers
        plan = ex.artifact.plan
        steps = [s for s in plan.steps if "winograd" in s.func]
        assert len(steps) == 3 and all(plan.tensors[a].image for s in steps for a in s.args)
        assert not ex.artifact.manifest["textures"]["fallbacks"]
    fused = next(p for p in programs if "conv2d" in p)
    if case.epilogue != "none":
        assert fused.startswith(f"fused_winograd{mode[1]}_conv2d_add"), programs
    if case.epilogue.endswith("relu"):
        assert fused.endswith("relu"), programs


def _relax(case):
    from adreno.frontend.importer import to_relax

    return to_relax(conv_model(case))


def _convs_left(mod) -> int:
    return mod["main"].script().count("R.nn.conv2d(")


def test_selection_rule_and_tuned_override():
    from adreno.schedules._conv import ConvWorkload

    def wl(c, o, hw, n=1):
        return ConvWorkload(n, c, hw, hw, o, 3, 3, hw, hw, (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32")

    assert winograd.select_tile(wl(64, 64, 56)) == 4
    assert winograd.select_tile(wl(512, 512, 7)) == 4
    assert winograd.select_tile(wl(32, 64, 56)) == 0  # too few channels
    assert winograd.select_tile(wl(64, 64, 4)) == 0  # too small
    small = ConvCase(1, 16, 14, 14, 16, 3, 1, (1, 1, 1, 1))
    mod = _relax(small)
    assert winograd.rewrite(mod, Winograd.OFF) is mod
    assert winograd.rewrite(mod, Winograd.AUTO) is mod  # 16 channels: below the threshold, nothing changes
    key = winograd.workload_of((1, 16, 14, 14, 16, (1, 1, 1, 1), 14, 14)).key(winograd.OP)
    assert key == "conv2d_winograd|n1c16h14w14|o16k3x3|s1x1|p1x1x1x1|d1x1|g1|float32"
    assert _convs_left(winograd.rewrite(mod, Winograd.AUTO, {key: {"tile": 2}})) == 0  # the tuner forces Winograd
    big = _relax(ConvCase(1, 64, 14, 14, 64, 3, 1, (1, 1, 1, 1)))
    assert _convs_left(winograd.rewrite(big, Winograd.AUTO)) == 0
    big_key = winograd.workload_of((1, 64, 14, 14, 64, (1, 1, 1, 1), 14, 14)).key(winograd.OP)
    kept = winograd.rewrite(big, Winograd.AUTO, {big_key: {"tile": 0}})
    assert _convs_left(kept) == 1  # ... or keeps the direct conv
    # not eligible whatever the mode: stride 2, 1x1, dilation 2
    for case in (ConvCase(1, 64, 14, 14, 64, 3, 2, (1, 1, 1, 1)), ConvCase(1, 64, 14, 14, 64, 1),
                 ConvCase(1, 64, 14, 14, 64, 3, 1, (2, 2, 2, 2), dilation=2)):
        assert _convs_left(winograd.rewrite(_relax(case), Winograd.F4)) == 1, case


def test_gemm_knobs_are_applied_and_checked():
    import tvm
    from tvm.relax.backend.adreno import pipeline


    target = context("adreno-740")
    mod = winograd.rewrite(_relax(ConvCase(1, 64, 14, 14, 64, 3, 1, (1, 1, 1, 1))), Winograd.F4)
    with target.target:
        passes = pipeline.library_dispatch_passes(target.target) + pipeline.legalize_passes(target.target)
        mod = tvm.transform.Sequential(passes[:-2])(mod)
    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    gemm = next(f for n, f in funcs.items() if "batch_gemm" in n)
    key = conv2d_winograd.FAMILY.workload_key(gemm)
    assert key == "winograd_batch_gemm|6x6x64x16x64|float32"
    cfg = conv2d_winograd.default_config(conv2d_winograd.FAMILY.workload(gemm), target)
    conv2d_winograd.check_config(conv2d_winograd.FAMILY.workload(gemm), cfg, target)
    tuned = {"tile_o": 2, "tile_p": 1, "threads_o": 4, "threads_p": 8, "tile_k": 2}
    default = conv2d_winograd.FAMILY.apply(gemm, target).mod["main"].script()
    script = conv2d_winograd.FAMILY.apply(gemm, target.candidate({key: tuned})).mod["main"].script()
    assert script != default and 'T.thread_binding(T.int64(8), thread="threadIdx.x")' in script
    with pytest.raises(ValueError):
        conv2d_winograd.FAMILY.apply(gemm, target.candidate({key: {**tuned, "tile_o": 3}}))
    assert all(conv2d_winograd.FAMILY.workload_key(f) is not None for n, f in funcs.items() if "winograd" in n)


@pytest.mark.parametrize("memory", ["texture"])  # the buffer stages: the layer cases above
def test_resnet18_with_winograd_matches_onnxruntime(memory, tmp_path, monkeypatch):
    from adreno.frontend import zoo
    from adreno.compile import compile_model
    from adreno.opencl.executor import Executor
    from adreno.options import CompileOptions

    model = zoo.get_model("resnet18")
    spec = zoo.MODELS["resnet18"]
    x = np.random.default_rng(7).standard_normal(spec.input_shape).astype(np.float32)
    with record_claims(monkeypatch, "conv2d_winograd") as claims:
        artifact = compile_model(model, tmp_path / "r18", CompileOptions(target="adreno-740", winograd="f4",
                                                                       memory=memory))
    out = Executor(artifact).run([x])[0]
    assert_close(out, reference(model, {spec.input_name: x})[0], rtol=RTOL)
    # the 3x3 stride-1 convs (13 of 20) became Winograd stages, all scheduled by our rules (identical stage functions
    # are shared between layers, so there are fewer functions than 3 x 13)
    programs = list(kernel_sources(artifact, "*winograd*"))
    assert {k.split("|")[0] for k in claims["conv2d_winograd"]} == set(_stage_names(memory))
    assert len(claims["conv2d_winograd"]) == len(programs), (claims, programs)
    assert sum("conv2d" in p for p in programs) >= 4  # an output transform per distinct layer shape at least
