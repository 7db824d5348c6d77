"""Engine: every window type of SEMANTICS §3 with its boundary cases, hand-computed; then randomized
agreement with the brute-force reference and physical-order invariance."""

from __future__ import annotations

import random

import pytest
from test_engine_support import (
    check_physical,
    cht,
    expected,
    gen_stream,
    rows,
    run,
    shuffle_physical,
    table,
    window_query,
)

from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF


def ev(id: str, le: int, re: int, v: int = 1, **p: object) -> Insert:
    return Insert(id, le, re, {"v": v, **p})


# ---------------------------------------------------------------------------------------------------------
# tumbling / hopping
# ---------------------------------------------------------------------------------------------------------
def test_tumbling_membership_by_overlap_and_back_to_back_events() -> None:
    stream = [ev("a", 1, 5), ev("b", 3, 12), ev("e", 9, 10), ev("c", 10, 11), ev("d", 20, 21), ev("f", 30, 31)]
    out, _ = run(window_query({"type": "tumbling", "size": 10}, "count"), stream)
    # e ends where c starts (shared endpoint 10): e only in [0,10), c only in [10,20); b spans both
    assert table(out) == rows((0, 10, {"count": 3}), (10, 20, {"count": 2}), (20, 30, {"count": 1}),
                              (30, 40, {"count": 1}))
    check_physical(out)


def test_tumbling_with_offset_and_negative_windows() -> None:
    out, _ = run(window_query({"type": "tumbling", "size": 5, "offset": 3}, "count"),
                 [ev("a", 1, 5), ev("b", 8, 9)])
    assert table(out) == rows((-2, 3, {"count": 1}), (3, 8, {"count": 1}), (8, 13, {"count": 1}))


def test_hopping_event_spanning_many_windows() -> None:
    out, _ = run(window_query({"type": "hopping", "size": 10, "hop": 5}, "sum", input="v"),
                 [ev("a", 1, 26, 1), ev("b", 12, 13, 10)])
    assert table(out) == rows((-5, 5, {"sum": 1}), (0, 10, {"sum": 1}), (5, 15, {"sum": 11}),
                              (10, 20, {"sum": 11}), (15, 25, {"sum": 1}), (20, 30, {"sum": 1}),
                              (25, 35, {"sum": 1}))


def test_hopping_with_gaps_hop_greater_than_size() -> None:
    # windows [1,4), [6,9), [11,14) ...: g lies entirely in the gap [4, 6)
    out, _ = run(window_query({"type": "hopping", "size": 3, "hop": 5, "offset": 1}, "count"),
                 [ev("g", 4, 6), ev("h", 3, 7), ev("i", 2, 3)])
    assert table(out) == rows((1, 4, {"count": 2}), (6, 9, {"count": 1}))


def test_infinite_lifetimes_on_tumbling_stop_at_the_largest_finite_time() -> None:
    # semantics-notes 2: T = 7 (largest finite LE/RE/CTI); windows with W.LE <= T only
    q = window_query({"type": "tumbling", "size": 5}, "count")
    out, r = run(q, [ev("a", 2, INF), ev("b", 5, 7)])
    assert table(out) == rows((0, 5, {"count": 1}), (5, 10, {"count": 2}))
    assert r.stats.truncated_at == 7
    # a CTI moves T (and the watermark): windows up to W.LE <= 23 exist
    out, r = run(q, [ev("a", 2, INF), ev("b", 5, 7), Cti(23)])
    assert table(out) == rows((0, 5, {"count": 1}), (5, 10, {"count": 2}), (10, 15, {"count": 1}),
                              (15, 20, {"count": 1}), (20, 25, {"count": 1}))
    assert r.stats.truncated_at == 23
    # nothing cut: no report
    out, r = run(q, [ev("a", 2, INF), Retract("a", 2, INF, 6)])
    assert table(out) == rows((0, 5, {"count": 1}), (5, 10, {"count": 1})) and r.stats.truncated_at is None


