"""The Spark Structured Streaming path: elements/s per micro-batch size (``udm run --engine spark-streaming
--batch-size N``), against the local engine on the same file in the same run, same answer checked.

Each size runs ``--batches`` micro-batches (default 12) of in-order inserts with a CTI every 1000
elements, grouped by 4 symbols into 4 key buckets, tumbling 100-tick windows with ``sum``. The figure
includes everything a user waits for: staging, Spark's per-batch planning and commit, the state store
round trip of each bucket's engine, and assembling the output file.

Run: ``.venv/bin/python -m bench.bench_streaming [--quick] [--sizes 50,1000,10000,100000]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["sym"],
                    "udm": "sum", "input": "price"}]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sizes 50, 1000, 10000 only")
    ap.add_argument("--sizes", default=None, help="comma-separated micro-batch sizes")
    ap.add_argument("--batches", type=int, default=12, help="micro-batches per size")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in (args.sizes or ("50,1000,10000" if args.quick else "50,1000,10000,100000")).split(",")]

    from bench.gen import in_order
    from udm.host.query.plan import bind
    from udm.host.query.runners import RunRequest, get_engine, run_local
    from udm.host.query.spec import parse_query
    from udm.host.spark.session import get_spark
    from udm.host.temporal.elements import parse_element
    from udm.host.testing.verifier import verify

    spark = get_spark(shuffle_partitions=4, **{"spark.sql.adaptive.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    bound = bind(parse_query(QUERY))
    stream = get_engine("spark-streaming")
    print(f"{'batch size':>10} {'elements':>9} {'batches':>7} {'stream s':>9} {'s/batch':>8} {'stream el/s':>12} "
          f"{'local el/s':>11} {'local/stream':>12}  same answer")
    with tempfile.TemporaryDirectory(prefix="udm-bench-stream-") as d:
        for size in sizes:
            n = size * args.batches
            src = Path(d) / f"in{size}.jsonl"
            in_order(src, n)
            t0 = time.perf_counter()
            local = run_local(RunRequest(bound, src, Path(d) / "local.jsonl"))
            t_local = time.perf_counter() - t0
            t0 = time.perf_counter()
            res = stream(RunRequest(bound, src, Path(d) / "stream.jsonl", batch_size=size,
                                    options={"buckets": 4}))
            t_stream = time.perf_counter() - t0

            def read(p: Path) -> list[object]:
                return [parse_element(json.loads(x)) for x in p.read_text().splitlines() if x.strip()]

            same = bool(verify(read(Path(d) / "stream.jsonl"), read(Path(d) / "local.jsonl")))
            batches = -(-n // size)
            print(f"{size:>10} {n:>9} {batches:>7} {t_stream:>9.1f} {t_stream / batches:>8.2f} "
                  f"{n / t_stream:>12,.0f} {n / t_local:>11,.0f} {t_stream / t_local:>11.0f}×  {same}", flush=True)
            assert res.elements_in == local.elements_in == n
            if not same:
                print("  streaming output CHT differs from the local engine's!", flush=True)
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
