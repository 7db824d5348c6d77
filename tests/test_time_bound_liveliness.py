"""``time_bound`` liveliness per window family (SEMANTICS §7, semantics-notes 72): the output CTI is the
input's on tumbling, hopping, snapshot and session windows; on count and rows windows an element at or
after the CTI can make a window over members before it, so no UDM that keeps its promise window by window
can give that — the counterexamples below, with the first-party ``follows`` and with a UDM that passes the
kit's ``time_bound`` contract check — and the output CTI is the time-insensitive rule there (the promise
still lifts the wait for member ends). The kit decides the bound for every family (no undecided answer)
and the engine meets it; under strong consistency ``time_bound`` gives nothing early."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from udm.host.catalog import Catalog
from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import check_engine, check_properties, liveliness_bound, run_contract_checks, runner_engine
from udm.host.testing.generator import generate
from udm.sdk import INF, Event, TimeSensitiveUDO, WindowDescriptor, udm
from udm_patterns import ALL as PATTERNS
from udm_stats import ALL as STATS


@udm(name="b_marks", version="1.0.0", time_bound=True, input_type="event", output_type="event")
class BMarks(TimeSensitiveUDO):
    """A point output at each member of type B that starts in the window: an output is caused by its
    own member only, so the promise holds window by window (the kit's contract check passes)."""

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> list[tuple[int, int, dict]]:
        return [(e.le, e.le + 1, {"b": e.le}) for e in events
                if e.le >= window.le and e.payload.get("type") == "B"]


@pytest.fixture(scope="module")
def cat() -> Catalog:
    c = Catalog()
    for cls in (*STATS, *PATTERNS, BMarks):
        c.add(cls)
    return c


def query(cat: Catalog, window: dict[str, Any], udm: str = "follows", **kw: Any) -> BoundQuery:
    step = {"op": "window", "window": window, "udm": udm, "clip": "left", "output": "time_bound", **kw}
    return bind(parse_query({"steps": [step]}), cat)


def ev(i: str, le: int, re: int, kind: str) -> Insert:
    return Insert(i, le, re, {"type": kind})


def traced(cat: Catalog, q: BoundQuery, stream: list[Element]) -> Any:
    out = runner_engine(QueryRunner, cat)(q, stream)
    assert check_properties(stream, out, q, trace=out.trace, catalog=cat) == []  # type: ignore[attr-defined]
    return out


def cti_after(out: Any, i: int) -> int:
    return max(e.t for outs in out.trace[: i + 1] for e in outs if isinstance(e, Cti))


#: A at 1, B at 4 (both open past the CTI), C at 7; then cti(10); then a B at 12
STREAM = [ev("a", 1, 30, "A"), ev("b", 4, 30, "B"), ev("c", 7, 8, "C"), Cti(10), ev("d", 12, 13, "B"), Cti(INF)]
CUT = 3

FAMILIES: dict[str, dict[str, Any]] = {
    "tumbling": {"type": "tumbling", "size": 6},
    "hopping": {"type": "hopping", "size": 6, "hop": 4},
    "cumulate": {"type": "cumulate", "size": 12, "step": 3},
    "snapshot": {"type": "snapshot"},
    "session": {"type": "session", "gap": 2},
    "count_by_start": {"type": "count_by_start", "n": 2},
    "count_by_end": {"type": "count_by_end", "n": 2},
    "rows": {"type": "rows", "n": 2},
}
#: the output CTI after cti(10), as the kit decides it: c, or the time-insensitive rule (a window over
#: members before c can still be made: count_by_start [7, 13) over c; count_by_end, REs 8 30: [7, 30)
#: not final; rows 1..3 = a b c, the window of rows 3-4 [7, 13) is still to come)
EXPECTED = {"tumbling": 10, "hopping": 10, "cumulate": 10, "snapshot": 10, "session": 10,
            "count_by_start": 7, "count_by_end": 7, "rows": 7}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_kit_decides_every_family_and_the_engine_meets_it(cat: Catalog, family: str) -> None:
    q = query(cat, FAMILIES[family])
    need = liveliness_bound(q, STREAM[: CUT + 1], 10, cat)
    assert need == EXPECTED[family]
    out = traced(cat, q, STREAM)
    assert cti_after(out, CUT) == need


def test_time_bound_gives_more_than_the_general_rule(cat: Catalog) -> None:
    """Without ``time_bound`` the open ends of a and b hold the CTI back to the first window holding a
    (the time-sensitive rule); on count and rows windows ``time_bound`` lifts that wait, though not up to c
    (count_by_end: a and b end after c, so they sit only in windows that are not final anyway)."""
    for family in FAMILIES:
        general = liveliness_bound(query(cat, FAMILIES[family], output="unaltered"), STREAM[: CUT + 1], 10, cat)
        assert general is not None and general <= EXPECTED[family], family
        assert (general == EXPECTED[family]) == (family == "count_by_end"), family
    cbs = query(cat, FAMILIES["count_by_start"])
    assert cti_after(traced(cat, cbs, STREAM), CUT) == 7


# -------------------------------------------------------------------------------------------------------
# why count and rows windows cannot give c
# -------------------------------------------------------------------------------------------------------
def late_output_before(out: Any, after: int, c: int) -> list[Insert]:
    """Inserts emitted after input element ``after`` (later elements, or the end of input) that start
    before ``c``."""
    done = sum(len(outs) for outs in out.trace[: after + 1])
    return [e for e in out[done:] if isinstance(e, Insert) and e.le < c]


@pytest.mark.parametrize(("window", "stream", "late"), [
    # count_by_start(3): d (at 12) makes the window [1, 13) over a and b: follows outputs at b (4)
    ({"type": "count_by_start", "n": 3}, [ev("a", 1, 2, "A"), ev("b", 4, 5, "B"), Cti(10), ev("d", 12, 13, "C")],
     4),
    # count_by_end(2): d makes the window [6, 12) over a and b, which end at 7: follows outputs at b (6)
    # (unclipped: clipped on the left, a would start at 6 too)
    ({"type": "count_by_end", "n": 2}, [ev("a", 1, 7, "A"), ev("b", 6, 7, "B"), Cti(10), ev("d", 10, 12, "C")], 6),
    # rows(3): d makes the window of rows 1..3 [1, 13) over a and b
    ({"type": "rows", "n": 3}, [ev("a", 1, 2, "A"), ev("b", 4, 5, "B"), Cti(10), ev("d", 12, 13, "C")], 4),
    # rows(2): w and y share LE 2; y's end moves before w's, so y becomes row 2 and the window of rows 1..2
    # [1, 3) now holds x (A) then y (B)
    ({"type": "rows", "n": 2}, [ev("x", 1, 3, "A"), ev("w", 2, 5, "A"), ev("y", 2, 20, "B"), Cti(3),
                                Retract("y", 2, 20, 4)], 2),
])
def test_follows_counterexamples(cat: Catalog, window: dict[str, Any], stream: list[Element], late: int) -> None:
    """After cti(c), an element makes follows output a row starting before c: an output CTI of c would have
    been violated. The engine's CTI waited at or below that row's start."""
    q = query(cat, window, clip="none")
    out = traced(cat, q, stream)
    cut = next(i for i, e in enumerate(stream) if isinstance(e, Cti))
    c = stream[cut].t  # type: ignore[union-attr]
    assert [e.le for e in late_output_before(out, cut, c)] == [late]
    assert cti_after(out, cut) <= late < c


@pytest.mark.parametrize("window", [{"type": "count_by_start", "n": 2}, {"type": "rows", "n": 2},
                                    {"type": "count_by_end", "n": 1}])
def test_a_udm_keeping_its_promise_window_by_window(cat: Catalog, window: dict[str, Any]) -> None:
    """``b_marks`` passes the kit's ``time_bound`` contract check (every output it changes starts at the
    changed member), yet count and rows windows made after the CTI hold members from before it. (follows
    keeps c on count_by_start(2) only because it needs two distinct LEs in a window before it outputs.)"""
    [res] = run_contract_checks(BMarks, checks=["time_bound"])
    assert res.passed and not res.skipped, res
    if window["type"] == "count_by_end":  # b's end moves to c = 10: a window [9, 10) over b (LE 9)
        stream: list[Element] = [ev("a", 1, 2, "A"), ev("b", 9, 30, "B"), Cti(10), Retract("b", 9, 30, 10)]
        late = 9
    else:
        stream = [ev("b", 4, 5, "B"), Cti(10), ev("d", 12, 13, "C")]
        late = 4
    out = traced(cat, query(cat, window, udm="b_marks"), stream)
    cut = next(i for i, e in enumerate(stream) if isinstance(e, Cti))
    assert [e.le for e in late_output_before(out, cut, 10)] == [late]
    assert cti_after(out, cut) <= late


def test_session_gives_c(cat: Catalog) -> None:
    """A session open at the CTI changes only after it: a bridging event merges a later session into it,
    follows outputs at the B after the CTI; the output CTI was c all along."""
    stream = [ev("a", 1, 9, "A"), Cti(10), ev("b", 10, 11, "C"), ev("c", 14, 15, "B"), ev("d", 12, 13, "C"),
              Cti(INF)]
    q = query(cat, {"type": "session", "gap": 2})
    out = traced(cat, q, stream)
    assert cti_after(out, 1) == 10
    assert [(e.le, e.re) for e in out if isinstance(e, Insert)] == [(14, 15)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_streams_meet_the_bound(cat: Catalog, family: str) -> None:
    """follows with ``time_bound`` on random streams (disorder, retraction chains): the kit's check —
    oracle CHT, output properties, and the liveliness bound after every CTI."""
    for seed in range(25):
        rng = random.Random(seed)
        win = dict(FAMILIES[family])
        q = query(cat, win, clip=rng.choice(["none", "left", "right", "full"]))
        stream = generate(seed=seed, events=rng.randint(2, 12), types=("A", "B", "C"), duration="mixed",
                          disorder=rng.choice(["in_order", "slightly", "out_of_order"]), speculation=0.5, chain=2,
                          cti=rng.choice(["regular", "eager"]))
        rep = check_engine(runner_engine(QueryRunner, cat), q, stream, seed=seed, variants=1, catalog=cat)
        assert rep.ok, f"seed {seed}\n{rep.text()}"


def test_strong_consistency_gives_nothing_early(cat: Catalog) -> None:
    """Under ``max_delay`` INF a window comes out only once final: b's end can still move after cti(10),
    and follows' output [4, min(b.RE, 6)) would change with it, so the CTI waits at the window's start."""
    stream = [ev("a", 1, 30, "A"), ev("b", 4, 30, "B"), Cti(10), Retract("b", 4, 30, 11), Cti(INF)]
    q = query(cat, {"type": "tumbling", "size": 6}, max_delay="inf")
    assert liveliness_bound(q, stream[:3], 10, cat) == 0
    out = traced(cat, q, stream)
    assert cti_after(out, 2) == 0 and not [e for e in out if isinstance(e, Retract)]
