"""The Spark Structured Streaming path: elements/s per micro-batch size (``udm run --engine spark-streaming
--batch-size N``), against the local engine on the same file in the same run, same answer checked.

Each size runs ``--batches`` micro-batches (default 12) of in-order inserts with a CTI every 1000
elements, grouped by 4 symbols into 4 key buckets, tumbling 100-tick windows with ``sum``. The figure
includes everything a user waits for: staging, Spark's per-batch planning and commit, the state store
round trip of each bucket's engine, and assembling the output file.

``--native`` instead measures the DataFrame API (`run_stream` with CTIs from the watermark) against native
Structured Streaming doing the nearest built-in query (``groupBy(window(ts, 10 s), g).agg(sum, count)``
with the same 10 s watermark) on the same Parquet file source and trigger (one file per micro-batch):
median micro-batch latency and throughput (Spark's own ``durationMs.triggerExecution`` and input rows,
from ``recentProgress``) and their ratios; then the udm micro-batch time when the live state is 10× larger
(10× the live keys, each holding an open window, while every micro-batch still touches as many keys as
before), for the per-key state layout and, side by side, the whole-bucket one (``run_stream(...,
per_key=False)``); then, in two child processes, ``local[1]`` against ``local[2]``.

``--cores`` measures whether throughput scales with cores, on a shape where there is work to split (see
`cores`): child processes ``local[1]`` and ``local[2]``, udm and native Structured Streaming alike, same
source, same trigger, same two key buckets; native's own local[2]/local[1] ratio is the yardstick of what
this machine gives Spark.

Run: ``.venv/bin/python -m bench.bench_streaming [--quick] [--sizes 50,1000,10000,100000]`` or
``... --native [--rows 2000] [--batches 8] [--groups 50]`` or
``... --cores [--rows 40000] [--groups 400] [--batches 8] [--repeat 3]``.
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
    ap.add_argument("--native", action="store_true", help="DataFrame API against native Structured Streaming")
    ap.add_argument("--rows", type=int, default=None, help="rows per micro-batch (--native 2000, --cores 40000)")
    ap.add_argument("--groups", type=int, default=None,
                    help="group keys (--native 50, 10x for the state test; --cores 400)")
    ap.add_argument("--cores", action="store_true", help="local[1] against local[2], udm and native")
    ap.add_argument("--repeat", type=int, default=1, help="--cores: runs of each child (median reported)")
    ap.add_argument("--files", type=int, default=2, help="--cores: source files per micro-batch")
    ap.add_argument("--master", default=None, help="--native: Spark master (a child run of the cores test)")
    ap.add_argument("--only", default=None, help=argparse.SUPPRESS)  # child runs: one measurement, JSON out
    args = ap.parse_args(argv)
    cores_run = args.cores or (args.only or "").startswith("cores-")
    args.rows = args.rows or (40_000 if cores_run else 2000)
    args.groups = args.groups or (400 if cores_run else 50)
    if args.cores or (args.only or "").startswith("cores-"):
        return cores(args)
    if args.native:
        return native(args)
    sizes = [int(x) for x in (args.sizes or ("50,1000,10000" if args.quick else "50,1000,10000,100000")).split(",")]

    from bench.gen import in_order
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query
    from udm.host.query.runners import RunRequest, get_engine, run_local
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


_SCHEMA = "line bigint, ts timestamp, g string, v double"


def _write_part(src: Path, b: int | str, lines: list[int], keys: list[int], mtime: float) -> None:
    """Micro-batch ``b``'s Parquet file: ``line, ts (timestamp, 10 ms per line), g (``g<key>``), v``; its
    mtime orders it for the file source (``maxFilesPerTrigger`` 1)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"line": pa.array(lines, pa.int64()),
                      "ts": pa.array([x * 10_000 for x in lines], pa.timestamp("us", tz="UTC")),
                      "g": pa.array([f"g{k}" for k in keys]),
                      "v": pa.array([float(x % 7) for x in lines])})
    p = src / (f"part-{b:05d}.parquet" if isinstance(b, int) else f"part-{b}.parquet")
    pq.write_table(table, p)
    os.utime(p, (mtime, mtime))


def _files(d: Path, batches: int, rows: int, groups: int) -> Path:
    """One Parquet file per micro-batch (`_write_part`) over ``groups`` keys, in time order."""
    src = d / f"src-{rows}-{groups}"
    src.mkdir(parents=True)
    base = time.time() - 10_000
    for b in range(batches):
        line = list(range(b * rows + 1, (b + 1) * rows + 1))
        _write_part(src, b, line, [x % groups for x in line], base + b)
    return src


