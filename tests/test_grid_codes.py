"""The pane store's groups as codes (`grid_codes`): a group without an object, made and dropped by the
thousand (a q5-like stream: each key lives a short while), numbered again once most codes are dead, with a
snapshot restored half-way; the output is the oracle's."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_engine_support import cht

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle


def _churn(seed: int, n: int, text: bool) -> list[Element]:
    """Keys that live a few ticks each (a new key every ~3 events), events up to 12 ticks late, a few
    spanning panes, retractions, CTIs a little behind."""
    rng = random.Random(seed)
    out: list[Element] = []
    cti = -1
    for i in range(n):
        le = i - (rng.randrange(12) if rng.random() < 0.3 else 0)
        re = le + (rng.randrange(2, 20) if rng.random() < 0.01 else 1)
        k = i // 3 + rng.randrange(3)
        out.append(Insert(f"e{i}", le, re, {"g": f"a{k}" if text else k, "v": rng.randrange(100)}))
        if rng.random() < 0.01:
            out.append(Retract(f"e{i}", le, re, le))
        if rng.random() < 0.05:
            cti = max(cti, i - rng.randrange(15))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


@pytest.mark.parametrize("text", [False, True])
@pytest.mark.parametrize("window", [{"type": "hopping", "size": 10, "hop": 2}, {"type": "tumbling", "size": 4}])
def test_groups_as_codes_come_and_go(window: dict, text: bool) -> None:
    q = bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "count",
                                     "as": "num"}]}))
    stream = _churn(5, 24_000, text)
    r = QueryRunner(q)
    out: list[Any] = []
    codes_seen = 0
    for a in range(0, len(stream), 400):
        part = stream[a:a + 400]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
        op = next(o for o in r.ops if hasattr(o, "family"))
        codes_seen += sum(type(g) is int for g in op.groups.values())
        if a == 12_000:
            r = QueryRunner.restore(r.snapshot(), q)
    op = next(o for o in r.ops if hasattr(o, "family"))
    store_codes = len(op.family.store.codes)
    out += r.finish()
    assert cht(out) == oracle(q.spec, stream)
    assert codes_seen  # (groups without an object)
    assert store_codes < 8000  # (8,000 keys came, a code each at least: dead codes were numbered away)
