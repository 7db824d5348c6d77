"""The property validator (SEMANTICS §7): each property holds on good output and is caught when broken."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.catalog import Catalog
from udm.host.model.spec import CountByEnd, CountByStart, FilterStep, Hopping, QuerySpec, Snapshot, Tumbling, WindowStep
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import check_properties, liveliness_bound
from udm.sdk import INF
from udm_patterns import ALL as PATTERNS
from udm_stats import ALL as STATS


@pytest.fixture(scope="module")
def cat() -> Catalog:
    c = Catalog()
    for cls in (*STATS, *PATTERNS):
        c.add(cls)
    return c


def ins(i: str, le: int, re: int, **p: Any) -> Insert:
    return Insert(i, le, re, p)


IN = [ins("a", 1, 3, v=1), Cti(5), ins("b", 6, 8, v=2), Cti(INF)]


def test_good_output_has_no_problems() -> None:
    out = [ins("o1", 0, 5, s=1), Retract("o1", 0, 5, 7), Cti(5), Retract("o1", 0, 7, 9), ins("o2", 5, 10, s=2),
           Cti(10), Cti(INF)]
    assert check_properties(IN, out) == []


@pytest.mark.parametrize(("out", "needle"), [
    ([Retract("nope", 0, 5, 0)], "not a live output event"),
    ([ins("o", 0, 5), Retract("o", 0, 6, 0)], "names [0, 6) but the event is [0, 5)"),
    ([ins("o", 0, 5), ins("o", 1, 2)], "reuses the live id 'o'"),
    ([Insert("o", 5, 5, {})], "empty lifetime"),
    ([Insert("o", 1, 5, ["x"])], "non-object payload"),  # type: ignore[arg-type]
    (["garbage"], "not a stream element"),
])
def test_physical_validity(out: list, needle: str) -> None:
    problems = check_properties([], out)
    assert any(needle in p for p in problems), problems


def test_an_id_may_be_reused_after_a_full_retraction() -> None:
    assert check_properties([], [ins("o", 0, 5), Retract("o", 0, 5, 0), ins("o", 1, 2)]) == []


def test_output_cti_violation_and_decreasing_ctis() -> None:
    problems = check_properties([], [Cti(5), ins("o", 3, 9)])
    assert any("CTI violation" in p and "sync time 3 < the output's own cti(5)" in p for p in problems)
    problems = check_properties([], [ins("o", 3, 9), Cti(5), Retract("o", 3, 9, 4)])  # sync min(9, 4) = 4 < 5
    assert any("CTI violation" in p for p in problems)
    assert check_properties([], [ins("o", 3, 9), Cti(5), Retract("o", 3, 9, 6)]) == []  # sync 6 >= 5
    problems = check_properties([], [Cti(5), Cti(4)])
    assert any("CTIs decrease" in p for p in problems)


def test_prefix_finality() -> None:
    # an event that ended before the CTI is changed later
    problems = check_properties([], [ins("o", 1, 3), Cti(5), Retract("o", 1, 3, 8)])
    assert any("prefix finality" in p and "ended before the CTI but later became [1, 8)" in p for p in problems)
    # an event starting before the CTI is added after it
    problems = check_properties([], [Cti(5), ins("o", 2, 9, x=1)])
    assert any("prefix finality" in p and "added later" in p for p in problems)
    # one is deleted after it
    problems = check_properties([], [ins("o", 2, 9, x=1), Cti(5), Retract("o", 2, 9, 2)])
    assert any("prefix finality" in p and "removed later" in p for p in problems)


def test_final_cti() -> None:
    problems = check_properties(IN, [ins("o", 0, 5)])
    assert any("final CTI" in p and "missing" in p for p in problems)
    problems = check_properties(IN, [ins("o", 0, 5), Cti(7)])
    assert any("final CTI" in p and "cti(7)" in p for p in problems)
    assert check_properties(IN[:3], [ins("o", 0, 5)]) == []  # no cti(inf) in, none needed
    assert check_properties(IN[:3], [ins("o", 0, 5)], finished=True) != []


# -- liveliness -------------------------------------------------------------------------------------


def q(window: Any, udm: str = "count", **kw: Any) -> QuerySpec:
    return QuerySpec(steps=[WindowStep(window=window, udm=udm, **kw)])


def test_liveliness_bounds_per_semantics(cat: Catalog) -> None:
    prefix = [ins("a", 2, 30, v=1), ins("b", 12, 13, v=1), Cti(15)]
    # time-insensitive, tumbling 10: start of the window holding 15 -> 10
    assert liveliness_bound(q(Tumbling(size=10)), prefix, 15, cat) == 10
    # hopping size 10 hop 4: earliest window with W.RE > 15 is [8, 18)
    assert liveliness_bound(q(Hopping(size=10, hop=4)), prefix, 15, cat) == 8
    # hop > size, c in a gap: windows [0,3) [10,13) [20,23): none holds 15 -> c itself
    assert liveliness_bound(q(Hopping(size=3, hop=10)), prefix, 15, cat) == 15
    # time-sensitive without right clipping: a=[2,30) lives past 15, its earliest window starts at 0
    assert liveliness_bound(q(Tumbling(size=10), "twa", input="v"), prefix, 15, cat) == 0
    assert liveliness_bound(q(Tumbling(size=10), "twa", input="v", clip="right"), prefix, 15, cat) == 10
    # snapshot: endpoints 2 12 13 30 -> the window holding 15 is [13, 30)
    assert liveliness_bound(q(Snapshot()), prefix, 15, cat) == 13
    # time_bound output: c
    assert liveliness_bound(q(Tumbling(size=10), "follows", output="time_bound"), prefix, 15, cat) == 15
    # boundaries: an event ending exactly at c can still be extended (sync time c)
    edge = [ins("a", 2, 15, v=1), Cti(15)]
    assert liveliness_bound(q(Tumbling(size=10), "twa", input="v"), edge, 15, cat) == 0
    assert liveliness_bound(q(Tumbling(size=10), "count"), edge, 15, cat) == 10
    # ... and a snapshot window ending at c can grow: time-sensitive members then change, counts do not
    edge2 = [ins("a", 2, 15, v=1), ins("b", 5, 15, v=1), Cti(15)]
    assert liveliness_bound(q(Snapshot(), "count"), edge2, 15, cat) == 15
    assert liveliness_bound(q(Snapshot(), "twa", input="v", clip="full"), edge2, 15, cat) == 5
    # count windows: LEs 2, 12 below 15; the next window, [12, next LE + 1), can still be made over b
    assert liveliness_bound(q(CountByStart(n=2)), prefix, 15, cat) == 12
    # ... even for time_bound output (a new LE makes a window over old members: semantics-notes 72), which
    # only lifts the wait for a's open end (twa, seeing ends, waits from a's window [2, 13) on)
    assert liveliness_bound(q(CountByStart(n=2), "follows", output="time_bound"), prefix, 15, cat) == 12
    assert liveliness_bound(q(CountByStart(n=2), "twa", input="v"), prefix, 15, cat) == 2
    # count_by_end: finite REs 13, 30; 13 < 15 is final, the window [12, 30) is not
    assert liveliness_bound(q(CountByEnd(n=2)), prefix, 15, cat) == 12
    # ... one RE below c: a's RE can still become 15, making a window [14, ...) over b
    assert liveliness_bound(q(CountByEnd(n=1)), prefix, 15, cat) == 14
    # span-only queries pass CTIs through; cti(inf) -> inf
    span = QuerySpec(steps=[FilterStep(udf="in_range", args={"field": "v"})])
    assert liveliness_bound(span, prefix, 15, cat) == 15
    assert liveliness_bound(q(CountByStart(n=2)), prefix, INF, cat) == INF


def test_liveliness_checked_against_a_trace(cat: Catalog) -> None:
    query = q(Tumbling(size=10))
    inp = [ins("a", 2, 4), Cti(15), ins("b", 16, 17), Cti(INF)]
    out_ok = [[], [ins("o1", 0, 10, count=1), Cti(10)], [], [ins("o2", 10, 20, count=1), Cti(INF)]]
    flat = [e for outs in out_ok for e in outs]
    assert check_properties(inp, flat, query, trace=out_ok, catalog=cat) == []
    lazy = [[], [], [], [ins("o1", 0, 10, count=1), ins("o2", 10, 20, count=1), Cti(INF)]]
    flat = [e for outs in lazy for e in outs]
    problems = check_properties(inp, flat, query, trace=lazy, catalog=cat)
    assert problems == ["liveliness: after input #1 cti(15) the output must reach cti(10) but has no output CTI"]
    late = [[], [ins("o1", 0, 10, count=1), Cti(5)], [], [ins("o2", 10, 20, count=1), Cti(INF)]]
    flat = [e for outs in late for e in outs]
    assert any("must reach cti(10) but has output cti(5)" in p
               for p in check_properties(inp, flat, query, trace=late, catalog=cat))
    # without a query only cti(inf) -> cti(inf) is decidable
    no_inf = [[], [], [], [ins("o1", 0, 10, count=1), ins("o2", 10, 20, count=1)]]
    flat = [e for outs in no_inf for e in outs]
    assert any("must reach cti(inf)" in p for p in check_properties(inp, flat, trace=no_inf))
    assert any("trace has" in p for p in check_properties(inp, flat, trace=[[]]))