def _measure(spark: object, query: object, ck: Path) -> dict[str, float]:
    """Run ``query`` (a streaming DataFrame) with ``availableNow``; the median micro-batch latency (ms, first
    two batches left out: planning and worker start-up) and throughput (rows/s over those batches)."""
    import statistics

    q = (query.writeStream.foreachBatch(lambda df, _id: df.count())  # type: ignore[attr-defined]
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    q.awaitTermination()
    steady = [p for p in q.recentProgress if p["numInputRows"] > 0][2:]
    ms = [p["durationMs"]["triggerExecution"] for p in steady]
    rows = sum(p["numInputRows"] for p in steady)
    return {"latency_ms": statistics.median(ms), "rows_per_s": rows / (sum(ms) / 1000), "batches": len(ms)}


def _native_query(spark: object, src: Path) -> object:
    from pyspark.sql import functions as F

    df = spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))  # type: ignore[attr-defined]
    return (df.withWatermark("ts", "10 seconds").groupBy(F.window("ts", "10 seconds"), "g")
            .agg(F.sum("v").alias("total"), F.count("v").alias("n")))


#: live events per key before the measured micro-batches (state growth)
_PRELOAD = 200


def _grow_files(d: Path, batches: int, rows: int, live: int, touched: int, per_key: int = _PRELOAD) -> Path:
    """The state-growth source: micro-batch 0 gives each of ``live`` keys ``per_key`` rows (every key then
    holds an open window and its live events); every later one has ``rows`` rows over ``touched`` keys (the
    next ``touched`` of them, round the ``live``). Same ``line, ts, g, v`` columns, 10 ms apart."""
    src = d / f"grow-{live}-{touched}"
    src.mkdir(parents=True)
    base = time.time() - 10_000
    line = 0
    for b in range(batches):
        n = live * per_key if b == 0 else rows
        keys = ([x % live for x in range(n)] if b == 0
                else [((b - 1) * touched + x % touched) % live for x in range(rows)])
        lines = list(range(line + 1, line + n + 1))
        line += n
        _write_part(src, b, lines, keys, base + b)
    return src


def _udm_query(spark: object, src: Path, size: int = 10_000_000, per_key: bool = True, life: int = 1) -> object:
    from pyspark.sql import functions as F

    from udm.host.spark.streaming import run_stream

    query = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": size}, "group_by": ["g"],
                        "udm": "sum", "input": "v", "as": "total"}]}
    df = spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))  # type: ignore[attr-defined]
    micros = F.unix_micros("ts")
    els = df.withWatermark("ts", "10 seconds").select(
        F.lit("insert").alias("kind"), F.col("line").cast("string").alias("id"), micros.alias("le"),
        (micros + life).alias("re"), F.to_json(F.struct("g", "v")).alias("payload"), "line", "ts")
    return run_stream(query, els, ctis_from_watermark=True, per_key=per_key)


def _growth(spark: object, d: Path, batches: int, args: argparse.Namespace) -> None:
    """Micro-batch time as the live state grows 10x at the same batch size and touched keys, per-key
    state beside the whole-bucket layout."""
    g = args.groups
    print(f"state growth: micro-batches of {args.rows} rows touching {g} keys; 1000 s windows and 500 s "
          f"events (none ends in the run); micro-batch 0 gives {g} then {g * 10} keys {_PRELOAD} events each; "
          "median micro-batch ms (first 2 not counted)")
    print(f"{'state layout':>22} {f'{g} live':>11} {f'{g * 10} live':>11} {'ratio':>7}")
    for per_key, label in ((True, "per key (layout 3)"), (False, "whole bucket (2)")):
        ms = []
        for live in (g, g * 10):
            src_g = _grow_files(Path(d) / f"{per_key}", batches, args.rows, live, g, _PRELOAD)
            ms.append(_measure(spark, _udm_query(spark, src_g, 1_000_000_000, per_key, 500_000_000),
                               Path(d) / f"ck-grow-{per_key}-{live}")["latency_ms"])
        target = " (target <= 1.3x)" if per_key else ""
        print(f"{label:>22} {ms[0]:>11.0f} {ms[1]:>11.0f} {ms[1] / ms[0]:>6.2f}x{target}", flush=True)


