"""A search space: named knobs, each with a list of choices, and a validity predicate over whole configs.

A config is a dict knob -> value; internally a candidate is a tuple of choice indices (one per knob, in knob
order), which is what strategies mutate and cross over. The space is the product of the choices minus what
`valid` refuses (a workgroup over the device limit, a tile larger than the tensor, ...)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

Config = dict
Candidate = tuple  # indices into each knob's choices, in knob order


@dataclass
class SearchSpace:
    """Knobs with their choices plus a validity predicate; `valid` defaults to accepting everything."""

    knobs: dict[str, list]
    valid: Callable[[Config], bool] = field(default=lambda config: True)

    @property
    def names(self) -> list[str]:
        return list(self.knobs)

    @property
    def sizes(self) -> list[int]:
        return [len(choices) for choices in self.knobs.values()]

    @property
    def total(self) -> int:
        """Size of the product (valid or not)."""
        return int(np.prod(self.sizes, dtype=np.int64))

    def config(self, candidate: Candidate) -> Config:
        return {name: self.knobs[name][i] for name, i in zip(self.knobs, candidate)}

    def candidate(self, config: Config) -> Candidate:
        """Indices of a config's values (KeyError/ValueError if a knob or value is not in the space)."""
        return tuple(self.knobs[name].index(config[name]) for name in self.knobs)

    def is_valid(self, candidate: Candidate) -> bool:
        return all(0 <= i < n for i, n in zip(candidate, self.sizes)) and bool(self.valid(self.config(candidate)))

    def random(self, rng: np.random.Generator, tries: int = 10_000) -> Candidate | None:
        """A uniformly drawn valid candidate (rejection sampling), or None if none was found in `tries`."""
        for _ in range(tries):
            candidate = tuple(int(rng.integers(n)) for n in self.sizes)
            if self.is_valid(candidate):
                return candidate
        return None

    def all_valid(self) -> Iterator[Candidate]:
        """Every valid candidate in lexicographic order (for grid search and small spaces)."""
        for candidate in itertools.product(*(range(n) for n in self.sizes)):
            if self.is_valid(candidate):
                yield candidate

    def neighbours(self, candidate: Candidate) -> Iterator[Candidate]:
        """Candidates one step away on one knob (valid or not), nearest first."""
        for axis, size in enumerate(self.sizes):
            for step in (-1, 1):
                i = candidate[axis] + step
                if 0 <= i < size:
                    yield candidate[:axis] + (i,) + candidate[axis + 1:]

    def nearest_valid(self, candidate: Candidate, rng: np.random.Generator | None = None,
                      max_radius: int | None = None) -> Candidate | None:
        """The valid candidate closest to `candidate` in index distance (Manhattan, ties broken at random):
        how the genetic search repairs an invalid child."""
        if self.is_valid(candidate):
            return candidate
        rng = rng or np.random.default_rng(0)
        frontier, seen = [candidate], {candidate}
        for _ in range(max_radius or sum(self.sizes)):
            following = []
            for c in frontier:
                for n in self.neighbours(c):
                    if n not in seen:
                        seen.add(n)
                        following.append(n)
            if not following:
                return None
            valid = [c for c in following if self.is_valid(c)]
            if valid:
                return valid[int(rng.integers(len(valid)))]
            frontier = following
        return None

    def encode(self, candidates: list[Candidate]) -> np.ndarray:
        """Knob values as a float matrix (numeric choices as themselves, others as their index)."""
        columns = []
        for axis, choices in enumerate(self.knobs.values()):
            numeric = all(isinstance(v, (int, float, bool)) for v in choices)
            columns.append([float(choices[c[axis]]) if numeric else float(c[axis]) for c in candidates])
        return np.array(columns, dtype=np.float64).T.reshape(len(candidates), len(self.knobs))
