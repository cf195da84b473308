"""Random search: uniformly drawn valid candidates not yet measured (the cost model is not consulted)."""

from __future__ import annotations

from adreno.tune.strategies import SearchStrategy

OPTIONS: dict[str, tuple] = {
    "max_tries": (None, "rejection-sampling misses before enumerating the remaining valid space "
                        "(default: max(200, 50 * n))"),
}


class RandomSearch(SearchStrategy):
    name = "random"
    OPTIONS = OPTIONS

    def propose(self, n, model=None, featurize=None, measured=None):
        return self._random_fill(n, self._excluded(measured), tries=self.options["max_tries"])


STRATEGY = RandomSearch
