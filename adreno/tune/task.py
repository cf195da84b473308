"""Tuning tasks: the distinct tunable kernels of a model, each with its search space, weighted by call count.

A task carries its primitive function as TVMScript text, so build workers in other processes can rebuild it
(TVM objects do not pickle). With `layouts`, every Winograd-eligible conv is a `LayoutTask` instead: its space
joins the weight layout (direct OIHW/OIHW4o or Winograd-transformed) with the knobs of the chosen layout (AL-Ansor).
With texture memory the tasks come from the texture-lowered model (packed convs of `conv2d_texture`), and each
task carries the OpenCL image every parameter of its function gets in the artifact, so that candidates are built
and measured on images, as `adreno compile` runs them."""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from functools import cached_property

from ..errors import AdrenoError
from ..records import layout_key, layout_workload, packed_workload
from .space import SearchSpace


@dataclass
class Task:
    """One distinct kernel workload of a model."""

    key: str  # workload key: op, shapes, dtypes, strides, padding (the family's `workload_key`)
    family: str  # schedule module under adreno.schedules
    func_name: str
    script: str  # TVMScript of the unscheduled, fused PrimFunc
    n_outputs: int
    weight: int = 1  # how many times the model calls it
    target_name: str = "adreno-740"
    names: list[str] = field(default_factory=list)  # every function name sharing this workload
    images: list = field(default_factory=list)  # per parameter (outputs last): its ImageSpec dict, None for a buffer

    @property
    def scopes(self) -> list[str] | None:
        """The memory scope of every parameter (`lower_primfunc`'s `scopes`); None when all are buffers."""
        if not any(self.images):
            return None
        return [image["scope"] if image else "global" for image in self.images]

    @property
    def precision(self) -> str:
        """"fp16" when the task is measured on half-float images, else "fp32" (its records say so)."""
        return "fp16" if any(image and image["channel_type"] == "float16" for image in self.images) else "fp32"

    @property
    def module(self):
        return importlib.import_module(f"adreno.schedules.{self.family}")

    def func(self):
        import tvm

        return tvm.script.from_source(self.script)

    @cached_property
    def workload(self):
        return self.module.workload(self.func())

    @cached_property
    def flops(self) -> int:
        return int(getattr(self.workload, "flops", 0))

    def space(self, target) -> SearchSpace:
        """The family's knobs, minus the configs its validator refuses for this workload and target."""
        module, workload = self.module, self.workload

        def valid(config: dict) -> bool:
            try:
                module.check_config(workload, config, target)
            except ValueError:
                return False
            return True

        return SearchSpace(dict(module.KNOBS), valid)

    def default_config(self, target) -> dict:
        """What compiling without records uses."""
        return self.module.default_config(self.workload, target)

    def seed_configs(self, target) -> list[dict]:
        """Configs measured in the task's first round, before the strategy proposes any."""
        return [self.default_config(target)]


LAYOUT = "conv2d_layout"  # the family of layout tasks (not a schedule module: a layout task spans two)
TILES = (0, 2, 4)  # 0: direct conv, OIHW weight; m: Winograd F(m x m, 3 x 3), weight transformed to (m+2)^2 x O x C


@dataclass
class LayoutTask(Task):
    """A Winograd-eligible conv (3x3, stride 1, groups 1, constant weight) whose weight layout is a knob: `tile` 0
    keeps the direct conv (the knobs of `conv2d_direct`, or of `conv2d_texture` in texture memory, apply), 2 or 4
    rewrites it into Winograd stages (the `conv2d_winograd` stage knobs apply; packed stages in texture memory). Its
    key is the one `adreno.winograd.choose_tile` reads (`adreno.records.layout_key`); a candidate is measured as the conv's
    whole pipeline, built from a one-conv module (`measure.build_candidate`; in texture memory with the packing of
    its NCHW input and the unpacking of its output, the same for every layout)."""

    memory: str = "buffer"

    @cached_property
    def workload(self):
        return layout_workload(self.key)

    @property
    def _direct(self):
        """(direct family module, the workload it sees)."""
        from ..schedules import conv2d_direct, conv2d_texture

        if self.memory == "texture":
            return conv2d_texture, packed_workload(self.workload)
        return conv2d_direct, self.workload

    def space(self, target) -> SearchSpace:
        """`tile` joined with the knobs of the direct schedule (active at tile 0) and of the Winograd stages
        (active at tile 2 and 4), minus what the schedules' validators refuse."""
        from ..schedules import conv2d_winograd

        direct, direct_wl = self._direct
        packed = self.memory == "texture"
        stage_knobs = {k: v for k, v in conv2d_winograd.KNOBS.items() if k != "tile"}

        def valid(config: dict) -> bool:
            m = config["tile"]
            try:
                if m == 0:
                    direct.check_config(direct_wl, {k: config[k] for k in direct.KNOBS}, target)
                for stage in conv2d_winograd.stage_workloads(self.workload, m, packed) if m else ():
                    knobs = conv2d_winograd.STAGE_KNOBS[conv2d_winograd.base_stage(stage[0])]
                    conv2d_winograd.check_config(stage, {k: config[k] for k in knobs}, target)
            except ValueError:
                return False
            return True

        conditions = {**{k: ("tile", (0,)) for k in direct.KNOBS},
                      **{k: ("tile", TILES[1:]) for k in stage_knobs}}
        return SearchSpace({"tile": list(TILES), **direct.KNOBS, **stage_knobs}, valid, conditions)

    def layout_default(self, tile: int, target) -> dict:
        """The default knobs of one layout."""
        from ..schedules import conv2d_winograd

        if tile == 0:
            direct, direct_wl = self._direct
            return {"tile": 0, **direct.default_config(direct_wl, target)}
        return conv2d_winograd.layout_default(self.workload, tile, target, packed=self.memory == "texture")

    def default_config(self, target) -> dict:
        """The layout the fixed rule of `--winograd auto` picks, with its default knobs."""
        from ..winograd import select_tile

        return self.layout_default(select_tile(self.workload), target)

    def seed_configs(self, target) -> list[dict]:
        """Every layout's defaults, the rule's first: the search starts from all three layouts."""
        default = self.default_config(target)
        return [default] + [self.layout_default(t, target) for t in TILES if t != default["tile"]]


