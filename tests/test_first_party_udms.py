"""The first-party UDMs of INTERFACES §6 as plain Python, against hand-computed values (udm-sketches:
`test_sketches`)."""

from __future__ import annotations

import json
import math
import pickle
import random
import statistics

import numpy as np
import pytest

from udm.host.validation import check_udm
from udm.sdk import INF, Event, WindowDescriptor
from udm_patterns import ALL as PATTERNS
from udm_patterns import Follows, Members, TopK
from udm_sketches import ALL as SKETCHES
from udm_stats import ALL as STATS
from udm_stats import Avg, Count, InRange, Max, Median, Min, Sum, TimeWeightedAverage, Variance

W = WindowDescriptor


def _inc(cls: type, values: list[float], removed: list[float] = ()) -> object:  # type: ignore[assignment]
    u = cls()
    s = u.add(u.initial_state(), values)
    if removed:
        s = u.remove(s, list(removed))
    return u.compute(s)


def test_every_first_party_udm_is_valid_and_declared_as_in_interfaces() -> None:
    table = {
        "count": ("uda", True, True, False), "sum": ("uda", True, True, False), "avg": ("uda", True, True, False),
        "min": ("uda", True, True, False), "max": ("uda", True, True, False),
        "variance": ("uda", True, True, False), "median": ("uda", False, False, False),
        "twa": ("uda", False, False, True), "topk": ("udo", False, False, False),
        "members": ("udo", False, False, True), "follows": ("udo", False, False, True),
        "explode": ("udo", False, False, False),
        "approx_distinct": ("uda", True, True, False), "approx_quantile": ("uda", True, True, False),
        "frequent_items": ("uda", True, True, False),
    }
    seen = {}
    for cls in (*STATS, *PATTERNS, *SKETCHES):
        assert check_udm(cls) == [], cls
        m = cls.manifest
        seen[m.name] = (m.kind, m.properties.incremental, m.properties.algebraic, m.properties.time_sensitive)
    for name, want in table.items():
        assert seen[name] == want, name
    assert Follows.manifest.properties.time_bound and "time_bound" in Follows.manifest.allowed_output
    assert [c.manifest.name for c in (*STATS, *PATTERNS, *SKETCHES) if c.manifest.span] == ["explode"]


def test_count_sum_avg() -> None:
    assert _inc(Count, [3, 1, 4]) == 3
    assert _inc(Count, [3, 1, 4], [1]) == 2
    assert _inc(Sum, [3, 1, 4]) == 8 and isinstance(_inc(Sum, [3, 1, 4]), int)
    assert _inc(Sum, [0.1, 0.2, 0.3], [0.2]) == pytest.approx(0.4, abs=1e-15)
    assert _inc(Sum, [1, 2.5], [2.5]) == 1
    assert _inc(Avg, [1.0, 2.0, 6.0]) == 3.0
    assert _inc(Avg, [1.0, 2.0, 6.0], [6.0]) == 1.5


def test_compensated_sum_survives_long_add_remove_chains() -> None:
    u = Sum()
    s = u.initial_state()
    big, small = 1e16, 1.0
    s = u.add(s, [big, small, small])
    s = u.remove(s, [big])
    assert u.compute(s) == 2.0  # a naive float sum gives 0.0 or 4.0 here


def test_variance_is_population_variance() -> None:
    xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    assert _inc(Variance, xs) == pytest.approx(4.0)  # the textbook example: σ² = 4
    assert _inc(Variance, [*xs, 100.0], [100.0]) == pytest.approx(statistics.pvariance(xs))
    assert _inc(Variance, [3.0]) == 0.0


def test_variance_after_removals_equals_a_fresh_pass_exactly() -> None:
    # Welford's running update drifted here, so an incremental snapshot window changed a final value.
    rng = random.Random(5)
    u = Variance()
    for _ in range(200):
        members = [rng.choice([13, 37.5, 59, 1e16, 0.1, -3]) for _ in range(rng.randint(2, 9))]
        gone = members[: rng.randint(1, len(members) - 1)]
        kept = members[len(gone):]
        fresh = u.compute(u.add(u.initial_state(), kept))
        assert u.compute(u.remove(u.add(u.initial_state(), members), gone)) == fresh
        assert fresh == pytest.approx(statistics.pvariance([float(x) for x in kept]), rel=1e-12, abs=1e-12)


