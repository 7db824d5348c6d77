"""The running sweep's two shortcuts (`udm.host.engine.window.sweep`): members entering as one array
(``add_array``) when they are plain numbers of one kind, and a state made afresh from the members that stay
when fewer stay than leave. Both must give the oracle's windows: exactly for ints (and an int stays an int),
within float tolerance for floats; mixed kinds, bools and ints beyond int64 keep the list route.

Streams are disordered, with retractions and events spanning window boundaries (so that a window's members
leave the sweep while a few stay), and panes of well over `udm.host.engine.window.sweep.ARRAY_MIN` members."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from udm.host.engine import QueryRunner
from udm.host.engine.window.sweep import plain_numbers
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


@pytest.mark.parametrize(("items", "dtype"), [
    ([1, 2, 3], np.int64), ([1.5, 2.0], np.float64), ([1, 2.0], None), ([True, 1], None), ([1 << 64, 1], None),
    ([-(1 << 63), (1 << 63) - 1], np.int64), (["a"], None), ([np.int64(3)], None),
])
def test_plain_numbers_takes_one_kind_of_number_only(items: list[Any], dtype: Any) -> None:
    arr = plain_numbers(items)
    if dtype is None:
        assert arr is None
    else:
        assert arr is not None and arr.dtype == dtype and arr.tolist() == items
