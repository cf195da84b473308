"""Winograd convolution F(m x m, 3 x 3) as a Relax-level rewrite (m = 2 or 4, tile alpha = m + 2).

`rewrite(mod, mode, config)` replaces every eligible `relax.nn.conv2d` of `main` (3x3 kernel, stride 1, dilation 1,
groups 1, NCHW/OIHW, float32, constant weight) that the selection rule (or a tuned record, or a forced mode) picks,
by three primitive functions and one constant:

  U[a, b, o, c]  = (G g G^T)[a, b]                 the weight transform, computed here with numpy (a constant)
  V[a, b, c, p]  = (B^T d_p B)[a, b]               `winograd_input_transform`: per input channel c and tile p of
                                                    alpha x alpha padded input (zero padding is a guarded load in
                                                    the block `winograd_data_tile`), as two passes (B^T d, then B)
  M[a, b, o, p]  = sum_c U[a, b, o, c] V[a, b, c, p]  `winograd_batch_gemm`: alpha*alpha independent GEMMs
  Y[n, o, y, x]  = (A^T M_p A)[y % m, x % m]       `winograd_output_transform` (written in NCHW), two passes too

The output transform is a multiply-accumulate reduction whose output is the conv's output, so Relax's FuseOps
treats it as "out-elementwise fusable": the bias add, ReLU/Clip and residual add that followed the conv fuse into its
primitive function, as they did into the direct conv. The three stages are scheduled by
`adreno.schedules.conv2d_winograd` (recognised by the block names above).

Texture memory: `adreno.texture.planning.plan_layouts` emits the same stages on packed tensors (`emit_stages` with
NCHW4c data): V[a, b, C/4, p, 4], M[a, b, O/4, p, 4] and the weight transform packed as U[a, b, O/4, C, 4]
(`transform_weight(..., packed=True)`), main blocks named with the suffix `_nchw4c`, each a 5-D tensor whose last
axis is a pixel's 4 channels (an image). Layout records of texture convs are keyed
`adreno.records.layout_key(wl, Memory.TEXTURE)`, and their direct layout is `conv2d_texture`.

Modes (`adreno.options.Winograd`): off (direct convs), auto (the selection rule `select_tile`), f2/f4 (every
eligible conv with that tile). A tuned layout record (`adreno tune`: `{"tile": 0|2|4, <knobs of that layout>}` under
the conv's key `ConvWorkload.key("conv2d_winograd")`) decides for its conv under off and auto; f2/f4 force every
eligible conv. `adreno.schedules.conv2d_winograd.kernel_configs` turns such records into the per-kernel keys the
schedules read.

Transform matrices (Lavin & Gray, interpolation points 0, +-1 for F(2,3) and 0, +-1, +-2 for F(4,3), plus infinity).
fp32 error: F(2x2) stays near direct conv (~1e-6 relative), F(4x4) is larger (the matrices have entries up to 8 and
1/24): ~1e-5..1e-4 relative to the output magnitude; tests use 1e-3.
"""

from __future__ import annotations

import re

import numpy as np

from ..targets.layout import LANES, PORTABLE_IMAGE2D_MAX  # LANES: the channel lanes of a packed (NCHW4c) tensor's pixel
from ..support.native_log import summarised_stderr
from ..artifact.winograd_weights import matrices, transform_weight
from .numpy_fold import fold_constants
from ..options import Memory, Winograd
from ..records import direct_key, layout_key
from ..workload import PACKED, ConvWorkload  # PACKED: the suffix of the packed (texture) stages' main blocks

OP = "conv2d_winograd"
GEMM_STAGE = "batch_gemm"  # the middle stage's PrimFunc is named winograd<m>_batch_gemm

