"""A hopping window wider than the column store keeps its sweep across batches: the cleanup at a CTI takes
the panes that are gone out of the sweep (``leave_before``) instead of emptying it, so the next batch moves it
on instead of refilling a whole window (issue 26: that refill made a 10,000-tick window cost O(size) per
batch). Against the oracle: random disorder, retractions, CTIs, several batches, a snapshot/restore
half-way, a running (sum), a merge-only (min, max) and a members (median) UDA."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from test_engine_support import gen_stream

from udm.host.engine import QueryRunner
from udm.host.engine.window.grid import COLUMN_PANES
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle

WINDOWS = [{"type": "hopping", "size": COLUMN_PANES + 4, "hop": 1},
           {"type": "hopping", "size": 3 * COLUMN_PANES, "hop": 2}]


def _text(events: Any) -> list[tuple[int, int, str]]:
    return sorted((le, re, json.dumps(p, sort_keys=True)) for le, re, p in events)


@pytest.mark.parametrize("uda", ["sum", "min", "max", "median"])
@pytest.mark.parametrize("win", WINDOWS, ids=lambda w: f"size{w['size']}hop{w['hop']}")
def test_a_wide_hopping_sweep_across_batches_equals_the_oracle(uda: str, win: dict) -> None:
    for seed in range(25):
        rng = random.Random(seed)
        stream = gen_stream(rng, n=rng.randrange(20, 70), span=80, p_inf=0.03, p_cti=0.2, values=50)
        step: dict[str, Any] = {"op": "window", "window": win, "udm": uda, "input": "v"}
        if seed % 2:
            step["group_by"] = ["g"]
        bq = bind(parse_query({"steps": [step]}))
        cuts = sorted(rng.sample(range(1, len(stream)), 4))
        r = QueryRunner(bq)
        out: list[Any] = []
        for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(stream)], strict=True)):
            out += r.process_many(stream[a:b], range(a + 1, b + 1))
            if i == 2:
                r = QueryRunner.restore(r.snapshot(), bq)
        out += r.finish()
        assert _text(cht(out).events()) == _text(oracle(bq, stream).events()), (seed, win, uda)