# ---------------------------------------------------------------------------------------------------------
# snapshot
# ---------------------------------------------------------------------------------------------------------
def test_snapshot_windows_shared_endpoints_and_infinite_re() -> None:
    stream = [ev("a", 1, 5, 1), ev("b", 3, INF, 2), ev("c", 5, 8, 4), ev("d", 5, 8, 8)]
    out, r = run(window_query({"type": "snapshot"}, "sum", input="v"), stream)
    # endpoints 1, 3, 5, 8 and an event with RE = inf: last window [8, inf)
    assert table(out) == rows((1, 3, {"sum": 1}), (3, 5, {"sum": 3}), (5, 8, {"sum": 14}), (8, INF, {"sum": 2}))
    assert r.stats.truncated_at is None
    check_physical(out)


def test_snapshot_gap_windows_are_empty_and_produce_nothing() -> None:
    out, _ = run(window_query({"type": "snapshot"}, "count"), [ev("a", 1, 3), ev("b", 6, 9)])
    assert table(out) == rows((1, 3, {"count": 1}), (6, 9, {"count": 1}))  # [3, 6) is empty


def test_snapshot_windows_split_and_merge_under_retractions() -> None:
    stream = [ev("a", 0, 10, 1), ev("b", 4, 6, 2), Retract("b", 4, 6, 12), Retract("a", 0, 10, 12)]
    out, _ = run(window_query({"type": "snapshot"}, "sum", input="v"), stream)
    assert table(out) == rows((0, 4, {"sum": 1}), (4, 12, {"sum": 3}))


# ---------------------------------------------------------------------------------------------------------
# count windows
# ---------------------------------------------------------------------------------------------------------
COUNT_START = [ev("a", 1, 4), ev("b", 1, 2), ev("c", 3, 10), ev("d", 7, 8), ev("e", 9, 12)]


def test_count_by_start() -> None:
    # distinct LE: 1, 3, 7, 9; window i = [s_i, s_(i+n-1) + 1); members by LE
    out, _ = run(window_query({"type": "count_by_start", "n": 2}, "count"), COUNT_START)
    assert table(out) == rows((1, 4, {"count": 3}), (3, 8, {"count": 2}), (7, 10, {"count": 2}))


def test_count_by_start_with_hop() -> None:
    out, _ = run(window_query({"type": "count_by_start", "n": 2, "hop": 2}, "count"), COUNT_START)
    assert table(out) == rows((1, 4, {"count": 3}), (7, 10, {"count": 2}))


def test_count_by_start_hop_alignment_survives_cleanup() -> None:
    """Positions count from the group's first LE ever: a group emptied by cleanup keeps its alignment, and a
    value at the CTI is not dropped (its event can still be deleted: the positions after it shift)."""
    q = window_query({"type": "count_by_start", "n": 1, "hop": 3}, "count")
    # LEs 62, 84: windows at positions 0, 3, ... -> only [62, 63), though cti(84) emptied the group
    out, _ = run(q, [ev("a", 62, 71), Cti(84), ev("b", 84, 90)], mode="each")
    assert table(out) == rows((62, 63, {"count": 1}))
    # LEs 0, 2, 3 at cti(3); the event at 3 is deleted after it: LEs 0, 2, 8 -> only [0, 1)
    stream = [ev("a", 0, INF), ev("b", 2, 4), ev("p", 3, 5), Cti(3), Retract("p", 3, 5, 3), ev("c", 8, 9)]
    out, _ = run(q, stream, mode="each")
    assert table(out) == rows((0, 1, {"count": 1}))
    check_physical(out)


def test_count_by_start_out_of_order_value_reshapes_windows() -> None:
    stream = [ev("a", 1, 2), ev("c", 5, 6), ev("d", 7, 8), ev("b", 3, 4)]  # 3 arrives last
    out, _ = run(window_query({"type": "count_by_start", "n": 2}, "count"), stream)
    assert table(out) == rows((1, 4, {"count": 2}), (3, 6, {"count": 2}), (5, 8, {"count": 2}))
    check_physical(out)


COUNT_END = [ev("a", 0, 3), ev("b", 1, 3), ev("c", 2, 5), ev("d", 4, 9), ev("e", 6, INF)]


