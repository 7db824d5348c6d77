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

Plans alternate (single, staged, staged, single, ...) ``--repeat`` times and the medians are reported, with
the load average: the machine may be shared. ``--master`` runs them elsewhere than ``local[2]``;
``--cluster`` starts a standalone cluster of two one-core workers on this machine
(`udm.host.testing.spark_cluster`) and runs the same comparison there and on ``local[2]``, each in a child
process of its own: the staged plan's time on the cluster against ``local[2]``.

``python -m bench.bench_stages [--quick] [--elements N] [--buckets B] [--skew S] [--repeat R] [--cluster]``
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each plan (median reported)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cluster", action="store_true", help="also on a 2-worker standalone cluster (children)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child's result, one JSON line
    args = ap.parse_args(argv)
    n = args.elements or (50_000 if args.quick else 400_000)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.cluster:
        return _cluster(args, n)

    from udm.host.io.jsonl import JsonlReader
    from udm.host.model.spec import parse_query
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.spark.graph import run_graph_batch
    from udm.host.spark.session import get_spark
    from udm.host.spark.stages import plan_stages
    from udm.host.testing.cht import cht

    spec = parse_query(QUERY)
    print(f"stages: {[[x.name for x in s.nodes] for s in plan_stages(spec)]}", flush=True)
    t0 = time.perf_counter()
    spark = get_spark(args.master, shuffle_partitions=args.buckets)
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
    import statistics

    times: dict[str, list[float]] = {"single bucket": [], "staged": []}
    answers: dict[str, Any] = {}
    loads = [os.getloadavg()[0]]
    plans = [("single bucket", False), ("staged", True)]
    for r in range(args.repeat):
        for label, staged in (plans if r % 2 == 0 else plans[::-1]):
            t0 = time.perf_counter()
            run = run_graph_batch(spec, frames, buckets=args.buckets, staged=staged)
            try:
                out = collect_elements(run.output)
                split = run.split
            finally:
                run.unpersist()
            secs = time.perf_counter() - t0
            times[label].append(secs)
            answers[label] = cht(out)
            loads.append(os.getloadavg()[0])
            if not args.json:
                print(f"{label:>14}: {secs:7.1f}s  {n / secs:9,.0f} el/s  {len(out):,} output elements  "
                      f"split={split}", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    same = answers["staged"] == answers["single bucket"]
    ratio = med["staged"] / med["single bucket"]
    if args.json:
        print(json.dumps({"single": med["single bucket"], "staged": med["staged"], "same": same,
                          "load": [min(loads), max(loads)]}), flush=True)
    else:
        print(f"median of {args.repeat}: staged {med['staged']:.1f}s, single bucket {med['single bucket']:.1f}s; "
              f"staged / single-bucket time: {ratio:.2f}x ({args.buckets} buckets on {spark.sparkContext.master}, "
              f"{os.cpu_count()} cpus; target <= 1.0x); same CHT: {same}; load {min(loads):.1f}-{max(loads):.1f}",
              flush=True)
    return 0 if same else 1


def _cluster(args: argparse.Namespace, n: int) -> int:
    """The comparison on ``local[2]`` and on a standalone cluster of two one-core workers, in children."""
    import subprocess
    import tempfile

    from udm.host.testing.spark_cluster import Cluster

    root = Path(__file__).resolve().parent.parent
    base = [sys.executable, "-m", "bench.bench_stages", "--json", "--elements", str(n), "--buckets",
            str(args.buckets), "--skew", str(args.skew), "--repeat", str(args.repeat)]
    got: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="udm-bench-cluster-") as d, Cluster(Path(d), workers=2, cores=1) as c:
        for name, master in (("local[2]", "local[2]"), ("cluster", c.url), ("local[2] again", "local[2]")):
            res = subprocess.run([*base, "--master", master], cwd=root, capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stderr[-3000:])
                return 1
            got[name] = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{name:>15}: staged {got[name]['staged']:.1f}s, single bucket {got[name]['single']:.1f}s, "
                  f"same CHT {got[name]['same']}, load {got[name]['load'][0]:.1f}-{got[name]['load'][1]:.1f}",
                  flush=True)
    local = (got["local[2]"]["staged"] + got["local[2] again"]["staged"]) / 2
    print(f"staged graph, cluster (2 workers x 1 core) / local[2]: {got['cluster']['staged'] / local:.2f}x "
          f"({n:,} elements, {args.buckets} buckets)", flush=True)
    return 0 if all(g["same"] for g in got.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
