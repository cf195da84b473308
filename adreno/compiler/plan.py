"""The launch plan of a lowered module: its tensors, the kernels each step launches with their sizes and argument
order, the OpenCL source of every program, the params, and a storage plan that lets dead intermediates share memory.

It is extracted from TVM's own lowering of each primitive function (`lower_primfunc`): the TIR pipeline is run
unchanged and the module is captured right after `SplitHostDevice`, where the host function still names its
buffers and launches each kernel with `call_ffi_kernel(name, <buffer data vars>, <grid extents>, <workgroup
extents>)`. So the kernels we run are the ones TVM would ship, and the sizes are TVM's.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict

import numpy as np

from . import local_arrays, private_arrays
from ..artifact.format import ImageSpec, KernelArg, KernelLaunch, Plan, Step, TensorSpec, kernel_path
from ..targets.devices import get_device
from ..errors import DynamicShapeError, ModelError, UnsupportedOpError
from ..targets.layout import LANES, tensor_image
from ..options import Memory, Precision
from ..texture import tir as texture_tir
from ..texture.tir import TextureLoweringError
from ..artifact.weights import QuantizedWeights, WinogradWeights, content_digest, stored_form


def bindings(func):
    for block in func.body.blocks:
        yield from block.bindings


def kernel_calls(lowered):
    """(binding, global var, PrimFunc) of every `call_tir` in the lowered module's `main`, in order."""
    import tvm

    call_tir = tvm.ir.Op.get("relax.call_tir")
    for binding in bindings(lowered["main"]):
        value = binding.value
        if isinstance(value, tvm.ir.expr.Call) and value.op == call_tir:
            yield binding, value.args[0], lowered[value.args[0]]


