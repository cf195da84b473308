"""The texture TIR pipeline: parameter scopes for one kernel, float4 widening of texture accesses, store checks,
and the pipeline registered with TVM as "adreno_texture" (see the package docstring)."""

from __future__ import annotations

from ..errors import AdrenoError
from ..compiler.expression_depth import shallow_expressions_pass
from ..compiler.float_literals import exact_float_literals_pass
from ..compiler.shared_subexpressions import shared_subexpressions_pass
from ..targets.layout import LANES


class TextureLoweringError(AdrenoError):
    """A kernel writes a texture in a way that is not one whole pixel per store."""


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


def for_scopes(func, scopes, tvm_target):
    """(`func` with its parameters in `scopes`, the name of the TIR pipeline that lowers it): the texture pipeline
    when a parameter is an image, TVM's "s_tir" when all are buffers (`scopes` None or all "global"). The launch
    plan (`plan.lower_primfunc`) and a tuner candidate's TVM library (`adreno.tune.native_build`) both lower
    through this, so a kernel measured through TVM's runtime is the kernel the launch plan runs."""
    if scopes is None or all(scope == "global" for scope in scopes):
        return func, "s_tir"
    return specialize_scopes(func, list(scopes), tvm_target), register_pipeline()


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

            def finalize_exact():  # the host library's kernels get the plan's exact constants and shared indices
                return tvm.transform.Sequential([finalize_device(), shared_subexpressions_pass(),
                                                 exact_float_literals_pass(), shallow_expressions_pass()])

            return texture_tir_pipeline(), finalize_host, finalize_exact

        cp.register_tir_pipeline(PIPELINE_NAME, factory)
    return PIPELINE_NAME
