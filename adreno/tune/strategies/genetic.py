"""Genetic search guided by a cost model (Woodpecker-AutoSearch).

A chromosome is a candidate's tuple of knob indices. Each `propose` evolves the population for `generations`
generations with the cost model as fitness, then measures the model's best unmeasured candidates:

1. Population: the previous call's final population (if any) plus the `seed_best` fastest candidates observed
   so far (`observe`), topped up with uniformly random valid candidates to `population`.
2. Fitness: the model's scores (higher = faster), turned positive for roulette-wheel selection as
   exp(pressure * z) with z the scores standardised over the population (uniform when there is no model or the
   scores are all equal).
3. Each generation keeps the `elite` best and breeds the rest: two parents drawn by roulette wheel, uniform
   crossover (each gene from either parent), per-gene mutation with probability `mutation` (a new index drawn
   uniformly for that knob). An invalid child is replaced by its nearest valid candidate (`space.nearest_valid`,
   ties broken at random; a random valid candidate if none is found within `repair_radius`), so the population only
   ever holds valid candidates.
4. The batch: the top n - round(epsilon * n) by score among all candidates scored during this call (a superset of
   the final population, whose elites are carried forward), not yet measured, plus round(epsilon * n) uniformly
   random valid unmeasured candidates (exploration, and protection against a wrong model). If either source runs
   short the other fills in; fewer than n come back only when the valid space is exhausted.
"""

from __future__ import annotations

import numpy as np

from adreno.tune.strategies import SearchStrategy

OPTIONS: dict[str, tuple] = {
    "population": (64, "chromosomes per generation"),
    "generations": (4, "generations evolved per propose call"),
    "mutation": (0.15, "per-gene mutation probability"),
    "crossover": (0.9, "probability that a child is a uniform crossover of two parents (else a copy of one)"),
    "elite": (4, "best chromosomes carried unchanged into the next generation"),
    "pressure": (2.0, "selection pressure: roulette-wheel fitness = exp(pressure * standardised score)"),
    "epsilon": (0.1, "fraction of each batch drawn uniformly at random (exploration)"),
    "seed_best": (8, "fastest measured candidates seeded into the population at each propose"),
    "repair_radius": (None, "max index distance searched for a valid replacement of an invalid child (None: any)"),
}


class GeneticSearch(SearchStrategy):
    name = "genetic"
    OPTIONS = OPTIONS

    def __init__(self, space, options=None, seed=0):
        super().__init__(space, options, seed)
        self.population: list = []

    # -- pieces
    def _repair(self, child):
        fixed = self.space.nearest_valid(child, self.rng, self.options["repair_radius"])
        return fixed if fixed is not None else self.space.random(self.rng)

    def _breed(self, a, b):
        sizes = self.space.sizes
        if self.rng.random() < self.options["crossover"]:
            mask = self.rng.random(len(sizes)) < 0.5
            child = [x if m else y for x, y, m in zip(a, b, mask)]
        else:
            child = list(a)
        for axis, size in enumerate(sizes):
            if size > 1 and self.rng.random() < self.options["mutation"]:
                child[axis] = int(self.rng.integers(size))
        child = tuple(int(i) for i in child)
        return child if self.space.is_valid(child) else self._repair(child)

    def _fitness(self, scores: np.ndarray) -> np.ndarray:
        spread = scores.std()
        if not np.isfinite(spread) or spread <= 0:
            return np.full(len(scores), 1.0 / len(scores))
        z = (scores - scores.max()) / spread
        f = np.exp(self.options["pressure"] * z)
        return f / f.sum()

    def _score(self, candidates: list, model, featurize, cache: dict) -> np.ndarray:
        fresh = [c for c in dict.fromkeys(candidates) if c not in cache]
        if fresh:
            if model is None or featurize is None:
                values = np.zeros(len(fresh))
            else:
                values = np.asarray(model.predict(featurize(fresh)), dtype=np.float64).reshape(-1)
                values = np.where(np.isfinite(values), values, -np.inf)
            cache.update(zip(fresh, values.tolist()))
        return np.array([cache[c] for c in candidates])

    # -- interface
    def propose(self, n, model=None, featurize=None, measured=None):
        if n <= 0:
            return []
        excluded = self._excluded(measured)
        opts = self.options
        size = max(2, int(opts["population"]))

        pool = list(dict.fromkeys(self.best_observed(int(opts["seed_best"])) + self.population))[:size]
        pool += [c for c in (self.space.random(self.rng) for _ in range(size - len(pool))) if c is not None]
        if not pool:
            return []  # no valid candidate could be drawn at all
        cache: dict = {}
        for _ in range(int(opts["generations"])):
            scores = self._score(pool, model, featurize, cache)
            order = np.argsort(-scores, kind="mergesort")
            elite = [pool[i] for i in order[:int(opts["elite"])]]
            fitness = self._fitness(np.nan_to_num(scores, neginf=scores[np.isfinite(scores)].min()
                                                  if np.isfinite(scores).any() else 0.0))
            children = list(elite)
            seen = set(children)
            attempts = 0
            while len(children) < size and attempts < 4 * size:
                attempts += 1
                i, j = self.rng.choice(len(pool), size=2, p=fitness)
                child = self._breed(pool[i], pool[j])
                if child is None:
                    continue
                if child in seen and attempts < 3 * size:
                    continue  # keep the population diverse while that is cheap
                seen.add(child)
                children.append(child)
            pool = children
        self._score(pool, model, featurize, cache)
        self.population = pool

        n_random = int(round(opts["epsilon"] * n))
        ranked = sorted(cache, key=lambda c: -cache[c])  # stable: ties keep first-scored order
        batch = [c for c in ranked if c not in excluded][:n - n_random]
        taken = excluded | set(batch)
        batch += self._random_fill(n - len(batch), taken)
        # Guard: only valid candidates ever leave (population members are valid by construction).
        return [c for c in batch if self.space.is_valid(c)]


STRATEGY = GeneticSearch
