"""``min`` and ``max`` are merge-only (one value per state, no ``remove``): count and snapshot windows sweep
them slice by slice (two stacks, a finger B-tree) and fold again from the members they keep
what a retraction or a late event changes. Against the oracle on random streams with disorder, retractions,
CTIs, a snapshot/restore half-way, groups, and values equal as numbers but not as JSON (``3``/``3.0``,
``0.0``/``-0.0``): the output must be the oracle's to the JSON text."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from test_engine_support import gen_stream

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Element, Insert, Retract
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle

WINDOWS = [{"type": "count_by_start", "n": 3}, {"type": "count_by_start", "n": 2, "hop": 2},
           {"type": "count_by_end", "n": 3}, {"type": "snapshot"}]
VALUES = [3, 3.0, 0, 0.0, -0.0, -2, -2.0, 5, 1.5]


def _text(events: Any) -> list[tuple[int, int, str]]:
    return sorted((le, re, json.dumps(p, sort_keys=True)) for le, re, p in events)


def _mixed(rng: random.Random, stream: list[Element], values: list[Any]) -> list[Element]:
    """The stream with each insert's ``v`` drawn from ``values`` (a retraction keeps its insert's payload)."""
    got: dict[str, Any] = {}
    out = []
    for el in stream:
        if isinstance(el, Insert):
            got[el.id] = {**el.payload, "v": rng.choice(values)}
            el = Insert(el.id, el.le, el.re, got[el.id])
        elif isinstance(el, Retract) and el.payload is not None and el.id in got:
            el = Retract(el.id, el.le, el.re, el.re_new, got[el.id])
        out.append(el)
    return out


@pytest.mark.parametrize("uda", ["min", "max"])
@pytest.mark.parametrize("win", WINDOWS, ids=lambda w: f"{w['type']}{w.get('n', w.get('size', ''))}")
def test_min_max_windows_equal_the_oracle(uda: str, win: dict) -> None:
    for seed in range(30):
        rng = random.Random(seed)
        stream = _mixed(rng, gen_stream(rng, n=rng.randrange(5, 40), p_inf=0.05), VALUES)
        step: dict[str, Any] = {"op": "window", "window": win, "udm": uda, "input": "v"}
        if seed % 2:
            step["group_by"] = ["g"]
        bq = bind(parse_query({"steps": [step]}))
        half = len(stream) // 2
        r = QueryRunner(bq)
        out = r.process_many(stream[:half], range(1, half + 1))
        r = QueryRunner.restore(r.snapshot(), bq)
        out += r.process_many(stream[half:], range(half + 1, len(stream) + 1))
        out += r.finish()
        assert _text(cht(out).events()) == _text(oracle(bq, stream).events()), (seed, win, uda)
