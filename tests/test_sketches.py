"""udm-sketches as plain Python (INTERFACES §6): hand-computed values in the exact regime, exact answers
(set sizes, sorted ranks, counts) within the declared bounds beyond it, and the manifests' promises."""

from __future__ import annotations

import math
import pickle
import random
from bisect import bisect_left, bisect_right
from collections import Counter
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from udm.host.validation import check_udm
from udm_sketches import ALL, ApproxDistinct, ApproxQuantile, FrequentItems


def _fold(u: Any, values: list[Any]) -> Any:
    return u.compute(u.add(u.initial_state(), values))


def test_manifests_declare_incremental_algebraic_without_remove_and_an_error_bound() -> None:
    for cls in ALL:
        assert check_udm(cls) == [], cls
        m = cls.manifest
        assert (m.kind, m.properties.incremental, m.properties.algebraic) == ("uda", True, True), m.name
        assert not hasattr(cls, "remove") and m.error_bound is not None
    assert {c.manifest.name: c.manifest.error_bound.estimates for c in ALL} == {  # type: ignore[union-attr]
        "approx_distinct": "distinct_count", "approx_quantile": "quantile", "frequent_items": "frequencies"}
    assert ApproxDistinct.manifest.properties.deterministic
    assert not ApproxQuantile.manifest.properties.deterministic  # KLL flips coins beyond k members
    assert not FrequentItems.manifest.properties.deterministic  # fold order matters beyond the map size
    # the bounds against the sketches' published figures: HLL's 1.04/sqrt(K) per standard deviation
    # (3 of them), KLL's 1.33 % at k = 200, and the frequent-items epsilon 3.5 / map size
    hll = ApproxDistinct.manifest.error_bound
    assert hll is not None and abs(hll.bound - 3 * 1.04 / math.sqrt(4096)) < 0.003 and hll.confidence == 0.997
    assert ApproxQuantile.manifest.error_bound.bound == pytest.approx(0.0133, abs=5e-5)  # type: ignore[union-attr]
    assert FrequentItems.manifest.error_bound.bound == 3.5 / 1024  # type: ignore[union-attr]
    assert ApproxDistinct(ApproxDistinct.Params(lg_k=14)).error_bound() == pytest.approx(hll.bound / 2, rel=0.05)


def test_approx_distinct_counts_json_values_exactly_while_small() -> None:
    u = ApproxDistinct()
    assert _fold(u, [1, 1.0, 2, "2", "a", "a", 3.5, 2**70]) == 6  # 1 == 1.0; "2" is not 2
    assert _fold(u, []) == 0 and _fold(u, ["x"]) == 1
    assert _fold(u, [""]) == 1 and _fold(u, ["", "s:"]) == 2  # (DataSketches' HLL skips "" unless told apart)
    assert _fold(u, list(range(300))) == 300
    assert isinstance(_fold(u, [1, 2]), int)


def test_approx_distinct_is_one_number_for_one_set_however_folded() -> None:
    rng = random.Random(2)
    values = [rng.randrange(60_000) for _ in range(100_000)]
    exact = len(set(values))
    u = ApproxDistinct()
    one = _fold(u, values)
    assert abs(one - exact) <= u.error_bound() * exact  # (a 99.7 % bound; this seed is well inside)
    by_one = u.initial_state()
    for v in values[:5000]:
        by_one = u.add(by_one, [v])
    by_one = u.add(by_one, values[5000:])
    arrays = u.add_array(u.add_array(u.initial_state(), np.array(values[:50_000], dtype=np.int64)),
                         np.array(values[50_000:], dtype=np.float64))  # integral floats: the same values
    parts = [u.add(u.initial_state(), values[i::7]) for i in range(7)]
    right = u.merge(u.merge(parts[2], parts[3]), u.merge(parts[4], u.merge(parts[5], parts[6])))
    tree = u.merge(u.merge(parts[0], parts[1]), right)
    assert {u.compute(by_one), u.compute(arrays), u.compute(tree), u.compute(u.merge(u.initial_state(), tree))} == {one}


def test_approx_distinct_state_is_small_bytes() -> None:
    u = ApproxDistinct()
    st = u.add(u.initial_state(), list(range(100_000)))
    assert isinstance(st, bytes) and len(st) < 2200  # HLL_4 at lg_k 12: 2 KB
    assert u.compute(pickle.loads(pickle.dumps(st))) == u.compute(st)
    small = ApproxDistinct(ApproxDistinct.Params(lg_k=8))
    assert len(small.add(small.initial_state(), list(range(100_000)))) < 200
    with pytest.raises(ValidationError):
        ApproxDistinct.Params(lg_k=3)


