"""``python -m bench.nexmark.stages [--events N] [--queries q0,q1] [--reps R]``: where a span query's CPU
goes, stage by stage, over the Nexmark bids.

Each block of the file goes through the stages one after the other in this one thread (no reader
workers, no write-behind), each stage timed with ``time.thread_time``: pyarrow's JSON parse
(``_read_table``), the reader's checks after it (`_fast_batch`'s rest: validity, faithful payloads, time
columns), the engine (`QueryRunner.process_batch_encoded`: the batch through the input gate and the
operators), the output encoding (`DeferredLines.make`) and the write. A block's buffers are freed before
the next one, as in a run, so allocator effects (`udm.host.io.arrow_pool`) show as they do there. The
split is per 1 M input elements, then each stage's share of their sum; the sum is the CPU a run would
spend with no thread overhead (`bench.nexmark` measures that).

``--format parquet``: the bids as a Parquet table (`bench.nexmark.gen.to_parquet`) with Parquet output, stages
``decode`` (pyarrow's Parquet reader, timed alone in one thread), ``rows`` (the table reader in this thread
while pyarrow's threads decode: the conversion to `ElementBatch`es, ids, CTIs, payload), ``engine``
(`QueryRunner.run_batch`), ``columns`` (the output batch as the physical view's columns,
`udm.host.io.table_columns`) and ``write`` (Parquet encoding and writing).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.nexmark.gen import generate
from bench.nexmark.queries import QUERIES, SPAN

STAGES = ("parse", "checks", "engine", "encode", "write")
TABLE_STAGES = ("decode", "rows", "engine", "columns", "write")


def _pool() -> str:
    """`use_bulk_pool`, as a run calls it; on a tree from before it (a base revision) pyarrow's default."""
    try:
        from udm.host.io.arrow_pool import use_bulk_pool
    except ImportError:
        import pyarrow as pa

        return str(pa.default_memory_pool().backend_name)
    return use_bulk_pool()


def run_once(path: Path, q: str, out: Path) -> tuple[int, dict[str, float]]:
    """One pass of query ``q`` over ``path``: (elements, CPU seconds per stage)."""
    from bench.nexmark import udfs
    from udm.host.catalog import Catalog
    from udm.host.io import jsonl
    from udm.host.model.plan import bind
    from udm.host.model.spec import QuerySpec
    from udm.host.query.runners import make_runner

    _pool()
    runner = make_runner(bind(QuerySpec.model_validate(QUERIES[q]), Catalog.discover(plugins=[udfs])), None)
    spent = dict.fromkeys(STAGES, 0.0)
    clock = time.thread_time
    n = 0
    parse = jsonl._read_table
    t_parse = 0.0

    def timed_parse(chunk: bytes):  # type: ignore[no-untyped-def]
        nonlocal t_parse
        c = clock()
        try:
            return parse(chunk)
        finally:
            t_parse += clock() - c

    jsonl._read_table = timed_parse  # type: ignore[assignment]
    try:
        with open(path, "rb", buffering=0) as f, jsonl.JsonlWriter(out) as w:
            for block, newlines, first in jsonl._numbered_blocks(f, jsonl._BLOCK_BYTES):
                c = clock()
                t_parse = 0.0
                batches = jsonl._parse_block(block, newlines, first, jsonl.DEFAULT_BATCH_SIZE, True)
                spent["parse"] += t_parse
                spent["checks"] += clock() - c - t_parse
                for b in batches:
                    n += len(b)
                    c = clock()
                    lines = runner.process_batch_encoded(b, defer=True)
                    c2 = clock()
                    made = lines.make() if hasattr(lines, "make") else lines
                    c3 = clock()
                    w.write_encoded(made)
                    c4 = clock()
                    spent["engine"] += c2 - c
                    spent["encode"] += c3 - c2
                    spent["write"] += c4 - c3
                del batches
            c = clock()
        spent["write"] += clock() - c  # (the close)
    finally:
        jsonl._read_table = parse  # type: ignore[assignment]
    return n, spent


