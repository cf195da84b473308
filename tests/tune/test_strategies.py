"""Search strategies on a synthetic space with a known optimum: grid and random cover it, genetic search guided by a
cost model finds it within a budget much smaller than the space, never proposes an invalid, duplicate or
already-measured candidate."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from adreno.costmodel import AnalyticalModel, LearnedModel, RandomModel
from adreno.tune.space import SearchSpace
from adreno.tune.strategies import SearchStrategy, get_strategy

OPTIMUM = (5, 2, 4, 6)
WEIGHTS = (0.15, 0.25, 0.2, 0.1)


def synthetic_space() -> SearchSpace:
    """8 x 7 x 6 x 8 = 2688 candidates; one in three invalid (a + 2b + c divisible by 3) -> 1792 valid."""
    return SearchSpace({"a": list(range(8)), "b": list(range(7)), "c": list(range(6)), "d": list(range(8))},
                       valid=lambda c: (c["a"] + 2 * c["b"] + c["c"]) % 3 != 0)


def cost(candidate) -> float:
    """Smooth bowl around OPTIMUM times +-1% deterministic noise (smaller than any gap to the optimum)."""
    h = int.from_bytes(hashlib.blake2b(bytes(candidate), digest_size=4).digest(), "little") / 2 ** 32
    bowl = sum(w * (x - o) ** 2 for w, x, o in zip(WEIGHTS, candidate, OPTIMUM))
    return float(np.exp(bowl)) * (1 + 0.02 * (h - 0.5))


def featurize(candidates) -> np.ndarray:
    """Knob indices and their squares: a log-linear (analytical) model can express the bowl exactly."""
    x = np.array(candidates, dtype=np.float64).reshape(len(candidates), 4)
    return np.hstack([x, x ** 2])


def analytical():
    return AnalyticalModel(columns=list(range(8)), prior=[0.0] * 8)


def tune(strategy: SearchStrategy, model, budget: int, batch: int = 16) -> list:
    """The tuner loop in miniature; checks every batch is distinct, valid and unmeasured."""
    measured: set = set()
    order = []
    while len(measured) < budget:
        want = min(batch, budget - len(measured))
        proposed = strategy.propose(want, model, featurize, measured)
        if not proposed:
            break
        assert len(proposed) == want or len(measured) + len(proposed) == sum(1 for _ in strategy.space.all_valid())
        assert len(set(proposed)) == len(proposed), "duplicate in one batch"
        assert not set(proposed) & measured, "re-proposed a measured candidate"
        assert all(strategy.space.is_valid(c) for c in proposed), "invalid candidate proposed"
        seconds = [cost(c) for c in proposed]
        strategy.observe(proposed, seconds)
        if model is not None:
            model.update(featurize(proposed), np.array(seconds))
        measured |= set(proposed)
        order += proposed
    return order


@pytest.fixture(scope="module")
def space():
    return synthetic_space()


@pytest.fixture(scope="module")
def valid(space):
    return list(space.all_valid())


def test_synthetic_space_has_the_known_optimum(space, valid):
    assert len(valid) == 1792 and space.total == 2688
    assert min(valid, key=cost) == OPTIMUM
    assert not space.is_valid((5, 2, 3, 6))  # a neighbour of the optimum is invalid: the rule bites near it


def test_get_strategy_names_and_options(space):
    assert {get_strategy(n).name for n in ("genetic", "random", "grid")} == {"genetic", "random", "grid"}
    with pytest.raises(ValueError, match="genetic.*random.*grid"):
        get_strategy("annealing")
    with pytest.raises(ValueError, match="unknown option"):
        get_strategy("genetic")(space, {"populaton": 10})
    genetic = get_strategy("genetic")
    assert {"population", "generations", "mutation", "epsilon"} <= set(genetic.OPTIONS)
    assert all(isinstance(desc, str) and desc for _, desc in genetic.OPTIONS.values())
    assert genetic(space, {"epsilon": 0.5}).options["epsilon"] == 0.5


def test_grid_is_exhaustive_in_order(space, valid):
    order = tune(get_strategy("grid")(space), None, budget=10_000, batch=100)
    assert order == valid
    assert OPTIMUM in order
    assert get_strategy("grid")(space).propose(5, None, featurize, set(valid)) == []


def test_grid_reoffers_unmeasured_proposals(space, valid):
    grid = get_strategy("grid")(space)
    first = grid.propose(4, None, featurize, set())
    measured = set(first[:2])
    assert grid.propose(4, None, featurize, measured) == first[2:] + valid[4:6]


def test_random_covers_the_whole_space_eventually(space, valid):
    order = tune(get_strategy("random")(space, seed=3), None, budget=10_000, batch=64)
    assert sorted(order) == sorted(valid)  # every valid candidate exactly once (duplicates checked in tune)
    assert order != valid  # and not in grid order


def test_random_is_deterministic_per_seed(space):
    a = get_strategy("random")(space, seed=7).propose(20, None, featurize, set())
    b = get_strategy("random")(space, seed=7).propose(20, None, featurize, set())
    c = get_strategy("random")(space, seed=8).propose(20, None, featurize, set())
    assert a == b and a != c


@pytest.mark.parametrize("make_model", [analytical, lambda: LearnedModel(num_boost_round=30, fallback=analytical())],
                         ids=["analytical", "learned"])
def test_genetic_with_a_model_finds_the_optimum_well_within_budget(space, make_model):
    budget = 160  # < 10% of the 1792 valid candidates
    order = tune(get_strategy("genetic")(space, seed=0), make_model(), budget)
    assert len(order) == budget
    assert OPTIMUM in order


def test_genetic_beats_random_search_at_equal_budget(space):
    """Over 5 seeds at a 96-trial budget the model-guided search's best is better than random search's."""
    genetic, rand = [], []
    for seed in range(5):
        genetic.append(min(map(cost, tune(get_strategy("genetic")(space, seed=seed), analytical(), 96))))
        rand.append(min(map(cost, tune(get_strategy("random")(space, seed=seed), None, 96))))
    assert np.mean(genetic) < np.mean(rand)
    assert sum(g <= cost(OPTIMUM) * 1.0001 for g in genetic) >= 4


def test_genetic_never_proposes_invalid_and_repairs_children():
    """A sparse rule (about 1 in 4 valid, single-knob steps often invalid): repair is needed all the time."""
    space = SearchSpace({"a": list(range(7)), "b": list(range(6)), "c": list(range(8)), "d": list(range(5))},
                        valid=lambda c: (c["a"] * 3 + c["b"] + 2 * c["c"] + c["d"]) % 4 == 0)
    repairs = {"n": 0}
    original = space.nearest_valid

    def counting(candidate, rng=None, max_radius=None):
        if not space.is_valid(candidate):
            repairs["n"] += 1
        return original(candidate, rng, max_radius)

    space.nearest_valid = counting
    model = RandomModel(seed=1)
    for seed in range(12):
        strategy = get_strategy("genetic")(space, {"population": 24, "generations": 3, "mutation": 0.4}, seed=seed)
        measured: set = set()
        for _ in range(5):
            batch = strategy.propose(12, model, featurize, measured)
            assert len(batch) == 12
            assert all(space.is_valid(c) for c in batch)
            assert len(set(batch)) == 12 and not set(batch) & measured
            assert all(space.is_valid(c) for c in strategy.population)
            strategy.observe(batch, [cost(c) if i % 5 else float("inf") for i, c in enumerate(batch)])
            measured |= set(batch)
    assert repairs["n"] > 100


def test_genetic_returns_fewer_only_when_the_space_is_exhausted():
    space = SearchSpace({"a": list(range(4)), "b": list(range(3))}, valid=lambda c: c["a"] != c["b"])
    strategy = get_strategy("genetic")(space, {"population": 8}, seed=0)
    valid = set(space.all_valid())  # 9 of 12
    first = strategy.propose(5, analytical_small(), small_featurize, set())
    assert len(first) == 5
    strategy.observe(first, [1.0] * 5)
    rest = strategy.propose(10, analytical_small(), small_featurize, set())
    assert len(rest) == 4 and set(first) | set(rest) == valid
    assert strategy.propose(3, None, small_featurize, set(rest)) == []  # measured (passed) + observed = all


def analytical_small():
    return AnalyticalModel(columns=[0, 1], prior=[1.0, -1.0])


def small_featurize(candidates):
    return np.array(candidates, dtype=np.float64).reshape(len(candidates), 2)


def test_genetic_follows_the_model_and_keeps_epsilon_random(space):
    """With a model that prefers high `a` and no exploration, the batch is the model's top; epsilon adds randoms."""
    model = AnalyticalModel(columns=[0], prior=[-1.0])  # log seconds = -a: bigger a is faster
    greedy = get_strategy("genetic")(space, {"epsilon": 0.0}, seed=0).propose(16, model, featurize, set())
    assert all(c[0] == 7 for c in greedy)
    mixed = get_strategy("genetic")(space, {"epsilon": 0.5}, seed=0).propose(16, model, featurize, set())
    assert sum(c[0] == 7 for c in mixed) < 16 and sum(c[0] == 7 for c in mixed) >= 8


def test_genetic_seeds_its_population_with_the_best_observed(space, valid):
    strategy = get_strategy("genetic")(space, {"generations": 0, "seed_best": 3}, seed=0)
    best = sorted(valid, key=cost)[:3]
    strategy.observe(best + [valid[0]], [cost(c) for c in best] + [float("inf")])
    assert strategy.best_observed(3) == best
    strategy.propose(4, RandomModel(), featurize, set())
    assert set(best) <= set(strategy.population)
