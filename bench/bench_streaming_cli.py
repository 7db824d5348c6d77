"""``udm run --engine spark-streaming`` at its default settings against native Structured Streaming at the
same micro-batch size, end to end, on the same data and answer; and its throughput as the held keys grow 10×.

Data: ``--elements`` (200,000) point inserts, 1 ms apart, over ``--keys`` keys, a CTI every 1,000
elements (100 ms behind the last event); before them, ``--held`` keys each get one event far in the future,
which keeps its window open (state the per-key layout holds but must not touch every micro-batch).
Query: a tumbling 1 s ``sum`` per key.

- udm: ``udm run Q --input F --output O --engine spark-streaming --master local[N]`` (the default batch size,
  `DEFAULT_BATCH_SIZE` elements per micro-batch; staging, Spark, and the output file all counted);
- native (this module's child, ``--native-child``): the same elements but the held ones, as JSON Lines files
  of that many lines each (cut beforehand, not timed). The held events are left out because Spark's
  watermark follows the largest event time seen: one far-future event makes every later element late and
  dropped (the native answer then missed nearly every window, and its time measured next to no
  aggregation); udm's CTIs come from the stream, so it holds them without moving time. The native side
  thus does a little less. ``readStream.json`` with an explicit schema and ``maxFilesPerTrigger=1``,
  the CTIs' lag as the watermark, ``groupBy(window(ts, 1 s), k).agg(sum)``, Spark's JSON file sink,
  ``availableNow``, on a session with udmkit's settings (`get_spark`), its checkpoint written as udm's
  local ones are (`local_checkpoint_files`).

Children alternate (udm, native, native, udm, ...) and each is measured by wall clock and by its process
tree's CPU seconds (`bench.child`), split into the JVM's (Spark) and Python's (udm's driver, PySpark's
workers); medians of ``--repeat`` (Python: the medians' difference). Answers are compared on the windows every CTI
closed (the same windows, values within 1e-9). The held-keys figure runs udm with ``--held`` and 10× that.
Targets (issue 31): udm ≤ 1.2× native; throughput flat (≤ 1.1×) as held keys grow 10×. udm's JVM runs C1 only
(`udm.host.spark.session.STREAMING_JAVA_OPTIONS`), native's keeps the JVM's default JIT; to compare both at C1,
run with ``JDK_JAVA_OPTIONS=-XX:TieredStopAtLevel=1`` (the ``java`` launcher adds it to every JVM).

``python -m bench.bench_streaming_cli [--quick] [--elements N] [--keys K] [--held H] [--repeat R]
[--batch-size B] [--no-flatness]`` (``--batch-size``: both sides' micro-batch size, to weigh the default
against native's fixed cost per micro-batch)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

_FAR = 10**15  # (µs: decades after the stream; the held events' windows never close)
_WINDOW = 1_000_000
_CTI_EVERY = 1000
_LAG = 100_000


def _write(path: Path, n: int, keys: int, held: int) -> list[str]:
    lines = [json.dumps({"kind": "insert", "id": f"h{k}", "le": _FAR + k, "re": _FAR + k + 1,
                         "payload": {"k": f"held{k}", "v": 1.0}}) for k in range(held)]
    for i in range(n):
        le = i * 1000
        lines.append(json.dumps({"kind": "insert", "id": f"e{i}", "le": le, "re": le + 1,
                                 "payload": {"k": f"k{(i * 7919) % keys}", "v": float(i % 97)}}))
        if (i + 1) % _CTI_EVERY == 0:
            lines.append(json.dumps({"kind": "cti", "t": max(0, le - _LAG)}))
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return lines


def _udm_answer(path: Path, until: int) -> dict[tuple[str, int], float]:
    """The windows of the output's CHT (retractions applied: a window first emitted early is revised)."""
    from udm.host.temporal.elements import parse_element
    from udm.host.testing.cht import cht

    els = [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return {(p["k"], le): float(p["sum"]) for le, re, p in cht(els).events() if re <= until and le < _FAR}


def _native_answer(path: Path, until: int) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for part in path.glob("part-*"):
        for line in part.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r["we"] <= until and r["ws"] < _FAR:
                out[(r["k"], r["ws"])] = float(r["x"])
    return out


def native_child(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from udm.host.spark.session import get_spark, local_checkpoint_files

    spark = get_spark(args.master)
    schema = "kind string, id string, le bigint, re bigint, t bigint, payload struct<k: string, v: double>"
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(args.input)
    ev = df.where(F.col("kind") == "insert").select(F.timestamp_micros("le").alias("ts"), "payload.k", "payload.v")
    agg = (ev.withWatermark("ts", f"{_LAG // 1000} milliseconds")
           .groupBy(F.window("ts", f"{_WINDOW} microseconds"), "k").agg(F.sum("v").alias("x"))
           .select("k", F.unix_micros("window.start").alias("ws"), F.unix_micros("window.end").alias("we"), "x"))
    with local_checkpoint_files(spark):  # (as udm's runs write their local checkpoints)
        q = (agg.writeStream.format("json").option("path", args.out).option("checkpointLocation", args.out + ".ck")
             .outputMode("append").trigger(availableNow=True).start())
        q.awaitTermination()
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="40 k elements, 1 repeat")
    ap.add_argument("--elements", type=int, default=None)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--held", type=int, default=1000, help="held keys (and 10x that for the flatness figure)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=None,
                    help="elements per micro-batch, both sides (default: udm's default, not passed to udm)")
    ap.add_argument("--no-flatness", action="store_true", help="skip the 10x held keys run")
    ap.add_argument("--native-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--input", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.native_child:
        return native_child(args)
    from bench.child import Measured, load, run_child
    from udm.host.spark.stream_files import DEFAULT_BATCH_SIZE

    n = args.elements or (40_000 if args.quick else 200_000)
    batch = args.batch_size or DEFAULT_BATCH_SIZE
    repeat = args.repeat or (1 if args.quick else 3)
    root = Path(__file__).resolve().parent.parent
    udm_bin = str(Path(sys.executable).with_name("udm"))
    with tempfile.TemporaryDirectory(prefix="udm-bench-stream-cli-") as d:
        work = Path(d)
        query = work / "q.json"
        query.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": _WINDOW},
                                                "group_by": ["k"], "udm": "sum", "input": "v"}]}))
        src = {h: work / f"in-{h}.jsonl" for h in (args.held, args.held * 10)}
        lines = {h: _write(p, n, args.keys, h) for h, p in src.items()}
        parts = work / "parts"  # native: the same elements, cut in micro-batch-sized files
        parts.mkdir()
        base = lines[args.held][args.held:]  # (the held events would move Spark's watermark: module doc)
        for k in range(0, len(base), batch):
            (parts / f"part-{k // batch:05d}.json").write_text(
                "".join(x + "\n" for x in base[k:k + batch]), encoding="utf-8")
        runs: dict[str, list[Measured]] = {"udm": [], "native": []} if args.no_flatness else {
            "udm": [], "native": [], "udm10": []}
        loads = [load()]

        def udm(h: int, tag: str) -> list[str]:
            return [udm_bin, "run", str(query), "--input", str(src[h]), "--output", str(work / f"{tag}.jsonl"),
                    "--engine", "spark-streaming", "--master", args.master, "--quiet",
                    *(["--batch-size", str(batch)] if args.batch_size else [])]

        for r in range(repeat):
            nat_out = str(work / f"native-{r}")
            order = [("udm", udm(args.held, "udm")),
                     ("native", [sys.executable, "-m", "bench.bench_streaming_cli", "--native-child", "--input",
                                 str(parts), "--out", nat_out, "--master", args.master]),
                     ("udm10", udm(args.held * 10, "udm10"))][:len(runs)]
            for name, cmd in (order if r % 2 == 0 else order[::-1]):
                runs[name].append(run_child(cmd, cwd=root))
                loads.append(load())
        until = (n - 1) * 1000 - _LAG - _WINDOW  # windows every CTI closed
        same = _udm_answer(work / "udm.jsonl", until) == _native_answer(work / f"native-{repeat - 1}", until)
        med = {k: (statistics.median(m.wall_s for m in v), statistics.median(m.cpu_s for m in v),
                   statistics.median(m.jvm_s for m in v)) for k, v in runs.items()}
    print(f"{n:,} elements, {args.keys} keys, CTI every {_CTI_EVERY}, tumbling 1 s sum; micro-batches of "
          f"{batch:,}{' (the default)' if batch == DEFAULT_BATCH_SIZE else ''}; {args.master}; {repeat} "
          f"alternating run(s); load "
          f"{min(loads):.1f}-{max(loads):.1f}")
    print(f"{'':>28} {'wall s':>7} {'el/s':>8} {'CPU s':>7} {'JVM':>6} {'Python':>6}   runs (wall; CPU)")
    for name, label in (("udm", f"udm, {args.held} held keys"), ("native", "native Structured Streaming"),
                        ("udm10", f"udm, {args.held * 10} held keys"))[:len(runs)]:
        wall, cpu, jvm = med[name]
        print(f"{label:>28} {wall:7.1f} {n / wall:8,.0f} {cpu:7.1f} {jvm:6.1f} {cpu - jvm:6.1f}   "
              + "/".join(f"{m.wall_s:.1f}" for m in runs[name]) + "; "
              + "/".join(f"{m.cpu_s:.1f}" for m in runs[name]))
    flat = "" if args.no_flatness else (
        f"{args.held * 10} vs {args.held} held keys: wall {med['udm10'][0] / med['udm'][0]:.2f}x, CPU "
        f"{med['udm10'][1] / med['udm'][1]:.2f}x (flat: <= 1.1x); ")
    print(f"udm/native: wall {med['udm'][0] / med['native'][0]:.2f}x, CPU {med['udm'][1] / med['native'][1]:.2f}x "
          f"(target <= 1.2x); {flat}same answer: {same}", flush=True)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