def test_min_max_hold_one_value_and_are_merge_only() -> None:
    """A min/max state is its extreme alone (a slice's partial is O(1)); without ``remove`` the engine
    evaluates them merge-only and re-folds what a retraction changes from the members it keeps."""
    assert _inc(Min, [5, 3, 8, 3]) == 3 and _inc(Max, [5, 3, 8]) == 8
    for cls in (Min, Max):
        u = cls()
        assert not hasattr(u, "remove")
        assert len(u.add(u.initial_state(), list(range(1000)))) == 1
        assert len(u.merge(u.add(u.initial_state(), [1, 2]), u.add(u.initial_state(), [3]))) == 1


@pytest.mark.parametrize("cls", [Min, Max])
def test_min_max_pick_the_same_value_whatever_the_order_and_grouping(cls: type) -> None:
    """Among values equal as numbers an int ranks below a float and -0.0 below 0.0; the pick (its JSON text:
    ``3`` or ``3.0``) must not depend on the order values enter or partials merge in (a finger B-tree
    merges slices by leave position)."""
    rng = random.Random(11)
    u = cls()

    def want(vals: list[float]) -> float:  # brute force: the extreme of the total order
        key = lambda v: (v, type(v) is float, math.copysign(1.0, v) > 0)  # noqa: E731
        return max(vals, key=key) if cls is Max else min(vals, key=key)

    for _ in range(300):
        vals = [rng.choice([3, 3.0, 0, 0.0, -0.0, -2, -2.0, 7, 7.5]) for _ in range(rng.randint(1, 8))]
        rng.shuffle(vals)
        cut = sorted(rng.sample(range(len(vals) + 1), k=min(3, len(vals) + 1)))
        parts = [vals[a:b] for a, b in zip([0, *cut], [*cut, len(vals)], strict=True)]
        states = [u.add(u.initial_state(), p) for p in parts]
        rng.shuffle(states)
        st = u.initial_state()
        for x in states:
            st = u.merge(x, st) if rng.random() < 0.5 else u.merge(st, x)
        got = u.compute(st)
        w = want(vals)
        assert json.dumps(got) == json.dumps(w), (vals, got, w)
        assert json.dumps(u.compute(u.add(u.initial_state(), vals))) == json.dumps(w)
        for dt in ("float64",) if any(type(v) is float for v in vals) else ("int64", "float64"):
            col = np.array(vals, dtype=dt)
            assert json.dumps(u.compute(u.add_array(u.initial_state(), col))) == json.dumps(
                want(col.tolist()))


@pytest.mark.parametrize("cls", [Count, Sum, Avg, Min, Max, Variance])
def test_merge_equals_state_of_union_and_leaves_inputs_alone(cls: type) -> None:
    u = cls()
    a, b = [1.0, 5.0, 2.0], [7.0, 3.0]
    sa, sb = u.add(u.initial_state(), a), u.add(u.initial_state(), b)
    before = pickle.dumps((sa, sb))
    merged = u.merge(sa, sb)
    assert u.compute(merged) == pytest.approx(u.compute(u.add(u.initial_state(), a + b)))
    assert pickle.dumps((sa, sb)) == before  # pane states are reused across windows
    assert u.compute(u.merge(u.initial_state(), sa)) == pytest.approx(u.compute(sa))


def test_median_odd_and_even() -> None:
    assert Median().compute([5, 1, 3]) == 3
    assert Median().compute([4, 1, 3, 2]) == 2.5
    assert Median().compute([7]) == 7


def test_twa_weights_by_overlap_with_the_window() -> None:
    w = W(0, 10)
    # [0,5) at 2 → 2*5; [5,20) at 4 → 4*5 (only the part inside W); (10 + 20) / 10 = 3
    assert TimeWeightedAverage().compute([Event(0, 5, 2.0), Event(5, 20, 4.0)], w) == 3.0
    # clipped lifetimes give the same answer: the intersection is what counts
    assert TimeWeightedAverage().compute([Event(0, 5, 2.0), Event(5, 10, 4.0)], w) == 3.0
    # a gap counts as zero
    assert TimeWeightedAverage().compute([Event(2, 4, 5.0)], w) == 1.0


