"""The host library: a Relax VM executable built from the launch plan, so the program a phone app or TVM's
`tvm_rpc` runs is the one every measurement ran.

The VM's `main` is the plan, step by step: each step calls its PrimFunc, specialised to the memory scopes the plan
gave its tensors (`adreno.texture.tir.specialize_scopes`, as `plan.lower_primfunc` lowers it), and each tensor is
allocated in the plan's scope, so a texture artifact's activations and weights are OpenCL images in the host
library too (TVM's runtime asks our plugin's allocator for them; `native/plugin/device_api.cc`).

Calling convention (docs/native.md, "The host library and its calling convention"):
    main(*inputs, *params) -> output, or a tuple of the outputs
inputs in `plan.inputs` order (buffers, the model's own shapes), then every param of `params.npz` in the plan's
order (`param_order`, the manifest's `host_params`), each a tensor of the param's shape and dtype in its plan scope
(`TensorSpec.scope`: "global" or a texture scope). The library holds no weights: an app loads them once from the
artifact's weight file and passes the same tensors to every call. An fp16 artifact's images hold half floats
behind float32 tensors: its texture weights are allocated with `adreno.opencl.empty_image(..., 16)` and uploaded
as half pixels (`adreno.opencl.write_pixels`), as `adreno.native.vm_executor` and the harness do. The kernels'
source is embedded zlib-compressed (`adreno.compiler.library_blob`), which the plugin inflates at load.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from ..artifact.format import Plan
from ..errors import AdrenoError
from ..targets.layout import TEXTURE_SCOPES
from .library_blob import pack_imports
from .lowered import reusing_pipeline
from ..options import Host
from .plan import short_name
from ..texture.tir import register_pipeline, specialize_scopes
from ..support.native_log import summarised_stderr


# A lib.so is linked without its symbol table and debug sections (a third of MobileNetV2's library): TVM's runtime
# finds the library's entry points through the dynamic symbols, which stay.
STRIPPED = ("-s",)


def param_order(plan: Plan) -> list[str]:
    """The params `main` takes after the inputs, in order: every tensor of kind "param" in the plan."""
    return [name for name, spec in plan.tensors.items() if spec.kind == "param"]


def plan_module(lowered, plan: Plan, tvm_target):
    """An IRModule whose `main` runs `plan` (see the module doc) with the PrimFuncs of `lowered`."""
    from tvm import relax
    from tvm.relax.global_info import VDevice

    vdevices: dict[str, VDevice] = {}

    def sinfo(name: str):
        spec = plan.tensors[name]
        if spec.scope not in vdevices:
            vdevices[spec.scope] = VDevice(tvm_target, 0, spec.scope)
        return relax.TensorType([int(d) for d in spec.shape], spec.dtype, vdevices[spec.scope])

    scope_sets: dict[str, set] = {}
    for step in plan.steps:
        scope_sets.setdefault(step.func, set()).add(tuple(plan.tensors[a].scope for a in step.args))
    bb = relax.BlockBuilder()
    funcs: dict[tuple, relax.GlobalVar] = {}
    names = plan.inputs + param_order(plan)
    params = [relax.Var(name, sinfo(name)) for name in names]
    values = dict(zip(names, params))
    with bb.function("main", params):
        for step in plan.steps:
            scopes = tuple(plan.tensors[a].scope for a in step.args)
            if (step.func, scopes) not in funcs:
                func = lowered[step.func]
                if any(scope != "global" for scope in scopes):
                    func = specialize_scopes(func, list(scopes), tvm_target)
                # A kernel's name comes from its function's: the plan's, unless one function has two scope sets.
                # the plan's kernel names (`adreno.compiler.plan.short_name`: PoCL cannot link names past ~250
                # characters)
                name = short_name(step.func if len(scope_sets[step.func]) == 1 else step.program)
                funcs[(step.func, scopes)] = bb.add_func(func.with_attr("global_symbol", name), name)
            # A step's arguments are its inputs, then its outputs: the tensors no earlier step made (the plan is SSA).
            outputs = [a for a in step.args if a not in values]
            inputs = [values[a] for a in step.args[:len(step.args) - len(outputs)]]
            out_sinfo = [sinfo(o) for o in outputs]
            call = relax.call_tir(funcs[(step.func, scopes)], inputs, out_sinfo if len(out_sinfo) > 1 else out_sinfo[0])
            result = bb.emit(call)
            if len(outputs) == 1:
                values[outputs[0]] = result
            else:
                for index, name in enumerate(outputs):
                    values[name] = bb.emit(relax.TupleGetItem(result, index))
        for name in plan.outputs:
            if name not in values and 0 in plan.tensors[name].shape:  # an empty output (adreno.frontend.empty): no data
                spec = plan.tensors[name]
                values[name] = bb.emit(relax.op.builtin.alloc_tensor(relax.ShapeExpr(spec.shape), spec.dtype, 0))
        missing = [o for o in plan.outputs if o not in values]
        if missing:
            raise AdrenoError(f"outputs {missing} are computed by no step; no host library can return them")
        results = [values[o] for o in plan.outputs]
        bb.emit_func_output(results[0] if len(results) == 1 else relax.Tuple(results))
    module = bb.get()
    module.update_global_info("vdevice", list(vdevices.values()))
    return module


def pixel_dtype(plan: Plan) -> str:
    """The pixel storage of the plan's images: "float16" for an fp16 artifact, else "float32" (one for all)."""
    kinds = {image["channel_type"] for image in plan.images.values()} or {"float32"}
    if len(kinds) > 1:
        raise AdrenoError(f"the plan's images mix pixel types {sorted(kinds)}; no host library can allocate them")
    return kinds.pop()


