"""Session windows ``session{gap}`` (SEMANTICS §9): hand-computed tables (runs, INF ends, merges by a late
bridging event, splits by a retraction), thousands of random streams against the kit's oracle, bounded
state under CTIs."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from test_engine_support import (
    UDA_CALLS,
    CountingSum,
    catalog_with,
    check_physical,
    rows,
    run,
    table,
    window_query,
)
from window_cases import BATCHED, every_udm_every_disorder, run_random_cases

from udm.host.errors import QuerySpecError
from udm.host.model.plan import bind
from udm.host.model.spec import Session, parse_query
from udm.host.query.fluent import Stream
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import cht, oracle
from udm.sdk import INF


def ev(id: str, le: int, re: int, v: int = 1) -> Insert:
    return Insert(id, le, re, {"v": v})


def q(gap: int, udm: str = "count", **kw: Any) -> dict:
    return window_query({"type": "session", "gap": gap}, udm, **kw)


def both(query: dict, stream: list, mode: str = "each") -> list:
    """The engine's table, checked equal to the oracle's on the same stream."""
    out, _ = run(query, stream, mode=mode)
    check_physical(out)
    got = table(out)
    want = oracle(bind(parse_query(query)), stream)
    assert sorted(want.elements()) == sorted(
        (le, re, json.dumps(p, sort_keys=True, separators=(",", ":"))) for le, re, p in got)
    return got


def test_runs_are_cut_where_the_next_start_is_a_gap_past_the_largest_end() -> None:
    # gap 3: a [1,4), b [2,3) -> largest end 4; c at 6 < 4+3 joins; d at 12 >= 9+3? c ends 9: 12 >= 12 cuts
    stream = [ev("a", 1, 4), ev("b", 2, 3), ev("c", 6, 9), ev("d", 12, 13)]
    assert both(q(3), stream) == rows((1, 12, {"count": 3}), (12, 16, {"count": 1}))


def test_an_endless_member_makes_an_endless_session() -> None:
    stream = [ev("a", 1, INF), ev("b", 50, 51)]
    assert both(q(2), stream) == rows((1, INF, {"count": 2}),)


def test_a_late_bridging_event_merges_two_sessions_and_retracts_both() -> None:
    stream = [ev("a", 1, 2), ev("b", 10, 11), ev("d", 30, 31), Cti(1), ev("c", 4, 9)]
    out, _ = run(q(3), stream, mode="each")
    check_physical(out)
    # before c (watermark 30): [1,5) and [10,14) were out; c (4 < 2+3) joins a, and b (10 < 9+3) joins them
    cut = next(i for i, el in enumerate(out) if isinstance(el, Cti))
    assert sorted((el.le, el.re) for el in out[:cut] if isinstance(el, Insert)) == [(1, 5), (10, 14)]
    retracted = {el.id for el in out if isinstance(el, Retract) and el.re_new == el.le}
    assert len(retracted) == 2
    assert both(q(3), stream) == rows((1, 14, {"count": 3}), (30, 34, {"count": 1}))


def test_a_retraction_splits_a_session() -> None:
    stream = [ev("a", 1, 2), ev("c", 4, 9), ev("b", 10, 11), Retract("c", 4, 9, 4)]
    assert both(q(3), stream) == rows((1, 5, {"count": 1}), (10, 14, {"count": 1}))
    shortened = [ev("a", 1, 2), ev("c", 4, 9), ev("b", 10, 11), Retract("c", 4, 9, 5)]
    assert both(q(3), shortened) == rows((1, 8, {"count": 2}), (10, 14, {"count": 1}))


def test_gap_zero_groups_overlapping_events() -> None:
    stream = [ev("a", 1, 3), ev("b", 3, 4), ev("c", 2, 3)]
    assert both(q(0), stream) == rows((1, 3, {"count": 2}), (3, 4, {"count": 1}))


def test_output_cti_waits_for_the_earliest_open_session() -> None:
    stream = [ev("a", 1, 2), ev("b", 3, 4), ev("c", 20, 21), Cti(8)]
    out, _ = run(q(3), stream, mode="each")
    # [1, 7) is final at 8 (no event from 8 on can join); [20, 24) is open: CTI = min(8, 20)
    assert next(el.t for el in out if isinstance(el, Cti)) == 8
    out, _ = run(q(3), [*stream[:3], Cti(6)], mode="each")
    assert next(el.t for el in out if isinstance(el, Cti)) == 1  # [1, 7) can still take an event at 6


def test_state_stays_bounded_under_advancing_ctis() -> None:
    stream: list = []
    for i in range(3000):
        t = i * 2 + (i // 5) * 4  # runs of 5 events, then a pause of 6
        stream.append(Insert(f"e{i}", t, t + 1, {"v": i % 7, "g": i % 3}))
        if i % 10 == 9:
            stream.append(Cti(t))
    _, r = run(q(3, "median", input="v", group_by=["g"]), stream, mode="each")
    sizes = r.ops[0].state_size()  # (a session step holds each event once)
    assert sizes["events"] <= 3 * 12 and sizes["windows"] <= 3 * 4


def test_spec_and_fluent_api() -> None:
    with pytest.raises(QuerySpecError, match=r"window\.gap"):
        parse_query(window_query({"type": "session", "gap": -1}, "count"))
    s = Stream.query().session(5).aggregate("count").spec
    assert s.steps[0].window == Session(gap=5)
    base = [ev("a", 1, 2), ev("b", 3, 4), ev("c", 20, 21)]
    got = cht(Stream.from_events(base).session(3).aggregate("count").to_elements())
    assert sorted(got.elements()) == sorted(oracle(bind(parse_query(q(3))), base).elements())


def _session_window(rng: random.Random) -> dict[str, Any]:
    return {"type": "session", "gap": rng.randint(0, 8)}


@pytest.mark.parametrize("part", range(4))
def test_random_streams_agree_with_the_oracle(part: int) -> None:
    assert run_random_cases(_session_window, range(part * 300, part * 300 + 300)) == 600


@pytest.mark.parametrize("part", range(2))
def test_random_streams_fed_in_batches_agree_with_the_oracle(part: int) -> None:
    """Batches of 1 to 7 elements cut at CTIs (one flush each); every UDM kind meets every disorder."""
    seeds = range(1200 + part * 300, 1500 + part * 300)
    assert run_random_cases(_session_window, seeds, engine=BATCHED, step=every_udm_every_disorder) == 600


def test_the_kit_decides_session_liveliness() -> None:
    """The random cases above hold the engine to the kit's session liveliness bound; it does bite."""
    from udm.host.engine.window.session import SessionFamily

    orig = SessionFamily.bound
    SessionFamily.bound = lambda self, c: min(orig(self, c), c - 1)  # type: ignore[method-assign]
    try:
        with pytest.raises(AssertionError, match="liveliness"):
            run_random_cases(lambda r: {"type": "session", "gap": r.randint(0, 6)}, range(10))
    finally:
        SessionFamily.bound = orig  # type: ignore[method-assign]


@pytest.mark.parametrize("mode", ["each", "many"])
def test_appends_extend_the_last_session_without_adding_its_members_again(mode: str) -> None:
    """With progressive output the open session is evaluated again at every flush; its aggregate is carried
    forward (each member handed to the UDA once), not rebuilt from its members."""
    q = window_query({"type": "session", "gap": 5}, "counting_sum", input="v", early=0)
    stream: list = []
    for i in range(600):
        stream.append(Insert(f"e{i}", i, i + 1, {"v": i % 7}))
        if i % 50 == 49:
            stream.append(Cti(i - 10))
    UDA_CALLS.clear()
    out, _ = run(q, stream, catalog_with(CountingSum), mode=mode)
    check_physical(out)
    assert table(out) == rows((0, 605, {"counting_sum": sum(i % 7 for i in range(600))}),)
    flushes = 600 if mode == "each" else 1
    assert UDA_CALLS["compute"] >= flushes  # evaluated at every flush
    assert UDA_CALLS["values"] == 600 and UDA_CALLS["remove"] == 0
