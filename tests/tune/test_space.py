"""Search spaces: validity, sampling, enumeration and nearest-valid repair."""

from __future__ import annotations

import numpy as np

from adreno.tune.space import SearchSpace

SPACE = SearchSpace({"x": [1, 2, 4, 8], "y": [1, 2, 4, 8], "mode": ["a", "b"]},
                    valid=lambda c: c["x"] * c["y"] <= 16)


def test_all_valid_matches_the_predicate():
    valid = list(SPACE.all_valid())
    assert len(valid) == 2 * sum(1 for x in [1, 2, 4, 8] for y in [1, 2, 4, 8] if x * y <= 16)
    assert all(SPACE.config(c)["x"] * SPACE.config(c)["y"] <= 16 for c in valid)


def test_random_is_valid_and_config_roundtrips():
    rng = np.random.default_rng(0)
    for _ in range(200):
        c = SPACE.random(rng)
        assert SPACE.is_valid(c) and SPACE.candidate(SPACE.config(c)) == c


def test_nearest_valid_repairs_to_distance_one():
    bad = SPACE.candidate({"x": 8, "y": 4, "mode": "a"})
    assert not SPACE.is_valid(bad)
    fixed = SPACE.nearest_valid(bad, np.random.default_rng(1))
    assert SPACE.is_valid(fixed) and sum(abs(a - b) for a, b in zip(bad, fixed)) == 1


def test_encode_uses_numeric_values():
    enc = SPACE.encode([SPACE.candidate({"x": 8, "y": 2, "mode": "b"})])
    assert enc.tolist() == [[8.0, 2.0, 1.0]]
