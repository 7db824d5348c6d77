"""The engine's rules (`udm.host.engine.rules`): each scalar form and its vector form give the same answer,
row by row, on random values (hypothesis), and the scalar forms say what SEMANTICS §1, §7 say (window
assignment, §3, is tests/test_grid_geometry.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host.engine import rules
from udm.host.engine.rules import INF, NEG

TIMES = st.one_of(st.integers(-50, 50), st.just(INF))
FINITE = st.integers(-50, 50)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), FINITE, TIMES, TIMES), min_size=1, max_size=40))
def test_sync_time_vector_equals_scalar(rows: list[tuple[int, int, int, int]]) -> None:
    kind = np.array([r[0] for r in rows], dtype=np.int8)
    le, re, rn = (np.array([r[i] for r in rows], dtype=np.int64) for i in (1, 2, 3))
    got = rules.sync_times(kind, le, re, rn).tolist()
    assert got == [rules.sync_time(*r) for r in rows]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TIMES, TIMES), min_size=1, max_size=40))
def test_closed_vector_equals_scalar_and_no_retraction_can_follow(rows: list[tuple[int, int]]) -> None:
    re, c = (np.array([r[i] for r in rows], dtype=np.int64) for i in (0, 1))
    got = rules.closed(re, c).tolist()
    assert got == [bool(rules.closed(a, b)) for a, b in rows]
    for (r, t), shut in zip(rows, got, strict=True):
        # open: some retraction (an extension to INF, or one to r itself) has sync time >= t (SEMANTICS §1)
        assert shut == (t >= INF or not any(rules.sync_time(1, -60, r, rn) >= t for rn in (r, INF)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), FINITE), min_size=1, max_size=40), st.one_of(st.just(NEG), FINITE))
def test_cti_before_vector_equals_a_running_maximum(rows: list[tuple[bool, int]], start: int) -> None:
    is_cti = np.array([r[0] for r in rows], dtype=bool)
    t = np.array([r[1] for r in rows], dtype=np.int64)
    got = rules.cti_before(is_cti, t, start).tolist()
    c = max(start, rules.I64_MIN)
    want = []
    for cti, tt in rows:
        want.append(c)
        if cti and tt > c:  # a lower CTI is ignored (SEMANTICS §1)
            c = tt
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TIMES, TIMES, TIMES), min_size=1, max_size=40))
def test_lifetime_checks_vector_equal_scalar(rows: list[tuple[int, int, int]]) -> None:
    le, re, rn = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    assert rules.insert_lifetime_bad(le, re).tolist() == [bool(rules.insert_lifetime_bad(a, b)) for a, b, _ in rows]
    assert rules.retract_lifetime_bad(le, re, rn).tolist() == [
        bool(rules.retract_lifetime_bad(a, b, c)) for a, b, c in rows]


def test_lifetime_rules_are_semantics_1() -> None:
    assert rules.insert_lifetime_bad(5, 5) and rules.insert_lifetime_bad(6, 5) and rules.insert_lifetime_bad(INF, INF)
    assert not rules.insert_lifetime_bad(5, 6) and not rules.insert_lifetime_bad(5, INF)
    assert rules.retract_lifetime_bad(5, 10, 4) and not rules.retract_lifetime_bad(5, 10, 5)  # RE_new == LE: delete
    assert not rules.retract_lifetime_bad(5, 10, 20)  # an extension


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FINITE, TIMES), max_size=30), st.lists(TIMES, max_size=5))
def test_reach_batch_equals_scalar(pairs: list[tuple[int, int]], extra: list[int]) -> None:
    le = np.array([p[0] for p in pairs], dtype=np.int64)
    re = np.array([p[1] for p in pairs], dtype=np.int64)
    ex = np.array(extra, dtype=np.int64)
    T = NEG
    for a, b in pairs:
        T = rules.reach(T, a, b)
    for t in extra:
        T = rules.reach(T, t)
    assert rules.reach_batch(NEG, le, re, ex) == T
    assert T < INF  # never an infinite time (semantics-notes 2)


def test_release_point_and_finalize() -> None:
    assert rules.release_point(10, 30, 0) == 30  # speculation: the watermark
    assert rules.release_point(10, 30, 5) == 25
    assert rules.release_point(10, 30, INF) == 10  # strong consistency: the CTI
    assert rules.release_point(10, 12, 5) == 10
    assert rules.effective_cti(10, 100, INF) == 10
    assert rules.effective_cti(10, 100, 30) == 70  # Finalize: m - max_memory_time
    assert rules.effective_cti(80, 100, 30) == 80


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FINITE, st.integers(1, 10)), max_size=8), st.lists(TIMES, min_size=1, max_size=40))
def test_ecti_range_vector_equals_scalar_and_membership(spans: list[tuple[int, int]], syncs: list[int]) -> None:
    # disjoint sorted ranges [a, a + w) from the spans (SEMANTICS §11: ECTIs never overlap)
    starts, ends, at = [], [], -100
    for a, w in sorted(spans):
        a = max(a, at)
        starts.append(a)
        ends.append(a + w)
        at = a + w
    got = rules.ecti_ranges(np.array(syncs, dtype=np.int64), np.array(starts, dtype=np.int64),
                            np.array(ends, dtype=np.int64)).tolist()
    assert got == [rules.ecti_range(s, starts, ends) for s in syncs]
    for s, i in zip(syncs, got, strict=True):
        inside = [k for k in range(len(starts)) if starts[k] <= s < ends[k]]
        assert inside == ([i] if i >= 0 else [])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TIMES, TIMES), min_size=1, max_size=40))
def test_final_vector_equals_scalar(rows: list[tuple[int, int]]) -> None:
    re = np.array([r[0] for r in rows], dtype=np.int64)
    c = np.array([r[1] for r in rows], dtype=np.int64)
    assert rules.final(re, c).tolist() == [bool(rules.final(*r)) for r in rows]
    # SEMANTICS §7 prefix finality: RE < t; and at the end of input everything is final
    assert [bool(rules.final(*r)) for r in rows] == [r[0] < r[1] or r[1] >= INF for r in rows]


def test_speculation_point_is_the_release_point_without_a_cti() -> None:
    assert rules.speculation_point(50, 10) == 40 == rules.release_point(NEG, 50, 10)
    assert rules.speculation_point(50, INF) == NEG
    assert rules.release_point(45, 50, 10) == 45


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FINITE, TIMES), max_size=30), FINITE)
def test_final_end_vector_equals_scalar(pairs: list[tuple[int, int]], c: int) -> None:
    le = np.array([p[0] for p in pairs], dtype=np.int64)
    re = np.array([p[1] for p in pairs], dtype=np.int64)
    assert rules.final_ends(c, le, re).tolist() == [rules.final_end(c, a, b) for a, b in pairs]


def test_final_end_is_strong_consistency() -> None:
    """SEMANTICS §7, max_delay INF: a window is final at CTI c only once no member end it sees can move."""
    assert rules.strong(INF) and not rules.strong(0) and not rules.strong(10**6)
    assert rules.final_end(10, 1, 20) == 1  # RE 20 can still move (to anything >= 10): windows past 1 wait
    assert rules.final_end(10, 1, 10) == 1  # RE == c: an extension has sync time 10, still valid
    assert rules.final_end(10, 1, 9) == 10  # RE < c is final
    assert rules.final_end(10, 1, INF) == 1  # an endless event can still end
    assert rules.final_end(10, 12, 20) == 10  # starts after c: in no window ending by c
