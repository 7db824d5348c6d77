"""``python -m bench.bench_writer --base REV [--queries q0,q1,q14] [--format jsonl|parquet] [--repeats R]``: the
output writer's CPU per output row on two code trees, alternating.

Why: issue #26's span queries spend a quarter of their CPU in the write-behind thread, and on a loaded
machine the whole-run figures (`bench.nexmark.before_after`) move by more than a writer change does. This
runs only the writer, in one thread, over a Nexmark query's output batches (made once per child by the
tree's own engine): element JSON Lines (``encode_batch``, then `JsonlWriter.write_encoded`) or a Parquet
physical view (`TableWriter.write_batch`), and prints per tree the median CPU per output row over
``--repeats`` alternating children, each the median of five passes (``time.thread_time``). The trees run
through `bench.bench_before_after`'s import redirect; the benchmark's own code is this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_before_after import REDIRECT, export_tree
from bench.machine import load_text
from bench.nexmark.gen import generate, to_parquet
from bench.nexmark.queries import query_names

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent

_CHILD = REDIRECT + r'''
import json, statistics, time
from pathlib import Path

from udm.host.cli import blas_threads

blas_threads.limit("__main__")
from bench.nexmark import udfs
from bench.nexmark.gen import table_options
from bench.nexmark.queries import QUERIES
from udm.host.catalog import Catalog
from udm.host.engine.output import encode_batch
from udm.host.io.arrow_pool import use_bulk_pool
from udm.host.io.jsonl import JsonlWriter
from udm.host.io.table_options import TableOptions, TableSource
from udm.host.io.table_out import TableWriter, output_sink
from udm.host.io.tables import open_reader
from udm.host.model.plan import bind
from udm.host.model.spec import QuerySpec
from udm.host.query.runners import make_runner

query, inp, out, fmt = sys.argv[1:5]
use_bulk_pool()
runner = make_runner(bind(QuerySpec.model_validate(QUERIES[query]), Catalog.discover(plugins=[udfs])))
src = TableSource(Path(inp), TableOptions(**table_options())) if fmt == "parquet" else inp
batches = [runner.run_batch(b) for b in open_reader(src, batch_size=65536)]
rows = sum(len(b) for b in batches)


def jsonl() -> None:
    with JsonlWriter(out) as w:
        for b in batches:
            w.write_encoded(encode_batch(b))


def parquet() -> None:
    w = TableWriter(output_sink(out, inputs=[src]))
    for b in batches:
        w.write_batch(b)
    w.close()


write = parquet if fmt == "parquet" else jsonl
times = []
for _ in range(5):
    t0 = time.thread_time()
    write()
    times.append(time.thread_time() - t0)
print(json.dumps({"rows": rows, "cpu": statistics.median(times)}))
'''


def _child(boot: Path, tree: Path, query: str, inp: Path, out: Path, fmt: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, str(boot), str(tree), query, str(inp), str(out), fmt], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"writer child on {tree} failed: {proc.stderr.strip()[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_writer", description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="baseline git revision")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", default="q0,q1,q14")
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="generate (or reuse) the streams in this directory")
    args = ap.parse_args(argv)
    names = query_names(ap, args.queries)
    tmp = Path(tempfile.mkdtemp(prefix="udm-bench-writer-"))
    try:
        base = tmp / "base"
        sha = export_tree(args.base, base)
        boot = tmp / "boot.py"
        boot.write_text(_CHILD)
        where = args.keep or tmp / "streams"
        bids = where / "bids.jsonl"
        if not bids.exists():
            generate(where, args.events)
        inp = to_parquet(bids, tmp / "bids.parquet") if args.format == "parquet" else bids
        out = tmp / f"out.{args.format}"
        trees = {"base": base, "current": ROOT}
        print(f"writer CPU per output row ({args.format}), base = {args.base} ({sha[:10]}), current = {ROOT}; "
              f"{args.repeats} alternating children, median; {load_text()}", flush=True)
        for q in names:
            ns: dict[str, list[float]] = {k: [] for k in trees}
            for _ in range(args.repeats):
                for label, tree in trees.items():
                    r = _child(boot, tree, q, inp, out, args.format)
                    ns[label].append(r["cpu"] * 1e9 / r["rows"])
            b, c = statistics.median(ns["base"]), statistics.median(ns["current"])
            print(f"{q:5} base {b:7.0f} ns/row   current {c:7.0f} ns/row   ratio {c / b:.3f}   "
                  f"(each: base {[round(x) for x in ns['base']]}, current {[round(x) for x in ns['current']]}) "
                  f"({int(r['rows']):,} rows; {load_text()})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
