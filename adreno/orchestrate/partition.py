"""The partition a compile emits: every block's chosen kernels, or FuseOps' partition of a block that has no choice.

A block falls back to FuseOps' partition (its fused groups and the primitives it left alone), with the reason kept
as a `Fallback` value, when
- its BLP gave no choice (`blp.Refusal`: a required FuseOps group failed to measure, or the solver's time limit
  came first), or
- its chosen kernels have no order (two kernels each reading what the other writes; the BLP does not forbid it).

An operator fission split (`graph.Composite`) is emitted whole, as its candidates' costs were measured
(`subgraph.py`), when every emitted kernel that holds any of its primitives holds all of them: its inner bindings
leave the kernels' members and the module to lower binds the operator (`graph.recomposed`). Where a kernel holds only
part of it (a choice that recomputes it), it stays split, which computes the same.

FuseOps' partition is always emittable: it is what FuseOps makes of the same module. So a compile with
`--orchestrate` never fails for want of a choice, and never emits one it cannot order. The predicted time is the sum
of the emitted kernels' measured costs; it is None when a fallback block has an unmeasured group.
"""

from __future__ import annotations

from dataclasses import dataclass

from adreno.orchestrate.blp import Choice
from adreno.orchestrate.candidates import kernel_of
from adreno.orchestrate.emit import EmittedKernel, topological
from adreno.orchestrate.graph import binding_of, inner_of
from adreno.orchestrate.report import ops_label


@dataclass(frozen=True)
class Fallback:
    """Block `block` emits FuseOps' partition, because of `reason`."""

    block: int
    reason: str


@dataclass(frozen=True)
class Partition:
    """The kernels to emit in a topological order, the blocks that fell back, per emitted kernel its block and
    measured cost (s, None where unmeasured), and the composites emitted whole."""

    kernels: tuple
    fallbacks: tuple
    blocks: tuple
    costs: tuple
    composites: tuple = ()

    @property
    def predicted_s(self) -> float | None:
        """The sum of the emitted kernels' costs; None when one is unmeasured."""
        return None if None in self.costs else sum(self.costs)


def partition(orchestration) -> Partition:
    """The emitted partition of an `report.Orchestration`."""
    graph = orchestration.graph
    position = {p.name: i for i, p in enumerate(graph.primitives)}
    emitted, blocks, fallbacks = [], [], []
    for index, bc in enumerate(orchestration.chosen):
        block = bc.candidates.block
        chosen, reason = _ordered(bc.choice)
        if chosen is None:
            prims = list(block.primitives)
            chosen = [kernel_of(g, prims, block.outputs, 0.0, "") for g in bc.candidates.fuseops]
            chosen = [chosen[i] for i in _order(chosen)]  # FuseOps' groups of one module always have an order
            fallbacks.append(Fallback(index, reason))
        emitted += chosen
        blocks += [index] * len(chosen)
    whole = tuple(c for c in graph.composites if _emitted_whole(c, emitted))
    inner = inner_of(whole)
    kernels = [EmittedKernel(*(tuple(binding_of(v) for v in sorted(values - inner, key=position.get))
                               for values in (k.primitives, k.outputs)), ops_label(graph, k.primitives))
               for k in emitted]
    return Partition(tuple(kernels), tuple(fallbacks), tuple(blocks),
                     tuple(orchestration.costs.get(k.primitives) for k in emitted), whole)


def _emitted_whole(composite, kernels) -> bool:
    """Some of `kernels` holds all of `composite`'s primitives, and none holds only some."""
    touching = [k for k in kernels if k.primitives & composite.members]
    return bool(touching) and all(composite.members <= k.primitives for k in touching)


def _ordered(choice):
    """The choice's kernels in a topological order and no reason, or None and why the block falls back."""
    if not isinstance(choice, Choice):
        return None, getattr(choice, "value", None) or f"more than {choice.limit} candidates"
    order = _order(list(choice.kernels))
    if order is None:
        return None, "the chosen kernels read each other's outputs"
    return [choice.kernels[i] for i in order], None


def _order(kernels):
    return topological([k.inputs for k in kernels], [sorted(k.outputs) for k in kernels])

