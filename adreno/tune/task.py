"""Tuning tasks: the distinct tunable kernels of a model, each with its search space, weighted by call count.

A task carries its primitive function as TVMScript text, so build workers in other processes can rebuild it
(TVM objects do not pickle)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cached_property

from ..errors import AdrenoError
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
        return self.module.default_config(self.workload, target)


def unscheduled_module(model, target_name: str, input_shapes: dict | None = None):
    """The model after Adreno legalization and fusion, before any schedule is applied."""
    from ..compile import lower_relax
    from ..frontend import load_model, to_relax
    from ..target import tvm_target

    onnx_model, _ = load_model(model)
    return lower_relax(to_relax(onnx_model, input_shapes), tvm_target(target_name), schedules="none")


def extract_tasks(model, target_name: str = "adreno-740", input_shapes: dict | None = None) -> list[Task]:
    """The tunable kernels of `model`: one task per distinct workload key, heaviest (most calls x flops) first."""
    import tvm

    from .. import schedules

    lowered = unscheduled_module(model, target_name, input_shapes)
    call_tir = tvm.ir.Op.get("relax.call_tir")
    tasks: dict[str, Task] = {}
    for block in lowered["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not (isinstance(value, tvm.ir.expr.Call) and value.op == call_tir):
                continue
            gvar = value.args[0]
            func = lowered[gvar]
            for family in schedules.FAMILIES:
                module = importlib.import_module(f"adreno.schedules.{family}")
                key = module.workload_key(func)
                if key is None:
                    continue
                if key in tasks:
                    tasks[key].weight += 1
                    if gvar.name_hint not in tasks[key].names:
                        tasks[key].names.append(gvar.name_hint)
                else:
                    fields = getattr(binding.var.ty, "fields", None)
                    tasks[key] = Task(key, family, gvar.name_hint, func.script(), len(fields) if fields else 1,
                                      target_name=target_name, names=[gvar.name_hint])
                break
    if not tasks:
        raise AdrenoError("the model has no kernel any of our schedules can tune")
    return sorted(tasks.values(), key=lambda t: t.weight * t.flops, reverse=True)
