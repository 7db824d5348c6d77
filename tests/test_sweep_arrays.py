"""Two shortcuts of window evaluation: values added to a state as one array (``add_array``,
`udm.host.engine.invoke.WindowUDM.add_values`) when they are numbers of one kind, and a running sweep's state
made afresh from the members that stay when fewer stay than leave (`udm.host.engine.window.sweep`). Both must
give the oracle's windows: exactly for ints (and an int stays an int), within float tolerance for floats;
mixed kinds and ints beyond int64 keep the list route (an int among floats stays an int).

Streams are disordered, with retractions and events spanning window boundaries (so that a window's members
leave the sweep while a few stay), and panes of well over `udm.host.engine.invoke.ARRAY_MIN` members."""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import oracle
from udm.host.testing.cht import cht
from udm.host.testing.verifier import verify

WINDOWS = [{"type": "tumbling", "size": 40}, {"type": "hopping", "size": 40, "hop": 10}]


def _value(rng: random.Random, kind: str, i: int) -> Any:
    if kind == "int":
        return rng.randrange(-1000, 1000)
    if kind == "float":
        return rng.uniform(-1000, 1000)
    if kind == "big":  # beyond int64 now and then: the list route
        return rng.randrange(1000) + (1 << 70 if i % 97 == 0 else 0)
    return rng.choice([rng.randrange(100), rng.uniform(0, 100), 7, 7.0])  # mixed


def _stream(kind: str, seed: int) -> list[Any]:
    """Two groups, ~1,200 events with LEs up to 30 ticks early, lifetimes up to 60 ticks (many span a window
    end), a fifth of them shortened or removed by a retraction a few elements later; CTIs lag behind."""
    rng = random.Random(seed)
    out: list[Any] = []
    live: list[tuple[str, int, int, dict[str, Any]]] = []
    for i in range(1200):
        t = i // 3
        le = max(0, t - rng.randrange(30))
        re = le + 1 + (rng.randrange(60) if rng.random() < 0.3 else rng.randrange(3))
        payload = {"k": "A" if rng.random() < 0.5 else "B", "v": _value(rng, kind, i)}
        out.append(Insert(f"e{i}", le, re, payload))
        live.append((f"e{i}", le, re, payload))
        if rng.random() < 0.2 and len(live) > 5:
            eid, ole, ore, pl = live.pop(rng.randrange(len(live) - 5, len(live)))
            out.append(Retract(eid, ole, ore, rng.randrange(ole, ore) if ore - ole > 1 else ole, pl))
        if i % 50 == 49:
            out.append(Cti(max(0, t - 40)))
    return [*out, Cti(10_000)]


@pytest.mark.parametrize("window", WINDOWS, ids=[w["type"] for w in WINDOWS])
@pytest.mark.parametrize("udm", ["sum", "avg", "count"])
@pytest.mark.parametrize("kind", ["int", "float", "mixed", "big"])
@pytest.mark.parametrize("seed", [1, 2])
def test_windows_equal_the_oracle(window: dict[str, Any], udm: str, kind: str, seed: int) -> None:
    spec = parse_query({"steps": [{"op": "window", "window": window, "group_by": ["k"], "udm": udm, "input": "v",
                                   "as": "s"}]})
    stream = _stream(kind, seed)
    expected = oracle(spec, stream)
    for size in (1, 64, len(stream)):
        runner = QueryRunner(bind(spec))
        out: list[Any] = []
        for at in range(0, len(stream), size):
            out += runner.process_many(stream[at:at + size])
        out += runner.finish()
        if kind == "float" and udm != "count":
            assert verify(out, expected), (size, verify(out, expected))
        else:  # ints exact, and the JSON text of each value (an int stays an int) the oracle's
            assert list(cht(out).rows()) == list(expected.rows()), size
