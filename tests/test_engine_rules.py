"""The engine's rules (`udm.host.engine.rules`): each scalar form and its vector form give the same answer,
row by row, on random values (hypothesis), and the scalar forms say what SEMANTICS §1, §3, §7 say."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host.engine import rules
from udm.host.engine.rules import INF, NEG, Grid

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


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(-5, 5),
       st.lists(st.tuples(st.integers(-40, 40), st.integers(1, 30)), min_size=1, max_size=20))
def test_grid_assignment_vector_equals_scalar_and_membership(size: int, hop: int, off: int,
                                                             events: list[tuple[int, int]]) -> None:
    g = Grid(size, hop, off)
    le = np.array([e[0] for e in events], dtype=np.int64)
    re = le + np.array([e[1] for e in events], dtype=np.int64)
    assert g.k_lo(le).tolist() == [g.k_lo(int(x)) for x in le]
    assert g.k_hi_v(re).tolist() == [g.k_hi(int(x)) for x in re]
    for a, b in zip(le.tolist(), re.tolist(), strict=True):
        # the windows between k_lo and k_hi are exactly those the event overlaps (SEMANTICS §3)
        ks = [k for k in range(-30, 60) if g.le(k) < b and g.le(k) + size > a]
        lo, hi = g.k_lo(a), g.k_hi(b)
        assert ks == [k for k in range(lo, hi + 1) if -30 <= k < 60]


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
