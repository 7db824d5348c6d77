"""The demo's streams carry the real series exactly (imperfections are physical only), and the job runs."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from udm.host.demo.data import load_stocks, load_temperatures, stock_stream, temperature_stream
from udm.host.demo.job import QUERIES, demo_streams, run_demo
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Insert, Retract
from udm.host.testing import assert_equivalent, cht, oracle


def _row(le: int, re: int, payload: dict) -> tuple[int, int, str]:
    return le, re, json.dumps(payload, sort_keys=True, separators=(",", ":"))


def test_temperature_stream_is_the_series_as_edge_events() -> None:
    series = load_temperatures()
    stream = temperature_stream(series)
    rows = series.rows
    expected = Counter(
        _row(t, rows[i + 1][0] if i + 1 < len(rows) else t + 60, {"city": k, "temp": v})
        for i, (t, k, v) in enumerate(rows)
    )
    assert cht(stream) == expected
    # the imperfections are really there: open-ended inserts, glitches retracted, samples out of order
    assert any(isinstance(e, Retract) and e.re_new == e.le for e in stream)
    les = [e.le for e in stream if isinstance(e, Insert)]
    assert any(b < a for a, b in pairwise(les))


def test_stock_stream_is_the_series_as_point_events() -> None:
    series = load_stocks()
    expected = Counter(_row(t, t + 1, {"symbol": s, "price": p}) for t, s, p in series.rows)
    assert cht(stock_stream(series)) == expected
    assert len({s for _, s, _ in series.rows}) == 5


def test_demo_queries_match_the_oracle_on_the_local_engine(tmp_path: Path) -> None:
    results = run_demo(out_dir=tmp_path, engine="local")
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    streams = demo_streams(load_temperatures(), load_stocks())
    for r in results:
        assert r.agrees_with_local and r.dead_lettered == 0
        got = [Insert(str(i), le, re, p) for i, (le, re, p) in enumerate(r.rows)]
        assert_equivalent(got, oracle(parse_query(r.query.spec), r.query.inputs(streams)))
    joined = next(r for r in results if r.query.title.startswith("Monthly price beside IBM"))
    ibm = {t: p for t, s, p in load_stocks().rows if s == "IBM"}
    assert joined.rows and all(p["ibm"] == ibm[le] and p["symbol"] != "IBM" for le, _, p in joined.rows)
    assert any(r.corrections for r in results), "the demo should show speculation being corrected"


@pytest.mark.spark
def test_demo_on_local_spark_agrees_with_the_local_engine(tmp_path: Path, spark: object) -> None:
    results = run_demo(out_dir=tmp_path, engine="spark")
    assert len(results) == len(QUERIES) and all(r.agrees_with_local for r in results)
