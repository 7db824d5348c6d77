"""Spark SQL registration: UDMs by registered name, checked against Spark's own built-ins."""

from __future__ import annotations

import json
from typing import Any

import pytest

from udm.host.spark import register_sql

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def registered(spark: Any) -> Any:
    return register_sql(spark)


def _ticks(spark: Any) -> Any:
    rows = [("A", 1, 1.0), ("A", 3, 5.0), ("A", 4, 2.0), ("A", 12, 7.0), ("B", 2, 4.0), ("B", 5, 6.0),
            ("B", 7, None), ("A", 15, 3.0), ("A", 19, 11.0), ("B", 13, 1.5)]
    df = spark.createDataFrame(rows, "k string, sec int, v double")
    return df.selectExpr("k", "timestamp_seconds(sec) AS ts", "v")


def test_registration_lists_kinds(registered: Any) -> None:
    # built-in names are kept for Spark; ours get the udm_ prefix
    assert {"udm_median", "udm_sum", "udm_count", "udm_avg", "udm_min", "udm_max"} <= set(registered.aggregates)
    assert registered.renamed["sum"] == "udm_sum"
    assert "in_range" in registered.functions
    assert "topk" in registered.table_functions
    assert "twa" in registered.skipped and "members" in registered.skipped
    assert "flat_map" in registered.skipped["explode"] and "udm_explode" not in registered.table_functions


def test_window_group_by_matches_builtins(spark: Any, registered: Any) -> None:
    _ticks(spark).createOrReplaceTempView("ticks")
    ours = spark.sql(
        "SELECT k, window.start AS ws, udm_median(v) AS med, udm_sum(v) AS s, udm_avg(v) AS a, "
        "udm_max(v) AS mx FROM ticks GROUP BY k, window(ts, '10 seconds')").collect()
    ref = spark.sql(
        "SELECT k, window.start AS ws, median(v) AS med, sum(v) AS s, avg(v) AS a, "
        "max(v) AS mx FROM ticks GROUP BY k, window(ts, '10 seconds')").collect()
    key = lambda r: (r["k"], r["ws"])  # noqa: E731
    assert len(ours) == len(ref) == 4
    for o, r in zip(sorted(ours, key=key), sorted(ref, key=key), strict=True):
        assert key(o) == key(r)
        for col in ("med", "s", "a", "mx"):
            assert o[col] == pytest.approx(r[col]), col


def test_count_skips_nulls_like_builtin(spark: Any, registered: Any) -> None:
    _ticks(spark).createOrReplaceTempView("ticks2")
    got = {r["k"]: r["c"] for r in spark.sql("SELECT k, udm_count(v) AS c FROM ticks2 GROUP BY k").collect()}
    ref = {r["k"]: r["c"] for r in spark.sql("SELECT k, count(v) AS c FROM ticks2 GROUP BY k").collect()}
    assert got == ref


def test_udf_as_sql_function(spark: Any, registered: Any) -> None:
    _ticks(spark).createOrReplaceTempView("ticks3")
    got = spark.sql("SELECT v, in_range(v) AS ok FROM ticks3").collect()
    assert all(r["ok"] == (r["v"] is not None) for r in got)  # default params: (-inf, inf)


def test_udo_as_udtf_with_table_partition(spark: Any, registered: Any) -> None:
    _ticks(spark).createOrReplaceTempView("ticks4")
    got = spark.sql(
        "SELECT * FROM topk(TABLE(SELECT k, v FROM ticks4 WHERE v IS NOT NULL) PARTITION BY k, "
        "params => '{\"k\": 2, \"by\": \"v\"}')").collect()
    rows = sorted((d["k"], d["rank"], d["v"]) for d in (json.loads(r["payload"]) for r in got))
    # hand-computed: A values 1,5,2,7,3,11 → 11, 7; B values 4,6,1.5 → 6, 4
    assert rows == [("A", 1, 11.0), ("A", 2, 7.0), ("B", 1, 6.0), ("B", 2, 4.0)]


def test_replace_builtins_makes_the_issue_query_work(spark: Any) -> None:
    """``median(v)`` by its registered name, in a separate session so the shared one keeps its built-ins."""
    session = spark.newSession()
    done = register_sql(session, replace_builtins=True)
    assert "median" in done.aggregates and not done.renamed
    _ticks(session).createOrReplaceTempView("t")
    got = session.sql("SELECT k, window.start AS ws, median(v) AS m FROM t "
                      "GROUP BY k, window(ts, '10 seconds')").collect()
    _ticks(spark).createOrReplaceTempView("t_ref")
    ref = spark.sql("SELECT k, window.start AS ws, percentile(v, 0.5) AS m FROM t_ref "
                    "GROUP BY k, window(ts, '10 seconds')").collect()
    assert sorted(map(tuple, got)) == sorted(map(tuple, ref))
