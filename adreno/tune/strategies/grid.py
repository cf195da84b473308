"""Grid search: every valid candidate in the space's lexicographic order (`space.all_valid()`), skipping measured
ones; candidates proposed earlier but never measured are offered again first. The cost model is not consulted."""

from __future__ import annotations

from adreno.tune.strategies import SearchStrategy

OPTIONS: dict[str, tuple] = {}


class GridSearch(SearchStrategy):
    name = "grid"
    OPTIONS = OPTIONS

    def __init__(self, space, options=None, seed=0):
        super().__init__(space, options, seed)
        self._cursor = space.all_valid()
        self._issued: list = []  # proposed, not yet known to be measured

    def propose(self, n, model=None, featurize=None, measured=None):
        excluded = self._excluded(measured)
        self._issued = [c for c in self._issued if c not in excluded]
        out = self._issued[:n]
        while len(out) < n:
            c = next(self._cursor, None)
            if c is None:
                break
            if c not in excluded:
                out.append(c)
                self._issued.append(c)
        return out


STRATEGY = GridSearch
