"""Texture memory for Adreno: packed layouts, texture scopes, image fitting and a texture TIR pipeline that
produces valid OpenCL on the stock TVM 0.27 wheel.

Layouts
  NCHW4c  activations: (N, ceil(C/4), H, W, 4), channel c at [:, c // 4, :, :, c % 4], padded lanes are zero.
  OIHW4o  conv weights: (ceil(O/4), I', KH, KW, 4), output channel o at [o // 4, ..., o % 4]; I' is the input
          channel count padded to a multiple of 4 (1 for depthwise). Transformed with numpy at compile time.

Scopes (TVM's `TextureFlatten` mapping of a 5-D NCHW4c-like tensor of shape (d0, d1, d2, d3, 4) to an
image2d_array whose pixel is the last axis, four channels RGBA):
  global.texture         width d3, height d2, layers d0*d1            (activations)
  global.texture-nhwc    width d2*d3, height d1, layers d0            (activations whose d0*d1 is too deep)
  global.texture-weight  width d1*d2*d3, height d0, layers 1          (weights and other constants)
A tensor that fits none of its scopes within the target's limits (`AdrenoDevice.image2d_max_width/height`,
`image_array_max_layers`) stays a buffer, and the plan records why.

Lowering. Upstream's Adreno TIR pipeline flattens texture buffers to `texture2d_load/store` and then lets
`VectorizeLoop` scalarise the 4-lane loop around them, which writes each lane as a whole pixel
(`write_imagef(img, coord, as_float4(<float>))`). `widen_texture_access` (run right before VectorizeLoop)
rewrites a 4-trip loop around texture accesses into one float4 `texture2d_load` into a register array before the
loop and one float4 `texture2d_store` from a register array after it, so every pixel is a single
`read_imagef`/`write_imagef`. A store that cannot be widened is reported (`TextureLoweringError`) and the
compiler falls back to a buffer for that tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .artifact import ImageSpec
from .errors import TVM_ERRORS, AdrenoError

TEXTURE_SCOPES = ("global.texture", "global.texture-nhwc", "global.texture-weight")
LANES = 4


class TextureLoweringError(AdrenoError):
    """A kernel writes a texture in a way that is not one whole pixel per store."""


# ---------------------------------------------------------------------------------------------------------------
# image specs
# ---------------------------------------------------------------------------------------------------------------

def image_dims(shape, scope: str) -> tuple[int, int, int]:
    """(width, height, layers) of a 5-D tensor with last axis 4 in `scope`."""
    d0, d1, d2, d3, lanes = (int(d) for d in shape)
    assert lanes == LANES
    if scope == "global.texture":
        return d3, d2, d0 * d1
    if scope == "global.texture-nhwc":
        return d2 * d3, d1, d0
    if scope == "global.texture-weight":
        return d1 * d2 * d3, d0, 1
    raise ValueError(scope)


def choose_image(shape, dtype: str, kind: str, device, storage_dtype: str = "float32") -> tuple[ImageSpec | None, str]:
    """The image a tensor gets, or (None, reason) when it must stay a buffer.

    kind "param" prefers global.texture-weight; activations prefer global.texture then global.texture-nhwc."""
    if len(shape) != 5 or int(shape[-1]) != LANES:
        return None, f"shape {list(shape)} is not a packed 5-D tensor with 4 lanes"
    if dtype != "float32":
        return None, f"dtype {dtype} (texture path stores float32 tensors only)"
    order = ["global.texture-weight", "global.texture", "global.texture-nhwc"] if kind == "param" else \
        ["global.texture", "global.texture-nhwc"]
    reasons = []
    for scope in order:
        width, height, layers = image_dims(shape, scope)
        limits = (device.image2d_max_width, device.image2d_max_height, device.image_array_max_layers)
        if width <= limits[0] and height <= limits[1] and layers <= limits[2]:
            return ImageSpec(scope, width, height, layers, channel_type=storage_dtype), ""
        reasons.append(f"{scope} needs {width}x{height}x{layers} (width x height x layers)")
    return None, ("exceeds the image limits " f"{device.image2d_max_width}x{device.image2d_max_height}"
                  f"x{device.image_array_max_layers} of {device.name}: " + "; ".join(reasons))


def to_image(array: np.ndarray, spec: ImageSpec) -> np.ndarray:
    """Host array of shape (layers, height, width, 4) holding a 5-D tensor as `spec` lays it out."""
    a = np.asarray(array)
    d0, d1, d2, d3, lanes = a.shape
    if spec.scope == "global.texture":
        out = a.reshape(d0 * d1, d2, d3, lanes)
    elif spec.scope == "global.texture-nhwc":
        out = a.reshape(d0, d1, d2 * d3, lanes)
    else:
        out = a.reshape(1, d0, d1 * d2 * d3, lanes)
    return np.ascontiguousarray(out, dtype=np.dtype(spec.channel_type))


def from_image(pixels: np.ndarray, shape, dtype: str = "float32") -> np.ndarray:
    """Inverse of `to_image` (the pixel array is (layers, height, width, 4) in every scope)."""
    return np.asarray(pixels).reshape([int(d) for d in shape]).astype(dtype, copy=False)


# ---------------------------------------------------------------------------------------------------------------
# layouts (numpy, compile time)
# ---------------------------------------------------------------------------------------------------------------

def channels4(c: int) -> int:
    return (int(c) + LANES - 1) // LANES


def pack_nchw4c(x: np.ndarray, pad_value: float = 0.0) -> np.ndarray:
    """(N, C, H, W) -> (N, ceil(C/4), H, W, 4), padded channels = pad_value."""
    n, c, h, w = x.shape
    c4 = channels4(c)
    padded = np.full((n, c4 * LANES, h, w), pad_value, dtype=x.dtype)
    padded[:, :c] = x
    return np.ascontiguousarray(padded.reshape(n, c4, LANES, h, w).transpose(0, 1, 3, 4, 2))


def unpack_nchw4c(x: np.ndarray, channels: int) -> np.ndarray:
    n, c4, h, w, lanes = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, c4 * lanes, h, w)[:, :channels])


def pack_oihw4o(w: np.ndarray, depthwise: bool = False) -> np.ndarray:
    """(O, I, KH, KW) -> (ceil(O/4), I', KH, KW, 4) with I' = I padded to a multiple of 4 (I' = 1 for depthwise)."""
    o, i, kh, kw = w.shape
    o4 = channels4(o)
    ip = i if depthwise else channels4(i) * LANES
    padded = np.zeros((o4 * LANES, ip, kh, kw), dtype=w.dtype)
    padded[:o, :i] = w
    return np.ascontiguousarray(padded.reshape(o4, LANES, ip, kh, kw).transpose(0, 2, 3, 4, 1))


# ---------------------------------------------------------------------------------------------------------------
# TIR: scopes and lowering
# ---------------------------------------------------------------------------------------------------------------

def specialize_scopes(func, scopes: list[str], tvm_target):
    """`func` with its parameter buffers put in `scopes` (one per parameter, the output(s) last).

    Done the way Relax does it for a call site (`SpecializePrimFuncBasedOnCallSite` on a one-call module),
    so the result is exactly what TVM's own texture lowering expects."""
    from tvm import relax
    from tvm.relax.global_info import VDevice

    vdevices: list = []

    def vdevice(scope):
        for v in vdevices:
            if v.memory_scope == scope:
                return v
        v = VDevice(tvm_target, 0, scope)
        vdevices.append(v)
        return v

    def ty(param, scope):
        return relax.TensorType([int(d) for d in param.ty.shape], str(param.ty.dtype), vdevice(scope))

    n_out = 1
    params = list(func.params)
    bb = relax.BlockBuilder()
    gv = bb.add_func(func, "kernel")
    ins = [relax.Var(p.name, ty(p, s)) for p, s in zip(params[:-n_out], scopes[:-n_out])]
    with bb.function("main", ins):
        with bb.dataflow():
            out = bb.emit_output(relax.call_tir(gv, ins, ty(params[-1], scopes[-1])))
        bb.emit_func_output(out)
    mod = bb.get()
    mod.update_global_info("vdevice", vdevices)
    mod = relax.transform.SpecializePrimFuncBasedOnCallSite()(mod)
    return mod[mod.get_global_var("kernel")]


def _dtype(expr):
    return expr.ty.dtype


def _is_call(node, name: str) -> bool:
    op = getattr(node, "op", None)
    return op is not None and getattr(op, "name", "") == name


def _collect(node, pred) -> list:
    import tvm_ffi

    found = []

    def visit(value):
        if pred(value):
            found.append(value)
        return value

    tvm_ffi.structural_map(node, visit, order="post")
    return found


def _texture_loads(node) -> list:
    return _collect(node, lambda v: _is_call(v, "tirx.texture2d_load"))


def _texture_stores(node) -> list:
    return _collect(node, lambda v: _is_call(v, "tirx.texture2d_store"))


def _free_in(expr_list, allowed) -> bool:
    """True when every variable of the expressions is free in `allowed` (defined outside the loop)."""
    from tvm import tirx

    allowed_ids = {v.__hash__() for v in allowed}
    for e in expr_list:
        for v in tirx.analysis.undefined_vars(e, []):
            if v.__hash__() not in allowed_ids:
                return False
    return True


def _local_array(name: str, dtype: str):
    from tvm import tirx

    return tirx.decl_buffer((LANES,), dtype, name, scope="local")


def _widen_loop(loop, counter):
    """Rewrite one 4-trip loop: hoist its lane-indexed texture loads into one float4 load each, and turn a
    texture store inside it into a per-lane store to a register array followed by one float4 store."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    if not (isinstance(loop.extent, tirx.IntImm) and int(loop.extent) == LANES
            and isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0):
        return loop
    lane = loop.loop_var
    outer_vars = tirx.analysis.undefined_vars(loop, [])
    prologue, epilogue = [], []
    body = loop.body

    # loads: texture2d_load(img, x, y, layer, bits, lane) with coordinates independent of the loop
    widened = []  # (original load, register read)
    for load in _texture_loads(body):
        args = list(load.args)
        if not (isinstance(args[-1], tvm.ir.expr.Var) and args[-1].same_as(lane)):
            continue
        if _dtype(load).lanes != 1 or not _free_in(args[1:-1], outer_vars):
            continue
        if any(tvm_ffi.structural_equal(load, old) for old, _ in widened):
            continue
        counter[0] += 1
        tmp = _local_array(f"tex_rd{counter[0]}", str(_dtype(load)))
        wide = tirx.call_intrin(f"{_dtype(load)}x{LANES}", "tirx.texture2d_load", *args[:-1],
                                tirx.Ramp(tirx.IntImm(str(_dtype(lane)), 0), tirx.IntImm(str(_dtype(lane)), 1), LANES))
        prologue += [tirx.AllocBuffer(tmp), tirx.BufferStore(tmp, wide, [tirx.Ramp(0, 1, LANES)])]
        widened.append((load, tirx.BufferLoad(tmp, [lane])))
    if widened:
        def swap(value):
            if _is_call(value, "tirx.texture2d_load"):
                for old, new in widened:
                    if tvm_ffi.structural_equal(value, old):
                        return new
            return value

        body = tvm_ffi.structural_map(body, swap, order="post")

    # stores: [if cond:] texture2d_store(img, x, y, layer, bits, value(lane)) directly under the loop
    stmt, guards = body, []
    while isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None:
        guards.append(stmt.condition)
        stmt = stmt.then_case
    if isinstance(stmt, tirx.Evaluate) and _is_call(stmt.value, "tirx.texture2d_store"):
        args = list(stmt.value.args)
        value = args[-1]
        if _dtype(value).lanes == 1 and _free_in(args[1:-1] + guards, outer_vars):
            counter[0] += 1
            tmp = _local_array(f"tex_wr{counter[0]}", str(_dtype(value)))
            prologue.append(tirx.AllocBuffer(tmp))
            body = tirx.BufferStore(tmp, value, [lane])
            store = tirx.Evaluate(tirx.call_intrin("void", "tirx.texture2d_store", *args[:-1],
                                                   tirx.BufferLoad(tmp, [tirx.Ramp(0, 1, LANES)])))
            for cond in reversed(guards):
                store = tirx.IfThenElse(cond, store, None)
            epilogue.append(store)
    if not prologue and body.same_as(loop.body):
        return loop
    new_loop = tirx.For(lane, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)
    return tirx.SeqStmt(prologue + [new_loop] + epilogue)


def widen_texture_access():
    """TIR pass: one float4 read_imagef/write_imagef per pixel instead of per-lane loops (see module doc)."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    @tvm.tirx.transform.prim_func_pass(opt_level=0, name="adreno.WidenTextureAccess")
    def _pass(func, _mod, _ctx):
        counter = [0]

        def on_for(loop):
            return _widen_loop(loop, counter)

        body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
        return func.with_body(body)

    return _pass


def _fold_staged_store(seq):
    """In a SeqStmt, `tex_wr[ramp] = value; [if c:] texture2d_store(..., tex_wr[ramp])` (what `_widen_loop` leaves
    after VectorizeLoop) becomes `[if c:] texture2d_store(..., value)`."""
    from tvm import tirx

    stmts, out, i = list(seq.seq), [], 0
    while i < len(stmts):
        stage, following = stmts[i], stmts[i + 1] if i + 1 < len(stmts) else None
        store, guards = following, []
        while isinstance(store, tirx.IfThenElse) and store.else_case is None:
            guards.append(store.condition)
            store = store.then_case
        if isinstance(stage, tirx.BufferStore) and str(stage.buffer.name).startswith("tex_wr") \
                and isinstance(store, tirx.Evaluate) and _is_call(store.value, "tirx.texture2d_store") \
                and getattr(store.value.args[-1], "source", None) is not None \
                and store.value.args[-1].source.same_as(stage.buffer):
            args = list(store.value.args)
            folded = tirx.Evaluate(tirx.call_intrin("void", "tirx.texture2d_store", *args[:-1], stage.value))
            for cond in reversed(guards):
                folded = tirx.IfThenElse(cond, folded, None)
            out.append(folded)
            i += 2
            continue
        out.append(stage)
        i += 1
    return seq if len(out) == len(stmts) else tirx.SeqStmt(out)


def fold_texture_store_staging():
    """TIR pass (after VectorizeLoop): store each widened pixel's value directly instead of through its register
    array. TVM's OpenCL codegen names the value of a `write_imagef` by its printed text within a scope, so after
    unrolling, every store of the same staging array (`tex_wr_ptr[0]`) in one scope would write the first one's
    value; the folded value differs per pixel."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    @tvm.tirx.transform.prim_func_pass(opt_level=0, name="adreno.FoldTextureStoreStaging")
    def _pass(func, _mod, _ctx):
        return func.with_body(tvm_ffi.structural_map(func.body, (tirx.SeqStmt, _fold_staged_store), order="post"))

    return _pass


def check_texture_stores(mod) -> None:
    """Raise TextureLoweringError when a texture store does not write a whole float4 pixel."""
    for gv, func in mod.functions.items():
        for store in _texture_stores(func.body):
            if _dtype(store.args[-1]).lanes != LANES:
                raise TextureLoweringError(f"{gv.name_hint}: texture store of {_dtype(store.args[-1])} (not one "
                                           "float4 per pixel)")


def texture_tir_pipeline():
    """Upstream's Adreno TIR pipeline (`s_tir.backend.adreno.pipeline.default_tir_pipeline`, same passes in the
    same order) with `widen_texture_access` right before VectorizeLoop and `fold_texture_store_staging` right after
    it; a module pass."""
    import tvm

    widen = widen_texture_access()

    @tvm.transform.module_pass(opt_level=0, name="adreno.TextureTIRPipeline")
    def _pipeline(mod, _ctx):
        return _run_with_widen(mod, widen)

    return _pipeline


def _run_with_widen(mod, widen):
    import tvm
    from tvm import s_tir, tirx

    config = tvm.transform.PassContext.current().config
    passes = [
        s_tir.backend.adreno.transform.TextureFlatten(),
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.LiftThreadBinding(),
        s_tir.transform.ManifestSharedMemoryLocalStage(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.LowerAutoCopy(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.InjectPermutedLayout(),
        s_tir.transform.AnnotateIrregularLoop(),
        s_tir.transform.InjectSoftwarePipeline(),
        s_tir.transform.TransformMmaBufferLayout(),
        s_tir.transform.LowerOpaqueBlock(),
        s_tir.backend.adreno.transform.InjectTextureAlloc(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        s_tir.transform.LoopPartition(),
        widen,
        tirx.transform.VectorizeLoop(not bool(config.get("tirx.disable_vectorize", False))),
        fold_texture_store_staging(),
        s_tir.transform.InjectVirtualThread(),
        s_tir.transform.InjectDoubleBuffer(),
        tirx.transform.StorageRewrite(),
        s_tir.transform.HoistIfThenElse(),
        tirx.transform.UnrollLoop(),
        s_tir.transform.RenormalizeSplitPattern(),
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveNoOp(),
        s_tir.transform.RewriteUnsafeSelect(),
        tirx.transform.CommonSubexprElim(),
        tirx.transform.FP8ComputeLegalize(),
        s_tir.transform.VerifyVTCMLimit(),
        s_tir.transform.LowerVtcmAlloc(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        s_tir.transform.ThreadSync("shared"),
        s_tir.transform.ThreadSync("shared.dyn"),
        s_tir.transform.ThreadSync("warp"),
        s_tir.transform.InferFragment(),
        s_tir.transform.LowerThreadAllreduce(),
        s_tir.transform.MergeSharedMemoryAllocations(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
        tirx.transform.FP8StorageLegalize(),
        tirx.transform.BF16StorageLegalize(),
    ]
    return tvm.ir.transform.Sequential(passes)(mod)


PIPELINE_NAME = "adreno_texture"


def register_pipeline() -> str:
    """Register the texture TIR pipeline with TVM as "adreno_texture": `tvm.tirx.get_tir_pipeline("adreno_texture")`
    returns (pipeline, finalize_host, finalize_device) like "s_tir" (upstream's "adreno" entry returns a single pass,
    which callers that unpack three fail on)."""
    import tvm
    from tvm.tirx import compilation_pipeline as cp

    if PIPELINE_NAME not in cp.PIPELINE_MAP:
        def factory():
            _, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("s_tir")
            return texture_tir_pipeline(), finalize_host, finalize_device

        cp.register_tir_pipeline(PIPELINE_NAME, factory)
    return PIPELINE_NAME


# ---------------------------------------------------------------------------------------------------------------
# Relax: layout planning (conv-centred regions in NCHW4c / OIHW4o)
# ---------------------------------------------------------------------------------------------------------------

_UNARY = {"relax.nn.relu", "relax.sigmoid", "relax.tanh", "relax.sqrt", "relax.rsqrt", "relax.exp", "relax.negative",
          "relax.abs", "relax.isnan", "relax.clip", "relax.nn.silu", "relax.nn.gelu"}
_BINARY = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum", "relax.minimum",
           "relax.power"}
_TERNARY = {"relax.where"}


def _shape(expr) -> list[int] | None:
    try:
        return [int(d) for d in expr.ty.shape.values]
    except (AttributeError, TypeError):
        return None


def _dtype_of(expr) -> str | None:
    try:
        return str(expr.ty.dtype)
    except AttributeError:
        return None


def _is_const(expr) -> bool:
    import tvm

    return isinstance(expr, tvm.ir.expr.Constant)


def _te_pack(x, channels: int):
    from tvm import te, tirx

    n, _, h, w = x.shape
    c4 = channels4(channels)
    zero = tirx.const(0, x.dtype)

    def body(i, j, y, z, k):
        c = j * LANES + k
        if channels % LANES == 0:
            return x[i, c, y, z]
        return tirx.if_then_else(c < channels, x[i, tirx.min(c, channels - 1), y, z], zero)

    return te.compute((n, c4, h, w, LANES), body, name="pack_nchw4c")


def _te_unpack(x, channels: int):
    from tvm import te

    n, _, h, w, _ = x.shape
    return te.compute((n, channels, h, w), lambda i, c, y, z: x[i, c // LANES, y, z, c % LANES],
                      name="unpack_nchw4c")


def _te_pad(data, pad, value, name):
    from tvm import te, tirx

    top, left, bottom, right = pad
    n, c4, h, w, lanes = data.shape
    if not any(pad):
        return data
    hp, wp = h + top + bottom, w + left + right

    def body(i, j, y, z, k):
        inside = tirx.all(y >= top, y < h + top, z >= left, z < w + left)
        return tirx.if_then_else(inside, data[i, j, y - top, z - left, k], tirx.const(value, data.dtype))

    return te.compute((n, c4, hp, wp, lanes), body, name=name)


def _te_conv4c(data, weight, strides, padding, dilation, depthwise: bool):
    """NCHW4c x OIHW4o -> NCHW4c (groups 1), or depthwise with weight (C4, 1, KH, KW, 4)."""
    from tvm import te

    n, c4, h, w, _ = (int(d) for d in data.shape)
    o4, cin, kh, kw, _ = (int(d) for d in weight.shape)
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (w + left + right - (kw - 1) * dw - 1) // sw + 1
    padded = _te_pad(data, padding, 0.0, "pad_nchw4c")
    ry = te.reduce_axis((0, kh), "ry")
    rx = te.reduce_axis((0, kw), "rx")
    if depthwise:
        return te.compute(
            (n, o4, oh, ow, LANES),
            lambda i, c, y, x, k: te.sum(padded[i, c, y * sh + ry * dh, x * sw + rx * dw, k] * weight[c, 0, ry, rx, k],
                                         axis=[ry, rx]), name="dwconv2d_NCHW4c")
    rc = te.reduce_axis((0, cin), "rc")
    return te.compute(
        (n, o4, oh, ow, LANES),
        lambda i, o, y, x, k: te.sum(padded[i, rc // LANES, y * sh + ry * dh, x * sw + rx * dw, rc % LANES]
                                     * weight[o, rc, ry, rx, k], axis=[rc, ry, rx]), name="conv2d_NCHW4c")


def _te_maxpool4c(data, pool, strides, padding, dilation):
    from tvm import te

    n, c4, h, w, _ = (int(d) for d in data.shape)
    (ph, pw), (sh, sw), (dh, dw) = pool, strides, dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - (ph - 1) * dh - 1) // sh + 1
    ow = (w + left + right - (pw - 1) * dw - 1) // sw + 1
    padded = _te_pad(data, padding, -3.4028234663852886e38, "pad_nchw4c")
    ry = te.reduce_axis((0, ph), "ry")
    rx = te.reduce_axis((0, pw), "rx")
    return te.compute((n, c4, oh, ow, LANES),
                      lambda i, c, y, x, k: te.max(padded[i, c, y * sh + ry * dh, x * sw + rx * dw, k], axis=[ry, rx]),
                      name="max_pool2d_NCHW4c")


@dataclass
class LayoutReport:
    """What the layout planning did: convs packed, convs left in NCHW (with why), border transforms."""

    packed_convs: int = 0  # Winograd convs included
    nchw_convs: list = None
    packs: int = 0
    unpacks: int = 0

    def __post_init__(self):
        self.nchw_convs = self.nchw_convs or []


def plan_layouts(mod, report: LayoutReport | None = None, winograd: str = "off", config: dict | None = None):
    """Rewrite conv-centred regions of `main` to NCHW4c activations / OIHW4o weights.

    A Winograd-eligible conv (`adreno.winograd.eligible`) for which `adreno.winograd.choose_tile(workload, winograd,
    config)` picks a tile becomes the three Winograd stages on packed tensors (`winograd.emit_stages`: V and M are
    (alpha, alpha, C/4 | O/4, tiles, 4) images, the transformed weight a constant (alpha, alpha, O/4, C, 4)).

    conv2d (groups 1 or depthwise, constant weights), max_pool2d, elementwise ops whose other operands are
    per-channel or scalar constants (or region tensors of the same shape), and mean over H, W (keepdims) stay in the
    region; any other consumer gets the tensor back in NCHW through one `unpack_nchw4c` (per tensor). Weights and
    per-channel constants are transformed with numpy (constants in the module, never run-time work)."""
    import tvm
    from tvm import relax

    from . import winograd as winograd_rule

    report = report if report is not None else LayoutReport()
    main = mod["main"]
    others = tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv.name_hint != "main"}, attrs=mod.attrs)
    bb = relax.BlockBuilder(others)
    packed: dict[int, tuple] = {}  # old var key -> (packed expr, channels)
    plain: dict[int, object] = {}  # old var key -> NCHW expr in the new function
    tuples: dict[int, list] = {}   # old tuple var -> its field exprs (old)

    def key(e):
        return e.__hash__()

    def lookup(e):
        """The new-function expression of an old expression in its plain layout (unpacking on demand)."""
        if isinstance(e, relax.Var) or type(e).__name__ in ("DataflowVar", "Var"):
            k = key(e)
            if k in plain:
                return plain[k]
            if k in packed:
                p, c = packed[k]
                plain[k] = bb.emit_te(_te_unpack, p, c, primfunc_name_hint="unpack_nchw4c")
                report.unpacks += 1
                return plain[k]
            if k in tuples:
                t = relax.Tuple([lookup(f) for f in tuples[k]])
                plain[k] = bb.emit(t)
                return plain[k]
            raise KeyError(e)
        if isinstance(e, relax.Tuple):
            return relax.Tuple([lookup(f) for f in e.fields])
        return e

    def packed_of(e):
        """(packed expr, channels) of an old expression, packing a plain 4-D NCHW tensor on demand."""
        k = key(e)
        if k in packed:
            return packed[k]
        shape = _shape(e)
        if shape is None or len(shape) != 4 or _dtype_of(e) != "float32":
            return None
        if _is_const(e):
            arr = e.value.numpy()
            res = (relax.const(pack_nchw4c(arr)), shape[1])
            return res
        p = bb.emit_te(_te_pack, lookup(e), shape[1], primfunc_name_hint="pack_nchw4c")
        report.packs += 1
        packed[k] = (p, shape[1])
        return packed[k]

    def const_operand(c, channels: int, pad_value: float):
        arr = c.value.numpy()
        if arr.ndim == 0 or arr.size == 1:
            return relax.const(arr.reshape(()).astype(arr.dtype))
        if arr.ndim in (3, 4) and arr.shape[-3] == channels and all(d == 1 for d in arr.shape[-2:]) \
                and (arr.ndim == 3 or arr.shape[0] == 1):
            vec = arr.reshape(channels)
            full = np.full(channels4(channels) * LANES, pad_value, dtype=arr.dtype)
            full[:channels] = vec
            return relax.const(np.ascontiguousarray(full.reshape(1, channels4(channels), 1, 1, LANES)))
        return None

    def try_elementwise(value, out_shape):
        """New packed expression for an elementwise call, or None when it must run in NCHW."""
        name = getattr(value.op, "name", "")
        args = list(value.args)
        if name == "relax.call_tir":
            callee = value.args[0].name_hint if hasattr(value.args[0], "name_hint") else ""
            base = callee.rstrip("0123456789")
            if base not in ("maximum", "minimum"):
                return None
            args = list(value.args[1].fields)
            name = f"relax.{base}"
        if name not in _UNARY | _BINARY | _TERNARY:
            return None
        if out_shape is None or len(out_shape) != 4:
            return None
        region = [a for a in args if not _is_const(a) and key(a) in packed]
        if not region:
            return None
        channels = packed[key(region[0])][1]
        new_args = []
        for pos, a in enumerate(args):
            if _is_const(a):
                pad = 1.0 if (name == "relax.divide" and pos == 1) else 0.0
                c = const_operand(a, channels, pad)
                if c is None:
                    return None
                new_args.append(c)
            elif _shape(a) == out_shape:
                p = packed_of(a)
                if p is None:
                    return None
                new_args.append(p[0])
            else:
                return None
        if name.startswith("relax.maximum") or name.startswith("relax.minimum"):
            op = relax.op.maximum if name == "relax.maximum" else relax.op.minimum
            return bb.emit(op(*new_args)), channels
        return bb.emit(relax.Call(value.op, new_args, value.attrs)), channels

    def try_conv(value):
        attrs = value.attrs
        data, weight = value.args
        if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or attrs.out_layout != "NCHW":
            return None, "layout is not NCHW/OIHW"
        if not _is_const(weight):
            return None, "weights are not constant"
        if _dtype_of(data) != "float32":
            return None, f"dtype {_dtype_of(data)}"
        w = weight.value.numpy()
        o, i, kh, kw = w.shape
        channels = _shape(data)[1]
        groups = int(attrs.groups)
        depthwise = groups > 1 and groups == channels == o and i == 1
        if groups != 1 and not depthwise:
            return None, f"grouped conv with groups={groups}"
        p = packed_of(data)
        if p is None:
            return None, "input cannot be packed"
        info = winograd_rule.eligible(value, w)
        tile = 0 if info is None else winograd_rule.choose_tile(winograd_rule.workload_of(info), winograd, config,
                                                                "texture")
        if tile:
            n, _, _, _, _, padding, oh, ow = info
            return (bb.emit(winograd_rule.emit_stages(bb, p[0], w, tile, n, padding, (oh, ow))), o), ""
        pad = [int(v) for v in attrs.padding]
        pad = pad * 2 if len(pad) == 2 else pad
        wpacked = relax.const(pack_oihw4o(w, depthwise=depthwise))
        out = bb.emit_te(_te_conv4c, p[0], wpacked, [int(s) for s in attrs.strides], pad,
                         [int(d) for d in attrs.dilation], depthwise,
                         primfunc_name_hint="dwconv2d_nchw4c" if depthwise else "conv2d_nchw4c")
        return (out, o), ""

    def try_pool(value):
        attrs = value.attrs
        if attrs.layout != "NCHW" or getattr(attrs, "ceil_mode", False):
            return None
        p = packed_of(value.args[0]) if key(value.args[0]) in packed else None
        if p is None:
            return None
        pad = [int(v) for v in attrs.padding]
        pad = pad * 2 if len(pad) == 2 else pad
        out = bb.emit_te(_te_maxpool4c, p[0], [int(v) for v in attrs.pool_size], [int(v) for v in attrs.strides],
                         pad, [int(v) for v in attrs.dilation], primfunc_name_hint="max_pool2d_nchw4c")
        return out, p[1]

    def try_mean(value, out_shape):
        attrs = value.attrs
        src = value.args[0]
        if key(src) not in packed or not attrs.keepdims or attrs.axis is None:
            return None
        if sorted(int(a) for a in attrs.axis) != [2, 3]:
            return None
        p = packed[key(src)]
        return bb.emit(relax.op.mean(p[0], axis=[2, 3], keepdims=True)), p[1]

    with bb.function("main", list(main.params), attrs=dict(main.attrs) if main.attrs else None):
        for var in main.params:
            plain[key(var)] = var
        with bb.dataflow():
            result = None
            for block in main.body.blocks:
                for binding in block.bindings:
                    var, value = binding.var, binding.value
                    out_shape = _shape(var)
                    done = None
                    if isinstance(value, relax.Call):
                        name = getattr(value.op, "name", "")
                        if name == "relax.nn.conv2d":
                            done, why = try_conv(value)
                            if done is None:
                                report.nchw_convs.append(f"{var.name}: {why}")
                            else:
                                report.packed_convs += 1
                        elif name == "relax.nn.max_pool2d":
                            done = try_pool(value)
                        elif name == "relax.mean":
                            done = try_mean(value, out_shape)
                        else:
                            done = try_elementwise(value, out_shape)
                    elif isinstance(value, relax.Tuple):
                        tuples[key(var)] = list(value.fields)
                        continue
                    elif isinstance(value, relax.TupleGetItem) and key(value.tuple_value) in tuples:
                        field = tuples[key(value.tuple_value)][value.index]
                        if key(field) in packed:
                            packed[key(var)] = packed[key(field)]
                        else:
                            plain[key(var)] = lookup(field)
                        continue
                    elif type(value).__name__ in ("Var", "DataflowVar"):
                        if key(value) in packed:
                            packed[key(var)] = packed[key(value)]
                        else:
                            plain[key(var)] = lookup(value)
                        continue
                    if done is not None:
                        packed[key(var)] = done
                        continue
                    plain[key(var)] = bb.emit(_remap(value, lookup))
            out = lookup(main.body.body)
            result = bb.emit_output(out)
        bb.emit_func_output(result)
    new = bb.get()
    return new, report


def _remap(value, lookup):
    from tvm import relax

    if isinstance(value, relax.Call):
        return relax.Call(value.op, [_remap_arg(a, lookup) for a in value.args], value.attrs, value.ty_args)
    if isinstance(value, relax.Tuple):
        return relax.Tuple([_remap_arg(a, lookup) for a in value.fields])
    if isinstance(value, relax.TupleGetItem):
        return relax.TupleGetItem(_remap_arg(value.tuple_value, lookup), value.index)
    return _remap_arg(value, lookup)


def _remap_arg(arg, lookup):
    from tvm import relax

    if isinstance(arg, relax.Tuple):
        return relax.Tuple([_remap_arg(a, lookup) for a in arg.fields])
    if type(arg).__name__ in ("Var", "DataflowVar"):
        return lookup(arg)
    return arg


# ---------------------------------------------------------------------------------------------------------------
# schedules for functions that write a packed (texture) tensor
# ---------------------------------------------------------------------------------------------------------------

THREADS = 64


def schedule_packed(func, target=None):
    """Schedule a fused function whose output is a packed 5-D tensor (last axis 4) so that every work-item owns one
    output pixel: the spatial axes are fused over the NDRange, the 4 lanes are the innermost (vectorised) loop, the
    reduction (if any) runs serially in registers with its channel axis split by 4 (so inputs are read as whole
    pixels), and every other block (padding, epilogue) is inlined. None when the function does not have that form.

    Convolutions normally never get here: the register-tiled family `adreno/schedules/conv2d_texture.py` (one of
    `schedules.FAMILIES`, run first) claims them; this is what pack, pooling and elementwise functions get, and
    what a conv gets with `--schedules tvm` or when the tiled schedule refuses it."""
    from tvm import s_tir
    from tvm.s_tir.dlight import analysis

    params = list(func.params)
    out_shape = [int(d) for d in params[-1].ty.shape]
    if len(out_shape) != 5 or out_shape[-1] != LANES:
        return None
    try:
        sch = s_tir.Schedule(func)
        root = analysis.get_root_block(sch)
        blocks = sch.get_child_blocks(root)
        reductions = [b for b in blocks if analysis.get_sblock_info(sch, b).is_reduction()]
        if len(reductions) > 1:
            return None
        red = reductions[0] if reductions else None
        out_block = blocks[-1]
        for blk in blocks[:-1]:
            if red is not None and sch.get(blk).same_as(sch.get(red)):
                continue
            try:
                sch.compute_inline(blk)
            except TVM_ERRORS:  # ScheduleError: not inlinable forwards, inline it backwards
                sch.reverse_compute_inline(blk)
        if red is None:
            loops = sch.get_loops(out_block)
            if len(loops) != 5:
                return None
            fused = sch.fuse(*loops[:4])
            bx, tx = sch.split(fused, [None, THREADS])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            sch.vectorize(loops[4])
            return sch
        loops = sch.get_loops(red)
        iters = analysis.get_sblock_info(sch, red).iters
        kinds = "".join(i.kind for i in iters)
        if len(loops) < 6 or kinds[:5] != "SSSSS" or set(kinds[5:]) != {"R"}:
            return None
        spatial, lane, rloops = loops[:4], loops[4], loops[5:]
        fused = sch.fuse(*spatial)
        bx, tx = sch.split(fused, [None, THREADS])
        name = sch.get(red).name_hint
        order = list(rloops)
        if name.startswith("conv2d_NCHW4c"):
            rc, rest = rloops[0], rloops[1:]
            rco, rci = sch.split(rc, [None, LANES])
            order = [rco, *rest, rci]
        sch.reorder(bx, tx, *order, lane)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if sch.get(out_block).same_as(sch.get(red)):
            writer = sch.cache_write(red, 0, "local")
            sch.reverse_compute_at(writer, tx, preserve_unit_loops=True)
        else:
            sch.reverse_compute_at(out_block, tx, preserve_unit_loops=True)
            sch.set_scope(red, 0, "local")
            writer = out_block
        sch.vectorize(sch.get_loops(writer)[-1])
        init = sch.decompose_reduction(red, order[0])
        sch.vectorize(sch.get_loops(init)[-1])
        return sch
    except TVM_ERRORS:  # a schedule primitive refused: TVM's dlight rules take the function
        return None


def schedule_rule():
    """A dlight ScheduleRule wrapping `schedule_packed`."""
    from tvm.s_tir.dlight.base import ScheduleRule

    class PackedTexture(ScheduleRule):
        def apply(self, func, target, tunable):  # noqa: D102, ARG002
            return schedule_packed(func, target)

    return PackedTexture()


def relax_passes(tvm_target, extra_schedule_passes=(), default_schedules: bool = True, winograd: str = "off",
                 config: dict | None = None):
    """The Relax pipeline of the texture path: decompose, fold, our layout planning, legalize, fuse, schedules.
    `winograd` and `config` (tuned records) choose which convs the layout planning turns into Winograd stages.

    `extra_schedule_passes` (`schedules.schedule_pass`: our families, among them the register-tiled packed conv
    `conv2d_texture`, with tuned knobs) run before `schedule_packed`; TVM's dlight GPU rules take whatever is left.
    `default_schedules=False` leaves those two out (unscheduled functions: what `adreno tune` extracts tasks from)."""
    import tvm
    from tvm import relax
    from tvm.relax.backend.adreno import pipeline
    from tvm.s_tir import dlight as dl

    @tvm.transform.module_pass(opt_level=0, name="adreno.PlanTextureLayouts")
    def _layouts(mod, _ctx):
        return plan_layouts(mod, winograd=winograd, config=config)[0]

    return (pipeline.library_dispatch_passes(tvm_target) + [
        tvm.tirx.transform.BindTarget(tvm_target),
        relax.transform.DecomposeOpsForInference(),
        relax.transform.Normalize(),
        relax.transform.FoldConstant(),
        _layouts,
        relax.transform.Normalize(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
        relax.transform.Normalize(),
        *extra_schedule_passes,
    ] + ([dl.ApplyDefaultSchedule(schedule_rule()),
          dl.ApplyDefaultSchedule(dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback())]
         if default_schedules else []))
