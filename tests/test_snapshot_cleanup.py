"""Snapshot windows clean up by a heap of ends: a CTI drops the events that ended before the first window
that can still change, at a cost of what it drops (issue 26: scanning every live event per CTI made a grouped
RANGE of 10,000 ticks cost 10x a RANGE of 10). An end that a retraction moved leaves a stale heap entry,
which must not drop the event; what stays is bounded by the live events."""

from __future__ import annotations

import json
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle


def _run(udm: str, stream: list[Element]) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]], Any]:
    bq = bind(parse_query({"steps": [{"op": "window", "window": {"type": "snapshot"}, "udm": udm, "input": "v"}]}))
    r = QueryRunner(bq)
    out = r.process_many(stream, range(1, len(stream) + 1))
    mid = r.state_size()
    out += r.finish()

    def text(evs: Any) -> list[tuple[int, int, str]]:
        return sorted((le, re, json.dumps(p, sort_keys=True)) for le, re, p in evs)

    return text(cht(out).events()), text(oracle(bq, stream).events()), mid


def test_an_extended_event_outlives_its_old_end() -> None:
    for udm in ("sum", "min", "max", "median"):
        # (b's ends make windows between a's old end and the CTI: the cleanup at 10 reaches a's old end)
        stream: list[Element] = [Insert("a", 0, 5, {"v": 1}), Insert("b", 6, 8, {"v": 7}), Retract("a", 0, 5, 15),
                                 Cti(10), Insert("c", 12, 14, {"v": 3}), Retract("a", 0, 15, 18), Cti(11),
                                 Insert("d", 16, 17, {"v": -4})]
        got, want, _ = _run(udm, stream)
        assert got == want, udm


def test_what_a_range_holds_is_its_live_events() -> None:
    size, n = 50, 2000
    stream: list[Element] = []
    for t in range(n):
        stream.append(Insert(f"e{t}", t, t + size, {"v": (t * 37) % 101}))
        if t % 10 == 9:
            stream.append(Cti(t + 1))
    got, want, mid = _run("max", stream)
    assert got == want
    assert mid["held"] <= size + 20  # (the events whose lifetime holds the last CTI, and a few ending at it)