def texture_allocations_pass(pixels: str = "float32"):
    """A Relax pass that gives each texture-scoped tensor its own image storage (after CallTIRRewrite).

    TVM's memory lowering (StaticPlanBlockMemory, LowerAllocTensor) turns every `R.builtin.alloc_tensor` into a
    byte buffer and drops its scope. A texture one becomes instead `vm.builtin.alloc_storage(shape, 0, pixels,
    scope)` (the allocator makes an image of the tensor's geometry whose pixels are `pixels`: half floats for an fp16
    artifact, as in its plan) and a scoped `vm.builtin.alloc_tensor` view of it in the tensor's own dtype; the VM
    frees it after its last use (KillAfterLastUse), and the allocator's pool reuses the image."""
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    alloc_tensor = tvm.ir.Op.get("relax.builtin.alloc_tensor")

    @mutator
    class TextureAllocations(PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op != alloc_tensor or str(call.args[3].value) not in TEXTURE_SCOPES:
                return call
            shape, dtype, scope = call.args[0], call.args[1], call.args[3]
            pixel_type = tvm.ir.expr.GenericConst(tvm.DataType(pixels), relax.AnyType())
            storage = self.builder_.emit(relax.op.call_builtin_with_ctx(
                "vm.builtin.alloc_storage", [shape, relax.prim_value(tvm.tirx.IntImm("int64", 0)), pixel_type, scope],
                ty_args=relax.ObjectType()))
            return relax.Call(relax.ExternFunc("vm.builtin.alloc_tensor"),
                              [storage, relax.prim_value(tvm.tirx.IntImm("int64", 0)), shape, dtype, scope],
                              ty_args=[relax.TensorType(shape.values, dtype.value)])

    @tvm.transform.module_pass(opt_level=0, name="AdrenoTextureAllocations")
    def rewrite(module, _context):
        for gvar, func in list(module.functions.items()):
            if isinstance(func, relax.Function):
                module[gvar] = TextureAllocations().visit_expr(func)
        return module

    return rewrite


def export_host_library(lowered, plan: Plan, tvm_target, out_dir: Path, host: Host, cc: str | None,
                        store=None) -> str:
    """Build the plan's VM executable and export it: `lib.so` where a compiler for the host is available (the
    host's own for --host native; `--cc`/$TVM_NDK_CC, an Android NDK clang, for --host android), otherwise
    `lib.tar` with the aarch64 objects, to be linked with the NDK later. With `store` (the `LoweredFunctions` the
    plan's extraction filled) a function the plan lowered is not lowered again (`adreno.compiler.lowered`)."""
    import tvm
    from tvm.relax.backend.adreno import pipeline

    module = plan_module(lowered, plan, tvm_target)
    with tvm_target:
        passes = (pipeline.dataflow_lower_passes(tvm_target) + [texture_allocations_pass(pixel_dtype(plan))]
                  + pipeline.finalize_passes(tvm_target))
        vm_module = tvm.transform.Sequential(passes)(module)
    reuse = reusing_pipeline(store, register_pipeline()) if store is not None else contextlib.nullcontext(None)
    with reuse as tir_pipeline, summarised_stderr():  # the LLVM host codegen's warnings (adreno.support.native_log)
        executable = tvm.compile(vm_module, target=tvm_target, relax_pipeline=None,
                                 tir_pipeline=tir_pipeline or register_pipeline())
    with _workspace_in(out_dir) as workspace:  # where TVM's export links: one a killed compile leaves is ours
        if host is Host.NATIVE:  # $TVM_NDK_CC names the phone's compiler: only an explicit --cc links for this host
            _link(executable, out_dir / "lib.so", cc, host, fpack_imports=pack_imports, options=list(STRIPPED),
                  workspace_dir=workspace, **({"cc": cc} if cc else {}))
            return "lib.so"
        cc = cc or os.environ.get("TVM_NDK_CC")
        if cc:
            _link(executable, out_dir / "lib.so", cc, host, fcompile=_cross_compiler(cc), fpack_imports=pack_imports,
                  workspace_dir=workspace)
            return "lib.so"
        try:
            executable.export_library(str(out_dir / "lib.tar"), fpack_imports=pack_imports, workspace_dir=workspace)
        except RuntimeError as err:  # TVM runs tar and gzip, and raises their output
            _refuse_full_disk("packing the host library's objects", str(err))
            raise AdrenoError(f"packing the host library's objects failed: {_first_error(str(err))}") from None
        return "lib.tar"


@contextlib.contextmanager
def _workspace_in(out_dir: Path):
    """A folder inside `out_dir`, the artifact's staging folder, for TVM's `export_library` to write its objects in
    (`workspace_dir`; by default TVM makes one in TMPDIR, which a compile killed there, SIGKILL, cannot remove).
    Inside the staging folder it goes with the folder, which the next compile to that `-o` removes
    (`adreno.artifact.format.ArtifactWriter`); removed here once the library is written."""
    workspace = tempfile.mkdtemp(prefix=".export.", dir=out_dir)
    try:
        yield workspace
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def _refuse_full_disk(step: str, output: str) -> None:
    """One line when a tool's `output` says the disk filled up (gzip's or ld's `No space left on device`)."""
    if os.strerror(errno.ENOSPC) in output:
        raise AdrenoError(f"{step} failed: no space left on device (where the artifact is written, or TMPDIR "
                          f"{tempfile.gettempdir()}); nothing was written")


def _first_error(output: str) -> str:
    """The first line of a tool's output that reports an error (else its last line), for a one-line message."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line.lower() and "compilation error" not in line.lower()),
                 lines[-1] if lines else "no output")
    return first[:300]


def _link(executable, path: Path, compiler: str | None, host: Host, **export) -> None:
    """`executable.export_library(path, **export)` with `compiler` (None: the host's own). A compiler that
    is missing or not a program is one line before TVM's build (which would end in a traceback from the process
    it could not start); one that fails (TVM raises its whole output), cannot be started, or exits without
    writing `path` is one line naming it and its first error."""
    wanted = ("the NDK's aarch64-linux-android<API>-clang" if host is Host.ANDROID
              else "a compiler for this machine (or leave --cc out)")
    advice = f"--cc for --host {host.value} must be {wanted}"
    if compiler and shutil.which(compiler) is None:
        source = "--cc or $TVM_NDK_CC" if host is Host.ANDROID else "--cc"
        raise AdrenoError(f"compiler {compiler!r} is not executable; {advice}" if Path(compiler).is_file()
                          else f"compiler {compiler!r} not found (from {source}); {advice}")
    name = compiler or "the host's compiler"
    try:
        executable.export_library(str(path), **export)
    except RuntimeError as err:
        _refuse_full_disk(f"linking the host library with {name}", str(err))
        raise AdrenoError(f"linking the host library with {name} failed: {_first_error(str(err))}; {advice}") from None
    except OSError as err:
        raise AdrenoError(f"linking the host library with {name} failed: {err.strerror or err}; {advice}") from None
    if not path.is_file():
        raise AdrenoError(f"linking the host library with {name} wrote no {path.name}; {advice}")


def _cross_compiler(cc: str):
    from tvm.support import cc as tvm_cc  # TVM 0.27 moved it here from tvm.contrib

    return tvm_cc.cross_compiler(cc, options=["-shared", "-fPIC", *STRIPPED])