def native(args: argparse.Namespace) -> int:
    import subprocess
    import sys

    from udm.host.spark.session import get_spark

    spark = get_spark(args.master, shuffle_partitions=2)
    spark.sparkContext.setLogLevel("ERROR")
    batches = 4 if args.quick else args.batches
    with tempfile.TemporaryDirectory(prefix="udm-bench-native-") as d:
        src = _files(Path(d), batches, args.rows, args.groups)
        if args.only == "grow":
            _growth(spark, Path(d), batches, args)
            return 0
        if args.only == "udm":
            print(json.dumps(_measure(spark, _udm_query(spark, src), Path(d) / "ck")), flush=True)
            return 0
        nat = _measure(spark, _native_query(spark, src), Path(d) / "ck-native")
        udm = _measure(spark, _udm_query(spark, src), Path(d) / "ck-udm")
        print(f"same source and trigger: {batches} micro-batches of {args.rows} rows, {args.groups} groups, "
              f"10 s tumbling windows, 10 s watermark, 2 partitions (first 2 batches not counted)")
        print(f"{'':>22} {'latency ms':>11} {'rows/s':>10}")
        print(f"{'native sum/count':>22} {nat['latency_ms']:>11.0f} {nat['rows_per_s']:>10,.0f}")
        print(f"{'udm run_stream':>22} {udm['latency_ms']:>11.0f} {udm['rows_per_s']:>10,.0f}")
        print(f"latency udm/native: {udm['latency_ms'] / nat['latency_ms']:.2f}x (target <= 2x); "
              f"throughput udm/native: {udm['rows_per_s'] / nat['rows_per_s']:.2f}x (target >= 0.5x)", flush=True)
        _growth(spark, Path(d), batches, args)
    cores = {}
    for m in ("local[1]", "local[2]"):
        cmd = [sys.executable, "-m", "bench.bench_streaming", "--native", "--only", "udm", "--master", m,
               "--rows", str(args.rows), "--groups", str(args.groups), "--batches", str(batches)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        cores[m] = json.loads(out)
    one, two = cores["local[1]"], cores["local[2]"]
    print(f"udm run_stream local[1]: {one['latency_ms']:.0f} ms/batch, {one['rows_per_s']:,.0f} rows/s; "
          f"local[2]: {two['latency_ms']:.0f} ms/batch, {two['rows_per_s']:,.0f} rows/s; "
          f"throughput local[2]/local[1]: {two['rows_per_s'] / one['rows_per_s']:.2f}x")
    return 0


def _cores_files(d: Path, batches: int, rows: int, groups: int, files: int) -> Path:
    """``files`` Parquet files per micro-batch (the source's partitions: the file source reads each as
    a task), ``rows`` rows over ``groups`` keys, in time order."""
    src = d / f"cores-{rows}-{groups}-{files}"
    src.mkdir(parents=True)
    base = time.time() - 10_000
    per = -(-rows // files)
    for b in range(batches):
        first = b * rows + 1
        for f in range(files):
            line = list(range(first + f * per, min(first + (f + 1) * per, first + rows)))
            _write_part(src, f"{b:05d}-{f}", line, [x % groups for x in line], base + b)
    return src


def _cores_child(args: argparse.Namespace) -> int:
    """One measurement in this process (``--only cores-udm`` or ``cores-native``): JSON on stdout."""
    from pyspark.sql import functions as F

    from udm.host.spark.session import get_spark

    spark = get_spark(args.master, shuffle_partitions=2)
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="udm-bench-cores-") as d:
        src = _cores_files(Path(d), args.batches, args.rows, args.groups, args.files)
        if args.only == "cores-native":
            df = spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", args.files).parquet(str(src))
            query = (df.withWatermark("ts", "10 seconds").groupBy(F.window("ts", "10 seconds"), "g")
                     .agg(F.sum("v").alias("total"), F.count("v").alias("n")))
        else:
            from udm.host.spark.streaming import run_stream

            q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10_000_000}, "group_by": ["g"],
                            "udm": "sum", "input": "v", "as": "total"}]}
            df = spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", args.files).parquet(str(src))
            micros = F.unix_micros("ts")
            els = df.withWatermark("ts", "10 seconds").select(
                F.lit("insert").alias("kind"), F.col("line").cast("string").alias("id"), micros.alias("le"),
                (micros + 1).alias("re"), F.to_json(F.struct("g", "v")).alias("payload"), "line", "ts")
            query = run_stream(q, els, ctis_from_watermark=True, buckets=2)
        print(json.dumps(_measure_cpu(query, Path(d) / "ck")), flush=True)
    return 0


