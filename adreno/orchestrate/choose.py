"""One model's choice of kernels, block by block: candidates per block, then the BLP of each block on the costs.

`block_candidates` splits the primitive graph (`blocks.split_blocks`, FuseOps' groups kept whole) and enumerates
each block's candidates with FuseOps' groups required among them; `choose` solves every block on the costs the
caller measured (`costs`: group -> seconds, None for a candidate whose measurement failed: it is left out, never
given a made-up cost). FuseOps' partition of each block, with the same costs, comes along for comparison: its cost
bounds the block's optimum from above whenever all of its kernels were measured.
"""

from dataclasses import dataclass

from adreno.orchestrate.blocks import Block, split_blocks
from adreno.orchestrate.blp import Choice, Refusal, solve
from adreno.orchestrate.candidates import TooManyCandidates, enumerate_groups, kernel_of


@dataclass(frozen=True)
class BlockCandidates:
    """A block, its candidate groups (or the enumeration's refusal), and FuseOps' partition of it (its fused
    groups, plus every primitive FuseOps left alone as a group of one)."""

    block: Block
    groups: list | TooManyCandidates
    fuseops: tuple


@dataclass(frozen=True)
class BlockChoice:
    """The block's solved choice (or why there is none) next to FuseOps' partition's cost (None: not all measured)."""

    candidates: BlockCandidates
    choice: Choice | Refusal | TooManyCandidates
    fuseops_cost: float | None
    measured: int


def block_candidates(graph, fused_groups, max_size: int = 4, max_candidates: int = 20000) -> list[BlockCandidates]:
    """The blocks of `graph` with their candidates; `fused_groups`: FuseOps' groups (frozensets of primitives)."""
    fused_groups = [frozenset(g) for g in fused_groups]
    result = []
    for block in split_blocks(list(graph.primitives), graph.outputs, fused_groups):
        names = {p.name for p in block.primitives}
        fused = [g for g in fused_groups if g <= names]
        alone = [frozenset([p.name]) for p in block.primitives if not any(p.name in g for g in fused)]
        groups = enumerate_groups(list(block.primitives), max_size, required=fused, max_candidates=max_candidates)
        result.append(BlockCandidates(block, groups, tuple(fused + alone)))
    return result


def choose(candidates: list[BlockCandidates], costs: dict, time_limit_s: float = 10.0) -> list[BlockChoice]:
    """Every block's BLP on `costs` (group -> seconds or None)."""
    chosen = []
    for bc in candidates:
        if isinstance(bc.groups, TooManyCandidates):
            chosen.append(BlockChoice(bc, bc.groups, None, 0))
            continue
        prims = list(bc.block.primitives)
        measured = [g for g in bc.groups if costs.get(g) is not None]
        kernels = [kernel_of(g, prims, bc.block.outputs, costs[g], str(i)) for i, g in enumerate(measured)]
        fuseops = [costs.get(g) for g in bc.fuseops]
        fuseops_cost = sum(fuseops) if all(c is not None for c in fuseops) else None
        choice = solve(kernels, bc.block.outputs, bc.block.external, time_limit_s)
        chosen.append(BlockChoice(bc, choice, fuseops_cost, len(measured)))
    return chosen