def test_approx_quantile_hand_computed() -> None:
    members = [3, 1, 4, 1, 5, 9, 2, 6]  # sorted: 1 1 2 3 4 5 6 9
    assert _fold(ApproxQuantile(), members) == 3.0  # the smallest x with at least half the members <= x
    many = ApproxQuantile(ApproxQuantile.Params(qs=(1.0, 0.0, 0.25, 0.5, 0.6, 0.9)))
    assert _fold(many, members) == [9.0, 1.0, 1.0, 3.0, 4.0, 9.0]  # in the order given
    assert many.quantile_ranks() == [1.0, 0.0, 0.25, 0.5, 0.6, 0.9]
    assert _fold(ApproxQuantile(ApproxQuantile.Params(q=0.1)), [2.5]) == 2.5
    with pytest.raises(ValidationError, match="not both"):
        ApproxQuantile.Params(q=0.5, qs=(0.1,))
    with pytest.raises(ValidationError):
        ApproxQuantile.Params(q=1.5)
    with pytest.raises(TypeError, match="needs numbers"):
        ApproxQuantile().add(ApproxQuantile().initial_state(), ["x"])


def test_approx_quantile_ranks_within_the_bound_beyond_k() -> None:
    rng = random.Random(5)
    values = [rng.lognormvariate(0, 2) for _ in range(200_000)]
    ordered = sorted(values)
    qs = (0.01, 0.25, 0.5, 0.75, 0.99)
    u = ApproxQuantile(ApproxQuantile.Params(qs=qs))
    parts = [u.add_array(u.initial_state(), np.array(values[i::4])) for i in range(4)]
    got = u.compute(u.merge(u.merge(parts[0], parts[1]), u.merge(parts[2], parts[3])))
    n = len(values)
    for q, x in zip(qs, got, strict=True):
        lo, hi = bisect_left(ordered, x) / n, bisect_right(ordered, x) / n
        assert lo - u.error_bound() <= q <= hi + u.error_bound(), (q, x, lo, hi)
    assert len(u.add(u.initial_state(), values)) < 6000  # bytes, however many members


def test_frequent_items_hand_computed() -> None:
    members = ["a", "a", "b", 1, 1.0, "1", 2.5]
    row = {"estimate": 2, "lower_bound": 2, "upper_bound": 2}
    one = {"estimate": 1, "lower_bound": 1, "upper_bound": 1}
    # counts: "a" 2, 1 2 (1.0 is 1), "1" 1, "b" 1, 2.5 1;
    # ties by canonical JSON text: '"a"' < '1', '"1"' < '"b"' < '2.5'
    assert _fold(FrequentItems(), members) == [{"item": "a", **row}, {"item": 1, **row}, {"item": "1", **one},
                                               {"item": "b", **one}, {"item": 2.5, **one}]
    assert _fold(FrequentItems(FrequentItems.Params(k=2)), members) == [{"item": "a", **row}, {"item": 1, **row}]
    u = FrequentItems()
    assert u.compute(u.add_array(u.initial_state(), np.array([1.0, 2.0, 1.0]))) == [
        {"item": 1, **row}, {"item": 2, **one}]  # a float column's integral values come out as integers


def test_frequent_items_bounds_hold_beyond_the_map_size() -> None:
    rng = random.Random(9)
    values = [int(20_000 ** rng.random()) for _ in range(60_000)] + [f"s{rng.randrange(5000)}" for _ in range(20_000)]
    rng.shuffle(values)
    counts = Counter(values)
    n = len(values)
    for error_type in ("no_false_positives", "no_false_negatives"):
        u = FrequentItems(FrequentItems.Params(k=1000, lg_max_map_size=6, error_type=error_type))
        parts = [u.add(u.initial_state(), values[i::3]) for i in range(3)]
        got = u.compute(u.merge(parts[0], u.merge(parts[1], parts[2])))
        assert got and len(counts) > 48  # beyond the exact size (0.75 * 64)
        eps = u.error_bound()
        for r in got:
            f = counts[r["item"]]
            assert r["lower_bound"] <= f <= r["upper_bound"] and abs(r["estimate"] - f) <= eps * n, r
        assert [r["estimate"] for r in got] == sorted((r["estimate"] for r in got), reverse=True)
        if error_type == "no_false_negatives":  # every item more frequent than the bound is listed
            listed = {r["item"] for r in got}
            assert {v for v, f in counts.items() if f > eps * n} <= listed