def run_table(path: Path, q: str, out: Path, disorder: int = 100) -> tuple[int, dict[str, float]]:
    """One pass of query ``q`` over the Parquet bids at ``path`` to Parquet ``out``: (elements, CPU seconds
    per stage)."""
    from bench.nexmark import udfs
    from bench.nexmark.gen import table_options
    from udm.host.catalog import Catalog
    from udm.host.io import table_columns, tables
    from udm.host.io.table_options import TableOptions, TableSource
    from udm.host.io.table_out import TableSink, TableWriter
    from udm.host.model.plan import bind
    from udm.host.model.spec import QuerySpec
    from udm.host.query.runners import make_runner

    _pool()
    runner = make_runner(bind(QuerySpec.model_validate(QUERIES[q]), Catalog.discover(plugins=[udfs])), None)
    spent = dict.fromkeys(TABLE_STAGES, 0.0)
    clock = time.thread_time
    n = 0
    reader = tables.TableReader(TableSource(path, TableOptions(**table_options(disorder))))
    physical = table_columns.physical_table
    writer = TableWriter(TableSink(out, "parquet", view="physical"))
    made: list[float] = []

    def timed_physical(b, timestamps=False):  # type: ignore[no-untyped-def]
        c = clock()
        try:
            return physical(b, timestamps)
        finally:
            made.append(clock() - c)

    import udm.host.io.table_out as table_out

    table_out.physical_table = timed_physical  # type: ignore[assignment]
    try:
        batches = iter(reader)  # (no read-ahead: this thread does it all, bar pyarrow's decoding threads)
        while True:
            c = clock()
            try:
                b = next(batches)
            except StopIteration:
                break
            spent["rows"] += clock() - c
            n += len(b)
            c = clock()
            o = runner.run_batch(b)
            c2 = clock()
            made.clear()
            writer.write_batch(o)
            c3 = clock()
            spent["engine"] += c2 - c
            spent["columns"] += sum(made)
            spent["write"] += c3 - c2 - sum(made)
        c = clock()
        writer.close()
        spent["write"] += clock() - c
    finally:
        table_out.physical_table = physical
    import pyarrow.parquet as pq

    c = clock()  # the decode alone, in this thread (in a run pyarrow's threads do it: not in "rows")
    for _ in pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20).iter_batches(batch_size=65536,
                                                                                       use_threads=False):
        pass
    spent["decode"] = clock() - c
    return n, spent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.nexmark.stages", description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", default=",".join(SPAN))
    ap.add_argument("--reps", type=int, default=3, help="passes per query (the median per stage is shown)")
    ap.add_argument("--keep", type=Path, default=None, help="generate (or reuse) the streams in this directory")
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    args = ap.parse_args(argv)
    where = args.keep or Path(tempfile.mkdtemp(prefix="nexmark-stages-"))
    bids = where / "bids.jsonl"
    if not bids.exists():
        generate(where, args.events)
    stages = STAGES if args.format == "jsonl" else TABLE_STAGES
    if args.format == "parquet":
        from bench.nexmark.gen import to_parquet

        bids = to_parquet(bids, where / "bids.parquet")
    print(f"per 1 M elements, CPU-s (median of {args.reps}); pyarrow pool: {_pool()}; {args.format}")
    print(f"{'query':6} " + " ".join(f"{s:>7}" for s in stages) + f" {'total':>7} {'k el/CPU-s':>10}")
    for q in args.queries.split(","):
        runs = [run_once(bids, q, where / f"out-{q}.jsonl") if args.format == "jsonl" else
                run_table(bids, q, where / f"out-{q}.parquet") for _ in range(args.reps)]
        n = runs[0][0]
        med = {s: statistics.median(r[1][s] for r in runs) * 1e6 / n for s in stages}
        total = sum(med.values())
        print(f"{q:6} " + " ".join(f"{med[s]:7.3f}" for s in stages) + f" {total:7.3f} {1e3 / total:10.0f}")
        print(f"{'share':6} " + " ".join(f"{med[s] / total:7.0%}" for s in stages), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
