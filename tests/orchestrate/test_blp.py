"""The BLP returns the known optimum on hand-made graphs, and refuses empty or infeasible candidate sets."""

import itertools
import random

import pytest

from adreno.orchestrate.blp import Choice, Kernel, Refusal, solve
from adreno.orchestrate.candidates import Primitive, enumerate_groups, kernel_of

# attention-like chain with a side branch: q@k -> scale -> max, exp(scale - max) -> sum -> div -> @v
ATTENTION = [
    Primitive("qk", ("q", "k"), heavy=True),
    Primitive("scale", ("qk",)),
    Primitive("max", ("scale",)),
    Primitive("exp", ("scale", "max")),
    Primitive("sum", ("exp",)),
    Primitive("div", ("exp", "sum")),
    Primitive("av", ("div", "v"), heavy=True),
]
EXTERNAL = {"q", "k", "v"}


def _feasible(chosen, outputs, external):
    written = {v for k in chosen for v in k.outputs} | external
    return all(v in written for v in outputs) and all(k.inputs <= written for k in chosen)


def _brute_force(kernels, outputs, external):
    best = None
    for r in range(1, len(kernels) + 1):
        for subset in itertools.combinations(kernels, r):
            if _feasible(subset, outputs, external):
                cost = sum(k.cost for k in subset)
                best = cost if best is None or cost < best else best
    return best


def test_chain_known_optimum():
    prims = [Primitive("mm", ("x", "w"), heavy=True), Primitive("add", ("mm", "b")), Primitive("relu", ("add",))]
    costs = {("mm",): 5.0, ("add",): 2.0, ("relu",): 2.0, ("add", "mm"): 5.5, ("add", "relu"): 2.5,
             ("add", "mm", "relu"): 6.0}
    groups = enumerate_groups(prims, max_size=3)
    assert {tuple(sorted(g)) for g in groups} == set(costs)
    kernels = [kernel_of(g, prims, ["relu"], costs[tuple(sorted(g))], "+".join(sorted(g))) for g in groups]
    choice = solve(kernels, ["relu"], {"x", "w", "b"})
    assert isinstance(choice, Choice) and choice.optimal and choice.gap == 0.0
    assert [k.name for k in choice.kernels] == ["add+mm+relu"] and choice.cost == 6.0
    # make the fused kernel expensive: mm alone plus the fused epilogue becomes optimal (5 + 2.5)
    kernels = [k if k.name != "add+mm+relu" else Kernel(k.name, k.primitives, k.inputs, k.outputs, 9.0)
               for k in kernels]
    choice = solve(kernels, ["relu"], {"x", "w", "b"})
    assert sorted(k.name for k in choice.kernels) == ["add+relu", "mm"] and choice.cost == 7.5


def test_random_costs_match_brute_force():
    groups = enumerate_groups(ATTENTION, max_size=3)
    rng = random.Random(25)
    for _ in range(5):
        kernels = [kernel_of(g, ATTENTION, ["av"], rng.uniform(1, 1 + len(g)), "+".join(sorted(g))) for g in groups]
        kernels = rng.sample(kernels, 7) + [k for k in kernels if len(k.primitives) == 1]
        choice = solve(kernels, ["av"], EXTERNAL)
        assert _feasible(choice.kernels, ["av"], EXTERNAL)
        assert choice.cost == pytest.approx(_brute_force(kernels, ["av"], EXTERNAL))


def test_fusions_dearer_than_their_primitives_are_pruned_without_changing_the_optimum():
    """Costs as on a CPU, where a fused kernel often costs about its primitives' sum: many fused candidates cost
    more than their single-primitive kernels together and are dropped before the solve (`blp._undominated`); the
    optimum still equals the brute force over every candidate, and a dominated kernel is never chosen."""
    groups = enumerate_groups(ATTENTION, max_size=3)
    rng = random.Random(7)
    pruned = 0
    for _ in range(6):
        alone = {p.name: rng.uniform(1, 2) for p in ATTENTION}
        kernels = [kernel_of(g, ATTENTION, ["av"], sum(alone[p] for p in g) * (1 if len(g) == 1 else
                                                                             rng.uniform(0.7, 1.3)),
                             "+".join(sorted(g))) for g in groups]
        kernels = rng.sample([k for k in kernels if len(k.primitives) > 1], 8) + \
            [k for k in kernels if len(k.primitives) == 1]
        dominated = [k for k in kernels if len(k.primitives) > 1 and k.cost >= sum(alone[p] for p in k.primitives)]
        pruned += len(dominated)
        choice = solve(kernels, ["av"], EXTERNAL)
        assert choice.cost == pytest.approx(_brute_force(kernels, ["av"], EXTERNAL))
        assert not set(choice.kernels) & set(dominated)
    assert pruned >= 20  # the case is exercised (25 of the 48 fused candidates)


def test_groups_are_convex_connected_and_bounded():
    groups = enumerate_groups(ATTENTION, max_size=4)
    names = {tuple(sorted(g)) for g in groups}
    assert ("exp", "max", "scale", "sum") in names
    # {scale, exp, div} skips sum, which lies between exp and div: not convex
    assert ("div", "exp", "scale") not in names
    assert all(sum(p.heavy for p in ATTENTION if p.name in g) <= 1 for g in groups)
    assert not any({"qk", "av"} <= g for g in groups)
    assert all(len(g) <= 4 for g in groups)
    # FuseOps' own groups are always present, even past the bound
    required = frozenset({"scale", "max", "exp", "sum", "div"})
    assert required in enumerate_groups(ATTENTION, max_size=2, required=[required])


def test_empty_and_infeasible_are_refusals():
    assert solve([], ["y"], {"x"}) is Refusal.EMPTY
    orphan = Kernel("orphan", frozenset({"y"}), frozenset({"t"}), frozenset({"y"}), 1.0)
    assert solve([orphan], ["y"], {"x"}) is Refusal.INFEASIBLE
    unrelated = Kernel("z", frozenset({"z"}), frozenset({"x"}), frozenset({"z"}), 1.0)
    assert solve([unrelated], ["y"], {"x"}) is Refusal.INFEASIBLE