def _tree_cpu_s() -> float:
    """CPU seconds so far of this process and every live descendant (the JVM, PySpark's daemon and
    workers), with the children each has reaped (Linux ``/proc``)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            f = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(p.name)] = int(f[1])
        cpu[int(p.name)] = sum(int(x) for x in f[11:15])  # utime stime cutime cstime
    mine, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo += [c for c, pp in parent.items() if pp == pid and c not in mine]
    return sum(cpu.get(p, 0) for p in mine) / tick


def _measure_cpu(query: object, ck: Path, skip: int = 2) -> dict[str, float]:
    """`_measure` plus the CPU seconds of the whole process tree over the steady micro-batches (each
    micro-batch runs inside its ``foreachBatch`` call: the tree's CPU before the first steady one and
    after the last), so a figure per CPU-s sits beside the wall figure."""
    marks: list[tuple[int, float, float]] = []

    def each(df: object, batch_id: int) -> None:
        t0, c0 = time.perf_counter(), _tree_cpu_s()
        n = df.count()  # type: ignore[attr-defined]
        if n:
            marks.append((batch_id, c0, _tree_cpu_s()))
            marks.append((batch_id, t0, time.perf_counter()))

    q = (query.writeStream.foreachBatch(each)  # type: ignore[attr-defined]
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    q.awaitTermination()
    import statistics

    steady = [p for p in q.recentProgress if p["numInputRows"] > 0][skip:]
    ms = [p["durationMs"]["triggerExecution"] for p in steady]
    n_rows = sum(p["numInputRows"] for p in steady)
    first = {p["batchId"] for p in steady}
    cpu = [m for i, m in enumerate(marks) if i % 2 == 0 and m[0] in first]
    cpu_s = cpu[-1][2] - cpu[0][1] if cpu else float("nan")
    return {"latency_ms": statistics.median(ms), "rows_per_s": n_rows / (sum(ms) / 1000), "batches": len(ms),
            "rows_per_cpu_s": n_rows / cpu_s if cpu_s else float("nan"), "cpu_s": cpu_s}


def cores(args: argparse.Namespace) -> int:
    """Throughput ``local[1]`` against ``local[2]`` for udm `run_stream` and native Structured Streaming.

    The shape is chosen so that there is work to split: ``--rows`` (40,000) rows per micro-batch, enough
    that the per-row work outweighs the fixed per-micro-batch cost (planning, task launch, state commit);
    ``--groups`` (400) keys, so each of the 2 key buckets (= 2 shuffle partitions) holds hundreds; and
    ``--files`` (2) source files per micro-batch, so the scan and routing before the shuffle run as 2
    tasks too. Each figure is one child process (its own JVM); children alternate udm/native and
    local[1]/local[2]; the median of ``--repeat`` runs is reported, with the whole child's CPU seconds."""
    import os
    import statistics
    import subprocess
    import sys

    if args.only:
        return _cores_child(args)
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    print(f"cores: {args.batches} micro-batches of {args.rows:,} rows ({args.files} files each), {args.groups} keys, "
          f"2 key buckets = 2 shuffle partitions; 10 s tumbling sum, 10 s watermark; steady batches only "
          f"(first 2 not counted); median of {args.repeat}; load {os.getloadavg()[0]:.1f}", flush=True)
    for _ in range(args.repeat):
        for what in ("udm", "native"):
            for m in ("local[1]", "local[2]"):
                cmd = [sys.executable, "-m", "bench.bench_streaming", "--only", f"cores-{what}", "--master", m,
                       "--rows", str(args.rows), "--groups", str(args.groups), "--batches", str(args.batches),
                       "--files", str(args.files)]
                t0 = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
                wall = time.perf_counter() - t0
                got = json.loads(out)
                got["child_wall_s"] = wall
                runs.setdefault((what, m), []).append(got)
    print(f"{'':>8} {'master':>9} {'ms/batch':>9} {'rows/s':>9} {'rows/CPU-s':>11} {'child wall s':>12}")
    med: dict[tuple[str, str], float] = {}
    for (what, m), rs in runs.items():
        med[(what, m)] = statistics.median(r["rows_per_s"] for r in rs)
        print(f"{what:>8} {m:>9} {statistics.median(r['latency_ms'] for r in rs):>9.0f} {med[(what, m)]:>9,.0f} "
              f"{statistics.median(r['rows_per_cpu_s'] for r in rs):>11,.0f} "
              f"{statistics.median(r['child_wall_s'] for r in rs):>12.1f}")
    u = med[("udm", "local[2]")] / med[("udm", "local[1]")]
    n = med[("native", "local[2]")] / med[("native", "local[1]")]
    print(f"throughput local[2]/local[1]: udm {u:.2f}x, native {n:.2f}x (target: udm clearly > 1; native is "
          f"the yardstick); udm/native at local[2]: {med[('udm', 'local[2]')] / med[('native', 'local[2]')]:.2f}x; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
