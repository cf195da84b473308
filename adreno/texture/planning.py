"""Layout planning: rewrite conv-centred regions of a Relax `main` to NCHW4c activations / OIHW4o weights.

A Winograd-eligible conv (`adreno.compiler.winograd.eligible`) for which `adreno.compiler.winograd.choose_tile(workload,
winograd, config)` picks a tile becomes the three Winograd stages on packed tensors (`winograd.emit_stages`: V and M are
(alpha, alpha, C/4 | O/4, tiles, 4) images, the transformed weight a constant (alpha, alpha, O/4, C, 4)).

conv2d (groups 1 or depthwise, constant weights), max_pool2d, elementwise ops whose other operands are per-channel or
scalar constants (or region tensors of the same shape), and mean over H, W (keepdims) stay in the region; any other
consumer gets the tensor back in NCHW through one `unpack_nchw4c` (per tensor). Weights and per-channel constants are
transformed with numpy (constants in the module, never run-time work).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from ..compiler import winograd as winograd_rule
from ..targets.layout import LANES, channels4, pack_nchw4c, pack_oihw4o
from ..compiler.numpy_fold import fold_pass
from ..options import Memory, Winograd
from ..schedules import last_resort
from ..schedules.packed import schedule_rule
from .compute import te_conv4c, te_maxpool4c, te_pack, te_unpack

PACKED_CONV_FUNCTION = re.compile(r"(dw)?conv2d_nchw4c\d*")  # the packed convs' PrimFuncs (TVM numbers repeats)


def is_packed_conv_function(name: str) -> bool:
    """A PrimFunc the planner emitted for a packed conv (a heavy primitive to kernel orchestration)."""
    return PACKED_CONV_FUNCTION.fullmatch(name) is not None


_UNARY = {"relax.nn.relu", "relax.sigmoid", "relax.tanh", "relax.sqrt", "relax.rsqrt", "relax.exp", "relax.negative",
          "relax.abs", "relax.isnan", "relax.clip", "relax.nn.silu", "relax.nn.gelu", "relax.nn.gelu_tanh", "relax.erf"}
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


# Binary ops that may broadcast a packed per-channel (N, C, 1, 1) operand, such as a squeeze-and-excitation gate:
# their padded lanes stay finite (a divide by a zero lane would not), so the convs after them, whose weights for
# those lanes are zero, are unaffected.
_PER_CHANNEL_OK = ("relax.multiply", "relax.add", "relax.subtract")


def _per_channel(shape, out_shape) -> bool:
    return shape is not None and len(shape) == 4 and shape[:2] == out_shape[:2] and shape[2:] == [1, 1]


def _is_const(expr) -> bool:
    """A constant tensor (weights, a bias). Not a scalar PrimValue such as Clip's bounds: TVM 0.27 derives both from
    `tvm.ir.expr.Constant`, and only the tensor has a `.value` array to pack."""
    import tvm

    return isinstance(expr, tvm.ir.expr.Constant) and _is_tensor(expr)


def _is_tensor(expr) -> bool:
    from tvm import relax

    return isinstance(getattr(expr, "ty", None), relax.TensorType)


@dataclass
class LayoutReport:
    """What the layout planning did: convs packed, convs left in NCHW (with why), border transforms."""

    packed_convs: int = 0  # Winograd convs included
    nchw_convs: list = field(default_factory=list)
    packs: int = 0
    unpacks: int = 0


class LayoutPlanner:
    """One planning of one module's `main`: the new function under construction (`bb`) and what each old
    variable became: packed (a 5-D NCHW4c expression and its channel count), plain (an NCHW expression), or a tuple
    of old expressions. `winograd` and `config` (tuned records) choose which convs become Winograd stages."""

    def __init__(self, mod, winograd: Winograd = Winograd.OFF, config: dict | None = None,
                 report: LayoutReport | None = None, weights=None):
        self.main = mod["main"]
        others = tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv.name_hint != "main"}, attrs=mod.attrs)
        self.bb = relax.BlockBuilder(others)
        self.winograd, self.config = winograd, config
        # adreno.artifact.weights.WinogradWeights: the transformed weights, stored as their source
        self.weights = weights
        self.report = report if report is not None else LayoutReport()
        self.packed: dict[int, tuple] = {}  # old var key -> (packed expr, channels)
        self.plain: dict[int, object] = {}  # old var key -> NCHW expr in the new function
        self.tuples: dict[int, list] = {}   # old tuple var -> its field exprs (old)

    def key(self, e):
        return e.__hash__()

    def lookup(self, e):
        """The new-function expression of an old expression in its plain layout (unpacking on demand)."""
        if isinstance(e, relax.Var) or type(e).__name__ in ("DataflowVar", "Var"):
            k = self.key(e)
            if k in self.plain:
                return self.plain[k]
            if k in self.packed:
                p, c = self.packed[k]
                self.plain[k] = self.bb.emit_te(te_unpack, p, c, primfunc_name_hint="unpack_nchw4c")
                self.report.unpacks += 1
                return self.plain[k]
            if k in self.tuples:
                t = relax.Tuple([self.lookup(f) for f in self.tuples[k]])
                self.plain[k] = self.bb.emit(t)
                return self.plain[k]
            raise KeyError(e)
        if isinstance(e, relax.Tuple):
            return relax.Tuple([self.lookup(f) for f in e.fields])
        return e

    def packed_of(self, e):
        """(packed expr, channels) of an old expression, packing a plain 4-D NCHW tensor on demand."""
        k = self.key(e)
        if k in self.packed:
            return self.packed[k]
        shape = _shape(e)
        if shape is None or len(shape) != 4 or _dtype_of(e) != "float32":
            return None
        if _is_const(e):
            arr = e.value.numpy()
            res = (relax.const(pack_nchw4c(arr)), shape[1])
            return res
        p = self.bb.emit_te(te_pack, self.lookup(e), shape[1], primfunc_name_hint="pack_nchw4c")
        self.report.packs += 1
        self.packed[k] = (p, shape[1])
        return self.packed[k]

    def const_operand(self, c, channels: int, pad_value: float):
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

    def try_elementwise(self, value, out_shape):
        """New self.packed expression for an elementwise call, or None when it must run in NCHW."""
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
        region = [a for a in args if not _is_const(a) and self.key(a) in self.packed]
        if not region:
            return None
        channels = self.packed[self.key(region[0])][1]
        new_args = []
        for pos, a in enumerate(args):
            if _is_const(a):
                pad = 1.0 if (name == "relax.divide" and pos == 1) else 0.0
                c = self.const_operand(a, channels, pad)
                if c is None:
                    return None
                new_args.append(c)
            elif not _is_tensor(a):  # a scalar attribute-like operand (Clip's bounds) stays as it is
                new_args.append(a)
            elif _shape(a) == out_shape or (name in _PER_CHANNEL_OK and _per_channel(_shape(a), out_shape)):
                p = self.packed_of(a)
                if p is None:
                    return None
                new_args.append(p[0])
            else:
                return None
        if name.startswith("relax.maximum") or name.startswith("relax.minimum"):
            op = relax.op.maximum if name == "relax.maximum" else relax.op.minimum
            return self.bb.emit(op(*new_args)), channels
        return self.bb.emit(relax.Call(value.op, new_args, value.attrs)), channels

    def try_conv(self, value):
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
        p = self.packed_of(data)
        if p is None:
            return None, "input cannot be packed"
        info = winograd_rule.eligible(value, w)
        tile = 0 if info is None else winograd_rule.choose_tile(winograd_rule.workload_of(info), self.winograd,
                                                                self.config, Memory.TEXTURE)
        if tile:
            n, _, _, _, _, padding, oh, ow = info
            return (self.bb.emit(winograd_rule.emit_stages(self.bb, p[0], w, tile, n, padding, (oh, ow),
                                                                   self.weights)), o), ""
        pad = [int(v) for v in attrs.padding]
        pad = pad * 2 if len(pad) == 2 else pad
        wpacked = relax.const(pack_oihw4o(w, depthwise=depthwise))
        out = self.bb.emit_te(te_conv4c, p[0], wpacked, [int(s) for s in attrs.strides], pad,
                         [int(d) for d in attrs.dilation], depthwise,
                         primfunc_name_hint="dwconv2d_nchw4c" if depthwise else "conv2d_nchw4c")
        return (out, o), ""

    def try_pool(self, value):
        attrs = value.attrs
        if attrs.layout != "NCHW" or getattr(attrs, "ceil_mode", False):
            return None
        p = self.packed_of(value.args[0]) if self.key(value.args[0]) in self.packed else None
        if p is None:
            return None
        pad = [int(v) for v in attrs.padding]
        pad = pad * 2 if len(pad) == 2 else pad
        out = self.bb.emit_te(te_maxpool4c, p[0], [int(v) for v in attrs.pool_size], [int(v) for v in attrs.strides],
                         pad, [int(v) for v in attrs.dilation], primfunc_name_hint="max_pool2d_nchw4c")
        return out, p[1]

    def try_mean(self, value, out_shape):
        attrs = value.attrs
        src = value.args[0]
        if self.key(src) not in self.packed or not attrs.keepdims or attrs.axis is None:
            return None
        if sorted(int(a) for a in attrs.axis) != [2, 3]:
            return None
        p = self.packed[self.key(src)]
        return self.bb.emit(relax.op.mean(p[0], axis=[2, 3], keepdims=True)), p[1]

    def run(self):
        """The rewritten module."""
        main = self.main
        with self.bb.function("main", list(main.params), attrs=dict(main.attrs) if main.attrs else None):
            for var in main.params:
                self.plain[self.key(var)] = var
            with self.bb.dataflow():
                for block in main.body.blocks:
                    for binding in block.bindings:
                        self.visit(binding.var, binding.value)
                result = self.bb.emit_output(self.lookup(main.body.body))
            self.bb.emit_func_output(result)
        return self.bb.get()

    def visit(self, var, value):
        """Plan one binding `var = value` of the old `main`: packed when it can stay in the region, else plain."""
        if isinstance(value, relax.Tuple):
            self.tuples[self.key(var)] = list(value.fields)
            return
        if isinstance(value, relax.TupleGetItem) and self.key(value.tuple_value) in self.tuples:
            self.alias(var, self.tuples[self.key(value.tuple_value)][value.index])
        elif type(value).__name__ in ("Var", "DataflowVar"):
            self.alias(var, value)
        else:
            done = self.try_call(var, value) if isinstance(value, relax.Call) else None
            if done is not None:
                self.packed[self.key(var)] = done
            else:
                # a dataflow binding keeps its name: planning an already planned module (`adreno compile
                # --orchestrate` plans before fission) leaves it as it was, names included, which orchestration maps
                # by; the output's variable is made anew by `emit_output`, named as before
                name = var.name if isinstance(var, relax.DataflowVar) else ""
                self.plain[self.key(var)] = self.bb.emit(_remap(value, self.lookup), name_hint=name)

    def alias(self, var, source):
        """`var` names the same tensor as the old expression `source`, in the same layout."""
        if self.key(source) in self.packed:
            self.packed[self.key(var)] = self.packed[self.key(source)]
        else:
            self.plain[self.key(var)] = self.lookup(source)

    def try_call(self, var, value):
        """(packed expr, channels) of a call that stays in the region, or None."""
        name = getattr(value.op, "name", "")
        if name == "relax.nn.conv2d":
            done, why = self.try_conv(value)
            if done is None:
                self.report.nchw_convs.append(f"{var.name}: {why}")
            else:
                self.report.packed_convs += 1
            return done
        if name == "relax.nn.max_pool2d":
            return self.try_pool(value)
        if name == "relax.mean":
            return self.try_mean(value, _shape(var))
        return self.try_elementwise(value, _shape(var))


def plan_layouts(mod, report: LayoutReport | None = None, winograd: Winograd = Winograd.OFF, config: dict | None = None,
                 weights=None):
    """(the module with `main`'s conv-centred regions packed, the LayoutReport); see the module docstring."""
    planner = LayoutPlanner(mod, winograd, config, report, weights)
    return planner.run(), planner.report


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


def layout_passes(ctx, winograd: Winograd = Winograd.OFF, weights=None) -> list:
    """The texture pipeline up to and with layout planning (library dispatch, decomposition, constant folding, the
    plan) for the `ScheduleContext` `ctx`: `relax_passes` goes on from it, and `adreno compile --orchestrate` runs it
    before fission, so that the packed convs, packs and unpacks are primitives (planning the result again changes
    nothing). `winograd`, `weights`: see `relax_passes`."""
    import tvm
    from tvm import relax
    from tvm.relax.backend.adreno import pipeline

    @tvm.transform.module_pass(opt_level=0, name="adreno.PlanTextureLayouts")
    def _layouts(mod, _ctx):
        return plan_layouts(mod, winograd=winograd, config=ctx.knobs, weights=weights)[0]

    return pipeline.library_dispatch_passes(ctx.target) + [
        tvm.tirx.transform.BindTarget(ctx.target),
        relax.transform.DecomposeOpsForInference(),
        relax.transform.Normalize(),
        fold_pass(),  # batch norms' constant arithmetic in numpy: TVM's pass builds an LLVM function per call
        relax.transform.FoldConstant(),
        _layouts,
    ]


def relax_passes(ctx, extra_schedule_passes=(), default_schedules: bool = True, winograd: Winograd = Winograd.OFF,
                 weights=None, fuse=None, refusals: list | None = None):
    """The Relax pipeline of the texture path for the `ScheduleContext` `ctx`: decompose, fold, our layout planning
    (`layout_passes`), legalize, fuse, schedules. `winograd` and the context's knob source (tuned records) choose
    which convs the layout planning turns into Winograd stages (`weights`, an `adreno.artifact.weights.WinogradWeights`,
    collects their transformed weights).

    `extra_schedule_passes` (`schedules.schedule_pass`: our families, among them the register-tiled packed conv
    `conv2d_texture`, with tuned knobs) run before `schedule_packed`; the last resort takes whatever is left
    (`adreno.schedules.last_resort`: dlight's reduction rules checked against the device, what it refuses appended
    to `refusals`, then dlight's Fallback). `default_schedules=False` leaves those two out (unscheduled functions:
    what `adreno tune` extracts tasks from).
    `fuse` is a pass run instead of TVM's FuseOps (`adreno.orchestrate.emit.fuse_within`)."""
    from tvm import relax
    from tvm.s_tir import dlight as dl

    return (layout_passes(ctx, winograd, weights) + [
        relax.transform.Normalize(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        fuse or relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
        relax.transform.Normalize(),
        *extra_schedule_passes,
    ] + ([dl.ApplyDefaultSchedule(schedule_rule(ctx)), last_resort.schedule_pass(ctx, refusals)]
         if default_schedules else []))
