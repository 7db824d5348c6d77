"""The Python side of a keyed ``--engine spark-streaming`` run, alone: `KeyedBucket` calls on a `DictStore`, on
two code trees, CPU seconds per phase, as the held keys grow 10×.

Why: `bench.bench_streaming_cli` measures the whole run (staging, Spark, the JVM) and takes ~15 minutes on a
loaded machine; this isolates what the per-key state layout costs a bucket's Python worker, which is what
`udm.host.spark.key_state` and `udm.host.spark.key_store` decide, in a minute, and compares a baseline.

Data: `bench.bench_streaming_cli`'s (``--held`` keys each holding one far-future event, then ``--elements``
point inserts 1 ms apart over 100 keys, a CTI every 1,000), cut as the ``udm run`` driver does into micro-
batches of `DEFAULT_BATCH_SIZE` elements and routed into 2 key buckets (``local[2]``'s), with ``cti(INF)``
and the end-of-input row last; a tumbling 1 s ``sum`` per key. Each micro-batch is one `KeyedBucket` call
per bucket, as in the Spark processor. Phases: the first micro-batch (the held keys are made), the middle
ones (per micro-batch: what must stay flat as held keys grow) and the last (every key ends).

Children alternate base / current (`bench.bench_before_after`'s bootstrap points the editable install at
``git archive --base``), ``--repeats`` each; medians of process CPU.

``python -m bench.bench_streaming_keys --base REV [--elements 50000] [--held 1000] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
_FAR = 10**15
_KEYS = 100
_BUCKETS = 2


def _tables(n: int, held: int, batch: int) -> list[list[Any]]:
    """The micro-batches' call inputs, per bucket (module doc)."""
    import pyarrow as pa

    from udm.host.spark.convert import ELEMENT_COLUMNS
    from udm.host.spark.key_state import payload_key
    from udm.host.spark.stream_parts import crc_bucket
    from udm.host.spark.stream_wire import BROADCAST, END_KIND

    rows: list[dict[str, Any]] = [{"kind": "insert", "id": f"h{k}", "le": _FAR + k, "re": _FAR + k + 1,
                                   "payload": {"k": f"held{k}", "v": 1.0}} for k in range(held)]
    for i in range(n):
        le = i * 1000
        rows.append({"kind": "insert", "id": f"e{i}", "le": le, "re": le + 1,
                     "payload": {"k": f"k{(i * 7919) % _KEYS}", "v": float(i % 97)}})
        if (i + 1) % 1000 == 0:
            rows.append({"kind": "cti", "t": max(0, le - 100_000)})
    rows += [{"kind": "cti", "t": 2**63 - 1}, {"kind": END_KIND}]
    schema = pa.schema([(c, pa.int64() if c in ("le", "re", "re_new", "t", "line") else pa.string())
                        for c in ELEMENT_COLUMNS] + [("udm_seq", pa.int64()), ("udm_route", pa.int64()),
                                                     ("udm_bucket", pa.int64()), ("udm_key", pa.string())])

    def table(lo: int, hi: int, b: int) -> pa.Table:
        cols: dict[str, list[Any]] = {f.name: [] for f in schema}
        for j in range(lo, hi):
            r = rows[j]
            route, key = BROADCAST, None
            if r["kind"] == "insert":
                route, key = crc_bucket(r["payload"], ["k"], _BUCKETS), payload_key(r["payload"], ["k"])
                if route != b:
                    continue
            for c in ELEMENT_COLUMNS:
                cols[c].append(j if c == "line" else json.dumps(r["payload"]) if c == "payload" and "payload" in r
                               else r.get(c))
            cols["udm_seq"].append(j)
            cols["udm_route"].append(route)
            cols["udm_bucket"].append(b)
            cols["udm_key"].append(key)
        return pa.table(cols, schema=schema)

    cuts, count = [0], 0
    for j, r in enumerate(rows):
        count += r["kind"] == "insert"
        if count == batch:
            cuts.append(j + 1)
            count = 0
    cuts.append(len(rows))
    return [[table(lo, hi, b) for b in range(_BUCKETS)] for lo, hi in pairwise(cuts) if hi > lo]