def _images(func, args, n_outputs: int, device, precision: str) -> list:
    """The image (ImageSpec dict) or None (buffer) of each parameter of `func` called with `args`, chosen as
    `compile.extract_plan` chooses them: constants prefer the weight scope, everything else the activation ones."""
    import tvm

    from ..layout import choose_image

    kinds = ["param" if isinstance(a, tvm.ir.expr.Constant) else "act" for a in args] + ["act"] * n_outputs
    storage = "float16" if precision == "fp16" else "float32"
    images = []
    for param, kind in zip(func.params, kinds):
        image, _ = choose_image([int(d) for d in param.shape], str(param.dtype), kind, device, storage)
        images.append(None if image is None else asdict(image))
    return images


def extract_tasks(model, target_name: str = "adreno-740", input_shapes: dict | None = None,
                  layouts: bool = False, memory: str = "buffer", precision: str = "fp32") -> list[Task]:
    """The tunable kernels of `model`: one task per distinct workload key, heaviest (most calls x flops) first.
    With `layouts`, a Winograd-eligible conv is a `LayoutTask` (keyed by its conv workload and memory) instead of a
    kernel task of `conv2d_direct` / `conv2d_texture` (not with fp16 images). With memory "texture" the model is
    lowered as `adreno compile` lowers it by default (packed convs are `conv2d_texture` tasks) and each task records
    its parameters' images (`Task.images`; `precision` "fp16": half-float images)."""
    from .. import schedules, winograd
    from ..compile import kernel_calls, lower_relax
    from ..frontend import load_model, to_relax
    from ..target import get_device, tvm_target

    if memory not in ("buffer", "texture"):
        raise AdrenoError(f"--memory must be 'texture' or 'buffer', not {memory!r}")
    if precision not in ("fp32", "fp16") or (precision == "fp16" and memory != "texture"):
        raise AdrenoError(f"--precision {precision}: fp32, or fp16 (half-float images) with --memory texture")
    onnx_model, _ = load_model(model)
    relax_mod = to_relax(onnx_model, input_shapes)
    # Winograd-eligible convs, by the workload their direct family sees (texture: channels padded to 4); with half
    # images a layout candidate's reference check (an NCHW fp32 input through a half image) is not exact: none
    eligible = {} if not layouts or precision == "fp16" else {
        packed_workload(wl) if memory == "texture" else wl: wl for wl in winograd.eligible_workloads(relax_mod)}
    direct_family = "conv2d_texture" if memory == "texture" else "conv2d_direct"
    lowered = lower_relax(relax_mod, tvm_target(target_name), schedules="none", memory=memory)
    device = get_device(target_name)
    tasks: dict[str, Task] = {}
    for binding, gvar, func in kernel_calls(lowered):
        for family in schedules.FAMILIES:
            module = importlib.import_module(f"adreno.schedules.{family}")
            key = module.workload_key(func)
            if key is None:
                continue
            kind, extra = Task, {}
            if eligible and family == direct_family and (wl := module.workload(func)) in eligible:
                kind, family, key = LayoutTask, LAYOUT, layout_key(eligible[wl], memory)
                extra = {"memory": memory}
            if key in tasks:
                tasks[key].weight += 1
                if gvar.name_hint not in tasks[key].names:
                    tasks[key].names.append(gvar.name_hint)
            else:
                fields = getattr(binding.var.ty, "fields", None)
                n_outputs = len(fields) if fields else 1
                images = _images(func, binding.value.args[1].fields, n_outputs, device, precision) \
                    if memory == "texture" and kind is Task else []
                tasks[key] = kind(key, family, gvar.name_hint, func.script(), n_outputs,
                                  target_name=target_name, names=[gvar.name_hint], images=images, **extra)
            break
    if not tasks:
        raise AdrenoError("the model has no kernel any of our schedules can tune")
    return sorted(tasks.values(), key=lambda t: t.weight * t.flops, reverse=True)
