"""A tuning task: one distinct tunable kernel of a model, with its search space, weighted by call count, and
everything the tuner does with it: seeded inputs, an independent reference, candidate builds, features, and how a
batch of proposals becomes the candidates measured. `LayoutTask` (`layout_task.py`) provides the same for a conv
whose weight layout is tuned too; `extract.py` finds a model's tasks.

A task carries its primitive function as TVMScript text, so build workers in other processes can rebuild it
(TVM objects do not pickle). With texture memory each task carries the OpenCL image every parameter of its function
gets in the artifact, so that candidates are built and measured on images, as `adreno compile` runs them."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..costmodel.features import featurize
from ..targets.devices import get_device
from ..options import Precision, Staging
from ..schedules import family, staging
from ..schedules.context import ScheduleContext
from . import builder
from .space import SearchSpace


@dataclass
class Task:
    """One distinct kernel workload of a model."""

    key: str  # workload key: op, shapes, dtypes, strides, padding (the family's `workload_key`)
    family: str  # the name of its schedule family (`adreno.schedules.family`)
    func_name: str
    script: str  # TVMScript of the unscheduled, fused PrimFunc
    n_outputs: int
    weight: int = 1  # how many times the model calls it
    target_name: str = "adreno-740"
    names: list[str] = field(default_factory=list)  # every function name sharing this workload
    images: list = field(default_factory=list)  # per parameter (outputs last): its ImageSpec dict, None for a buffer
    staging: Staging = Staging.AUTO  # `--staging`: off keeps the default and the search unstaged (`staging.space`)
    precision: Precision = Precision.FP32  # the storage of its images (fp16: half floats); its records say so

    @property
    def scopes(self) -> list[str] | None:
        """The memory scope of every parameter (`lower_primfunc`'s `scopes`); None when all are buffers."""
        if not any(self.images):
            return None
        return [image["scope"] if image else "global" for image in self.images]

    @property
    def schedule_family(self):
        return family(self.family)

    def func(self):
        import tvm

        return tvm.script.from_source(self.script)

    @cached_property
    def workload(self):
        return self.schedule_family.workload(self.func())

    @cached_property
    def flops(self) -> int:
        return int(getattr(self.workload, "flops", 0))

    def context(self, knobs: dict | None = None):
        """The `ScheduleContext` its candidates are scheduled in: the target's device facts, the task's `--staging`,
        and `knobs` (workload key -> the candidate's config) as the tuner's knob source. Built where it is used,
        since a task travels to build workers as text and a TVM target does not pickle."""
        return ScheduleContext.for_device(get_device(self.target_name), staging=self.staging).candidate(knobs or {})

    def space(self) -> SearchSpace:
        """The family's knobs, minus the configs its validator refuses for this workload and target."""
        family, workload, ctx = self.schedule_family, self.workload, self.context()

        def valid(config: dict) -> bool:
            try:
                family.check_config(workload, config, ctx)
            except ValueError:
                return False
            return True

        return SearchSpace(dict(staging.space(family.knobs, self.staging)), valid)

    def default_config(self) -> dict:
        """What compiling without records uses (with the same `--staging`)."""
        return self.schedule_family.default_config(self.workload, self.context())

    def seed_configs(self) -> list[dict]:
        """Configs measured in the task's first round, before the strategy proposes any."""
        return [self.default_config()]

    # input_specs(): shape, dtype and storage of each input; inputs(seed): seeded inputs every candidate runs on;
    # reference(inputs): the outputs every candidate must match; build(config, out_dir, native=None): a candidate's
    # artifact (run in a build worker; with `native`, its TVM library too). See `measure`.
    input_specs, inputs = builder.kernel_input_specs, builder.task_inputs
    reference, build = builder.kernel_reference, builder.build_kernel

    @property
    def features(self):
        """The cost model's view of its candidates (`Family.features`): its family's."""
        return self.schedule_family.features

    def featurize(self, configs: list[dict], limits: dict) -> np.ndarray:
        """The cost model's features of `configs`."""
        return featurize(self.workload, configs, limits, self.features)

    def proposals(self, n: int) -> int:
        """How many candidates to ask the strategy for, to measure n."""
        return n

    def choose(self, proposals: list, n: int, space: SearchSpace, records: list, taken: set, rng) -> list:
        """The candidates to measure out of the strategy's proposals (in its order, none of them in `taken`), given
        this task's records."""
        return proposals[:n]

    def layouts(self, records: list) -> dict:
        """What a report says about the task's weight layouts: nothing for a kernel task."""
        return {}