def extract_plan(lowered, tvm_target, memory: Memory = Memory.BUFFER, device=None,
                 precision: Precision = Precision.FP32, weights: WinogradWeights | None = None,
                 quantized: QuantizedWeights | None = None, store=None,
                 input_images: bool = False) -> tuple[Plan, dict[str, str], dict[str, np.ndarray]]:
    """Walk `main` of a lowered module into a launch plan, the OpenCL source per program, and what params.npz
    stores for each param (`adreno.artifact.weights`: a weight of `weights`, the Winograd-transformed ones, as its 3x3
    source; the weights of an fp16 compile as float16; a weight of `quantized` as its integer tensor).

    Equal constants are one param: Relax gives a weight it copies (an unrolled LSTM's recurrent weight, transposed
    once per time step; a weight two branches share) a constant per use, and the weight file would store each copy.
    A constant is keyed by its value (`content_digest`: shape, dtype, bytes) with what the kernels read it as (its
    scope) and what params.npz stores for it (its stored form), so one stored in another form stays its own param.

    `store` (an `adreno.compiler.lowered.LoweredFunctions`) keeps every function's lowering for the host library's
    build.

    Texture memory: every packed 5-D tensor (NCHW4c activation, OIHW4o weight) that fits the device's image
    limits is an OpenCL image (`TensorSpec.image`); one that does not, or whose producing kernel cannot write
    whole pixels, stays a buffer with the reason in `TensorSpec.fallback`. With `input_images` the inputs are images
    by the same rule: a kernel measured alone (`adreno.orchestrate.costs`) then reads what it reads in the model, where
    its inputs are other kernels' images."""
    import tvm

    textures = memory is Memory.TEXTURE
    if textures:
        device = device or get_device("adreno-740")

    def assign_image(spec: TensorSpec) -> None:
        if not textures:
            return
        image, reason = tensor_image(spec.shape, spec.dtype, spec.kind == "param", device, precision)
        if image is None:
            if len(spec.shape) == 5 and spec.shape[-1] == LANES:
                spec.fallback = reason
            return
        spec.scope = image.scope
        spec.image = asdict(image)

    call_tir = tvm.ir.Op.get("relax.call_tir")
    main = lowered["main"]
    tensors: dict[str, TensorSpec] = {}
    params: dict[str, np.ndarray] = {}
    param_of: dict[tuple, str] = {}  # (content digest, scope, stored form) of a constant -> its param
    values: dict[int, str] = {}  # id of a relax expr -> tensor name (or a tuple of names for tuples)
    steps: list[Step] = []
    programs: dict[str, str] = {}
    sources: dict[str, str] = {}
    lowered_funcs: dict[tuple, tuple[list[KernelLaunch], list[int], str, str]] = {}

    def tensor_of(expr) -> str:
        if isinstance(expr, tvm.ir.expr.GenericConst) or isinstance(expr, tvm.ir.expr.Constant):
            array = expr.value.numpy()
            spec = TensorSpec(f"param{len(params)}", list(array.shape), str(array.dtype), "param", "")
            assign_image(spec)
            half_pixels = spec.image is not None and spec.image["channel_type"] == "float16"
            stored, member = stored_form(array, precision is Precision.FP16, half_pixels,
                                         weights.source_of(array) if weights else None, quantized)
            key = (content_digest(array), spec.scope, stored)
            if key not in param_of:
                param_of[key], tensors[spec.name], params[spec.name] = spec.name, spec, member
                spec.stored = stored.to_json() if stored else None
            return param_of[key]
        try:
            return values[_expr_key(expr)]
        except KeyError:
            raise ModelError(f"unexpected expression in the lowered graph: {expr}") from None

    for var in main.params:
        shape, dtype = _tensor_type(var)
        tensors[var.name] = TensorSpec(var.name, shape, dtype, "input", "")
        if input_images:
            assign_image(tensors[var.name])
        values[_expr_key(var)] = var.name
    inputs = [v.name for v in main.params]

    for binding in bindings(main):
        var, value = binding.var, binding.value
        if isinstance(value, tvm.ir.expr.Call) and value.op == call_tir:
            gvar, args = value.args[0], [tensor_of(a) for a in value.args[1].fields]
            outs = _output_types(var)
            base = _unique(var.name, tensors)
            out_names = [base] if len(outs) == 1 else [_unique(f"{base}.{i}", tensors) for i in range(len(outs))]
            for name, (shape, dtype) in zip(out_names, outs):
                tensors[name] = TensorSpec(name, shape, dtype, "intermediate", "")
                assign_image(tensors[name])
            values[_expr_key(var)] = out_names[0] if len(outs) == 1 else tuple(out_names)
            func_name = gvar.name_hint
            step_args = args + out_names
            while True:
                scopes = tuple(tensors[n].scope for n in step_args) if textures else None
                key = (func_name, scopes)
                if key in lowered_funcs:
                    break
                try:
                    launches, workspaces, source = lower_primfunc(lowered[gvar], func_name, tvm_target, scopes,
                                                                  store)
                except TextureLoweringError as err:
                    demoted = [n for n in out_names if tensors[n].image is not None]
                    if not demoted:
                        raise
                    for n in demoted:
                        tensors[n].scope, tensors[n].image = "global", None
                        tensors[n].fallback = f"producer {func_name} cannot write whole pixels ({err})"
                    continue
                program = func_name if not scopes or all(sc == "global" for sc in scopes) \
                    else f"{func_name}__tex{sum(1 for k in lowered_funcs if k[0] == func_name)}"
                if program in programs:
                    program = f"{program}_{len(programs)}"
                lowered_funcs[key] = (launches, workspaces, source, program)
                programs[program] = kernel_path(short_name(program))
                sources[program] = source
                break
            launches, workspaces, _, program = lowered_funcs[key]
            steps.append(Step(func_name, program, _op_family(func_name), step_args, launches, workspaces))
        elif isinstance(value, tvm.ir.expr.TupleGetItem):
            values[_expr_key(var)] = values[_expr_key(value.tuple_value)][value.index]
        elif isinstance(value, tvm.ir.expr.Tuple):
            values[_expr_key(var)] = tuple(tensor_of(f) for f in value.fields)
        elif isinstance(value, tvm.ir.expr.Var):
            values[_expr_key(var)] = values[_expr_key(value)]
        else:
            raise UnsupportedOpError(f"cannot execute binding {var.name} = {type(value).__name__} in the launch plan")

    result = _result_value(values, main.body.body, tensor_of)
    outputs = list(result) if isinstance(result, tuple) else [result]
    for name in outputs:
        if tensors[name].kind == "intermediate":
            tensors[name].kind = "output"
    storage, images = plan_storage(tensors, steps, with_images=True)
    return Plan(inputs, outputs, tensors, storage, programs, steps, images=images), sources, params


