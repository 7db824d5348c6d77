"""Run in a child process by ``test_spark_connect.py``: the Spark surfaces over a Spark Connect session
(``remote="local[2]"``: PySpark starts a local Connect server), results written as JSON for the parent
to check. A child process because a Connect server cannot share this test run's SparkContext."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from udm.host.temporal.elements import element_to_json, parse_element


def main(work: Path) -> None:
    from udm.host.spark import register_sql
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.spark.session import get_spark
    from udm.host.spark.streaming import run_stream

    job = json.loads((work / "job.json").read_text(encoding="utf-8"))
    spark = get_spark(shuffle_partitions=2, **{"spark.remote": "local[2]"})
    result: dict[str, Any] = {"session": type(spark).__module__}
    stream = [parse_element(x) for x in job["stream"]]
    df = elements_df(spark, stream)
    for path in ("algebraic", "engine"):
        run = run_batch(job["query"], df, algebraic=None if path == "algebraic" else False)
        result[path] = {"path": run.path, "out": [element_to_json(e) for e in collect_elements(run.output)],
                        "dead": sorted(r["line"] for r in run.dead_letters.collect())}

    reg = register_sql(spark)
    spark.createDataFrame(job["ticks"], "k string, sec int, v double") \
        .selectExpr("k", "timestamp_seconds(sec) AS ts", "v").createOrReplaceTempView("ticks")
    sql = "SELECT k, unix_micros(window.start) AS ws, {}(v) AS m FROM ticks GROUP BY k, window(ts, '10 seconds')"
    result["sql"] = {"ours": [r.asDict() for r in spark.sql(sql.format(reg.renamed["median"])).collect()],
                     "builtin": [r.asDict() for r in spark.sql(sql.format("median")).collect()]}

    src = work / "stream-in"
    src.mkdir()
    base = time.time() - 1000
    for i, rows in enumerate(job["micro_batches"]):  # one file per micro-batch, in order
        p = src / f"p{i:03d}.json"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        import os

        os.utime(p, (base + i, base + i))
    source = spark.readStream.schema(
        "line long, kind string, id string, le long, re long, re_new long, t long, payload string") \
        .option("maxFilesPerTrigger", 1).json(str(src))
    q = run_stream(job["query"], source, buckets=2).writeStream.format("memory").queryName("udm_out") \
        .option("checkpointLocation", str(work / "ck")).trigger(availableNow=True).start()
    q.awaitTermination()
    result["stream"] = [r.asDict() for r in spark.sql("SELECT * FROM udm_out").collect()]
    (work / "result.json").write_text(json.dumps(result), encoding="utf-8")
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
