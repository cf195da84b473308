"""Blocks: the primitive graph split at single-value cuts, so that each block's BLP is solved on its own.

The whole-model program does not close (docs/orchestrate.md: `tiny` keeps a 0.76 gap after 30 s): its covering
constraints have a weak LP relaxation, and the search grows with the graph. Korch splits the graph where one value
alone crosses from the primitives before a point to those after it. Candidates are enumerated inside a block, so
the blocks' optima together are the optimum over the candidates that span no cut (a group across a cut, such as a
conv before it with the add after it, is given up). A cut is never placed inside a group that must stay whole
(`keep_together`: FuseOps' groups), so every required group falls in one block and FuseOps' partition stays a
feasible choice of every block.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """Consecutive primitives; `outputs`: its values read after it or that are model outputs; `external`: what it
    reads from outside it (graph inputs, weights, earlier blocks' outputs)."""

    primitives: tuple
    outputs: tuple
    external: frozenset


def split_blocks(primitives, model_outputs, keep_together=()) -> list[Block]:
    """`primitives` (topologically ordered) cut after every position where at most one value produced up to it is
    read after it, unless a `keep_together` group has members on both sides."""
    position = {p.name: i for i, p in enumerate(primitives)}
    last_read = {}
    for i, p in enumerate(primitives):
        for v in p.inputs:
            if v in position:
                last_read[v] = i
    spans = [(min(position[m] for m in g), max(position[m] for m in g)) for g in keep_together]
    cuts, live = [], set()
    for i, p in enumerate(primitives[:-1]):
        live = {v for v in live | {p.name} if last_read.get(v, -1) > i}
        if len(live) <= 1 and not any(lo <= i < hi for lo, hi in spans):
            cuts.append(i + 1)
    bounds = [0, *cuts, len(primitives)]
    return [_block(primitives[a:b], primitives[b:], model_outputs) for a, b in zip(bounds, bounds[1:])]


def _block(inside, after, model_outputs) -> Block:
    names = {p.name for p in inside}
    read_after = {v for p in after for v in p.inputs} | set(model_outputs)
    reads = {v for p in inside for v in p.inputs if v not in names}
    return Block(tuple(inside), tuple(p.name for p in inside if p.name in read_after), frozenset(reads))
