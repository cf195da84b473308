"""Search strategies: which candidates of a SearchSpace to measure next.

Every strategy module declares an OPTIONS table, name -> (default, description), kernel_tuner style, and one
SearchStrategy subclass. The tuner loop drives them as

    strategy = get_strategy("genetic")(space, options={"epsilon": 0.1}, seed=0)
    while budget:
        batch = strategy.propose(n, model, featurize, measured)   # n distinct valid, unmeasured candidates
        seconds = measure(batch)                                   # inf for a failed candidate
        strategy.observe(batch, seconds); model.update(featurize(batch), seconds, groups); measured |= set(batch)

`propose` returns fewer than n only when the space has no more valid unmeasured candidates. `measured` should hold
every candidate already measured or in flight; candidates passed to `observe` are excluded as well.
"""

from __future__ import annotations

import importlib
from typing import Callable

import numpy as np

from adreno.tune.space import Candidate, SearchSpace

STRATEGIES: dict[str, str] = {"genetic": "genetic", "random": "random_search", "grid": "grid"}


class SearchStrategy:
    """Base class: option handling, the observed history, and the exhaustive fallback."""

    name = "base"
    OPTIONS: dict[str, tuple] = {}

    def __init__(self, space: SearchSpace, options: dict | None = None, seed: int = 0):
        unknown = set(options or {}) - set(self.OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) {sorted(unknown)} for strategy {self.name!r}; "
                             f"options: {sorted(self.OPTIONS)}")
        self.space = space
        self.options = {key: default for key, (default, _) in self.OPTIONS.items()}
        self.options.update(options or {})
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.history: dict[Candidate, float] = {}  # observed candidate -> seconds (inf = failed)

    def propose(self, n: int, model, featurize: Callable[[list[Candidate]], np.ndarray],
                measured: set) -> list[Candidate]:
        raise NotImplementedError

    def observe(self, candidates: list[Candidate], seconds: list[float]) -> None:
        for candidate, s in zip(candidates, seconds):
            s = float(s)
            self.history[tuple(candidate)] = s if np.isfinite(s) and s > 0 else float("inf")

    # helpers for subclasses
    def _excluded(self, measured) -> set:
        return set(map(tuple, measured or ())) | set(self.history)

    def best_observed(self, k: int) -> list[Candidate]:
        """The k fastest successful candidates observed so far."""
        ok = [(s, c) for c, s in self.history.items() if np.isfinite(s)]
        return [c for _, c in sorted(ok)[:k]]

    def _random_fill(self, n: int, taken: set, tries: int | None = None) -> list[Candidate]:
        """Up to n valid candidates not in `taken` (which is updated): rejection sampling first, then, if that
        stalls, an enumeration of the whole valid space (so fewer than n means the space is exhausted)."""
        out: list[Candidate] = []
        tries = tries if tries is not None else max(200, 50 * n)
        misses = 0
        while len(out) < n and misses < tries:
            c = self.space.random(self.rng, tries=1000)
            if c is None or c in taken:
                misses += 1
                continue
            taken.add(c)
            out.append(c)
        if len(out) < n:
            rest = [c for c in self.space.all_valid() if c not in taken]
            for i in self.rng.permutation(len(rest))[:n - len(out)]:
                taken.add(rest[i])
                out.append(rest[i])
        return out


def get_strategy(name: str) -> type[SearchStrategy]:
    """The strategy class registered under `name` ("genetic" | "random" | "grid")."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown search strategy {name!r}; known: {', '.join(STRATEGIES)}")
    module = importlib.import_module(f"{__name__}.{STRATEGIES[name]}")
    return module.STRATEGY