def _result_value(values: dict, body, tensor_of):
    """The plan tensors of main's result. An output that is a constant (the model computes it from no input: a
    reduction over an empty axis, a table of anchors) is a param (`tensor_of`): stored with the weights and read
    back as the output, with no kernel to run."""
    if _expr_key(body) in values:
        return values[_expr_key(body)]
    fields = list(getattr(body, "fields", None) or [body])
    return tuple(values.get(_expr_key(f)) or tensor_of(f) for f in fields)


def _unique(name: str, taken) -> str:
    """Relax names are hints, not identifiers (two bindings may both be `lv6`): make tensor names unique."""
    if name not in taken:
        return name
    suffix = 1
    while f"{name}_{suffix}" in taken:
        suffix += 1
    return f"{name}_{suffix}"


def _expr_key(expr) -> int:
    return expr.__hash__()


def _tensor_type(var) -> tuple[list[int], str]:
    ty = var.ty
    try:
        return [int(d) for d in ty.shape.values], str(ty.dtype)
    except (AttributeError, TypeError):
        raise DynamicShapeError(f"{var.name} has no static shape ({ty}); give one with --input-shape") from None


def _output_types(var) -> list[tuple[list[int], str]]:
    ty = var.ty
    fields = getattr(ty, "fields", None)
    if fields is None:
        return [_tensor_type(var)]
    return [([int(d) for d in f.shape.values], str(f.dtype)) for f in fields]


_OP_FAMILIES = ("conv2d", "max_pool", "avg_pool", "adaptive_avg_pool", "matmul", "dense", "softmax", "mean",
                "layout_transform", "reshape", "transpose", "concatenate", "add", "multiply", "relu", "clip")


def _op_family(func_name: str) -> str:
    """A short op name for tables: the first known op in a (possibly fused) function name."""
    for family in _OP_FAMILIES:
        if family in func_name:
            return family
    return func_name.removeprefix("fused_").split("_")[0]


def plan_storage(tensors: dict[str, TensorSpec], steps: list[Step], with_images: bool = False):
    """Assign storage to tensors: inputs, outputs and params own theirs; intermediates reuse a freed storage
    block of at least their size once its previous tensor is dead (greedy, best fit). Image tensors get image
    storage ("i<n>"), reused only by a later image tensor of exactly the same image spec.
    Returns the storage dict (id -> bytes), plus the images (id -> image spec) when `with_images`."""
    images: dict[str, dict] = {}
    free_images: list[str] = []
    last_use: dict[str, int] = {}
    for index, step in enumerate(steps):
        for name in step.args:
            last_use[name] = index
    storage: dict[str, int] = {}
    free: list[str] = []
    for index, step in enumerate(steps):
        for name in step.args:
            spec = tensors[name]
            if spec.storage:
                continue
            if spec.image is not None:
                same = [i for i in free_images if images[i] == spec.image] if spec.kind == "intermediate" else []
                if same:
                    block = same[0]
                    free_images.remove(block)
                else:
                    block = f"i{len(images)}"
                    images[block] = dict(spec.image)
                    storage[block] = ImageSpec(**spec.image).nbytes
                spec.storage = block
                continue
            if spec.kind != "intermediate":
                spec.storage = _new_id(storage)
                storage[spec.storage] = spec.nbytes
                continue
            fitting = [s for s in free if storage[s] >= spec.nbytes]
            if fitting:
                block = min(fitting, key=storage.__getitem__)
                free.remove(block)
            elif free:  # grow the largest free block rather than allocate another
                block = max(free, key=storage.__getitem__)
                free.remove(block)
                storage[block] = spec.nbytes
            else:
                block = _new_id(storage)
                storage[block] = spec.nbytes
            spec.storage = block
        for name in set(step.args):
            spec = tensors[name]
            if spec.kind == "intermediate" and last_use[name] == index:
                (free_images if spec.image is not None else free).append(spec.storage)
    for spec in tensors.values():  # inputs/outputs never touched by a step (pass-through) still need storage
        if not spec.storage:
            spec.storage = _new_id(storage)
            storage[spec.storage] = spec.nbytes
    return (storage, images) if with_images else storage


