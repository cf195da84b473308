"""`adreno compile --orchestrate`: what `compile_model` is handed to compile the BLP's kernels instead of FuseOps'.

The compile calls, in order: `check(options)` before anything is measured (orchestration compiles fp32 with our
schedules, the conditions its candidates are measured under, `costs.py`, in a memory it measures), then
`prepare(layout, name)`, where `layout(memory)` is the imported module laid out for `memory` (`layouts.py`). For
each memory the orchestrator measures in (its cost tables, one per memory): fission, FuseOps' partition, the costs
the records lack measured, every block's BLP (`partition.py`). The memory whose emitted kernels are predicted to
run shortest is compiled (`MemoryChoice`); `prepare` returns it with the module to lower, which binds whole each
operator fission split that the kernels hold whole. Then `fuse_pass()` for `lower_relax` in place of FuseOps
(`emit.py`), and after lowering `summary()`, which the manifest records under `orchestration`: each emitted kernel
with its operators, measured cost and the functions it became, the fallbacks, the device's launch cost and the
predicted wall time of a run (the per-run cost plus the emitted kernels' costs), next to the candidates,
measurements, solve time and each measured memory's prediction.

The memory is chosen per model, not per kernel: the two memories lay tensors out differently (NCHW4c images against
NCHW buffers), so a kernel of one cannot read what a kernel of the other wrote without a conversion between them,
which no candidate measures.
"""

from __future__ import annotations

from dataclasses import dataclass

from adreno.errors import AdrenoError
from adreno.options import Memory, Precision, Schedules
from adreno.orchestrate.emit import fuse_within
from adreno.orchestrate.graph import recomposed
from adreno.orchestrate.partition import Partition, partition
from adreno.orchestrate.report import Orchestration, orchestrate_module


def milliseconds(seconds: float | None) -> str:
    """A predicted time as the progress lines and the compile's summary print it, 'unknown' where a kernel is
    unmeasured; one spelling, so the memory choice and the compile's orchestration line read alike."""
    return "unknown" if seconds is None else f"{seconds * 1e3:.3f} ms"


@dataclass(frozen=True)
class MemoryChoice:
    """One memory's orchestration of the model and its emitted partition; `predicted_s`, a run's predicted wall
    time (the per-run launch cost plus the emitted kernels' costs), is None where a kernel is unmeasured."""

    memory: Memory
    orchestration: Orchestration
    partition: Partition

    @property
    def predicted_s(self) -> float | None:
        kernels = self.partition.predicted_s
        return None if kernels is None else kernels + self.orchestration.report["launch"]["per_run_s"]

    def __str__(self) -> str:
        return f"{self.memory} {milliseconds(self.predicted_s)}"

    @staticmethod
    def best(choices: list) -> MemoryChoice:
        """The choice predicted fastest; one with a prediction before one without; the first of equals (the
        caller lists the compile's default memory first, so it is kept when nothing is known)."""
        known = [c for c in choices if c.predicted_s is not None]
        return min(known, key=lambda c: c.predicted_s) if known else choices[0]


class Orchestrator:
    """Orchestration for one compile, measuring through `tables` (`costs.CostTable`s, one per memory to consider,
    the compile's default memory first)."""

    def __init__(self, tables, max_size: int = 3, time_limit_s: float = 10.0, progress=None):
        self.tables, self.max_size, self.time_limit_s = tuple(tables), max_size, time_limit_s
        self.say = progress or (lambda line: None)
        self.choices, self.chosen, self.emitted = (), None, {}

    @property
    def memories(self) -> tuple:
        return tuple(table.memory for table in self.tables)

    def check(self, options) -> None:
        """`check_options` for the memories this orchestrator measures in."""
        self.check_options(options, self.memories)

    @staticmethod
    def check_options(options, memories) -> None:
        """One line for options orchestration cannot honour (exit 2), before anything is measured (so the CLI
        calls it before it opens a device): `options` as given, before the compile decides what they leave open;
        `memories`, those the candidates are measured in."""
        wrong = [f"--{name} {value}" for name, value, wanted in
                 (("schedules", options.schedules, Schedules.ADRENO), ("precision", options.precision, Precision.FP32))
                 if value is not None and value is not wanted]
        if wrong:
            raise AdrenoError(f"--orchestrate compiles fp32 with our schedules (what its candidates are measured "
                              f"with), not {', '.join(wrong)}")
        if options.memory is not None and options.memory not in memories:
            raise AdrenoError(f"--orchestrate compiles {options.memory} memory, but its candidates are measured in "
                              f"{' and '.join(memories)} memory")

    @property
    def orchestration(self) -> Orchestration | None:
        return self.chosen and self.chosen.orchestration

    @property
    def partition(self) -> Partition | None:
        return self.chosen and self.chosen.partition

    def prepare(self, layout, name: str):
        """(the memory to compile, the module to lower in it): `layout(memory)` fissioned and numbered, with the
        partition to emit decided, in the memory whose partition is predicted fastest."""
        choices = []
        for table in self.tables:
            if len(self.tables) > 1:
                self.say(f"{table.memory} memory")
            orchestration = orchestrate_module(layout(table.memory), name, table.target_name, table, self.max_size,
                                               self.time_limit_s, self.say)
            choices.append(MemoryChoice(table.memory, orchestration, partition(orchestration)))
        self.choices, self.chosen = tuple(choices), MemoryChoice.best(choices)
        for fallback in self.partition.fallbacks:
            self.say(f"block {fallback.block}: FuseOps' partition ({fallback.reason})")
        if len(choices) > 1:
            self.say(f"compiling {self.chosen.memory} memory (a run predicted: {', '.join(map(str, choices))})")
        return self.chosen.memory, recomposed(self.orchestration.mod, self.orchestration.graph,
                                              self.partition.composites)

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
        measured_now = sum(c.orchestration.report["measured_now"] for c in self.choices)
        return {"max_size": self.max_size, "device": report["device"], "memory": self.chosen.memory.value,
                "memories": {c.memory.value: c.predicted_s for c in self.choices},
                "primitives": report["primitives"], "blocks": len(report["blocks"]),
                "candidates": report["candidates"], "measured_now": measured_now,
                "solve_s": round(report["solve_s"], 3), "fuseops_cost_s": report["fuseops_cost_s"],
                "launch": launch, "predicted_run_s": self.chosen.predicted_s,
                "fallbacks": [{"block": f.block, "reason": f.reason} for f in part.fallbacks], "kernels": kernels}
