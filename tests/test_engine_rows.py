"""Row windows ``rows{n, slide, partial}`` (SEMANTICS §9): hand-computed tables from the spec text, then
thousands of random streams against the kit's brute-force oracle, and bounded state under CTIs."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_engine_support import check_physical, rows, run, table, window_query
from window_cases import BATCHED, every_udm_every_disorder, run_random_cases

from udm.host.errors import QuerySpecError
from udm.host.model.plan import bind
from udm.host.model.spec import Rows, parse_query
from udm.host.query.fluent import Stream
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import cht, oracle
from udm.sdk import INF


def pt(id: str, t: int, v: int) -> Insert:
    return Insert(id, t, t + 1, {"v": v})


# a and b share LE 1: two rows (canonical order by payload: v 1 before v 2)
BASE = [pt("a", 1, 1), pt("b", 1, 2), pt("c", 3, 3), pt("d", 5, 4)]


def q(n: int, slide: int = 1, partial: bool = False, udm: str = "sum", **kw: Any) -> dict:
    return window_query({"type": "rows", "n": n, "slide": slide, "partial": partial}, udm,
                        **({"input": "v"} if udm in ("sum", "avg") else {}), **kw)


def both(query: dict, stream: list) -> list:
    """The engine's table, checked equal to the oracle's on the same stream."""
    out, _ = run(query, stream)
    check_physical(out)
    got = table(out)
    want = oracle(bind(parse_query(query)), stream)
    assert sorted(want.elements()) == sorted((le, re, p) for le, re, p in _rows_text(got))
    return got


def _rows_text(t: list) -> list:
    import json
    return [(le, re, json.dumps(p, sort_keys=True, separators=(",", ":"))) for le, re, p in t]


def test_equal_les_are_distinct_rows_and_the_interval_is_first_le_to_last_le_plus_one() -> None:
    # rows: 1:a@1 2:b@1 3:c@3 4:d@5; n=2: k=2 rows 1-2 [1,2); k=3 rows 2-3 [1,4); k=4 rows 3-4 [3,6)
    assert both(q(2), BASE) == rows((1, 2, {"sum": 3}), (1, 4, {"sum": 5}), (3, 6, {"sum": 7}))


def test_partial_windows_hold_fewer_rows() -> None:
    assert both(q(2, partial=True), BASE) == rows((1, 2, {"sum": 1}), (1, 2, {"sum": 3}), (1, 4, {"sum": 5}),
                                                  (3, 6, {"sum": 7}))


def test_slide_yields_every_slide_th_row() -> None:
    # n=3, slide=2: k=2 holds 2 rows (partial only), k=4 rows 2-4 [1, 6)
    assert both(q(3, 2), BASE) == rows((1, 6, {"sum": 9}),)
    assert both(q(3, 2, True), BASE) == rows((1, 2, {"sum": 3}), (1, 6, {"sum": 9}))
    # slide > n leaves rows out: n=1, slide=3 -> only row 3
    assert both(q(1, 3), BASE) == rows((3, 4, {"sum": 3}),)


def test_a_late_row_renumbers_every_later_row() -> None:
    late = [*BASE, pt("e", 2, 10)]  # rows a b e c d
    got = both(q(2), late)
    assert got == rows((1, 2, {"sum": 3}), (1, 3, {"sum": 12}), (2, 4, {"sum": 13}), (3, 6, {"sum": 7}))


def test_a_retracted_row_renumbers_every_later_row() -> None:
    stream = [*BASE, Retract("b", 1, 2, 1)]  # rows a c d
    assert both(q(2), stream) == rows((1, 4, {"sum": 4}), (3, 6, {"sum": 7}))


def test_a_changed_end_reorders_rows_of_one_le() -> None:
    # a [1,9) sorts after b [1,2) once it ends later; membership follows the order, not overlap
    stream = [Insert("a", 1, 3, {"v": 1}), Insert("b", 1, 5, {"v": 2}), pt("c", 7, 4),
              Retract("a", 1, 3, 9)]
    assert both(q(2), stream) == rows((1, 2, {"sum": 3}), (1, 8, {"sum": 5}))


def test_speculative_output_is_revised_with_minimal_diffs() -> None:
    # the window of row 3 is out when LE 5 arrives (W.RE = 4 <= m); the late row changes it and later ones
    stream = [pt("a", 1, 1), pt("b", 3, 2), pt("c", 5, 3), pt("d", 7, 4), Cti(6), pt("e", 6, 100)]
    out, _ = run(q(2), stream, mode="each")
    check_physical(out)
    # [1,4) sum 3 and [3,6) sum 5 never change: inserted once, never retracted
    ins = [el for el in out if isinstance(el, Insert)]
    assert sorted((el.le, el.re) for el in ins).count((1, 4)) == 1
    assert sorted((el.le, el.re) for el in ins).count((3, 6)) == 1
    assert table(out) == rows((1, 4, {"sum": 3}), (3, 6, {"sum": 5}), (5, 7, {"sum": 103}), (6, 8, {"sum": 104}))


def test_output_cti_stops_at_the_first_window_that_can_still_change() -> None:
    # after cti(7), a row with LE >= 7 can go before d (row 4), and d's end can still change: the window
    # of row 4 (rows 3-4, [5, 8)) can still change, so the output CTI is its first LE
    stream = [pt("a", 1, 1), pt("b", 3, 2), pt("c", 5, 3), pt("d", 7, 4), Cti(7)]
    out, _ = run(q(2), stream, mode="each")
    assert next(el.t for el in out if isinstance(el, Cti)) == 5
    # after cti(6) instead, c = [5, 6) can still be extended (sync time 6), but it is alone at LE 5: it
    # cannot move, and sum does not see ends, so row 3's window [3, 6) is final
    out, _ = run(q(2), [*stream[:4], Cti(6)], mode="each")
    assert next(el.t for el in out if isinstance(el, Cti)) == 5
    # a time-sensitive UDM sees c's end: the window holding c ([3, 6), rows 2-3) waits
    out, _ = run(q(2, udm="twa", input="v"), [*stream[:4], Cti(6)], mode="each")
    assert next(el.t for el in out if isinstance(el, Cti)) == 3


def test_state_stays_bounded_under_advancing_ctis() -> None:
    stream: list = []
    for i in range(3000):
        stream.append(Insert(f"e{i}", i, i + 3, {"v": i % 7, "g": i % 4}))
        if i % 10 == 9:
            stream.append(Cti(i - 2))
    _out, r = run({**q(5, 2, udm="median", input="v", group_by=["g"])}, stream, mode="each")
    sizes = r.ops[0].state_size()  # (a rows step holds each row once, as an event)
    assert sizes["events"] <= 4 * 12 and sizes["windows"] <= 4 * 6


def test_spec_and_fluent_api() -> None:
    with pytest.raises(QuerySpecError, match=r"window\.n"):
        parse_query(window_query({"type": "rows", "n": 0}, "count"))
    s = Stream.query().rows(3, slide=2).aggregate("count").spec
    assert s.steps[0].window == Rows(n=3, slide=2)
    got = cht(Stream.from_events(BASE).rows(2).aggregate("sum", input="v").to_elements())
    assert sorted(got.elements()) == sorted(oracle(bind(parse_query(q(2))), BASE).elements())


def _rows_window(rng: random.Random) -> dict[str, Any]:
    return {"type": "rows", "n": rng.randint(1, 5), "slide": rng.randint(1, 4), "partial": rng.random() < 0.3}


@pytest.mark.parametrize("part", range(4))
def test_random_streams_agree_with_the_oracle(part: int) -> None:
    runs = run_random_cases(_rows_window, range(part * 300, part * 300 + 300))
    assert runs == 600


@pytest.mark.parametrize("part", range(2))
def test_random_streams_fed_in_batches_agree_with_the_oracle(part: int) -> None:
    """Batches of 1 to 7 elements cut at CTIs (one flush each); every UDM kind meets every disorder."""
    seeds = range(1200 + part * 300, 1500 + part * 300)
    assert run_random_cases(_rows_window, seeds, engine=BATCHED, step=every_udm_every_disorder) == 600


def test_end_change_of_an_endless_row() -> None:
    stream = [Insert("a", 1, INF, {"v": 1}), pt("b", 1, 2), pt("c", 2, 5), Cti(3), Retract("a", 1, INF, 2)]
    both(q(2), stream)


@pytest.mark.parametrize("udm", ["sum", "max"])
def test_in_order_slides_reuse_state_only_across_shared_rows(udm: str) -> None:
    # values 1..9 at t = 1..9, fed one by one: n=2, slide=3 share no rows (k=3: rows 2-3, k=6: 5-6, k=9: 8-9);
    # n=4, slide=2 share two (k=4: rows 1-4, k=6: 3-6, k=8: 5-8)
    stream = [pt(f"e{t}", t, t) for t in range(1, 10)]
    agg = (lambda vs: sum(vs)) if udm == "sum" else max
    for n, slide in ((2, 3), (4, 2)):
        out, _ = run(q(n, slide, udm=udm, **({} if udm == "sum" else {"input": "v"})), stream, mode="each")
        check_physical(out)
        want = [(k - n + 1, k + 1, {udm: agg(range(k - n + 1, k + 1))}) for k in range(slide, 10, slide) if k >= n]
        assert table(out) == rows(*want)


def test_open_ends_hold_the_cti_only_where_a_row_can_still_move() -> None:
    # a [1,10), b [2,9), c [3,12) still open at cti(5), each alone in its LE: they cannot move, so the CTI is
    # SEMANTICS §7's first LE of the earliest window with W.RE > 5 (row 4's, rows 3-4: [3, 7))
    stream = [Insert("a", 1, 10, {"v": 1}), Insert("b", 2, 9, {"v": 2}), Insert("c", 3, 12, {"v": 3}),
              pt("d", 6, 4), Cti(5)]
    out, _ = run(q(2), stream, mode="each")
    assert next(el.t for el in out if isinstance(el, Cti)) == 3
    # a second row at LE 1 ([1, 4) sorts first; a's end can still move it past [1, 20)): the window of
    # rows 1-2 holds part of that block, so the CTI waits at its LE
    out, _ = run(q(2), [Insert("e", 1, 20, {"v": 9}), *stream], mode="each")
    assert next(el.t for el in out if isinstance(el, Cti)) == 1
    both(q(2), [Insert("e", 1, 20, {"v": 9}), *stream, Retract("a", 1, 10, 30)])


def test_a_batch_of_appends_slides_the_state_too() -> None:
    """The batch path (many elements per call, one flush) computes the first window once and slides."""
    stream = [pt(f"e{t}", t, t % 7) for t in range(300)]
    for mode in ("many", "each"):
        out, _ = run(q(50), stream, mode=mode)
        assert table(out) == rows(*[(k - 49, k + 1, {"sum": sum(t % 7 for t in range(k - 49, k + 1))})
                                    for k in range(49, 300)])


def test_the_kit_decides_rows_liveliness() -> None:
    """The random cases above hold the engine to the kit's rows liveliness bound; it does bite."""
    from udm.host.engine.window.rows import RowsFamily

    orig = RowsFamily.bound
    RowsFamily.bound = lambda self, c: min(orig(self, c), c - 1)  # type: ignore[method-assign]
    try:
        with pytest.raises(AssertionError, match="liveliness"):
            run_random_cases(lambda r: {"type": "rows", "n": r.randint(1, 3)}, range(10))
    finally:
        RowsFamily.bound = orig  # type: ignore[method-assign]
