"""``udm run --engine spark`` end to end against native Spark SQL on the same JSON Lines file and answer.

What a user waits for, on both sides: a fresh process that starts Spark, reads the file, computes a tumbling
``sum`` (or ``median``) per key, and writes the result. The CLI is ``udm run Q --input F --output O --engine
spark --master local[N]``; native is this module's child (``--native-child``): ``spark.read.json`` with an
explicit schema, ``groupBy(k, window).agg(sum | median)``, written with Spark's JSON writer, on a session
with the same settings (`udm.host.spark.session.get_spark`: shuffle partitions, UI off, logging).

The two run alternately (A B, B A, ...) so that a shared machine's load falls on both alike; each
figure is the median over ``--repeat`` runs, wall clock and the CPU seconds of the child's whole process
tree (`bench.child`: on a loaded machine the CPU ratio is the steadier one), with the load average around
the runs printed next to it.
Answers are checked against each other (same windows, values within 1e-9 relative). Targets (issue 31):
``sum`` ≤ 1.2×, ``median`` ≤ 1.5× native.

``python -m bench.bench_spark_cli [--quick] [--events N] [--repeat R] [--udms sum,median] [--master local[2]]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

TARGETS = {"sum": 1.2, "median": 1.5}
_BUILTIN = {"sum": "sum", "median": "median", "avg": "avg", "count": "count"}


def _udm_answer(path: Path, name: str) -> dict[tuple[str, int], float]:
    out = {}
    for line in path.read_text().splitlines():
        el = json.loads(line)
        if el["kind"] == "insert":
            out[(el["payload"]["k"], el["le"])] = float(el["payload"][name])
    return out


def _native_answer(path: Path) -> dict[tuple[str, int], float]:
    out = {}
    for part in sorted(path.glob("part-*")):
        for line in part.read_text().splitlines():
            r = json.loads(line)
            out[(r["k"], r["ws"])] = float(r["x"])
    return out


def _same(a: dict[tuple[str, int], float], b: dict[tuple[str, int], float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in a)


def native_child(args: argparse.Namespace) -> int:
    """The native run: what a Spark user writes for this answer."""
    from pyspark.sql import functions as F

    from udm.host.spark.session import get_spark

    spark = get_spark(args.master, shuffle_partitions=4)
    size = args.window_us
    df = spark.read.schema("kind string, id string, le bigint, re bigint, payload struct<k: string, v: double>") \
        .json(args.input)
    agg = getattr(F, _BUILTIN[args.udm])("payload.v").alias("x")
    out = (df.where(F.col("kind") == "insert")
           .groupBy(F.col("payload.k").alias("k"), (F.floor(F.col("le") / size) * size).alias("ws")).agg(agg))
    out.write.mode("overwrite").json(args.out)
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 k events, 1 repeat")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--window-us", type=int, default=1_000_000)
    ap.add_argument("--udms", default="sum,median")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=None, help="runs of each side (median reported; default 3)")
    ap.add_argument("--json", action="store_true", help="also one JSON line per UDM: median wall and CPU seconds")
    ap.add_argument("--native-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--udm", default="sum", help=argparse.SUPPRESS)
    ap.add_argument("--input", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.native_child:
        return native_child(args)
    n = args.events or (200_000 if args.quick else 1_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    from bench.bench_spark import _write_input
    from bench.child import Measured, load, run_child

    udm_bin = str(Path(sys.executable).with_name("udm"))
    rc = 0
    with tempfile.TemporaryDirectory(prefix="udm-bench-cli-") as d:
        src = Path(d) / "events.jsonl"
        _write_input(src, n, args.keys)
        print(f"{n:,} point events ({src.stat().st_size / 1e6:.0f} MB), {args.keys} keys, tumbling "
              f"{args.window_us} µs, {args.master}, {os.cpu_count()} cpus; {repeat} alternating run(s) each",
              flush=True)
        print(f"{'udm':>7} {'cli s':>7} {'native s':>9} {'ratio':>6} {'cli cpu':>8} {'nat cpu':>8} {'ratio':>6} "
              f"{'target':>7} {'wall runs (cli | native)':>30} {'load':>10}  same")
        for name in args.udms.split(","):
            query = Path(d) / f"{name}.json"
            query.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling",
                                                                                 "size": args.window_us},
                                                     "group_by": ["k"], "udm": name, "input": "v"}]}))
            cli_out, nat_out = Path(d) / f"{name}.out.jsonl", Path(d) / f"{name}.native"
            cli = [udm_bin, "run", str(query), "--input", str(src), "--output", str(cli_out), "--engine", "spark",
                   "--master", args.master, "--quiet"]
            nat = [sys.executable, "-m", "bench.bench_spark_cli", "--native-child", "--udm", name, "--input",
                   str(src), "--out", str(nat_out), "--master", args.master, "--window-us", str(args.window_us)]
            m_cli: list[Measured] = []
            m_nat: list[Measured] = []
            loads = [load()]
            root = Path(__file__).resolve().parent.parent
            for r in range(repeat):
                order: list[tuple[list[str], list[Measured]]] = [(cli, m_cli), (nat, m_nat)]
                for cmd, acc in (order if r % 2 == 0 else order[::-1]):
                    acc.append(run_child(cmd, cwd=root))
                    loads.append(load())
            same = _same(_udm_answer(cli_out, name), _native_answer(nat_out))
            a, b = statistics.median(m.wall_s for m in m_cli), statistics.median(m.wall_s for m in m_nat)
            ca, cb = statistics.median(m.cpu_s for m in m_cli), statistics.median(m.cpu_s for m in m_nat)
            target = TARGETS.get(name)
            runs = "/".join(f"{m.wall_s:.1f}" for m in m_cli) + " | " + "/".join(f"{m.wall_s:.1f}" for m in m_nat)
            print(f"{name:>7} {a:7.1f} {b:9.1f} {a / b:6.2f} {ca:8.1f} {cb:8.1f} {ca / cb:6.2f} {target or '-':>7} "
                  f"{runs:>30} {min(loads):4.1f}-{max(loads):<5.1f}  {same}", flush=True)
            if args.json:
                print(json.dumps({"udm": name, "cli_s": a, "native_s": b, "cli_cpu_s": ca, "native_cpu_s": cb,
                                  "same": same, "load": [min(loads), max(loads)]}), flush=True)
            if not same:
                print(f"  {name}: the CLI's answer differs from native Spark SQL's", flush=True)
                rc = 1
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
