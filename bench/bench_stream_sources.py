"""``udm run --engine spark-streaming`` at its new default micro-batch size against the old default of 50
(semantics-notes 45), and `run_stream` over Spark's ``rate`` source against native Structured Streaming.

``file`` (default): a file of ``--elements`` in-order inserts (CTI every 1000, 4 symbols, tumbling sum, 4
buckets) run as ``udm run`` runs it: the local engine on the whole file (the baseline), the streaming engine
at the default batch size on the whole file, and at ``--batch-size 50`` on its first ``--old-elements`` (the
old default would take hours on the whole file). Prints elements/s of each and the ratios; the streaming
output is checked against the local engine's. The default-size run goes first, as in a fresh ``udm run``
process: it pays the JVM's and the Python workers' warm-up (~10 s here), which ``--warm`` excludes (a
small streaming run first).

``rate``: `rate_elements` at ``--rate`` rows/s through `run_stream` (``order=RATE_ORDER``, CTIs from the
watermark, 1-second tumbling count by group) and native ``groupBy(window(timestamp, 1 s), g).count()`` on
the same source and ``--trigger``, each for ``--seconds``: median micro-batch latency and input rows/s (from
Spark's progress reports, the first two batches left out), and udm/native ratios.

Where a file run's time goes (profiled with Spark's event log, 4 buckets on 2 cores): the first micro-batch
of a process costs ~7-12 s (the JVM warming up, the Python workers starting, ~2.5-5 s of query planning);
after it a micro-batch costs ~0.7-1.2 s whatever its size (a 2-element tail batch as much as a 10,000-one),
nearly all of it the Spark job itself: per stateful task the Python runner's set-up (~0.3 s) and the state
store commit (~0.1-0.45 s), four such tasks in two waves. Outside the job: listing the staged parts
(latestOffset) 40-180 ms, planning 60-250 ms, the WAL and commit logs ~50-100 ms each, the
``foreachBatch`` writer 1-60 ms, assembling the output file under 1 s for 200 k elements. RocksDB changelog
checkpointing (``--conf spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true``)
cuts the commit metric but not the micro-batch (13 micro-batches of 50 elements: 713-809 ms each with it
off, 790-839 ms on); two buckets instead of four saved ~10 %.

``--conf KEY=VALUE`` (repeatable) sets a Spark setting for the whole run (to compare settings, e.g.
``--conf spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true``).

Run: ``.venv/bin/python -m bench.bench_stream_sources [file|rate] [--elements 200000] [--old-elements 1000]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["sym"],
                    "udm": "sum", "input": "price"}]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", default="file", choices=("file", "rate"))
    ap.add_argument("--elements", type=int, default=200_000, help="file: elements in the file")
    ap.add_argument("--old-elements", type=int, default=1000, help="file: elements run at --batch-size 50")
    ap.add_argument("--rate", type=int, default=2000, help="rate: rows per second")
    ap.add_argument("--seconds", type=float, default=25.0, help="rate: seconds per query")
    ap.add_argument("--trigger", default="2 seconds", help="rate: processing-time trigger")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    ap.add_argument("--warm", action="store_true", help="file: a small streaming run first (no warm-up timed)")
    args = ap.parse_args(argv)
    from udm.host.spark.session import get_spark

    conf = dict(c.split("=", 1) for c in args.conf)
    spark = get_spark(shuffle_partitions=4, **{"spark.sql.adaptive.enabled": "false", **conf})
    spark.sparkContext.setLogLevel("ERROR")
    return file_bench(args) if args.what == "file" else rate_bench(spark, args)


def _read(p: Path) -> list[Any]:
    from udm.host.temporal.elements import parse_element

    return [parse_element(json.loads(x)) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]


def file_bench(args: argparse.Namespace) -> int:
    from bench.gen import in_order
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query
    from udm.host.query.runners import RunRequest, get_engine, run_local
    from udm.host.spark.stream_files import DEFAULT_BATCH_SIZE
    from udm.host.testing.verifier import verify

    bound = bind(parse_query(QUERY))
    stream = get_engine("spark-streaming")
    with tempfile.TemporaryDirectory(prefix="udm-bench-sources-") as d:
        src, old_src = Path(d) / "in.jsonl", Path(d) / "old.jsonl"
        in_order(src, args.elements)
        in_order(old_src, args.old_elements)
        t0 = time.perf_counter()
        run_local(RunRequest(bound, src, Path(d) / "local.jsonl"))
        t_local = time.perf_counter() - t0
        if args.warm:
            stream(RunRequest(bound, old_src, Path(d) / "warm.jsonl", batch_size=args.old_elements // 2,
                              options={"buckets": 4}))
        t0 = time.perf_counter()
        res = stream(RunRequest(bound, src, Path(d) / "new.jsonl", options={"buckets": 4}))
        t_new = time.perf_counter() - t0
        t0 = time.perf_counter()
        stream(RunRequest(bound, old_src, Path(d) / "old.jsonl", batch_size=50, options={"buckets": 4}))
        t_old = time.perf_counter() - t0
        same = bool(verify(_read(Path(d) / "new.jsonl"), _read(Path(d) / "local.jsonl")))
    n, m = args.elements, args.old_elements
    print(f"{'run':<34} {'elements':>9} {'seconds':>8} {'el/s':>10}")
    print(f"{'local engine (baseline)':<34} {n:>9} {t_local:>8.1f} {n / t_local:>10,.0f}")
    print(f"{f'spark-streaming default ({DEFAULT_BATCH_SIZE})':<34} {n:>9} {t_new:>8.1f} {n / t_new:>10,.0f}")
    print(f"{'spark-streaming --batch-size 50':<34} {m:>9} {t_old:>8.1f} {m / t_old:>10,.0f}")
    print(f"new default / old default: {(n / t_new) / (m / t_old):,.0f}× el/s; "
          f"local / new default: {(n / t_local) / (n / t_new):,.1f}×; same answer as local: {same}"
          f"{' (warmed up)' if args.warm else ''}")
    assert res.elements_in == n
    return 0 if same else 1


def _measure(query: Any, ck: Path, seconds: float, trigger: str) -> dict[str, float]:
    from udm.host.spark.stream_stop import stop_between_batches

    q = (query.writeStream.foreachBatch(lambda df, _id: df.count()).option("checkpointLocation", str(ck))
         .trigger(processingTime=trigger).start())
    time.sleep(seconds)
    stop_between_batches(q)  # (stopped mid-batch, Spark prints a StackOverflowError: see stream_stop)
    steady = [p for p in q.recentProgress if p["numInputRows"] > 0][2:]
    if not steady:
        return {"latency_ms": float("nan"), "rows_per_s": 0.0, "batches": 0}
    ms = [p["durationMs"]["triggerExecution"] for p in steady]
    rows = sum(p["numInputRows"] for p in steady)
    return {"latency_ms": statistics.median(ms), "rows_per_s": rows / (sum(ms) / 1000), "batches": len(ms)}


def rate_bench(spark: Any, args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from udm.host.spark.stream_sources import RATE_ORDER, rate_elements
    from udm.host.spark.streaming import run_stream

    query = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 1_000_000}, "group_by": ["g"],
                        "udm": "count"}]}
    with tempfile.TemporaryDirectory(prefix="udm-bench-rate-") as d:
        udm_q = run_stream(query, rate_elements(spark, args.rate, groups=10), buckets=4, order=RATE_ORDER,
                           ctis_from_watermark=True)
        udm = _measure(udm_q, Path(d) / "ck-udm", args.seconds, args.trigger)
        src = rate_elements(spark, args.rate, groups=10)
        native_q = (src.withColumn("g", F.get_json_object("payload", "$.g"))
                    .groupBy(F.window("timestamp", "1 second"), "g").count())
        native = _measure(native_q, Path(d) / "ck-native", args.seconds, args.trigger)
    print(f"rate source, {args.rate} rows/s, trigger {args.trigger!r}, {args.seconds:.0f} s per query")
    print(f"{'query':<24} {'batches':>7} {'median ms':>10} {'rows/s':>10}")
    for name, r in (("udm run_stream", udm), ("native window count", native)):
        print(f"{name:<24} {r['batches']:>7.0f} {r['latency_ms']:>10.0f} {r['rows_per_s']:>10,.0f}")
    if native["rows_per_s"] and udm["rows_per_s"]:
        print(f"latency udm/native: {udm['latency_ms'] / native['latency_ms']:.2f}×; "
              f"throughput udm/native: {udm['rows_per_s'] / native['rows_per_s']:.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
