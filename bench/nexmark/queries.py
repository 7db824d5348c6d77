"""The Nexmark queries udmkit can express, over the streams of `bench.nexmark.gen`, with Flink 1.13's
published per-core throughput where Flink runs the query (q6 over a count window Flink cannot run).

Times are ticks = milliseconds, so Nexmark's 10 s windows are 10 000 ticks."""

from __future__ import annotations

from typing import Any

__all__ = ["BENCH_UDFS", "FLINK_PER_CORE", "NATIVE", "QUERIES", "SPAN", "native_query", "query_names"]

BID_FIELDS = ["auction", "bidder", "price", "channel"]

#: Flink 1.13 Nexmark, events/s per core (the issue's figures)
FLINK_PER_CORE: dict[str, int | None] = {
    "q0": 155_000, "q1": 158_000, "q2": 175_000, "q5": 22_000, "q6": None, "q7": 12_000, "q7j": 12_000,
    "q11": 40_000, "q14": 161_000,
}
#: span queries (one output per input at most): the issue's 1 M el/s target applies
SPAN = ("q0", "q1", "q2", "q14")

QUERIES: dict[str, dict[str, Any]] = {
    # pass-through: every field kept
    "q0": {"steps": [{"op": "project", "keep": BID_FIELDS}]},
    # currency conversion
    "q1": {"steps": [{"op": "map", "udf": "nexmark_dollar_to_euro", "args": {"price": "price"}, "as": "price"}]},
    # selection: auction % 123 == 0
    "q2": {"steps": [{"op": "filter", "udf": "nexmark_mod_eq", "args": {"field": "auction"},
                      "params": {"mod": 123, "rem": 0}}]},
    # hot items, first half: bids per auction over a 10 s window sliding every 2 s
    "q5": {"steps": [{"op": "window", "window": {"type": "hopping", "size": 10_000, "hop": 2_000},
                      "group_by": ["auction"], "udm": "count", "as": "num"}]},
    # average selling price by seller, as a count window: a bidder's last 10 bids
    "q6": {"steps": [{"op": "window", "window": {"type": "rows", "n": 10}, "group_by": ["bidder"],
                      "udm": "avg", "input": "price", "as": "avg_price"}]},
    # highest bid: tumbling 10 s max
    "q7": {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10_000}, "udm": "max",
                      "input": "price", "as": "maxprice"}]},
    # ... and its join form: the bids that carry their window's highest price
    "q7j": {"inputs": {"bids": {}},
            "steps": [{"id": "mx", "from": "bids", "op": "window", "window": {"type": "tumbling", "size": 10_000},
                       "udm": "max", "input": "price", "as": "maxprice"},
                      {"id": "j", "op": "join", "from": ["bids", "mx"], "on": [["price", "maxprice"]]}]},
    # user sessions: bids per bidder session (gap 10 s)
    "q11": {"steps": [{"op": "window", "window": {"type": "session", "gap": 10_000}, "group_by": ["bidder"],
                       "udm": "count", "as": "bid_count"}]},
    # a UDF filter + map: bids of 0.5 M or more, converted to euro
    "q14": {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 500_000}},
                      {"op": "map", "udf": "nexmark_dollar_to_euro", "args": {"price": "price"}, "as": "price_eur"}]},
}

#: queries calling the benchmark's own UDFs (`bench.nexmark.udfs`): not installed, so the Spark engine's
#: workers cannot resolve them; the Spark batch column skips these
BENCH_UDFS = ("q1", "q2", "q14")

#: the queries native Spark SQL expresses directly (ticks are ms: ``ts`` = le / 1000 s)
NATIVE = ("q0", "q1", "q2", "q5", "q7", "q14")


def query_names(ap: Any, text: str) -> list[str]:
    """The queries a ``--queries q0,q5`` option names (an unknown one is the argument parser's error)."""
    names = [q for q in text.split(",") if q]
    unknown = [q for q in names if q not in QUERIES]
    if unknown:
        ap.error(f"unknown query {unknown[0]!r}; queries: {', '.join(QUERIES)}")
    return names


def native_query(q: str, df: Any) -> Any:
    """Query ``q`` in native PySpark over the bids' insert rows (``df``: columns le, re, auction, bidder,
    price, channel, ts)."""
    from pyspark.sql import functions as F

    if q == "q0":
        return df.select("le", "re", "auction", "bidder", "price", "channel")
    if q == "q1":
        return df.select("le", "re", "auction", "bidder", (F.col("price") * 0.908).alias("price"), "channel")
    if q == "q2":
        return df.where(F.col("auction") % 123 == 0).select("le", "re", "auction", "price")
    if q == "q5":
        return df.groupBy("auction", F.window("ts", "10 seconds", "2 seconds")).agg(F.count("*").alias("num"))
    if q == "q7":
        return df.groupBy(F.window("ts", "10 seconds")).agg(F.max("price").alias("maxprice"))
    if q == "q14":
        return df.where(F.col("price") >= 500_000).withColumn("price_eur", F.col("price") * 0.908)
    raise KeyError(q)