def child(n: int, held: int) -> dict[str, float]:
    """One tree's run: CPU seconds of the first, middle (per micro-batch) and last micro-batches."""
    from udm.host.io.batch import ElementBatch
    from udm.host.model.plan import build_plan
    from udm.host.spark.convert import ELEMENT_COLUMNS
    from udm.host.spark.key_state import KeyedBucket
    from udm.host.spark.key_store import DictStore
    from udm.host.spark.rows import with_struct_payloads
    from udm.host.spark.stream_parts import DEFAULT_BATCH_SIZE
    from udm.host.spark.stream_wire import END_KIND, UNROUTABLE

    bound = build_plan({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 1_000_000},
                                   "group_by": ["k"], "udm": "sum", "input": "v"}]})
    batches = _tables(n, held, DEFAULT_BATCH_SIZE)
    stores = [DictStore() for _ in range(_BUCKETS)]
    cpu: list[float] = []
    for tables in batches:
        t0 = time.process_time()
        for b, t in enumerate(tables):
            KeyedBucket(bound, None, ["k"], stores[b], b, buckets=_BUCKETS).run(
                t, lambda r, part: list(r.process_batch(ElementBatch.from_table(part))), None, None, END_KIND,
                UNROUTABLE, lambda t: with_struct_payloads(t.select(list(ELEMENT_COLUMNS))))
        cpu.append(time.process_time() - t0)
    return {"first": cpu[0], "mid": statistics.mean(cpu[1:-1]), "last": cpu[-1], "total": sum(cpu)}


_BOOT = r'''
"""``python boot.py TREE N HELD``: `child` on the udm of TREE."""
''' + "{redirect}" + r'''
import json

import udm.host  # noqa: E402

from bench.bench_streaming_keys import child  # noqa: E402

r = child(int(sys.argv[1]), int(sys.argv[2]))
r["tree"] = udm.host.__file__
print(json.dumps(r))
'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="baseline git revision")
    ap.add_argument("--elements", type=int, default=50_000)
    ap.add_argument("--held", type=int, default=1000, help="held keys (and 10x that)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from bench.bench_before_after import REDIRECT, export_tree
    from bench.machine import load_text

    with tempfile.TemporaryDirectory(prefix="udm-bench-stream-keys-") as d:
        tmp = Path(d)
        sha = export_tree(args.base, tmp / "base")
        boot = tmp / "boot.py"
        boot.write_text(_BOOT.replace("{redirect}", REDIRECT), encoding="utf-8")
        trees = {"base": tmp / "base", "current": ROOT}
        got: dict[tuple[str, int], list[dict[str, float]]] = {}
        for r in range(args.repeats):
            for held in (args.held, args.held * 10):
                for name in (("base", "current") if r % 2 == 0 else ("current", "base")):
                    out = subprocess.run([sys.executable, str(boot), str(trees[name]), str(args.elements), str(held)],
                                         cwd=ROOT, capture_output=True, text=True, check=True,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)})
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    if not Path(res.pop("tree")).resolve().is_relative_to(trees[name].resolve()):
                        raise RuntimeError(f"the {name} child imported another udm")
                    got.setdefault((name, held), []).append(res)
    print(f"KeyedBucket CPU s (median of {args.repeats}), {args.elements:,} elements, {_KEYS} keys, {_BUCKETS} "
          f"buckets; base = {args.base} ({sha[:7]}); {load_text()}")
    print(f"{'':>22} {'first':>7} {'mid/batch':>9} {'last':>7} {'total':>7}")
    med = {k: {f: statistics.median(x[f] for x in v) for f in ("first", "mid", "last", "total")}
           for k, v in got.items()}
    for (name, held), m in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{name + f', {held} held':>22} {m['first']:7.2f} {m['mid']:9.3f} {m['last']:7.2f} {m['total']:7.2f}")
    for name in ("base", "current"):
        lo, hi = med[(name, args.held)], med[(name, args.held * 10)]
        print(f"{name}: x10 held keys: mid/batch {hi['mid'] / lo['mid']:.2f}x, total {hi['total'] / lo['total']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