def test_twa_unbounded_window_is_the_limit() -> None:
    w = W(10, INF)
    events = [Event(10, 12, 100.0), Event(10, INF, 3.0), Event(11, INF, 4.0)]
    assert TimeWeightedAverage().compute(events, w) == 7.0


def test_topk_ranks_and_breaks_ties_canonically() -> None:
    from udm_patterns.operators import TopKParams

    rows = [{"s": "b", "p": 5}, {"s": "a", "p": 5}, {"s": "c", "p": 9}, {"s": "d", "p": 1}]
    out = TopK(TopKParams(k=3, by="p")).compute(rows)
    # 9 first; the two 5s tie and are ordered by canonical JSON text: {"p":5,"s":"a"} < {"p":5,"s":"b"}
    assert out == [{"s": "c", "p": 9, "rank": 1}, {"s": "a", "p": 5, "rank": 2}, {"s": "b", "p": 5, "rank": 3}]
    assert TopK().compute([4, 7]) == [{"value": 7, "rank": 1}, {"value": 4, "rank": 2}]
    with pytest.raises(TypeError, match="must be a number"):
        TopK(TopKParams(by="p")).compute([{"p": "x"}])


def test_members_shows_clipped_lifetimes() -> None:
    out = list(Members().compute([Event(3, 5, {"x": 1}), Event(4, INF, 7)], W(0, 10)))
    assert out == [Event(3, 5, {"le": 3, "re": 5, "x": 1}), Event(4, INF, {"le": 4, "re": "inf", "value": 7})]


def test_follows_pattern() -> None:
    w = W(10, 20)
    ev = [
        Event(2, 30, {"type": "A"}),       # an A before the window still counts as x
        Event(8, 9, {"type": "B"}),        # B before W.LE: not a y (y.LE >= W.LE required)
        Event(12, 25, {"type": "B", "n": 1}),  # y: last A before 12 is at 2... and 11 below
        Event(11, 12, {"type": "A"}),
        Event(15, 16, {"type": "A"}),
        Event(15, 17, {"type": "B", "n": 2}),  # same LE as an A: that A does not count (x.LE < y.LE)
        Event(5, 6, {"type": "C"}),
    ]
    ev.sort(key=lambda e: (e.le, e.re))
    out = sorted(Follows().compute(ev, w))
    assert out == [
        (12, 20, {"type": "B", "n": 1, "a_le": 11}),  # end capped at W.RE
        (15, 17, {"type": "B", "n": 2, "a_le": 11}),
    ]
    # no A at all: nothing
    assert list(Follows().compute([Event(12, 13, {"type": "B"})], w)) == []


def test_in_range_udf() -> None:
    from udm_stats.functions import RangeParams

    f = InRange(RangeParams(lo=0, hi=100))
    assert f.compute(field=0) and f.compute(field=100) and f.compute(field=50.5)
    assert not f.compute(field=-0.1) and not f.compute(field=100.1)
    assert not f.compute(field="12") and not f.compute(field=None)  # type: ignore[arg-type]
    assert InRange().compute(field=-math.inf)


@pytest.mark.parametrize("cls", [Min, Max])
def test_min_max_prefixes_equal_the_scalar_fold_with_signed_zeros(cls: type) -> None:
    """``compute_prefixes`` (the vectorized form) against ``add`` of each prefix, zeros of both signs and a
    state of the other kind included."""
    rng = random.Random(3)
    u = cls()
    for _ in range(200):
        vals = [rng.choice([0.0, -0.0, 1.5, -1.5, 2.0]) for _ in range(rng.randint(1, 9))]
        pre = rng.choice([[], [0], [0.0], [-0.0], [2], [-3.5]])
        st = u.add(u.initial_state(), pre)
        ends = sorted(rng.randint(0 if pre else 1, len(vals)) for _ in range(4))
        got = u.compute_prefixes(st, np.array(vals), ends)
        got = got.tolist() if hasattr(got, "tolist") else list(got)
        want = [u.compute(u.add(u.add(u.initial_state(), pre), vals[:k])) for k in ends]
        assert json.dumps(got) == json.dumps(want), (pre, vals, ends)