def test_count_by_end() -> None:
    # distinct finite RE: 3, 5, 9; window i = [r_i - 1, r_(i+n-1)); members by RE; e (RE = inf) in none
    out, _ = run(window_query({"type": "count_by_end", "n": 2}, "count"), COUNT_END)
    assert table(out) == rows((2, 5, {"count": 3}), (4, 9, {"count": 2}))
    out, _ = run(window_query({"type": "count_by_end", "n": 2, "hop": 2}, "count"), COUNT_END)
    assert table(out) == rows((2, 5, {"count": 3}))
    out, _ = run(window_query({"type": "count_by_end", "n": 1}, "count"), COUNT_END)
    assert table(out) == rows((2, 3, {"count": 2}), (4, 5, {"count": 1}), (8, 9, {"count": 1}))


def test_count_by_end_follows_re_changes() -> None:
    stream = [*COUNT_END, Retract("e", 6, INF, 9), Retract("a", 0, 3, 4)]
    # RE now: b 3, a 4, c 5, d 9, e 9 -> windows [2,4): a,b; [3,5): a,c; [4,9): c,d,e
    out, _ = run(window_query({"type": "count_by_end", "n": 2}, "count"), stream)
    assert table(out) == rows((2, 4, {"count": 2}), (3, 5, {"count": 2}), (4, 9, {"count": 3}))
    check_physical(out)


# ---------------------------------------------------------------------------------------------------------
# randomized agreement with the reference; many physical orders, one CHT
# ---------------------------------------------------------------------------------------------------------
WINDOWS = [
    {"type": "tumbling", "size": 5},
    {"type": "tumbling", "size": 7, "offset": 3},
    {"type": "hopping", "size": 10, "hop": 3},
    {"type": "hopping", "size": 4, "hop": 6, "offset": 1},
    {"type": "snapshot"},
    {"type": "count_by_start", "n": 2},
    {"type": "count_by_start", "n": 3, "hop": 2},
    {"type": "count_by_end", "n": 2},
    {"type": "count_by_end", "n": 3, "hop": 2},
]
UDMS = [
    {"udm": "count"},
    {"udm": "sum", "input": "v"},
    {"udm": "median", "input": "v"},
    {"udm": "topk", "params": {"k": 2, "by": "v"}},
    {"udm": "twa", "input": "v", "clip": "full"},
    {"udm": "members", "input": "v", "clip": "left", "output": "unaltered"},
]


@pytest.mark.parametrize("win", WINDOWS, ids=lambda w: "-".join(str(v) for v in w.values()))
def test_random_streams_agree_with_the_reference(win: dict) -> None:
    for seed in range(25):
        rng = random.Random(seed)
        u = UDMS[seed % len(UDMS)]
        q = window_query(win, **u, **({"group_by": ["g"]} if seed % 2 else {}))
        stream = gen_stream(rng, n=rng.randrange(1, 25), p_inf=0.05 if win["type"] in ("tumbling", "hopping") else 0.1)
        want = expected(q, stream)
        for mode in ("many", "each"):
            out, _ = run(q, stream, mode=mode)
            assert cht(out) == want, (seed, mode, q)
            check_physical(out)


@pytest.mark.parametrize("win", WINDOWS[::2], ids=lambda w: w["type"])
def test_many_physical_orders_one_cht(win: dict) -> None:
    for seed in range(8):
        rng = random.Random(seed)
        q = window_query(win, "sum", input="v", group_by=["g"])
        stream = gen_stream(rng, n=20, p_inf=0.0)
        base = cht(run(q, stream)[0])
        for _ in range(4):
            variant = shuffle_physical(rng, stream)
            assert cht(run(q, variant)[0]) == base


def test_physical_variants_from_the_conformance_kit() -> None:
    from udm.host.model.spec import parse_query
    from udm.host.testing import generate, oracle, physical_variants, verify

    q = parse_query(window_query({"type": "tumbling", "size": 5}, "sum", input="v", group_by=["g"]))
    for seed in range(5):
        stream = generate(seed=seed, events=20, groups=2, duration="short", disorder="out_of_order",
                          speculation=0.3)
        for var in [stream, *physical_variants(stream, 3, seed=seed)]:
            out, _ = run(q.to_json_dict(), var)
            assert verify(out, oracle(q, var)).ok