def _new_id(storage) -> str:
    index = sum(1 for k in storage if k.startswith("s"))
    while f"s{index}" in storage:
        index += 1
    return f"s{index}"


class _SplitCapture:
    """Pass instrument that keeps the module as it is right after SplitHostDevice."""

    def __init__(self):
        self.module = None

    def run_after_pass(self, mod, info):
        if info.name.endswith("SplitHostDevice"):
            self.module = mod


def lower_primfunc(func, name: str, tvm_target, scopes=None,
                   store=None) -> tuple[list[KernelLaunch], list[int], str]:
    """Lower one scheduled PrimFunc with TVM's own TIR pipeline; return its kernel launches (in order),
    the byte sizes of the global workspaces it allocates, and the OpenCL source of its kernels.

    `scopes` (one memory scope per parameter) puts parameters in texture scopes and lowers with the texture TIR
    pipeline (`adreno.texture`); a texture store that is not one float4 per pixel raises TextureLoweringError, a
    private array beyond a register tile `private_arrays.PrivateArrayError`, more local memory than the target's
    work-group holds `local_arrays.LocalMemoryError`. `store` (`adreno.compiler.lowered`) keeps the
    pipeline's result, keyed by the function as it entered the pipeline."""
    import tvm

    capture = tvm.ir.instrument.pass_instrument(_SplitCapture)()
    func, pipeline_name = texture_tir.for_scopes(func, scopes, tvm_target)
    textured = pipeline_name != "s_tir"
    symbol = short_name(name)  # the kernels' names: PoCL fails to link one named past about 250 characters
    module = tvm.IRModule({symbol: func.with_attr("global_symbol", symbol)})
    module = tvm.tirx.transform.BindTarget(tvm_target)(module)
    pipeline = tvm.tirx.get_tir_pipeline(pipeline_name)[0]
    # the device finalize the host library's build runs too, for buffer and texture kernels alike: TVM's, then
    # exact float literals (`adreno.compiler.float_literals`)
    finalize_device = tvm.tirx.get_tir_pipeline(texture_tir.register_pipeline())[2]
    with tvm.transform.PassContext(instruments=[capture]):
        result = pipeline(module)
    split = capture.module
    host = split[symbol]
    device_funcs = {gv.name_hint: f for gv, f in split.functions.items() if gv.name_hint != symbol}
    alias: dict[int, object] = {}  # a declared buffer view -> the buffer it views (params, workspaces)

    def root(expr):
        var = expr.args[0] if getattr(getattr(expr, "op", None), "name", "") == "tirx.buffer_data" else expr
        return alias.get(var.__hash__(), var)

    param_of = {p.__hash__(): i for i, p in enumerate(host.params)}
    # a topi kernel written with ir_builder (scatter, scatter_nd) declares its inputs with a symbolic elem_offset and
    # takes it as a kernel argument: every plan tensor starts its storage (offset 0), as TVM's runtime passes it
    zero_offset = {p.elem_offset.__hash__() for p in host.params
                   if isinstance(getattr(p, "elem_offset", None), tvm.tirx.Var)}
    workspaces: list[int] = []
    workspace_of: dict[int, int] = {}
    launches: list[KernelLaunch] = []

    def visit(stmt):
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            for s in stmt.seq:
                visit(s)
        elif kind == "DeclBuffer" and stmt.data is not None:
            alias[stmt.buffer.__hash__()] = root(stmt.data)
        elif kind == "AllocBuffer":
            buf = stmt.buffer
            if str(buf.scope()) not in ("global", ""):
                raise UnsupportedOpError(f"{name}: host allocation in scope {buf.scope()} is not supported")
            workspace_of[buf.__hash__()] = len(workspaces)
            workspaces.append(int(np.prod([int(d) for d in buf.shape])) * np.dtype(str(buf.dtype)).itemsize)
        elif kind == "Evaluate" and isinstance(stmt.value, tvm.ir.expr.Call) \
                and getattr(stmt.value.op, "name", "").endswith("call_ffi_kernel"):
            launches.append(_kernel_launch(stmt.value, device_funcs, param_of, workspace_of, root, zero_offset))
        elif kind in ("For", "While"):
            raise UnsupportedOpError(f"{name}: kernels launched inside a host loop are not supported")
        for attr in ("body", "then_case", "else_case"):
            child = getattr(stmt, attr, None) if kind != "SeqStmt" else None
            if child is not None:
                visit(child)

    visit(host.body)
    device_module = tvm.IRModule({gv: f for gv, f in split.functions.items() if gv.name_hint != symbol})
    private_arrays.check(device_module)
    for kernel in device_module.functions.values():
        local_arrays.check(kernel, int(tvm_target.attrs["max_shared_memory_per_block"]))
    if textured:
        texture_tir.check_texture_stores(device_module)
    device_module = finalize_device()(device_module)
    source = tvm.get_global_func("target.build.opencl")(device_module, tvm_target).inspect_source()
    if store is not None:
        store.put(module[symbol], result)
    return launches, workspaces, source


