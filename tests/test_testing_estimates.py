"""The exact side of the kit's ``error_bound`` check (`udm.host.testing.estimates`), on hand-computed cases."""

from __future__ import annotations

import math
import random

import pytest

from udm.host.testing.estimates import allowed_misses, estimate_errors, random_members


def _tail(trials: int, p: float, m: int) -> float:
    """P(X > m) for X ~ Binomial(trials, p), summed upward (the function under test sums downward)."""
    return sum(math.comb(trials, j) * p ** j * (1 - p) ** (trials - j) for j in range(m + 1, trials + 1))


def test_allowed_misses_is_the_binomial_quantile() -> None:
    assert allowed_misses(25, 1.0) == 0  # a guarantee allows no miss
    for trials, conf in ((25, 0.99), (25, 0.997), (100, 0.95), (10, 0.5)):
        m = allowed_misses(trials, conf)
        assert _tail(trials, 1 - conf, m) <= 1e-6 < _tail(trials, 1 - conf, m - 1), (trials, conf, m)
    assert allowed_misses(25, 0.99) == 5


def test_distinct_count_error_is_relative_and_compares_json_numbers() -> None:
    members = [1, 1.0, 2, "2", "a", 3.5, 3.5]  # distinct: 1, 2, "2", "a", 3.5
    assert estimate_errors("distinct_count", 5, members) == ([0.0], None)
    assert estimate_errors("distinct_count", 6, members) == ([0.2], None)
    assert estimate_errors("distinct_count", "5", members)[1] == "a distinct count must be a number, got '5'"


def test_quantile_error_is_the_distance_from_the_rank_interval() -> None:
    members = [3, 1, 4, 1, 5, 9, 2, 6]  # sorted: 1 1 2 3 4 5 6 9
    # 3 has rank interval [3/8, 4/8]: the exact median; 5 is [5/8, 6/8]: 0.125 above; 1 is [0, 2/8]: 0.25 below
    assert estimate_errors("quantile", 3.0, members, [0.5]) == ([0.0], None)
    assert estimate_errors("quantile", [5.0, 1.0, 9.0], members, [0.5, 0.5, 1.0]) == ([0.125, 0.25, 0.0], None)
    assert "2 value(s) for the 1 rank(s)" in str(estimate_errors("quantile", [1, 2], members, [0.5])[1])


def test_frequency_errors_and_bounds() -> None:
    members = ["a"] * 6 + ["b"] * 3 + ["c"]
    rows = [{"item": "a", "estimate": 7, "lower_bound": 5, "upper_bound": 7},
            {"item": "b", "estimate": 3, "lower_bound": 3, "upper_bound": 3}]
    assert estimate_errors("frequencies", rows, members) == ([0.1], None)  # |7 - 6| / 10 members
    bad = [{"item": "c", "estimate": 3, "lower_bound": 2, "upper_bound": 3}]
    assert estimate_errors("frequencies", bad, members)[1] == "item 'c' occurs 1 times, outside its own bounds [2, 3]"
    assert "needs item, estimate" in str(estimate_errors("frequencies", [{"item": "a"}], members)[1])


@pytest.mark.parametrize(("kinds", "types"), [(("number",), {int, float}), (("integer",), {int}),
                                              (("string",), {str}), (("number", "string"), {int, float, str})])
def test_random_members_fit_the_declared_input(kinds: tuple[str, ...], types: set[type]) -> None:
    rng = random.Random(4)
    seen: set[type] = set()
    for est in ("distinct_count", "quantile", "frequencies"):
        for _ in range(40):
            ms = random_members(est, kinds, rng, rng.randint(1, 300))
            seen |= {type(v) for v in ms}
    assert seen == types
    with pytest.raises(ValueError, match="admits neither"):
        random_members("distinct_count", ("boolean",), rng, 3)
