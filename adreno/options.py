"""What a compile (or a tuning run, which must compile the kernels the same way) is for: one frozen, checked object.

`CompileOptions` is checked once, when it is made: every consumer (the compiler, task extraction, the CLI) can then
trust it. The enums below are the only lists of legal values; the CLI's `choices` come from them (`enum_argument`),
and a mode travels as its enum member from the command line to the kernel: code compares members (`is`), never
their strings. They are `StrEnum`s, so JSON (records, plan.json, manifest.json) writes them as their values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from .targets.devices import AdrenoDevice, get_device
from .errors import AdrenoError


class Memory(enum.StrEnum):
    """Where the conv-centred parts of a model live: OpenCL images (NCHW4c, the default) or plain buffers."""

    TEXTURE = "texture"
    BUFFER = "buffer"


class Precision(enum.StrEnum):
    """How images store their pixels: fp32, or fp16 (CL_HALF_FLOAT; arithmetic stays fp32; textures only)."""

    FP32 = "fp32"
    FP16 = "fp16"

    @property
    def storage_dtype(self) -> str:
        return "float16" if self is Precision.FP16 else "float32"


class Winograd(enum.StrEnum):
    """Winograd F(m x m, 3 x 3) for 3x3 stride-1 convs: off, the selection rule, or forced F(2x2) / F(4x4)."""

    OFF = "off"
    AUTO = "auto"
    F2 = "f2"
    F4 = "f4"

    @property
    def forced_tile(self) -> int | None:
        """The tile F2/F4 force on every eligible conv (None: off and auto leave it to records and the rule)."""
        return {Winograd.F2: 2, Winograd.F4: 4}.get(self)


class Schedules(enum.StrEnum):
    """Whose schedules: ours first (TVM's dlight rules for the rest), TVM 0.27's only, or none (task extraction)."""

    ADRENO = "adreno"
    TVM = "tvm"
    NONE = "none"


class Defaults(enum.StrEnum):
    """How a kernel without tuning records gets its knobs: ranked by the analytical cost model over its space
    (`adreno.costmodel.ranked_defaults`), or the family's rule (`Family.default_config`, the occupancy rule)."""

    MODEL = "model"
    RULE = "rule"


class Staging(enum.StrEnum):
    """Cooperative staging in local memory (knob `cooperative`) of kernels without tuning records: where it pays on
    GPU targets (auto, `adreno.schedules.staging.default`), or never (off: a device whose local memory is slow or
    broken, or a side-by-side measurement)."""

    AUTO = "auto"
    OFF = "off"


class Indices(enum.StrEnum):
    """Run-time gather and scatter indices: clamped into their tensor and checked, a bad one failing the run in one
    line (`adreno.frontend.index_guards`; the default), or trusted (`--trust-indices`: no guard kernels, an index
    out of range reads or writes outside the tensor, as TVM's kernels do)."""

    CHECKED = "checked"
    TRUSTED = "trusted"


class Host(enum.StrEnum):
    """What the host library is built for: an aarch64 Android phone, or this machine."""

    ANDROID = "android"
    NATIVE = "native"


class Runtime(enum.StrEnum):
    """What `adreno run` runs: the launch plan through pyopencl (the default), or the host library through TVM's
    Relax VM and our OpenCL plugin (what a phone app runs; `adreno.native.vm_executor`)."""

    PLAN = "plan"
    TVM = "tvm"


def choices(kind: type[enum.Enum]) -> list[str]:
    """The legal values of an option, for argparse."""
    return [member.value for member in kind]


def enum_argument(kind: type[enum.Enum], legal=None) -> dict:
    """argparse keywords of an option whose values are members of `kind` (`legal`: some of them; default all): the
    parsed value is the member, the help and a refusal ("invalid choice") name the values."""
    values = [member.value for member in legal or kind]

    def member(text: str):
        return kind(text) if text in values else text  # argparse refuses the text: not one of `choices`

    member.__name__ = kind.__name__
    return {"type": member, "choices": values}


def add_staging_argument(parser) -> None:
    """`--staging` of `adreno compile` and `adreno tune` (an argparse parser)."""
    parser.add_argument("--staging", **enum_argument(Staging), default=Staging.AUTO,
                        help="cooperative staging of conv tiles in local memory (knob cooperative) where no record "
                        "sets it: auto (on GPU targets where it pays; the default) or off (never, on any target: a "
                        "device whose local memory is slow or broken, a side-by-side measurement). Records still "
                        "win; tune --staging off searches unstaged configs only")


def _parse(kind: type[enum.Enum], value, flag: str):
    if value is None or isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise AdrenoError(f"{flag} must be one of {', '.join(choices(kind))}, not {value!r}") from None


@dataclass(frozen=True)
class CompileOptions:
    """What to compile for. `memory` None: `adreno.records.default_memory` of the records (texture unless they are
    all buffer kernels); `winograd` None: auto with our schedules, off with TVM's. Under off and auto, a conv's tuned
    layout record (`records`) decides instead. `defaults` None: "rule" (model-ranked defaults are opt-in until a GPU
    has measured them: one of them crashed PoCL, see docs/guide.md). `staging`: the staging policy of kernels without
    records (`adreno.schedules.staging.default`). `indices`: whether run-time indices are checked (`Indices`)."""

    target: str = "adreno-740"
    host: Host = Host.ANDROID
    cc: str | None = None
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    memory: Memory | None = None
    precision: Precision = Precision.FP32
    schedules: Schedules = Schedules.ADRENO
    records: str | None = None
    winograd: Winograd | None = None
    defaults: Defaults | None = None
    staging: Staging = Staging.AUTO
    indices: Indices = Indices.CHECKED
    # the largest image width/height to use (a local check device's, e.g. 4096): wider tensors take another image
    # scope or stay buffers; None: the target's limits (within 8192 where a scope fits, see adreno/targets/layout.py)
    image_max: int | None = None
    # the device's facts as a live OpenCL device reports them (`adreno.targets.devices.from_opencl`), in place of the
    # table's entry for `target` (a benchmark compiling for the device it measures); None: the table's
    facts: AdrenoDevice | None = None

    def __post_init__(self):
        for name, kind, flag in (("host", Host, "--host"), ("memory", Memory, "--memory"),
                                 ("precision", Precision, "--precision"), ("schedules", Schedules, "--schedules"),
                                 ("winograd", Winograd, "--winograd"), ("defaults", Defaults, "--defaults"),
                                 ("staging", Staging, "--staging"), ("indices", Indices, "--trust-indices")):
            object.__setattr__(self, name, _parse(kind, getattr(self, name), flag))
        if self.image_max is not None and self.image_max < 1:
            raise AdrenoError(f"--image-max must be a positive number of pixels, not {self.image_max}")
        if self.precision is Precision.FP16 and self.memory is Memory.BUFFER:
            raise AdrenoError("--precision fp16 stores images as half floats: it needs --memory texture")

    def device(self) -> AdrenoDevice:
        """The target's `AdrenoDevice` (`facts` where a live device was read), its image limits capped at
        `image_max`."""
        device = self.facts or get_device(self.target)
        if self.image_max is None:
            return device
        return replace(device, image2d_max_width=min(device.image2d_max_width, self.image_max),
                       image2d_max_height=min(device.image2d_max_height, self.image_max))

    def resolved(self, record_memory: Memory) -> CompileOptions:
        """These options with `memory`, `winograd` and `defaults` decided (`record_memory`: what the tuned records
        want where `memory` is not given, `adreno.records.default_memory`), checked again as new options are."""
        memory = self.memory or record_memory
        winograd = self.winograd or (Winograd.AUTO if self.schedules is Schedules.ADRENO else Winograd.OFF)
        defaults = self.defaults or Defaults.RULE
        return replace(self, memory=memory, winograd=winograd, defaults=defaults)
