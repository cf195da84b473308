"""A search space: named knobs, each with a list of choices, and a validity predicate over whole configs.

A config is a dict knob -> value; internally a candidate is a tuple of choice indices (one per knob, in knob
order), which is what strategies mutate and cross over. The space is the product of the choices minus what
`valid` refuses (a workgroup over the device limit, a tile larger than the tensor, ...).

A conditional space (`conditions`: knob -> (switch knob, switch values where the knob is active)) joins
alternatives, e.g. a conv's layout `tile` with the knobs of the direct schedule (active when tile is 0) and those
of the Winograd stages (active when tile is 2 or 4). An inactive knob is irrelevant, so it is held at its first
choice (the canonical candidate) and left out of configs: knobs that do not apply never make distinct candidates.
Switch knobs must themselves be unconditional."""

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
    conditions: dict[str, tuple[str, tuple]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.knobs)

    @property
    def sizes(self) -> list[int]:
        return [len(choices) for choices in self.knobs.values()]

    @property
    def total(self) -> int:
        """Number of canonical candidates (valid or not): the product of the choices of every active knob."""
        return sum(int(np.prod([self.sizes[a] for a in self._switched_axes(base)], dtype=np.int64))
                   for base in self._bases())

    def _active(self, name: str, indices) -> bool:
        switch, values = self.conditions.get(name, (None, ()))
        return switch is None or self.knobs[switch][indices[self.names.index(switch)]] in values

    def _active_axes(self, indices) -> list[int]:
        return [axis for axis, name in enumerate(self.knobs) if self._active(name, indices)]

    def _switched_axes(self, indices) -> list[int]:
        return [a for a in self._active_axes(indices) if self.names[a] in self.conditions]

    def _bases(self) -> Iterator[Candidate]:
        """Every combination of the unconditional knobs, conditional ones at their first choice."""
        free = [range(n) if name not in self.conditions else range(1) for name, n in zip(self.knobs, self.sizes)]
        return itertools.product(*free)

    def canonical(self, candidate: Candidate) -> Candidate:
        """`candidate` with every inactive knob at its first choice."""
        return tuple(i if self._active(name, candidate) else 0 for name, i in zip(self.knobs, candidate))

    def config(self, candidate: Candidate) -> Config:
        """knob -> value of the active knobs."""
        return {name: self.knobs[name][i] for name, i in zip(self.knobs, candidate) if self._active(name, candidate)}

    def candidate(self, config: Config) -> Candidate:
        """Indices of a config's values, inactive knobs canonical (KeyError/ValueError if an active knob or a value
        is not in the space)."""
        indices = [self.knobs[name].index(config[name]) if name not in self.conditions else 0 for name in self.knobs]
        return tuple(self.knobs[name].index(config[name]) if self._active(name, indices) else 0
                     for name in self.knobs)

    def is_valid(self, candidate: Candidate) -> bool:
        return all(0 <= i < n for i, n in zip(candidate, self.sizes)) and self.canonical(candidate) == candidate \
            and bool(self.valid(self.config(candidate)))

    def random(self, rng: np.random.Generator, tries: int = 10_000) -> Candidate | None:
        """A valid candidate drawn uniformly per knob (rejection sampling; inactive knobs canonical), or None if
        none was found in `tries`."""
        for _ in range(tries):
            candidate = self.canonical(tuple(int(rng.integers(n)) for n in self.sizes))
            if self.is_valid(candidate):
                return candidate
        return None

    def all_valid(self) -> Iterator[Candidate]:
        """Every valid candidate in lexicographic order (for grid search and small spaces)."""
        for base in self._bases():
            axes = self._switched_axes(base)
            for values in itertools.product(*(range(self.sizes[a]) for a in axes)):
                candidate = list(base)
                for axis, i in zip(axes, values):
                    candidate[axis] = i
                if self.is_valid(tuple(candidate)):
                    yield tuple(candidate)

    def neighbours(self, candidate: Candidate) -> Iterator[Candidate]:
        """Canonical candidates one step away on one active knob (valid or not), nearest first."""
        for axis in self._active_axes(candidate):
            for step in (-1, 1):
                i = candidate[axis] + step
                if 0 <= i < self.sizes[axis]:
                    yield self.canonical(candidate[:axis] + (i,) + candidate[axis + 1:])

    def nearest_valid(self, candidate: Candidate, rng: np.random.Generator | None = None,
                      max_radius: int | None = None) -> Candidate | None:
        """The valid candidate closest to `candidate` in index distance (Manhattan, ties broken at random):
        how the genetic search repairs an invalid child."""
        candidate = self.canonical(candidate)
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
