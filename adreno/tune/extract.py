"""Task extraction: the distinct tunable kernels of a model, lowered as `adreno compile` lowers it, one task per
workload key, weighted by call count. With `layouts`, every Winograd-eligible conv is a `LayoutTask` instead."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict

import numpy as np

from .. import schedules
from ..compiler import winograd
from ..compile import lower_relax
from ..errors import AdrenoError
from ..frontend.bind import bind_inputs
from ..frontend.importer import load_model, to_relax
from ..targets.layout import tensor_image
from ..options import CompileOptions, Memory, Precision, Schedules
from ..compiler.plan import kernel_calls
from ..records import default_memory, layout_key, packed_workload
from ..schedules.context import ScheduleContext
from .layout_task import LAYOUT, LayoutTask
from .task import Task


def _images(func, args, n_outputs: int, device, precision: Precision) -> list:
    """The image (ImageSpec dict) or None (buffer) of each parameter of `func` called with `args`, as the launch
    plan gives them (`layout.tensor_image`)."""
    import tvm

    constant = [isinstance(a, tvm.ir.expr.Constant) for a in args] + [False] * n_outputs
    images = []
    for param, const in zip(func.params, constant):
        image, _ = tensor_image([int(d) for d in param.shape], str(param.dtype), const, device, precision)
        images.append(None if image is None else asdict(image))
    return images


BUFFER_TASKS = CompileOptions(memory=Memory.BUFFER)  # the API's default: tune the buffer kernels


def extract_tasks(model, options: CompileOptions = BUFFER_TASKS, layouts: bool = False,
                  bind: Mapping[str, np.ndarray] | None = None) -> list[Task]:
    """The tunable kernels of `model`: one task per distinct workload key, heaviest (most calls x flops) first.
    With `layouts`, a Winograd-eligible conv is a `LayoutTask` (keyed by its conv workload and memory) instead of a
    kernel task of `conv2d_direct` / `conv2d_texture` (not with fp16 images). `options` (target, input shapes,
    memory, precision, image_max) are what `adreno compile` gets: in texture memory the model is lowered as compile
    lowers it (packed convs are `conv2d_texture` tasks) and each task records its parameters' images (`Task.images`,
    within the device's image limits as `CompileOptions.device` caps them; precision fp16: half-float images).
    `bind`: graph inputs baked in, as `compile_model(..., bind=)` takes."""
    options = options.resolved(default_memory(()))
    memory, precision, target_name = options.memory, options.precision, options.target
    onnx_model, _ = load_model(model)
    relax_mod = to_relax(bind_inputs(onnx_model, bind)[0], options.input_shapes)
    # Winograd-eligible convs, by the workload their direct family sees (texture: channels padded to 4); with half
    # images a layout candidate's reference check (an NCHW fp32 input through a half image) is not exact: none
    textures = memory is Memory.TEXTURE
    eligible = {} if not layouts or precision is Precision.FP16 else {
        packed_workload(wl) if textures else wl: wl for wl in winograd.eligible_workloads(relax_mod)}
    direct_family = "conv2d_texture" if textures else "conv2d_direct"
    device = options.device()  # as compile's: the target's, its image limits capped at --image-max
    ctx = ScheduleContext.for_device(device, host=options.host, staging=options.staging)
    lowered = lower_relax(relax_mod, ctx, schedules=Schedules.NONE, memory=memory)
    tasks: dict[str, Task] = {}
    for binding, gvar, func in kernel_calls(lowered):
        for family in schedules.FAMILIES:
            key = family.workload_key(func)
            if key is None:
                continue
            kind, name, extra = Task, family.name, {}
            if eligible and family.name == direct_family and (wl := family.workload(func)) in eligible:
                kind, name, key = LayoutTask, LAYOUT, layout_key(eligible[wl], memory)
                extra = {"memory": memory}
            if key in tasks:
                tasks[key].weight += 1
                if gvar.name_hint not in tasks[key].names:
                    tasks[key].names.append(gvar.name_hint)
            else:
                fields = getattr(binding.var.ty, "fields", None)
                n_outputs = len(fields) if fields else 1
                images = _images(func, binding.value.args[1].fields, n_outputs, device, precision) \
                    if textures and kind is Task else []
                tasks[key] = kind(key, name, gvar.name_hint, func.script(), n_outputs,
                                  target_name=target_name, names=[gvar.name_hint], images=images,
                                  staging=options.staging, precision=precision, **extra)
            break
    if not tasks:
        raise AdrenoError("the model has no kernel any of our schedules can tune")
    return sorted(tasks.values(), key=lambda t: t.weight * t.flops, reverse=True)


def extract_shape_sets(model, options: CompileOptions, shape_sets: list[dict[str, list[int]]], layouts: bool = False,
                       bind: Mapping[str, np.ndarray] | None = None) -> list[Task]:
    """The tunable kernels of `model` at every shape set (`adreno.artifact.shape_sets`: what one artifact of several
    sets compiles): `extract_tasks` of each set, a workload several sets call once, its calls summed, heaviest first.
    The records are keyed by workload, so the compile of every set finds its kernels' records."""
    from dataclasses import replace

    merged: dict[str, Task] = {}
    for shapes in shape_sets:
        for task in extract_tasks(model, replace(options, input_shapes=shapes), layouts=layouts, bind=bind):
            kept = merged.setdefault(task.key, task)
            if kept is not task:
                kept.weight += task.weight
                kept.names.extend(n for n in task.names if n not in kept.names)
    return sorted(merged.values(), key=lambda t: t.weight * t.flops, reverse=True)
