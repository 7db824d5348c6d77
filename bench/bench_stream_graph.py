"""Per-key state of a query graph on the streaming path (`udm.host.spark.key_state`, semantics-notes 52)
against the whole-bucket layout, micro-batch by micro-batch, without Spark's overhead around it.

One bucket holds ``--live`` keys, each with a long-lived event on input ``a``; every micro-batch then brings
``--touched`` inserts on ``b`` (each meeting one key's event) and moves both inputs' CTIs without ending the
long events. The whole-bucket layout (streaming layout 2/3 for graphs) restores the bucket's one pickled
engine, feeds the batch and pickles it back, as its ``ValueState`` does per call; the per-key layout runs
`KeyedBucket` over a `DictStore` (one pickled engine per key, in slabs, and the index). Printed per layout: median CPU
ms per micro-batch (``time.process_time``, so the other processes on the machine do not count), state
bytes read per micro-batch, slabs read; and the ratio whole / per key, measured in the same run,
alternating the two layouts batch by batch. Three graphs: a join (exact dues: a CTI that ends nothing
loads no key), a join followed by a tumbling window (exact: loaded at its windows' ends), and a join
followed by a snapshot window (a key holding its state is loaded on every CTI advance: the conservative
rule). Both layouts' output is checked to be the same CHT.

A staged graph (joined by ``k``, then a tumbling count per ``g``: two stages, each keyed, semantics-notes 59)
at ``--staged-live`` live keys (2,000 and 20,000) is replayed without Spark through both stages'
`StageBucket`s over dict stores (2 buckets per stage), per key against one engine per stage bucket: CPU ms
per micro-batch, state bytes read (slabs, index, exchange blob), slabs read. ``--staged --spark`` runs it
on Structured Streaming instead.

``--spark`` runs the join on Structured Streaming instead (`run_stream` over two JSON file sources, one
file per micro-batch, 2 key buckets), ``per_key=True`` then ``per_key=False``: Spark's median
``triggerExecution`` per micro-batch (the first two left out), everything included.

Run: ``.venv/bin/python -m bench.bench_stream_graph [--live 2000] [--touched 20] [--batches 15] [--spark]
[--staged-live 2000,20000] [--only-staged] [--staged]``.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from typing import Any

from udm.host.temporal.elements import Cti, Insert

JOIN = {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"}]}
JOIN_WINDOW = {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 1000}, "group_by": ["l_k"],
     "udm": "count"}]}
#: joined by k, then counted per g over tumbling windows: no key serves both steps, so it runs in two stages
STAGED = {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 1000}, "group_by": ["l_g"],
     "udm": "count"}]}
JOIN_SNAPSHOT = {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "snapshot"}, "group_by": ["l_k"], "udm": "count"}]}


class _Bytes:
    """A `DictStore` that also counts the bytes of slabs read."""

    def __init__(self) -> None:
        from udm.host.spark.key_store import DictStore

        self.store = DictStore()
        self.read = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def get_slab(self, n: int) -> bytes | None:
        got = self.store.get_slab(n)
        self.read += len(got or b"")
        return got


def _batches(live: int, touched: int, batches: int) -> list[list[tuple[str, Any]]]:
    first = [("a", Insert(f"a{k}", 0, 1_000_000, {"k": k, "v": 1.0})) for k in range(live)]
    out = [[*first, ("a", Cti(1)), ("b", Cti(1))]]
    for b in range(1, batches + 1):
        t = 10 * b
        rows: list[tuple[str, Any]] = [("b", Insert(f"b{b}-{i}", t, t + 5, {"k": (b * 7919 + i * 104729) % live,
                                                                          "w": i})) for i in range(touched)]
        out.append([*rows, ("a", Cti(t)), ("b", Cti(t))])
    return out


def _table(rows: list[tuple[str, Any]], line0: int) -> Any:
    import pyarrow as pa

    from udm.host.io.batch import ElementBatch

    t = ElementBatch.from_elements([e for _, e in rows], list(range(line0, line0 + len(rows)))).table
    t = t.append_column("udm_route", pa.array([0] * t.num_rows, pa.int64()))
    return t.append_column("udm_input", pa.array([n for n, _ in rows], pa.string()))


def _feed(runner: Any, part: Any) -> list[Any]:
    from udm.host.spark.rows import feed_by_input

    return feed_by_input(runner, part, part.column("udm_input").to_pylist())


def _prepare(part: Any) -> Any:
    """One input's rows with struct payloads, once per call (the Spark processor's ``prepare``)."""
    from udm.host.spark.rows import with_struct_payloads

    return with_struct_payloads(part.select(["kind", "id", "le", "re", "re_new", "t", "payload", "line", "error",
                                             "raw"]))


def _one(query: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query
    from udm.host.spark.key_state import KeyedBucket
    from udm.host.spark.partition import graph_routing
    from udm.host.temporal.elements import Cti, Insert, Retract
    from udm.host.testing.cht import cht

    spec = parse_query(query)
    bound, routing = bind(spec), graph_routing(spec)
    assert isinstance(routing, dict)
    whole_blob = QueryRunner(bound).snapshot()
    keyed = _Bytes()
    ms: dict[str, list[float]] = {"whole": [], "key": []}
    read: dict[str, list[int]] = {"whole": [], "key": []}
    engines: list[int] = []
    out_w: list[Any] = []
    out_k: list[Any] = []
    line = 1
    for b, rows in enumerate(_batches(args.live, args.touched, args.batches)):
        table = _table(rows, line)
        line += len(rows)
        for layout in (("whole", "key") if b % 2 else ("key", "whole")):
            t0 = time.process_time()
            if layout == "whole":
                n = len(whole_blob)
                r = QueryRunner.restore(whole_blob, bound)
                got = _feed(r, table)
                whole_blob = r.snapshot()
            else:
                before, reads = keyed.read, keyed.counts["slab_reads"]
                res = KeyedBucket(bound, None, routing, keyed, 0).run(table, _feed, prepare=_prepare)
                n = keyed.read - before
                nread = keyed.counts["slab_reads"] - reads
            dt = (time.process_time() - t0) * 1000
            if b == 0:
                continue  # the load: not a steady micro-batch
            ms[layout].append(dt)
            read[layout].append(n)
            if layout == "whole":
                out_w.extend(el for el in got if not isinstance(el, Cti))
            else:
                engines.append(nread)
                for prefix, el in res.out:
                    out_k.append(Insert(f"{prefix}.{el.id}", el.le, el.re, el.payload) if isinstance(el, Insert)
                                 else Retract(f"{prefix}.{el.id}", el.le, el.re, el.re_new))
    assert cht(out_w) == cht(out_k), "the two layouts disagree"
    return {name: {"ms": statistics.median(ms[name]), "bytes": statistics.median(read[name])}
            for name in ms} | {"engines": statistics.median(engines)}


def _with_g(el: Any) -> Any:
    """An ``a`` event of the staged graph: ``g`` (what the second stage counts by) beside its key."""
    return Insert(el.id, el.le, el.re, {**el.payload, "g": el.payload["k"] % 50}) if isinstance(el, Insert) else el


def _staged(args: argparse.Namespace, live: int) -> dict[str, Any]:
    """The staged graph replayed without Spark (`udm.host.spark.stage_replay`, 2 buckets per stage), per
    key then whole bucket alternating batch by batch: CPU ms per micro-batch through both stages, state
    bytes read (engines, index and exchange blob), engines read; both layouts' output the same CHT."""
    from udm.host.model.spec import parse_query
    from udm.host.spark.stage_replay import StagedReplay
    from udm.host.testing.cht import cht

    spec = parse_query(STAGED)
    reps = {"key": StagedReplay(spec, 2), "whole": StagedReplay(spec, 2, per_key=False)}
    ms: dict[str, list[float]] = {"whole": [], "key": []}
    read: dict[str, list[int]] = {"whole": [], "key": []}
    engines: list[int] = []
    outs: dict[str, list[Any]] = {"whole": [], "key": []}
    line = 1
    for b, rows in enumerate(_batches(live, args.touched, args.batches)):
        rows = [(n, _with_g(el) if n == "a" else el) for n, el in rows]
        numbered = [(n, line + i, el) for i, (n, el) in enumerate(rows)]
        line += len(rows)
        for layout in (("whole", "key") if b % 2 else ("key", "whole")):
            rep = reps[layout]
            head, tail = rep.input_rows(numbered)
            stores = [st for ss in rep.stores for st in ss]
            for st in stores:
                st.counts.clear()
            t0 = time.process_time()
            res = rep.batch(head + tail)
            dt = (time.process_time() - t0) * 1000
            outs[layout] += res.out
            if b == 0:
                continue  # the load: not a steady micro-batch
            ms[layout].append(dt)
            read[layout].append(sum(st.counts["bytes_read"] + st.counts["aux_bytes_read"] for st in stores))
            if layout == "key":
                engines.append(sum(st.counts["slab_reads"] for st in stores))
    assert cht(outs["whole"]) == cht(outs["key"]), "the two layouts disagree"
    return {name: {"ms": statistics.median(ms[name]), "bytes": statistics.median(read[name])}
            for name in ms} | {"engines": statistics.median(engines)}