# Selection rule of "auto" (documented in adreno/schedules/conv2d_winograd.py): both channel counts at least this ...
MIN_CHANNELS = 64
# ... and an output at least this large in both dimensions; F(4x4) from F4_MIN_SPATIAL up, F(2x2) below. On PoCL
# F(4x4) beat F(2x2) on every ResNet-18 layer down to 7x7 (tools/bench_conv.py), so "auto" picks F(4x4) throughout;
# F(2x2) is there for forcing ("f2") and for the tuner (knob `tile`), e.g. for devices where it wins on small maps.
MIN_SPATIAL = 7
F4_MIN_SPATIAL = 7


def tiles(oh: int, ow: int, m: int) -> tuple[int, int]:
    return -(-oh // m), -(-ow // m)


def _const_matrix(values: np.ndarray, name: str):
    """A te tensor holding a small constant matrix as a select chain (folds away once the loops are unrolled)."""
    from tvm import te, tirx

    rows, cols = values.shape

    def entry(i, j):
        expr = tirx.const(0.0, "float32")
        for r in range(rows):
            for c in range(cols):
                if values[r, c] != 0:
                    expr = tirx.Select(tirx.all(i == r, j == c), tirx.const(float(values[r, c]), "float32"), expr)
        return expr

    return te.compute((rows, cols), entry, name=name)




def _row_sum(matrix, row, column_value, size: int):
    """sum_k matrix[row, k] * column_value(k) written out term by term: a transform's first pass is an elementwise
    block (no reduction to initialise), and once `row` is unrolled each term's coefficient folds to a constant and
    the zero terms vanish."""
    total = matrix[row, 0] * column_value(0)
    for k in range(1, size):
        total = total + matrix[row, k] * column_value(k)
    return total


def _input_transform_te(data, m: int, padding, out_hw):
    """V[a, b, c, p] = (B^T d B)[a, b] for every input channel c and tile p (tiles numbered n-major, then tile rows,
    then tile columns); d is the alpha x alpha input patch of the tile, zero outside the image (the padding).
    Packed `data` (N, C/4, H, W, 4) gives V[a, b, c/4, p, lane] (block `winograd_input_transform_nchw4c`).

    Computed as two passes over the patch, T = B^T d (block `winograd_input_rows`) and V = T B, not as one sum over
    alpha^2 terms per output: with B^T's 22 nonzero entries (F(4x4)) that is 264 multiply-adds a tile instead of 484,
    and a row `a` of V needs only row `a` of T. The single sum's unrolled 6^4 select-chain terms also took TVM's
    simplifier and codegen seconds per kernel and made a 2,300-line kernel that PoCL compiled for seconds more."""
    from tvm import te, tirx

    bt_np = matrices(m)[0]
    alpha = m + 2
    packed = len(data.shape) == 5
    n, c, h, w = (int(d) for d in data.shape[:4])
    lanes = (LANES,) if packed else ()
    nh, nw = tiles(*out_hw, m)
    top, left = padding[0], padding[1]
    bt = _const_matrix(bt_np, "winograd_BT")

    def tile_value(ci, p, r, s, *lane):
        b = p // (nh * nw)
        y = (p // nw) % nh * m + r - top
        x = p % nw * m + s - left
        inside = tirx.all(y >= 0, y < h, x >= 0, x < w)
        return tirx.if_then_else(inside, data[(b, ci, y, x, *lane)], tirx.const(0.0, data.dtype))

    d = te.compute((c, n * nh * nw, alpha, alpha, *lanes), tile_value, name="winograd_data_tile")
    rows = te.compute((c, n * nh * nw, alpha, alpha, *lanes),
                      lambda ci, p, a, s_, *lane: _row_sum(bt, a, lambda r: d[(ci, p, r, s_, *lane)], alpha),
                      name="winograd_input_rows")
    s = te.reduce_axis((0, alpha), name="s")
    return te.compute((alpha, alpha, c, n * nh * nw, *lanes),
                      lambda a, b, ci, p, *lane: te.sum(rows[(ci, p, a, s, *lane)] * bt[b, s], axis=s),
                      name="winograd_input_transform" + (PACKED if packed else ""))


def _gemm_te(u, v):
    """M[a, b, o, p] = sum_c U[a, b, o, c] V[a, b, c, p]; packed: U (alpha, alpha, O/4, C, 4) and
    V (alpha, alpha, C/4, P, 4) give M[a, b, o/4, p, lane] (block `winograd_batch_gemm_nchw4c`)."""
    from tvm import te

    packed = len(v.shape) == 5
    alpha, _, o, c = (int(d) for d in u.shape[:4])
    p_total = int(v.shape[3])
    k = te.reduce_axis((0, c), name="k")
    if packed:
        return te.compute((alpha, alpha, o, p_total, LANES),
                          lambda a, b, co, p, lane: te.sum(u[a, b, co, k, lane] * v[a, b, k // LANES, p, k % LANES],
                                                           axis=k), name="winograd_batch_gemm" + PACKED)
    return te.compute((alpha, alpha, o, p_total),
                      lambda a, b, co, p: te.sum(u[a, b, co, k] * v[a, b, k, p], axis=k),
                      name="winograd_batch_gemm")


def _output_transform_te(mm, m: int, n: int, out_hw):
    """Y[n, o, y, x] = (A^T M_p A)[y % m, x % m] with p the tile of (n, y, x); packed M gives Y[n, o/4, y, x, lane]
    (block `winograd_output_transform_nchw4c`).

    Two passes, as the input transform: T = A^T M (block `winograd_output_rows`, m x alpha per tile) and Y = T A, 180
    multiply-adds a tile for F(4x4) instead of 324; an output row needs one row of T. The function is marked
    out-elementwise fusable (`op_pattern` 4, like a conv; TVM's own analysis says "reduction" because every output
    reads distinct M) so that FuseOps fuses the conv's epilogue (bias, activation, residual add) into it."""
    from tvm import te

    at_np = matrices(m)[2]
    alpha = m + 2
    packed = len(mm.shape) == 5
    o, p_total = int(mm.shape[2]), int(mm.shape[3])
    lanes = (LANES,) if packed else ()
    oh, ow = out_hw
    nh, nw = tiles(oh, ow, m)
    at = _const_matrix(at_np, "winograd_AT")
    rows = te.compute((o, p_total, m, alpha, *lanes),
                      lambda co, p, yi, b, *lane: _row_sum(at, yi, lambda a: mm[(a, b, co, p, *lane)], alpha),
                      name="winograd_output_rows")
    rb = te.reduce_axis((0, alpha), name="rb")

    def out_value(b, co, y, x, *lane):
        p = (b * nh + y // m) * nw + x // m
        return te.sum(rows[(co, p, y % m, rb, *lane)] * at[x % m, rb], axis=rb)

    return te.compute((n, o, oh, ow, *lanes), out_value, name="winograd_output_transform" + (PACKED if packed else ""))


def emit_stages(bb, data, weight: np.ndarray, m: int, n: int, padding, out_hw, weights=None):
    """Emit the three Winograd stages of a conv into the BlockBuilder `bb` (inside a dataflow block) and return the
    output transform's call (not emitted: the caller emits or returns it). `data` is NCHW or packed NCHW4c (then
    the weight transform is packed too and every stage works on packed tensors). The transformed weight is
    recorded with `weights` (an `adreno.artifact.weights.WinogradWeights`), so that the artifact stores `weight`
    instead."""
    from tvm import relax

    packed = len(data.ty.shape) == 5
    u = transform_weight(weight, m, packed)
    if weights is not None:
        weights.record(u, weight, m, packed)
    v = bb.emit_te(_input_transform_te, data, m, padding, out_hw, primfunc_name_hint=f"winograd{m}_input_transform")
    mm = bb.emit_te(_gemm_te, relax.const(u), v, primfunc_name_hint=f"winograd{m}_{GEMM_STAGE}")
    return bb.call_te(_output_transform_te, mm, m, n, out_hw, primfunc_name_hint=f"winograd{m}_conv2d",
                      # a multiply-accumulate whose output is the conv's: its epilogue may fuse into it
                      # (TVM's analysis alone says "reduction" since every output reads distinct M)
                      primfunc_attrs={"op_pattern": 4})


def is_gemm_function(name: str) -> bool:
    """Whether a PrimFunc named `name` is a batched GEMM `emit_stages` made (the Block Builder numbers repeats:
    `winograd4_batch_gemm1`): the stage that does a conv's multiply-accumulates, heavy as the conv was."""
    return re.fullmatch(rf"winograd[24]_{GEMM_STAGE}\d*", name) is not None


def _shape(expr) -> list[int]:
    shape = expr.ty.shape
    return [int(v) for v in getattr(shape, "values", shape)]


def eligible(call, const_weight) -> tuple | None:
    """(N, C, H, W, O, padding, OH, OW) when `call` is a conv2d Winograd F(m, 3x3) can replace, else None.

    A conv whose weights are all integers is not replaced: it is the integer domain of a quantized operator
    (ConvInteger, QLinearConv: `w - w_zp` as float, `adreno.frontend.quantized`), whose float accumulation is exact
    and whose result a Cast to int32 truncates; Winograd's transforms are not exact, and turned ConvInteger's
    integer sums into n - 1 for 44% of a ResNet-18 layer's outputs, compounding to 0.05 at the logits."""
    attrs = call.attrs
    try:
        if [int(v) for v in attrs.strides] != [1, 1] or [int(v) for v in attrs.dilation] != [1, 1] \
                or int(attrs.groups) != 1 or str(attrs.data_layout) != "NCHW" or str(attrs.kernel_layout) != "OIHW" \
                or str(attrs.out_layout) not in ("NCHW", ""):
            return None
        if attrs.out_dtype is not None and str(attrs.out_dtype) not in ("", "float32"):
            return None
        dshape = _shape(call.args[0])
        oshape = _shape(call)
        padding = [int(v) for v in attrs.padding]
    except (TypeError, ValueError, AttributeError):
        return None
    if const_weight is None or const_weight.dtype != np.float32 or const_weight.ndim != 4 \
            or tuple(const_weight.shape[2:]) != (3, 3) or str(call.args[0].ty.dtype) != "float32":
        return None
    if len(padding) == 2:
        padding = padding * 2
    if len(dshape) != 4 or len(oshape) != 4 or const_weight.shape[1] != dshape[1]:
        return None
    if np.array_equal(const_weight, np.round(const_weight)):
        return None  # an integer-domain conv: it must stay exact (see `eligible`'s doc)
    n, c, h, w = dshape
    return n, c, h, w, int(const_weight.shape[0]), tuple(padding), oshape[2], oshape[3]


def workload_of(info) -> ConvWorkload:
    """The ConvWorkload of an eligible conv (`eligible`'s description)."""
    n, c, h, w, o, padding, oh, ow = info
    return ConvWorkload(n, c, h, w, o, 3, 3, oh, ow, (1, 1), (1, 1), padding, 1, "float32")


def _has_layout_records(config: dict | None) -> bool:
    return any(key.startswith(OP + "|") for key in config or {})


def select_tile(wl) -> int:
    """The default selection rule of "auto": 0 (keep the direct conv), 2 or 4 (see the module constants)."""
    if min(wl.c, wl.o) < MIN_CHANNELS or min(wl.oh, wl.ow) < MIN_SPATIAL:
        return 0
    return 4 if min(wl.oh, wl.ow) >= F4_MIN_SPATIAL else 2


def choose_tile(wl, mode: Winograd, config: dict | None, memory: Memory = Memory.BUFFER) -> int:
    """The tile for an eligible conv compiled for `memory`: forced by f2/f4, else its tuned layout record's (of
    that memory), else 0 when it has a tuned direct-kernel record (a `--no-layouts` run), else the mode's rule
    (auto: `select_tile`, off: 0)."""
    if mode.forced_tile is not None:
        return mode.forced_tile
    config = config or {}
    tuned = config.get(layout_key(wl, memory))
    if tuned and "tile" in tuned:
        return int(tuned["tile"])
    tile = select_tile(wl) if mode is Winograd.AUTO and direct_key(wl, memory) not in config else 0
    return portable_tile(wl, tile) if memory is Memory.TEXTURE else tile


def portable_tile(wl, tile: int) -> int:
    """`tile`, or another tile (4, then direct: 0) when the packed stages' V and M images, one pixel column per tile,
    would be wider than local check devices allow (`PORTABLE_IMAGE2D_MAX`; e.g. F(2x2) on a 224x224 map: 12544)."""
    def width(m: int) -> int:
        nh, nw = tiles(wl.oh, wl.ow, m)
        return wl.n * nh * nw

    return next((m for m in (tile, 4) if width(m) <= PORTABLE_IMAGE2D_MAX), 0) if tile else 0


def _const_array(expr):
    import tvm

    value = getattr(expr, "value", None) if isinstance(expr, tvm.ir.expr.GenericConst) else None
    return value.numpy() if hasattr(value, "numpy") else None


def _calls(func, op) -> bool:
    """Whether a binding of `func`'s body calls `op` (a conv needs the weights folded to constants first)."""
    import tvm

    return any(isinstance(b.value, tvm.ir.expr.Call) and b.value.op == op
               for block in func.body.blocks for b in block.bindings)


def eligible_workloads(mod) -> list:
    """The ConvWorkload of every conv2d in `main` that Winograd can replace, in order (repeats included)."""
    import tvm

    conv_op = tvm.ir.Op.get("relax.nn.conv2d")
    found = []
    if not _calls(mod["main"], conv_op):
        return found
    # the fold legalizes a constant Gather: TVM's fast-mode warning (adreno.support.native_log)
    with summarised_stderr():
        folded = fold_constants(mod)
    for block in folded["main"].body.blocks:
        for binding in block.bindings:
            call = binding.value
            if isinstance(call, tvm.ir.expr.Call) and isinstance(call.op, tvm.ir.Op) and call.op == conv_op:
                info = eligible(call, _const_array(call.args[1]))
                if info is not None:
                    found.append(workload_of(info))
    return found


def rewrite(mod, mode: Winograd = Winograd.AUTO, config: dict | None = None, weights=None):
    """Rewrite the eligible conv2d of `main` into Winograd stages (see the module doc); returns a new module (the
    input module unchanged when nothing is rewritten). `weights`: see `emit_stages`."""
    import tvm
    from tvm import relax

    if mode is Winograd.OFF and not _has_layout_records(config):
        return mod
    conv_op = tvm.ir.Op.get("relax.nn.conv2d")
    if not _calls(mod["main"], conv_op):
        return mod  # nothing to rewrite, so no fold
    folded = fold_constants(mod)
    chosen: list = []

    @relax.expr_functor.mutator
    class _Rewriter(relax.expr_functor.PyExprMutator):
        def __init__(self, module):
            super().__init__(module)

        def visit_call_(self, call):  # noqa: N802 - visitor protocol
            call = super().visit_call_(call)
            if not isinstance(call.op, tvm.ir.Op) or call.op != conv_op:
                return call
            array = _const_array(call.args[1])
            info = eligible(call, array)
            if info is None:
                return call
            wl = workload_of(info)
            m = choose_tile(wl, mode, config)
            if m not in (2, 4):
                return call
            chosen.append((wl, m))
            n, _, _, _, _, padding, oh, ow = info
            return emit_stages(self.builder_, call.args[0], array, m, n, padding, (oh, ow), weights)

    rewriter = _Rewriter(folded)
    func = rewriter.visit_expr(folded["main"])
    if not chosen:
        return mod
    rewriter.builder_.update_func(folded.get_global_var("main"), func)
    return rewriter.builder_.get()


def rewrite_pass(mode: Winograd = Winograd.AUTO, config: dict | None = None, weights=None):
    """`rewrite` as a module pass (for a pass list)."""
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="AdrenoWinograd")
    def _pass(mod, ctx):  # noqa: ARG001
        return rewrite(mod, mode, config, weights)

    return _pass
