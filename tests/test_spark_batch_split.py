"""Keyless queries split by time range (with overlap) on the Spark batch path: same CHT and same dead
letters as the reference oracle and the local engine, on streams with retractions, CTIs, bad elements,
events spanning many ranges and infinite lifetimes; one bucket where splitting is not sound."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import collect_elements, elements_df
from udm.host.spark.partition import time_split
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import assert_equivalent, generate, oracle_run
from udm.sdk import INF

pytestmark = pytest.mark.spark


def _w(window: dict[str, Any], udm: str, **kw: Any) -> dict[str, Any]:
    return {"op": "window", "window": window, "udm": udm, **kw}


SPLIT: dict[str, dict[str, Any]] = {
    "tumbling_sum": {"steps": [_w({"type": "tumbling", "size": 7, "offset": 2}, "sum", input="v")]},
    "hopping_median": {"steps": [_w({"type": "hopping", "size": 12, "hop": 5}, "median", input="v")]},
    "hopping_gaps_count": {"steps": [_w({"type": "hopping", "size": 4, "hop": 9}, "count")]},
    "filter_then_twa_full_clip": {"steps": [
        {"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 10, "hi": 90}},
        _w({"type": "tumbling", "size": 15}, "twa", input="v", clip="full")]},
    "grouped_inside_topk": {"steps": [
        {"op": "map", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 0, "hi": 50}, "as": "g"},
        _w({"type": "tumbling", "size": 20}, "topk", params={"k": 2, "by": "v"}, group_by=["g"])]},
}

STREAMS: dict[str, dict[str, Any]] = {
    "mixed_speculative": {"events": 80, "groups": 3, "duration": "mixed", "speculation": 0.4, "chain": 2,
                          "disorder": "slightly", "bad": 0.1},
    "long_and_infinite": {"events": 50, "duration": "infinite", "long_max": 90, "speculation": 0.3,
                          "disorder": "out_of_order", "cti": "eager"},
    "long_overlapping": {"events": 60, "duration": "long", "long_max": 120, "overlap": "high",
                         "speculation": 0.5, "speculation_kinds": ("extend", "open_ended", "delete"),
                         "bad": 0.15},
}


def _dead_lines(run: Any) -> list[int]:
    return sorted(r["line"] for r in run.dead_letters.collect())


def _local(query: Any, stream: list[Any]) -> tuple[list[Any], list[int]]:
    runner = QueryRunner(bind(query))
    out = runner.process_many(stream, range(1, len(stream) + 1))
    out += runner.finish()
    return out, sorted(d.line for d in runner.take_dead_letters())


@pytest.mark.parametrize("stream_name", sorted(STREAMS))
@pytest.mark.parametrize("name", sorted(SPLIT))
def test_time_ranges_match_oracle_and_local_engine(spark: Any, name: str, stream_name: str) -> None:
    query = parse_query(SPLIT[name])
    assert time_split(query) is not None
    stream = generate(seed=len(name) * 7 + len(stream_name), **STREAMS[stream_name])
    expected = oracle_run(bind(query), stream)
    local_out, local_dead = _local(query, stream)
    run = run_batch(query, elements_df(spark, stream), buckets=4, algebraic=False)
    try:
        assert run.split == "time" and run.buckets > 1, (run.split, run.buckets)
        out = collect_elements(run.output)
        assert_equivalent(out, expected.cht)
        assert_equivalent(out, local_out)
        dead = _dead_lines(run)
        assert dead == sorted(rej.index + 1 for rej in expected.rejected)
        assert dead == local_dead
    finally:
        run.unpersist()


def test_event_spanning_every_range_and_reused_ids(spark: Any) -> None:
    """An endless event, one spanning all ranges then shortened, an id reused after a full retraction and
    a duplicate live id far from the first: every range decides each id as the whole stream does."""
    stream: list[Any] = [
        Insert("inf", 3, INF, {"v": 1}),
        Insert("wide", 5, 400, {"v": 2}),
        *[Insert(f"p{i}", t, t + 1, {"v": i}) for i, t in enumerate(range(0, 400, 9))],
        Retract("wide", 5, 400, 150),
        Insert("x", 10, 20, {"v": 3}),
        Insert("x", 300, 301, {"v": 4}),  # duplicate live id, in another range than the first x
        Retract("x", 10, 20, 10),  # deletes the first x
        Insert("x", 350, 360, {"v": 5}),  # now valid
        Retract("x", 300, 301, 300),  # refers to the dead-lettered duplicate: lifetime mismatch
        Cti(200),
        Insert("late", 100, 101, {"v": 6}),  # CTI violation
        Retract("inf", 3, INF, 390),
        Cti(INF),
    ]
    for name in ("tumbling_sum", "hopping_median"):
        query = parse_query(SPLIT[name])
        expected = oracle_run(bind(query), stream)
        run = run_batch(query, elements_df(spark, stream), buckets=5, algebraic=False)
        try:
            assert run.split == "time" and run.buckets == 5
            assert_equivalent(collect_elements(run.output), expected.cht)
            assert _dead_lines(run) == sorted(rej.index + 1 for rej in expected.rejected)
        finally:
            run.unpersist()


def test_infinite_event_truncated_where_one_engine_would(spark: Any) -> None:
    stream: list[Any] = [Insert("a", 2, INF, {"v": 1}), *[Insert(f"p{t}", t, t + 1, {"v": t}) for t in (5, 60, 90)],
                         Cti(130), Cti(INF)]
    query = parse_query(SPLIT["hopping_median"])
    expected = oracle_run(bind(query), stream)
    assert expected.truncated_at is not None
    run = run_batch(query, elements_df(spark, stream), buckets=3, algebraic=False)
    try:
        assert run.split == "time"
        assert_equivalent(collect_elements(run.output), expected.cht)
    finally:
        run.unpersist()


@pytest.mark.parametrize("steps", [
    [_w({"type": "snapshot"}, "count")],
    [_w({"type": "count_by_start", "n": 3}, "avg", input="v")],
    [_w({"type": "tumbling", "size": 10}, "count"),
     {"op": "filter", "udf": "in_range", "args": {"field": "count"}, "params": {"lo": 2, "hi": 9}}],
    [_w({"type": "tumbling", "size": 10}, "count", max_memory_time=30)],
])
def test_unsound_shapes_run_in_one_bucket(spark: Any, steps: list[dict[str, Any]]) -> None:
    query = parse_query({"steps": steps})
    assert time_split(query) is None
    stream = generate(seed=4, events=40, duration="mixed", speculation=0.3, bad=0.1)
    expected = oracle_run(bind(query), stream)
    run = run_batch(query, elements_df(spark, stream), buckets=4, algebraic=False)
    try:
        assert run.split == "single" and run.buckets == 1
        assert_equivalent(collect_elements(run.output), expected.cht)
        assert _dead_lines(run) == sorted(rej.index + 1 for rej in expected.rejected)
    finally:
        run.unpersist()