def _kernel_launch(call, device_funcs, param_of, workspace_of, root, zero_offset) -> KernelLaunch:
    import tvm

    kernel = str(call.args[0].value)
    launch_params = [str(p) for p in device_funcs[kernel].attrs["tirx.kernel_launch_params"]]
    n_extents = len(launch_params)
    rest = list(call.args[1:])
    arg_exprs, extents = rest[: len(rest) - n_extents], [int(e) for e in rest[len(rest) - n_extents:]]
    args = []
    for expr in arg_exprs:
        key = root(expr).__hash__()
        if key in param_of:
            args.append(KernelArg(arg=param_of[key]))
        elif key in workspace_of:
            args.append(KernelArg(workspace=workspace_of[key]))
        elif isinstance(expr, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
            args.append(KernelArg(scalar=expr.value, dtype=str(expr.dtype)))
        elif key in zero_offset:
            args.append(KernelArg(scalar=0, dtype=str(expr.ty)))
        else:
            raise UnsupportedOpError(f"kernel {kernel}: cannot map argument {expr} to a tensor")
    groups, local, dyn_local = [1, 1, 1], [1, 1, 1], 0
    for tag, extent in zip(launch_params, extents):
        if tag.startswith("blockIdx."):
            groups["xyz".index(tag[-1])] = extent
        elif tag.startswith("threadIdx."):
            local["xyz".index(tag[-1])] = extent
        elif tag == "tirx.use_dyn_shared_memory":
            dyn_local = extent
    dims = max(1, max(("xyz".index(t[-1]) + 1 for t in launch_params if t[:-1] in ("blockIdx.", "threadIdx.")),
                      default=1))
    return KernelLaunch(kernel, args, [g * w for g, w in zip(groups, local)][:dims], local[:dims], dyn_local)


def short_name(program: str) -> str:
    """The program's name, or for a name past what file systems take (255 bytes; a fusion of many ops, e.g. the 25
    strided slices of a MaxPool's argmax taps, or an unrolled LSTM step) its start and a digest of the whole: the
    kernel files' names and the kernels' own (PoCL fails to link a kernel named past about 250 characters)."""
    if len(program) <= 120:
        return program
    return f"{program[:100]}_{hashlib.sha256(program.encode()).hexdigest()[:16]}"
