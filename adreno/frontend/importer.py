"""Model import: ONNX (a file, a ModelProto, or a bundled zoo name) -> Relax with weights as constants.

Everything a user can get wrong about a model is checked here, before TVM sees it, so the error names the
file, the input, the dimension or the node."""

from __future__ import annotations

import contextlib
import gc
import io
import math
import os
import warnings
from pathlib import Path

from . import decompose, index_guards, old_opsets, one_hot, rewrites, scatter_nd, upsampling
from .constfold import prepare
from .onnx_reading import attributes, opset
from .quantized import dequantize
from ..errors import TVM_ERRORS, DynamicShapeError, ModelError, UnsupportedOpError
from ..support.identifiers import identifiers
from ..support.native_log import quiet_stderr
from ..support.paths import regular_file


def load_model(model) -> tuple:
    """Return (ModelProto, display name) for a zoo name, a path to an .onnx file, or a ModelProto."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        check_declared(model, model.graph.name or "model")
        return model, model.graph.name or "model"
    from . import zoo  # inside: loads onnx at import

    text = str(model)
    if text in zoo.MODELS:
        return zoo.get_model(text), text
    path = Path(os.fspath(model))
    if not path.exists():
        known = ", ".join(sorted(zoo.MODELS))
        raise ModelError(f"{path}: no such file, and not a bundled model (bundled: {known})")
    regular_file(path, "model", ModelError)
    from google.protobuf.message import DecodeError

    try:
        proto = onnx.load(str(path))
    except onnx.checker.ValidationError as err:  # external data that escapes the model's folder, is missing, ...
        raise ModelError(f"{path}: its external weight data cannot be read: {str(err).splitlines()[0]}") from None
    except (DecodeError, ValueError, OSError) as err:  # not a protobuf / not a model / unreadable
        raise ModelError(f"{path} is not a valid ONNX model: {type(err).__name__}: {err}") from None
    if not proto.graph.node:
        raise ModelError(f"{path} is not a valid ONNX model: its graph has no nodes")
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as err:
        raise ModelError(f"{path} is not a valid ONNX model: {str(err).splitlines()[0]}") from None
    check_declared(proto, str(path))
    return proto, path.stem


def check_declared(proto, where: str) -> None:
    """Refuse what onnx's checker lets through but no model can mean: a graph with no outputs (an artifact that
    computes nothing, a run that shows nothing) and an opset no ONNX release has defined (its ops' meaning is
    unknown, and the importer would read them as the newest it knows)."""
    import onnx

    if not proto.graph.output:
        raise ModelError(f"{where} is not a valid ONNX model: its graph declares no outputs")
    newest = onnx.defs.onnx_opset_version()
    declared = opset(proto, newest)
    if not 1 <= declared <= newest:
        raise ModelError(f"{where} imports opset {declared} of the ONNX domain; the ONNX releases this adreno "
                         f"reads define opsets 1..{newest}")


def graph_inputs(model) -> list:
    """The real inputs of an ONNX graph (initializers listed as inputs are weights, not inputs)."""
    weights = {init.name for init in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in weights]


def input_shapes(model, overrides: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    """Static shape of every graph input, with `overrides` (from --input-shape) applied.

    A dynamic dimension without an override is a `DynamicShapeError` naming the input and the dimension."""
    overrides = dict(overrides or {})
    inputs = graph_inputs(model)
    unknown = set(overrides) - {i.name for i in inputs}
    if unknown:
        raise ModelError(f"--input-shape names {sorted(unknown)}, but the model's inputs are "
                         f"{[i.name for i in inputs]}")
    shapes = {}
    for inp in inputs:
        if inp.name in overrides:
            shapes[inp.name] = _within_int32(inp.name, _override(inp, [int(d) for d in overrides[inp.name]]))
            continue
        dims = inp.type.tensor_type.shape.dim
        shape = []
        for axis, dim in enumerate(dims):
            if declared_size(dim) is not None:
                shape.append(dim.dim_value)
            else:
                label = dim.dim_param or "?"
                example = ",".join(str(d.dim_value) if d.HasField("dim_value") else "1" for d in dims)
                raise DynamicShapeError(
                    f"input {inp.name!r} has a dynamic dimension {axis} ({label!r}); give a static shape, e.g. "
                    f"--input-shape {inp.name}:{example}")
        shapes[inp.name] = _within_int32(inp.name, shape)
    return shapes


def declared_size(dim) -> int | None:
    """A dimension's static size, or None where it is dynamic: a name, nothing, or a negative value (as
    paddle2onnx writes -1). 0 is static: an empty input (adreno.frontend.empty)."""
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None


INT32_MAX = 2 ** 31 - 1  # kernels index tensors with 32-bit ints: a larger input would wrap around


def _within_int32(name: str, shape: list[int]) -> list[int]:
    """`shape` of input `name`, static or from --input-shape, refused past what 32-bit indexing holds."""
    if math.prod(shape) > INT32_MAX:
        raise ModelError(f"input {name!r} of shape {shape} has {math.prod(shape)} elements, more than 32-bit "
                         f"indexing holds ({INT32_MAX})")
    return shape


def _override(inp, shape: list[int]) -> list[int]:
    """An --input-shape for `inp`, refused unless it only fills the model's dynamic dimensions with sizes >= 0:
    silently replacing a static dimension would compile another model."""
    where = f"--input-shape {inp.name}:{','.join(map(str, shape))}"
    if any(d < 0 for d in shape):  # 0 is allowed: an empty input (adreno.frontend.empty)
        raise ModelError(f"{where}: a dimension cannot be negative")
    tensor = inp.type.tensor_type
    if not tensor.HasField("shape"):  # the model says nothing about this input's shape: the override is it
        return shape
    declared = [declared_size(d) for d in tensor.shape.dim]
    model_shape = ",".join("?" if d is None else str(d) for d in declared)
    if len(declared) != len(shape) or any(d is not None and d != s for d, s in zip(declared, shape)):
        raise ModelError(f"{where}: the model's input is {model_shape} (? dynamic); --input-shape may only fix "
                         "the dynamic dimensions")
    return shape


def check_supported_ops(model) -> None:
    """Raise `UnsupportedOpError` naming the first node whose op the ONNX importer does not know."""
    from tvm.relax.frontend.onnx import onnx_frontend

    known = set(onnx_frontend._get_convert_map()) | {"Constant", "If", *decompose.RECURRENT_OPS}
    for index, node in enumerate(model.graph.node):
        if node.op_type not in known:
            raise UnsupportedOpError(f"operator {node.op_type} (node {node.name or f'#{index}'}) is not supported "
                                     "by the ONNX importer of TVM 0.27")


# (op, what TVM 0.27's importer would silently get wrong or crash on, the test on the node's attributes and outputs)
UNSUPPORTED_FORMS = (
    ("BatchNormalization", "outputs running statistics outside training mode (opset < 14); export the model for "
     "inference (PyTorch: model.eval())", lambda attrs, outputs: not attrs.get("training_mode", 0) and outputs > 1),
    ("Resize", "uses an unknown coordinate_transformation_mode; use half_pixel, half_pixel_symmetric, "
     "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize",
     lambda attrs, outputs: attrs.get("coordinate_transformation_mode", b"half_pixel") not in (
         b"half_pixel", b"half_pixel_symmetric", b"pytorch_half_pixel", b"align_corners", b"asymmetric",
         b"tf_half_pixel_for_nn", b"tf_crop_and_resize")),
    ("Upsample", "is opset 1's experimental form (height_scale, width_scale), which neither TVM nor onnxruntime "
     "runs; convert the model to opset 9 (onnx.version_converter)",
     lambda attrs, outputs: "height_scale" in attrs or "width_scale" in attrs),
)


def check_supported_forms(model) -> None:
    """Raise `UnsupportedOpError` naming the first node in a form of its op that the importer would get wrong."""
    for index, node in enumerate(model.graph.node):
        for op, problem, applies in UNSUPPORTED_FORMS:
            if node.op_type != op:
                continue
            if applies(attributes(node), sum(1 for name in node.output if name)):
                raise UnsupportedOpError(f"node {node.name or f'#{index}'} ({op}) {problem}")


def to_relax(model, overrides: dict[str, list[int]] | None = None, empty=None, quantized=None, guarded=None):
    """Import an ONNX model into a Relax IRModule whose weights are bound as constants (so weight
    preprocessing such as transposes folds at compile time instead of running on the phone).

    The importer sees the model as `constfold.prepare` leaves it: static input shapes, shape subgraphs folded
    to constants, initializers no longer listed as inputs. Empty outputs are refused, or, with an
    `empty.EmptyTensors` given, recorded there and left out (None when no output is left to compute).
    `quantized` (an `adreno.artifact.weights.QuantizedWeights`) collects the integer weights of a quantized model. With
    `guarded` (an `index_guards.GuardedNodes`) given, run-time indices are clamped into their tensor and checked,
    the flags an extra output (`index_guards.OUTPUT`) and the nodes recorded in `guarded`."""
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    shapes = input_shapes(model, overrides)
    dequantized = dequantize(model)  # first: the op check and constfold know no com.microsoft op
    model = dequantized.model
    for weight in dequantized.weights if quantized is not None else ():
        quantized.record(weight.values, weight.scale, weight.zero_point, weight.axis, weight.integer)
    check_supported_ops(model)
    check_supported_forms(model)
    model = prepare(model, shapes, empty)
    check_supported_ops(model)  # again: the nodes of the If branches that `prepare` inlined were not checked
    check_supported_forms(model)
    check_value_sized_ops(model)  # after folding: a NonZero of constants is a constant now
    if not model.graph.output:
        return None
    shapes = {name: shape for name, shape in shapes.items() if name not in (empty.inputs if empty else ())}
    inferred = rewrites.InferredShapes(shapes)  # shape inference once for the rewrites, where one needs it
    if guarded is not None:
        model = index_guards.guard(model, guarded)
    model = scatter_nd.rewrite(model)  # after the guards: its row indices are in range by construction
    model = one_hot.rewrite(model, inferred)
    model = upsampling.rewrite(rewrites.rewrite(model, inferred), inferred)
    model = old_opsets.current_forms(decompose.decompose(model, inferred))
    model, shapes = identifiers(model, shapes)  # kernel argument names: `gpu_0/data_0` -> `gpu_0_data_0`
    failure = None
    # the importer prints "Error converting operator ..." on stdout before it raises: our error says it in one line
    with quiet_stderr(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # renamings, unknown dimensions: about the graph we give it, static here
        try:
            mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=True)
        except (*TVM_ERRORS, KeyError, IndexError, AttributeError, AssertionError) as err:
            message = str(err).strip() or "no message"  # a bare `assert` in a converter has none
            failure = f"the ONNX importer failed: {type(err).__name__}: {message.splitlines()[0]}"
        gc.collect()  # the failed import's BlockBuilder warns when destroyed: let that happen while stderr is quiet
    if failure:
        raise ModelError(failure)
    check_static_sizes(mod)
    mod, params = relax.frontend.detach_params(mod)
    weights = params.get("main", [])
    names = [v.name for v in mod["main"].params[len(mod["main"].params) - len(weights):]]
    mod = relax.transform.BindParams("main", dict(zip(names, weights)))(mod)
    # BatchNorm after a conv folds into the conv's weights and a bias, so the fused kernel keeps its activation.
    # A reshape of a reshape is one reshape, and one to its input's shape none: FuseOps would otherwise fuse a chain
    # of them (LeViT's `reshape_as`: Reshape(Flatten(x), Shape(x)) per block) into one kernel whose index
    # arithmetic, unravelled and ravelled once per link, grows exponentially (9 links: 40 s, 11: past 200 s, 4.6 GB).
    return relax.transform.RemoveRedundantReshape()(relax.transform.FoldBatchnormToConv2D()(mod))


# ops whose output's size is counted from the input's values: TVM's importer gives NonZero's a symbolic dimension
# and pads NonMaxSuppression's to its largest size (so a run would differ from onnxruntime's in shape)
VALUE_SIZED_OPS = ("NonZero", "NonMaxSuppression", "Unique", "Compress")
STATIC_SIZES_HINT = ("an artifact fixes every size at compile time; run this step on the host, or export the model "
                     "without it (a detector's NMS: e.g. Ultralytics' export(nms=False))")


def check_value_sized_ops(model) -> None:
    """Refuse, in one line, the first node (left after constant folding) whose output's size is counted from the
    input's values: an artifact fixes every buffer, image and launch at compile time."""
    for index, node in enumerate(model.graph.node):
        if node.op_type in VALUE_SIZED_OPS:
            raise ModelError(f"node {node.name or f'#{index}'} ({node.op_type}): the size of its output is counted "
                             f"from the input's values; {STATIC_SIZES_HINT}")


def check_static_sizes(mod) -> None:
    """Refuse, in one line, an imported graph that sizes a value from the input's values anyway (an op converted
    that way that `VALUE_SIZED_OPS` does not list): the schedules and the launch plan assume static sizes."""
    from tvm import relax, tirx

    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            ty = binding.var.ty
            dims = getattr(ty.shape, "values", None) if isinstance(ty, relax.TensorType) else ()
            if dims is None or any(not isinstance(d, tirx.IntImm) for d in dims):
                raise ModelError(f"the imported model sizes {binding.var.name} from the input's values "
                                 f"({ty.shape}); {STATIC_SIZES_HINT}")


def conv_nodes(model) -> list[tuple]:
    """Every Conv node of an ONNX model with static shapes, in graph order, as (node, attributes, input shape,
    weight shape, output shape) from ONNX shape inference: what benchmarks and occupancy tables list per layer."""
    import onnx

    model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(graph.value_info) + list(graph.input) + list(graph.output)}
    weights = {t.name: list(t.dims) for t in graph.initializer}
    return [(node, attributes(node), shapes[node.input[0]],
             weights[node.input[1]], shapes[node.output[0]]) for node in graph.node if node.op_type == "Conv"]
