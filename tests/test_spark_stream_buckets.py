"""Key buckets and shuffle partitions (`udm.host.spark.stream_buckets`): the bucket-to-partition placement
is checked against Spark's own ``hash`` function and against where a running stream's rows come from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.stream_io import json_files, out_elements
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.stream_buckets import bucket_salts, murmur3_long, partition_of
from udm.host.temporal.elements import parse_element
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

SUM_BY_G = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                       "udm": "sum", "input": "v"}]}


def test_no_buckets_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 key bucket, got 0"):
        bucket_salts(0)


@pytest.mark.spark
def test_murmur3_long_and_partition_of_are_sparks_hash(spark: Any) -> None:
    from pyspark.sql import functions as F

    values = [-(2**63), -(2**31) - 1, -5, -1, 0, 1, 2, 3, 41, 2**31, 2**40 + 7, 2**63 - 1]
    df = spark.createDataFrame([(v,) for v in values], "v bigint")
    got = df.select("v", F.hash("v").alias("h"), F.hash(F.lit(3).cast("bigint"), "v").alias("h2")).collect()
    assert [(r.v, r.h) for r in got] == [(v, murmur3_long(v)) for v in values]
    assert [r.h2 % 7 for r in got] == [partition_of(3, v, 7) for v in values]


@pytest.mark.spark
def test_salts_put_every_bucket_in_its_own_partition(spark: Any) -> None:
    """Spark computes where each (bucket, salt) lands; with n buckets over n partitions, bucket b is in b
    (over a partition count dividing n: b mod it). Without the salt, 0 and 1 of 2 share a partition."""
    from pyspark.sql import functions as F

    for n in (1, 2, 3, 4, 5, 8, 16):
        rows = [(b, s) for b, s in enumerate(bucket_salts(n))]
        df = spark.createDataFrame(rows, "b bigint, s bigint")
        got = [r.p for r in df.select(F.pmod(F.hash("b", "s"), F.lit(n)).alias("p")).orderBy("b").collect()]
        assert got == list(range(n)), n
        if n % 2 == 0:
            halves = [r.p for r in df.select(F.pmod(F.hash("b", "s"), F.lit(2)).alias("p")).orderBy("b").collect()]
            assert halves == [b % 2 for b in range(n)]
    unsalted = spark.createDataFrame([(0,), (1,)], "b bigint").select(F.pmod(F.hash("b"), F.lit(2)).alias("p"))
    assert {r.p for r in unsalted.collect()} == {1}  # the serialization the salt removes


@pytest.mark.spark
def test_each_bucket_runs_in_its_own_task(spark: Any, tmp_path: Path) -> None:
    """A running stream: the rows of bucket b come out of shuffle partition b (both tasks have work),
    and the answer is still the oracle's."""
    from pyspark.sql import functions as F

    from udm.host.spark.streaming import run_stream

    groups = [f"k{i}" for i in range(12)]
    files = [[{"line": b * 25 + i + 1, "kind": "insert", "id": f"e{b}-{i}", "le": b * 10 + i % 10, "re": 100,
               "payload": json.dumps({"g": groups[i % 12], "v": float(i)})} for i in range(24)]
             + [{"line": b * 25 + 25, "kind": "cti", "t": 10 if b == 0 else 2**63 - 1}] for b in range(2)]
    src = json_files(spark, tmp_path / "in", files,
                     "line long, kind string, id string, le long, re long, re_new long, t long, payload string")
    rows: list[dict[str, Any]] = []

    def keep(df: Any, batch_id: int) -> None:
        rows.extend({**r.asDict(), "batch": batch_id}
                    for r in df.withColumn("part", F.spark_partition_id()).collect())

    q = (run_stream(SUM_BY_G, src, buckets=2).writeStream.foreachBatch(keep)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination()
    assert {(r["bucket"], r["part"]) for r in rows if r["stream"] == "out"} == {(0, 0), (1, 1)}
    logical = [parse_element({k: v for k, v in r.items() if v is not None and k != "line"}
                             | ({"payload": json.loads(r["payload"])} if r.get("payload") else {}))
               for f in files for r in f]
    assert verify(out_elements(rows), oracle_run(bind(parse_query(SUM_BY_G)), logical).cht)
