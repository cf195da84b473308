"""Every family's kernels under Oclgrind (Debian `oclgrind`, an OpenCL device simulator that reports out-of-bounds
accesses and data races): small models compiled with the GPU defaults (adreno-740: small tiles, Winograd transforms
split by rows), the CPU's big tiles (pocl-cpu), and tuned configs (ragged register tiles, staged patches, cooperative
reductions in local memory, split-K), run on Oclgrind's device through pyopencl in a subprocess (its ICD is named by
OCL_ICD_VENDORS), outputs checked against onnxruntime, Oclgrind's report required to be free of errors. A kernel that
writes past its buffer and one that races in local memory show that the report is read at all. Cooperative staging
(`cooperative` 1) is checked the same way, and its global loads (Oclgrind's instruction counts) against the tile
bound and the unstaged kernel's.

Bounded time: shapes of 8-16 channels at 9x9, one simulator process for all artifacts (about a minute on 2 cores).

The texture convs staged in local memory (`cooperative=1`, `adreno/schedules/staging.py`) are counted too:
Oclgrind's instruction counts (OCLGRIND_INST_COUNTS) give each kernel's `read_imagef` calls, which per work-group
must stay within the staged tiles' bound and below the same tiles' unstaged kernel.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.opencl import oclgrind
from tests.schedules.sched_helpers import ConvCase, context, conv_model, model_inputs, reference

# what Oclgrind reports about a kernel (its API checks, OCLGRIND_CHECK_API, are off: pyopencl asks for
# OpenCL 3.0 device info Oclgrind 21.10 does not know)
ERRORS = ("Invalid read", "Invalid write", "data race", "Uninitialized", "Work-group divergence", "barrier")

pytestmark = pytest.mark.skipif(not oclgrind.available() or shutil.which("oclgrind") is None,
                                reason="needs Debian's oclgrind (tools/install_system_deps.sh installs it)")



def _head_model() -> onnx.ModelProto:
    """conv 3x3 (9x9, ragged for 4-wide tiles) -> ReLU -> max pool 3x3/s2 -> global average pool -> softmax."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2, "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Softmax", ["f"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _softmax_model(shape: list[int]) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "softmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _layer_norm_model() -> onnx.ModelProto:
    """LayerNorm over rows of 20 (ragged for 8 lanes), 6 rows (ragged for 4 rows a work-group), then ReLU."""
    rng = np.random.default_rng(9)
    weights = [numpy_helper.from_array(rng.uniform(0.5, 1.5, 20).astype(np.float32), "g"),
               numpy_helper.from_array(rng.standard_normal(20).astype(np.float32), "b")]
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
             helper.make_node("Relu", ["n"], ["y"])]
    graph = helper.make_graph(nodes, "layer_norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 20])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _linear_model() -> onnx.ModelProto:
    """A linear layer on 12 tokens of 20 features (ragged for 8x2 tiles and K steps of 16), bias and SiLU fused,
    then an attention-style batched product (2 x 3 heads of 5 x 7 by 7 x 6)."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((20, 13)).astype(np.float32) * 0.2, "w")
    b = numpy_helper.from_array(rng.standard_normal(13).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["y"]),
             helper.make_node("MatMul", ["q", "k"], ["z"])]
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info("x", f, [1, 12, 20]),
                                                helper.make_tensor_value_info("q", f, [2, 3, 5, 7]),
                                                helper.make_tensor_value_info("k", f, [2, 3, 7, 6])],
                              [helper.make_tensor_value_info("y", f, [1, 12, 13]),
                               helper.make_tensor_value_info("z", f, [2, 3, 5, 6])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _squeeze_model() -> onnx.ModelProto:
    """A squeeze-and-excitation block on a 3x3 conv's 16 channels at 9x9: its global mean (4 output pixels, 81
    elements each: ragged for 64 work-items a pixel) is shared by a work-group per pixel
    (`adreno/schedules/cross_thread.py`), then 1x1 convs, the sigmoid gate and the multiply."""
    rng = np.random.default_rng(4)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
               for name, shape, scale in (("w", (16, 8, 3, 3), 0.2), ("w1", (4, 16, 1, 1), 0.3), ("b1", (4,), 1.0),
                                          ("w2", (16, 4, 1, 1), 0.3), ("b2", (16,), 1.0))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["g"]), helper.make_node("Conv", ["g", "w1", "b1"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]), helper.make_node("Conv", ["r", "w2", "b2"], ["e"]),
             helper.make_node("Sigmoid", ["e"], ["gate"]), helper.make_node("Mul", ["c", "gate"], ["y"])]
    graph = helper.make_graph(nodes, "squeeze", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 9, 9])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


MODELS = {
    "head": _head_model,
    "linear": _linear_model,
    "conv3x3": lambda: conv_model(ConvCase(1, 8, 9, 9, 16, 3, 1, (1, 1, 1, 1))),
    "dw": lambda: conv_model(ConvCase(1, 16, 9, 9, 16, 3, 2, (1, 1, 1, 1), groups=16, epilogue="bn_clip")),
    "1x1": lambda: conv_model(ConvCase(1, 16, 7, 7, 24, 1, 1, epilogue="bn")),
    "winograd": lambda: conv_model(ConvCase(1, 8, 9, 9, 8, 3, 1, (1, 1, 1, 1), epilogue="bias_residual_relu")),
    "conv3x3s2": lambda: conv_model(ConvCase(1, 8, 11, 13, 12, 3, 2, (1, 1, 1, 1))),
    "plain3x3": lambda: conv_model(ConvCase(1, 8, 9, 9, 16, 3, 1, (1, 1, 1, 1), epilogue="none")),
    "plain1x1": lambda: conv_model(ConvCase(1, 16, 7, 7, 24, 1, 1, epilogue="none")),
    "attention_softmax": lambda: _softmax_model([4, 2, 4, 4]),  # 4 lanes per row: MobileViT's attention
    "layer_norm": _layer_norm_model,
    "squeeze": _squeeze_model,
}
# (model, memory, target, winograd, tuned knobs per family: they replace that family's defaults)
CASES = [
    ("head", "buffer", "adreno-740", "off", {}),
    ("head", "buffer", "adreno-740", "off", {
        "conv2d_direct": {"tile_f": 2, "tile_y": 2, "tile_x": 4, "threads_f": 2, "threads_y": 2, "threads_x": 2,
                          "tile_rc": 2, "unroll_k": 1, "stage": 1},
        "pool": {"threads_x": 8, "threads_y": 4, "tile_x": 1, "unroll": 0},     # lanes reduce in local memory
        "reduce": {"threads_x": 8, "threads_y": 1}}),
    ("attention_softmax", "buffer", "adreno-740", "off", {}),
    ("layer_norm", "buffer", "adreno-740", "off", {}),
    ("layer_norm", "buffer", "adreno-740", "off", {"reduce": {"threads_x": 8, "threads_y": 4}}),  # lanes, ragged
    ("linear", "buffer", "adreno-740", "off", {}),  # dlight's Matmul (schedules/dense.py), ragged tiles
    ("conv3x3", "texture", "adreno-740", "off", {}),
    ("squeeze", "texture", "adreno-740", "off", {}),  # the SE mean: a work-group per pixel, partials in local memory
    ("conv3x3", "texture", "pocl-cpu", "off", {}),
    ("conv3x3", "texture", "adreno-740", "off", {
        "conv2d_texture": {"tile_cb": 2, "tile_y": 2, "tile_x": 4, "threads_cb": 1, "threads_y": 2, "threads_x": 2,
                           "unroll_k": 0, "stage": 1}}),
    ("dw", "buffer", "adreno-740", "off", {}),
    ("dw", "texture", "pocl-cpu", "off", {}),
    ("1x1", "texture", "adreno-740", "off", {}),
    ("1x1", "texture", "adreno-740", "off", {"conv2d_1x1": {"tile_cb": 2, "tile_p": 7, "tile_k": 2, "threads_cb": 1,
                                                            "threads_p": 7}}),
    ("1x1", "texture", "adreno-740", "off", {"conv2d_1x1": {"tile_cb": 1, "tile_p": 1, "tile_k": 1, "threads_cb": 2,
                                                            "threads_p": 7, "threads_k": 4}}),  # split-K
    ("conv3x3s2", "texture", "adreno-740", "off", {  # staged, stride 2, ragged, whole patch in registers
        "conv2d_texture": {"tile_cb": 1, "tile_y": 2, "tile_x": 2, "threads_cb": 2, "threads_y": 2, "threads_x": 4,
                           "unroll_k": 1, "stage": 1, "cooperative": 1}}),
    ("conv3x3", "buffer", "adreno-740", "off", {  # split-K over 2 slices of 4 channels, ragged tiles, stage 1
        "conv2d_direct": {"tile_f": 2, "tile_y": 2, "tile_x": 4, "threads_f": 2, "threads_y": 2, "threads_x": 2,
                          "tile_rc": 2, "unroll_k": 1, "stage": 1, "threads_k": 2}}),
    ("conv3x3s2", "texture", "adreno-740", "off", {  # split-K over the 2 input channel blocks, ragged tiles
        "conv2d_texture": {"tile_cb": 1, "tile_y": 2, "tile_x": 2, "threads_cb": 2, "threads_y": 2, "threads_x": 2,
                           "unroll_k": 1, "stage": 0, "threads_k": 2}}),
    ("winograd", "buffer", "adreno-740", "f4", {}),
    ("winograd", "buffer", "pocl-cpu", "f2", {}),
    ("winograd", "texture", "adreno-740", "f2", {}),
    ("winograd", "texture", "pocl-cpu", "f4", {}),
    ("winograd", "texture", "adreno-740", "f2", {  # the packed GEMM staged, ragged groups over 25 tiles
        "conv2d_winograd": {"tile_o": 1, "tile_p": 2, "threads_o": 2, "threads_p": 4, "tile_k": 1, "cooperative": 1}}),
    # both transforms split: a row of the tile per work-item, whose first pass computes only that row
    ("winograd", "buffer", "adreno-740", "f4", {"conv2d_winograd": {"threads_t": 16, "split_t": 1}}),
    ("winograd", "texture", "adreno-740", "f2", {"conv2d_winograd": {"threads_t": 16, "split_t": 1}}),
]




def _compile(case, tmp_path: Path, monkeypatch) -> dict:
    from adreno.compile import compile_model
    from adreno.options import CompileOptions
    from adreno.schedules import family as schedule_family
    from adreno.schedules.family import Refused

    name, memory, target, winograd, tuned = case
    claimed = {family: 0 for family in tuned}
    for name_, knobs in tuned.items():  # the tuned knobs reach `apply` as a record would: keyed by workload
        family = schedule_family(name_)

        def apply(func, ctx, _family=family, _knobs=knobs, _apply=family.apply):
            key = _family.workload_key(func)
            sch = _apply(func, ctx.candidate({key: _knobs}) if key else ctx)
            claimed[_family.name] += bool(key and sch is not None and not isinstance(sch, Refused))
            return sch

        monkeypatch.setattr(family, "apply", apply)
    model = MODELS[name]()
    inputs = model_inputs(model)
    # numbered: two cases of one model may differ only in their knobs
    out = tmp_path / f"{name}-{memory}-{target}-{winograd}-{len(tuned)}-{len(list(tmp_path.glob(name + '-*')))}"
    out.parent.mkdir(parents=True, exist_ok=True)
    compile_model(model, out, CompileOptions(target=target, memory=memory, winograd=winograd, host="native"))
    monkeypatch.undo()
    assert all(claimed.values()), claimed
    np.savez(out / "check.npz", reference=reference(model, inputs)[0], **inputs)
    return {"artifact": str(out), "data": str(out / "check.npz")}


def test_every_family_is_free_of_out_of_bounds_accesses_and_races(tmp_path, monkeypatch):
    cases = [_compile(case, tmp_path, monkeypatch) for case in CASES]
    run = oclgrind.run_artifacts(cases, tmp_path, data_races=True)
    assert run.returncode == 0, run.stderr[-3000:]
    results = oclgrind.errors(run.stdout)
    assert len(results) == len(cases), run.stdout[-2000:]
    assert all(r["error"] <= 1e-3 for r in results), results  # Winograd rounds more than a direct conv
    found = [line for line in run.stderr.splitlines() if any(e in line for e in ERRORS)]
    assert not found, run.stderr[-4000:]
    assert "Oclgrind" not in run.stderr, run.stderr[-4000:]  # any other report of the simulator


BROKEN = r"""
import numpy as np, pyopencl as cl
device = [d for p in cl.get_platforms() if "Oclgrind" in p.name for d in p.get_devices()][0]
ctx = cl.Context([device]); queue = cl.CommandQueue(ctx)
source = '''__kernel void k(__global float *a, __local float *t) {
  int i = get_global_id(0); t[get_local_id(0)] = a[i];
  a[i + 1] = t[(get_local_id(0) + 1) % 4]; }'''
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16 * 4)
cl.Program(ctx, source).build().k(queue, (16,), (4,), buf, cl.LocalMemory(16)); queue.finish()
"""


def test_oclgrind_reports_what_the_checks_look_for(tmp_path):
    run = oclgrind.run(["-c", BROKEN], tmp_path, data_races=True)
    assert "Invalid write" in run.stderr and "data race" in run.stderr, run.stderr[-2000:]


# Cooperative staging (`cooperative` 1): convs without an epilogue (every load of the conv kernel is an operand
# load), each compiled staged and unstaged: (name, model, memory, winograd, family, knobs replacing the defaults)
STAGED = [
    ("3x3", ConvCase(1, 8, 9, 9, 16, 3, 1, (1, 1, 1, 1), epilogue="none"), "buffer", "off", "conv2d_direct", {}),
    ("3x3-tuned", ConvCase(1, 8, 9, 9, 16, 3, 1, (1, 1, 1, 1), epilogue="none"), "buffer", "off", "conv2d_direct",
     {"tile_f": 2, "tile_y": 2, "tile_x": 2, "threads_f": 2, "threads_y": 2, "threads_x": 4, "tile_rc": 4,
      "stage": 1}),
    ("3x3-s2", ConvCase(1, 6, 11, 11, 8, 3, 2, (1, 1, 1, 1), epilogue="none"), "buffer", "off", "conv2d_direct",
     {"tile_f": 1, "tile_y": 1, "tile_x": 2, "threads_f": 4, "threads_y": 2, "threads_x": 2, "tile_rc": 4}),
    ("1x1-plain", ConvCase(1, 16, 7, 7, 24, 1, epilogue="none"), "buffer", "off", "conv2d_direct",
     {"tile_f": 4, "tile_y": 1, "tile_x": 7, "threads_f": 2, "threads_y": 7, "threads_x": 1, "tile_rc": 8}),
    ("winograd", ConvCase(1, 8, 9, 9, 8, 3, 1, (1, 1, 1, 1), epilogue="none"), "buffer", "f2", "conv2d_winograd", {}),
    ("winograd-tuned", ConvCase(1, 8, 9, 9, 8, 3, 1, (1, 1, 1, 1), epilogue="none"), "buffer", "f2",
     "conv2d_winograd", {"tile_o": 2, "tile_p": 2, "threads_o": 4, "threads_p": 8, "tile_k": 4}),
]
KERNEL = {"conv2d_direct": "conv2d", "conv2d_winograd": "batch_gemm"}
MODELS.update({name: (lambda case=case: conv_model(case)) for name, case, *_ in STAGED})  # names of their own


def _conv_workload(case: ConvCase):
    from adreno.workload import ConvWorkload

    oh, ow = case.out_hw
    return ConvWorkload(case.n, case.c, case.h, case.w, case.o, case.k, case.k, oh, ow, (case.stride,) * 2,
                        (case.dilation,) * 2, case.pads, case.groups, "float32")


def _load_bound(case: ConvCase, family: str, knobs: dict) -> int:
    """Global loads (elements) a staged kernel may make: per work-group and reduction step its input tile (with
    the halo the kernel and stride need) and its weight tile, each element once."""
    from adreno.schedules import conv2d_direct, conv2d_winograd

    wl, target = _conv_workload(case), context("adreno-740")
    if family == "conv2d_direct":
        cfg = {**conv2d_direct.default_config(wl, target), **knobs}
        f, y, x = (cfg[f"tile_{a}"] * cfg[f"threads_{a}"] for a in "fyx")
        groups = wl.n * -(-wl.o // f) * -(-wl.oh // y) * -(-wl.ow // x)
        rc = cfg["tile_rc"]
        halo_y, halo_x = ((y - 1) * wl.stride[0] + wl.kh, (x - 1) * wl.stride[1] + wl.kw)
        return groups * -(-wl.c // rc) * (rc * halo_y * halo_x + f * rc * wl.kh * wl.kw)
    m = 2
    gemm = conv2d_winograd.stage_workloads(wl, m)[1]
    alpha, _, o, p, c = gemm[1]
    cfg = {**conv2d_winograd.default_config(gemm, target), **knobs}
    f, q = cfg["tile_o"] * cfg["threads_o"], cfg["tile_p"] * cfg["threads_p"]
    return alpha * alpha * -(-o // f) * -(-p // q) * -(-c // cfg["tile_k"]) * cfg["tile_k"] * (f + q)


def test_cooperative_staging_is_correct_race_free_and_loads_each_tile_once(tmp_path, monkeypatch):
    """cooperative=1 (direct 3x3 / stride 2 / 1x1 and Winograd's GEMM on buffers; defaults and
    tuned-looking tiles; the image convs: test_staged_texture_convs_read_each_pixel_once_per_work_group):
    outputs match onnxruntime, no out-of-bounds access or local-memory race, and the staged kernel's global loads
    (Oclgrind's instruction counts) stay within the tile bound and below the unstaged kernel's."""
    cases, meta = [], []
    for i, (name, case, memory, winograd, family, knobs) in enumerate(STAGED):
        for cooperative in (0, 1):
            tuned = {family: {**knobs, "cooperative": cooperative}}
            cases.append(_compile((name, memory, "adreno-740", winograd, tuned), tmp_path / f"{i}-{cooperative}",
                                  monkeypatch))
        meta.append((f"{name} {memory}", KERNEL[family], _load_bound(case, family, knobs)))
    run = oclgrind.run_artifacts(cases, tmp_path, data_races=True, inst_counts=True)
    assert run.returncode == 0, run.stderr[-3000:]
    results = oclgrind.errors(run.stdout)
    assert len(results) == len(cases) and all(r["error"] <= 1e-3 for r in results), results
    found = [line for line in run.stderr.splitlines() if any(e in line for e in ERRORS)]
    assert not found, run.stderr[-4000:]
    reports = oclgrind.sections(run.stdout)
    for i, (name, kernel, bound) in enumerate(meta):
        plain, staged = (sum(b for k, b in oclgrind.global_load_bytes(reports[cases[2 * i + j]["artifact"]]).items()
                             if kernel in k) // oclgrind.FLOAT_BYTES for j in (0, 1))
        assert 0 < staged <= bound and staged < plain, (name, staged, bound, plain)
STAGED_3X3 = {"tile_cb": 2, "tile_y": 2, "tile_x": 4, "threads_cb": 1, "threads_y": 2, "threads_x": 2, "unroll_k": 0,
              "stage": 0}
STAGED_1X1 = {"tile_cb": 1, "tile_p": 7, "tile_k": 1, "threads_cb": 2, "threads_p": 7, "threads_k": 1}
# (model, family, tiles, the staged tiles' read_imagef bound per work-group: per input channel block, the input box
# and the weights, each read as whole rounds of the work-group's work-items)
COUNTED = [
    # 3x3 8->16 @9x9 (padded 11x11): a group of 2x2 work-items computes 8 channels x 4 rows x 8 columns;
    # per block: a 6x10 input box (60 pixels) and 2 x 4 x 9 = 72 weight pixels; 2 input channel blocks
    ("plain3x3", "conv2d_texture", STAGED_3X3, 2 * (15 + 18) * 4),
    # 1x1 16->24 @7x7: a group of 2x7 work-items computes 8 channels x 49 pixels (the map);
    # per block: the 7x7 box and 2 x 4 weight pixels; 4 input channel blocks
    ("plain1x1", "conv2d_1x1", STAGED_1X1, 4 * (4 + 1) * 14),
]


def _image_reads(report: str) -> int:
    """read_imagef calls of the conv kernels in one artifact's section of Oclgrind's instruction counts."""
    return sum(reads for kernel, reads in oclgrind.image_reads(report).items() if "conv2d" in kernel)


def _groups(artifact: str) -> int:
    """Work-groups of the artifact's conv kernel (plan.json launch sizes)."""
    import math

    plan = json.loads((Path(artifact) / "plan.json").read_text())
    (launch,) = [k for step in plan["steps"] for k in step["kernels"] if "conv2d" in k["name"]]
    return math.prod(g // local for g, local in zip(launch["global_size"], launch["local_size"]))


def test_staged_texture_convs_read_each_pixel_once_per_work_group(tmp_path, monkeypatch):
    cases = [(name, "texture", "adreno-740", "off", {family: {**tiles, "cooperative": cooperative}})
             for name, family, tiles, _ in COUNTED for cooperative in (0, 1)]
    compiled = [_compile(case, tmp_path, monkeypatch) for case in cases]
    run = oclgrind.run_artifacts(compiled, tmp_path, data_races=True, inst_counts=True)
    assert run.returncode == 0, run.stderr[-3000:]
    results = oclgrind.errors(run.stdout)
    assert len(results) == len(compiled) and all(r["error"] <= 1e-4 for r in results), results
    found = [line for line in run.stderr.splitlines() if any(e in line for e in ERRORS)]
    assert not found, found[:5]
    reports = oclgrind.sections(run.stdout)
    reads = {c["artifact"]: _image_reads(reports[c["artifact"]]) for c in compiled}
    per_group = {c["artifact"]: reads[c["artifact"]] / _groups(c["artifact"]) for c in compiled}
    for (name, _, _, bound), (plain, staged) in zip(COUNTED, zip(compiled[::2], compiled[1::2])):
        assert per_group[staged["artifact"]] <= bound, (name, per_group)
        assert per_group[staged["artifact"]] < per_group[plain["artifact"]] / 2, (name, per_group)