def _spark(args: argparse.Namespace) -> int:
    import json
    import os
    import statistics
    import tempfile
    from pathlib import Path

    from udm.host.spark.session import get_spark
    from udm.host.spark.streaming import run_stream

    spark = get_spark(shuffle_partitions=2, **{"spark.sql.adaptive.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    schema = "line long, kind string, id string, le long, re long, re_new long, t long, payload string"
    batches = _batches(args.live, args.touched, args.batches)
    query = STAGED if args.staged else JOIN
    if args.staged:
        batches = [[(n, _with_g(el) if n == "a" else el) for n, el in rows] for rows in batches]
    name = "staged join|tumbling" if args.staged else "join"
    print(f"Structured Streaming, {name} graph, {args.live} live keys over 2 buckets, {args.touched} touched per "
          f"micro-batch, {args.batches} micro-batches: median triggerExecution ms (first 2 left out)")
    with tempfile.TemporaryDirectory() as d:
        base = time.time() - 10_000
        for name in ("a", "b"):
            (Path(d) / name).mkdir()
        line = {"a": 0, "b": 0}
        for i, rows in enumerate(batches):
            for name in ("a", "b"):
                recs = []
                for n, el in rows:
                    if n != name:
                        continue
                    line[n] += 1
                    j = {"line": line[n] + (0 if n == "a" else 10**9)}
                    if isinstance(el, Cti):
                        j |= {"kind": "cti", "t": el.t}
                    else:
                        j |= {"kind": "insert", "id": el.id, "le": el.le, "re": el.re,
                              "payload": json.dumps(el.payload)}
                    recs.append(j)
                p = Path(d) / name / f"p{i:05d}.json"
                p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
                os.utime(p, (base + i, base + i))
        for per_key in (True, False):
            frames = {n: spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(Path(d) / n))
                      for n in ("a", "b")}
            loaded: dict[int, int] = {}

            def keep(df: Any, batch: int, loaded: dict[int, int] = loaded) -> None:
                for r in df.filter("stream = 'stats'").select("payload").collect():
                    loaded[batch] = loaded.get(batch, 0) + json.loads(r[0]).get("keys", {}).get("loaded", 0)

            q = (run_stream(query, frames, buckets=2, per_key=per_key).writeStream.foreachBatch(keep)
                 .option("checkpointLocation", str(Path(d) / f"ck-{per_key}")).trigger(availableNow=True).start())
            q.awaitTermination()
            ms = [p["durationMs"]["triggerExecution"] for p in q.recentProgress if p["numInputRows"] > 0][2:]
            label = f"per key (layout {5 if args.staged else 4})" if per_key else "whole bucket"
            keys = statistics.median([loaded.get(b, 0) for b in sorted(loaded)[2:]] or [0])
            print(f"{label:>20}: {statistics.median(ms):8.0f} ms per micro-batch ({len(ms)} measured), "
                  f"{keys:.0f} keys loaded per micro-batch", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--live", type=int, default=2000, help="live keys in the bucket")
    ap.add_argument("--touched", type=int, default=20, help="inserts (keys touched) per micro-batch")
    ap.add_argument("--batches", type=int, default=15, help="steady micro-batches measured")
    ap.add_argument("--spark", action="store_true", help="on Structured Streaming (run_stream), whole Spark cost")
    ap.add_argument("--staged-live", type=lambda v: [int(x) for x in v.split(",") if x], default=[2000, 20000],
                    help="live keys of the staged graph runs (comma-separated; empty: none)")
    ap.add_argument("--staged", action="store_true", help="with --spark: the staged graph")
    ap.add_argument("--only-staged", action="store_true", help="only the staged graph (Spark-free)")
    args = ap.parse_args(argv)
    if args.spark:
        return _spark(args)
    print(f"{args.touched} touched keys per micro-batch, {args.batches} micro-batches (median; CPU ms per "
          f"micro-batch){'' if args.only_staged else f'; graphs: {args.live} live keys in one bucket'}; staged: "
          "2 buckets per stage, both stages replayed")
    graphs = () if args.only_staged else (("join (exact dues)", JOIN), ("join + tumbling (exact)", JOIN_WINDOW),
                                          ("join + snapshot (every CTI)", JOIN_SNAPSHOT))
    for label, query in graphs:
        r = _one(query, args)
        w, k = r["whole"], r["key"]
        print(f"{label:30s} whole bucket {w['ms']:8.1f} ms {w['bytes'] / 1e6:7.2f} MB read | per key "
              f"{k['ms']:8.1f} ms {k['bytes'] / 1e6:7.2f} MB read, {r['engines']:.0f} slabs | "
              f"whole/per-key {w['ms'] / max(k['ms'], 1e-9):.2f}x time, "
              f"{w['bytes'] / max(k['bytes'], 1):.1f}x bytes")
    for live in args.staged_live:
        r = _staged(args, live)
        w, k = r["whole"], r["key"]
        label = f"staged join|tumbling {live}"
        print(f"{label:30s} whole bucket {w['ms']:8.1f} ms {w['bytes'] / 1e6:7.2f} MB read | per key "
              f"{k['ms']:8.1f} ms {k['bytes'] / 1e6:7.2f} MB read, {r['engines']:.0f} slabs | "
              f"whole/per-key {w['ms'] / max(k['ms'], 1e-9):.2f}x time, "
              f"{w['bytes'] / max(k['bytes'], 1):.1f}x bytes", flush=True)
    _ = pickle  # (engines are pickled by both layouts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
