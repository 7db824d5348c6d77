"""Engine snapshots (``--checkpoint``) of the SEMANTICS §9 window state: rows (with panes and sliding
states), session windows, ``aggregates`` and progressive output survive snapshot/restore mid-stream and
give the same output as an uninterrupted run."""

from __future__ import annotations

from typing import Any

import pytest
from test_engine_support import cht

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.testing import generate

AGGS = [{"udm": "count", "as": "n"}, {"udm": "sum", "input": "v", "as": "s"}]


@pytest.mark.parametrize("step", [
    {"window": {"type": "rows", "n": 4, "slide": 2}, "udm": "sum", "input": "v"},
    {"window": {"type": "rows", "n": 5}, "udm": "median", "input": "v"},
    {"window": {"type": "rows", "n": 3}, "udm": "avg", "input": "v", "early": 0},
    {"window": {"type": "session", "gap": 3}, "aggregates": AGGS, "early": 2},
    {"window": {"type": "hopping", "size": 6, "hop": 2}, "aggregates": AGGS},
])
def test_snapshot_restore_mid_stream(step: dict[str, Any]) -> None:
    bq = bind(parse_query({"steps": [{"op": "window", "group_by": ["g"], **step}]}))
    stream = generate(seed=11, events=60, groups=3, disorder="slightly", speculation=0.3, duration="mixed")
    whole = QueryRunner(bq)
    want = [o for el in stream for o in whole.process(el)] + whole.finish()
    half = len(stream) // 2
    first = QueryRunner(bq)
    out = [o for el in stream[:half] for o in first.process(el)]
    resumed = QueryRunner.restore(first.snapshot(), bq)
    out += [o for el in stream[half:] for o in resumed.process(el)] + resumed.finish()
    assert cht(out) == cht(want)
