"""Spark batch: a query graph whose partitioning key changes, run as stages against the same graph in one
bucket (what the planner did before stages), in the same run, on the same input.

Query: the two streams of `bench.gen.join_streams` (10 k skewed keys, disorder, ~5 % retractions, CTIs)
joined on ``k``, then counted per right value ``q`` (100 values) in tumbling windows of 50 ticks. No key
serves both steps, so the staged plan routes the join by ``k`` and the window by ``q``, with a shuffle of the
join's output (and its CTIs) between them; the baseline runs the whole graph in one Python task.

Prints, for each plan: seconds (Spark job, collection included; session start-up excluded, measured once
before), elements/s, output rows; and the staged/single time ratio. Both outputs must have the same CHT.

With the default key skew one hot key holds most of the join's work, which no partitioning spreads;
``--skew 1`` (uniform keys) shows what the stages gain when the work can spread.

``python -m bench.bench_stages [--quick] [--elements N] [--buckets B] [--skew S]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import gen

QUERY: dict[str, Any] = {"inputs": {"left": {}, "right": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["left", "right"], "on": "k", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 50}, "group_by": ["r_q"], "udm": "count",
     "as": "n"}]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_stages", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="50 k elements instead of 400 k")
    ap.add_argument("--elements", type=int, default=None)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--skew", type=float, default=3.0, help="key skew of the streams (1: uniform keys)")
    args = ap.parse_args(argv)
    n = args.elements or (50_000 if args.quick else 400_000)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from udm.host.io.jsonl import JsonlReader
    from udm.host.query.spec import parse_query
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.spark.graph import run_graph_batch
    from udm.host.spark.session import get_spark
    from udm.host.spark.stages import plan_stages
    from udm.host.testing.cht import cht

    spec = parse_query(QUERY)
    print(f"stages: {[[x.name for x in s.nodes] for s in plan_stages(spec)]}", flush=True)
    t0 = time.perf_counter()
    spark = get_spark(shuffle_partitions=args.buckets)
    print(f"spark session: {time.perf_counter() - t0:.1f}s ({spark.sparkContext.master})", flush=True)
    with tempfile.TemporaryDirectory() as d:
        paths = {name: Path(d) / f"{name}.jsonl" for name in ("left", "right")}
        gen.join_streams(paths["left"], paths["right"], n, skew=args.skew)
        frames = {}
        for name, path in paths.items():
            reader = JsonlReader(path)
            try:
                frames[name] = elements_df(spark, list(reader)).cache()
            finally:
                reader.close()
            frames[name].count()
    results = {}
    for label, staged in (("single bucket", False), ("staged", True)):
        t0 = time.perf_counter()
        run = run_graph_batch(spec, frames, buckets=args.buckets, staged=staged)
        try:
            out = collect_elements(run.output)
            split = run.split
        finally:
            run.unpersist()
        secs = time.perf_counter() - t0
        results[label] = (secs, cht(out))
        print(f"{label:>14}: {secs:7.1f}s  {n / secs:9,.0f} el/s  {len(out):,} output elements  split={split}",
              flush=True)
    same = results["staged"][1] == results["single bucket"][1]
    ratio = results["staged"][0] / results["single bucket"][0]
    print(f"staged / single-bucket time: {ratio:.2f}x ({args.buckets} buckets on {os.cpu_count()} cpus); "
          f"same CHT: {same}", flush=True)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
