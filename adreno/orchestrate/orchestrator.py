"""`adreno compile --orchestrate`: what `compile_model` is handed to compile the BLP's kernels instead of FuseOps'.

The compile calls, in order: `check(options)` before anything is measured (orchestration compiles fp32 with our
schedules: the conditions its candidates are measured under, `costs.py`), `prepare(mod, name, memory)` on the
imported module laid out for `memory` (`layouts.py`; the costs must be measured in that memory): fission, FuseOps'
partition, the costs the records lack measured, every block's BLP (`partition.py`); the module it returns binds
whole each operator fission split that the kernels hold whole. Then `fuse_pass()` for `lower_relax` in place of
FuseOps (`emit.py`), and after lowering `summary()`, which the manifest records under `orchestration`: each emitted
kernel with its operators, measured cost and the functions it became, the fallbacks, the device's launch cost and
the predicted wall time of a run (the per-run cost plus the emitted kernels' costs), next to the candidates,
measurements and solve time.
"""

from __future__ import annotations

from adreno.errors import AdrenoError
from adreno.options import Memory, Precision, Schedules
from adreno.orchestrate.emit import fuse_within
from adreno.orchestrate.graph import recomposed
from adreno.orchestrate.partition import partition
from adreno.orchestrate.report import orchestrate_module


class Orchestrator:
    """Orchestration for one compile, measuring through `costs_of` (a `costs.CostTable`)."""

    def __init__(self, costs_of, max_size: int = 3, time_limit_s: float = 10.0, progress=None):
        self.costs_of, self.max_size, self.time_limit_s = costs_of, max_size, time_limit_s
        self.say = progress or (lambda line: None)
        self.orchestration, self.partition, self.emitted = None, None, {}

    @staticmethod
    def check(options) -> None:
        """One line for options orchestration cannot honour (exit 2), before anything is measured."""
        wrong = [f"--{name} {value}" for name, value, wanted in
                 (("schedules", options.schedules, Schedules.ADRENO), ("precision", options.precision, Precision.FP32))
                 if value is not None and value is not wanted]
        if wrong:
            raise AdrenoError(f"--orchestrate compiles fp32 with our schedules (what its candidates are measured "
                              f"with), not {', '.join(wrong)}")

    def prepare(self, mod, name: str, memory: Memory):
        """The module to lower in `memory` (the memory the costs are measured in): `mod` fissioned and numbered, with
        the partition to emit decided."""
        if memory is not self.costs_of.memory:
            raise AdrenoError(f"--orchestrate compiles {memory} memory, but its candidates are measured in "
                              f"{self.costs_of.memory} memory")
        self.orchestration = orchestrate_module(mod, name, self.costs_of.target_name, self.costs_of, self.max_size,
                                                self.time_limit_s, self.say)
        self.partition = partition(self.orchestration)
        for fallback in self.partition.fallbacks:
            self.say(f"block {fallback.block}: FuseOps' partition ({fallback.reason})")
        return recomposed(self.orchestration.mod, self.orchestration.graph, self.partition.composites)

    def fuse_pass(self):
        """The pass `lower_relax` runs instead of FuseOps."""
        return fuse_within(self.partition.kernels, self.emitted)

    def summary(self, plan) -> dict:
        """What the manifest records (plain data). A kernel's `functions` are those of it the `plan` launches: a
        computation whose every value an earlier kernel also writes (the BLP may choose overlapping kernels) is
        dead, removed by the pipeline, and listed under `dead` instead."""
        launched = {step.func for step in plan.steps}
        report, part = self.orchestration.report, self.partition
        launch = report["launch"]
        kernels = [{"block": block, "ops": k.label, "primitives": len(k.members), "cost_s": cost,
                    "functions": [f for f in self.emitted.get(i, []) if f in launched],
                    "dead": [f for f in self.emitted.get(i, []) if f not in launched]}
                   for i, (k, block, cost) in enumerate(zip(part.kernels, part.blocks, part.costs))]
        return {"max_size": self.max_size, "device": report["device"], "primitives": report["primitives"],
                "blocks": len(report["blocks"]), "candidates": report["candidates"],
                "measured_now": report["measured_now"], "solve_s": round(report["solve_s"], 3),
                "fuseops_cost_s": report["fuseops_cost_s"], "launch": launch,
                "predicted_run_s": None if part.predicted_s is None else part.predicted_s + launch["per_run_s"],
                "fallbacks": [{"block": f.block, "reason": f.reason} for f in part.fallbacks], "kernels": kernels}
