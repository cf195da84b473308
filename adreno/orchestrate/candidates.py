"""Candidate kernels: the connected convex subgraphs of a primitive graph, up to a documented bound.

A primitive produces one value (named like the primitive) from values that are other primitives' outputs or
external (graph inputs, weights). A candidate is a set S of primitives that is
- connected (through producer/consumer edges, ignoring direction),
- convex (no path leaves S and re-enters it: otherwise one kernel would need a value computed after it),
- at most `max_size` primitives, and at most one heavy primitive (conv or matmul) — the bound Korch uses so that a
  kernel is one of our schedule families plus its prologue/epilogue.
Groups passed as `required` (TVM FuseOps' partition) are always added, even beyond the size bound, so the BLP's
optimum is never worse than today's partition on the measured costs. `max_candidates` stops a runaway enumeration
with a refusal value instead of silently truncating it.
"""

from dataclasses import dataclass

from adreno.orchestrate.blp import Kernel


@dataclass(frozen=True)
class Primitive:
    """One primitive: its name (also its output value), the values it reads, whether it is conv/matmul."""

    name: str
    inputs: tuple
    heavy: bool = False


@dataclass(frozen=True)
class TooManyCandidates:
    """The enumeration passed `limit` subgraphs; lower `max_size` or split the graph into blocks."""

    limit: int


def enumerate_groups(prims, max_size: int = 4, required=(), max_candidates: int = 20000):
    """Every connected convex group of `prims` within the bound, plus `required`; a sorted list or a refusal."""
    by_name = {p.name: p for p in prims}
    consumers = {p.name: set() for p in prims}
    for p in prims:
        for v in p.inputs:
            if v in consumers:
                consumers[v].add(p.name)
    neighbours = {p.name: consumers[p.name] | {v for v in p.inputs if v in by_name} for p in prims}
    reach = _descendants(prims, consumers)
    found = set()
    frontier = [frozenset([p.name]) for p in prims]
    while frontier:
        group = frontier.pop()
        if group in found or not _within(group, by_name, max_size) or not _convex(group, reach):
            continue
        found.add(group)
        if len(found) > max_candidates:
            return TooManyCandidates(max_candidates)
        if len(group) < max_size:
            frontier.extend(group | {n} for g in group for n in neighbours[g] if n not in group)
    found |= {frozenset(g) for g in required}
    return sorted(found, key=lambda g: (len(g), sorted(g)))


def kernel_of(group, prims, model_outputs, cost: float, name: str) -> Kernel:
    """The Kernel a group computes: what it reads from outside and which of its values are needed outside it."""
    group = frozenset(group)
    inside = [p for p in prims if p.name in group]
    reads = {v for p in inside for v in p.inputs if v not in group}
    needed_outside = {v for p in prims if p.name not in group for v in p.inputs} | set(model_outputs)
    return Kernel(name, group, frozenset(reads), frozenset(group & needed_outside), cost)


def _within(group, by_name, max_size):
    return len(group) <= max_size and sum(by_name[g].heavy for g in group) <= 1


def _descendants(prims, consumers):
    """For each primitive, every primitive reachable from it (prims are in topological order)."""
    reach = {}
    for p in reversed(prims):
        reach[p.name] = set()
        for c in consumers[p.name]:
            reach[p.name] |= {c} | reach[c]
    return reach


def _convex(group, reach):
    """No primitive outside the group lies on a path between two primitives of the group."""
    outside_reached = set().union(*(reach[g] for g in group)) - group
    return not any(reach[o] & group for o in outside_reached)
