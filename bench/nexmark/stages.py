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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.nexmark.stages", description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", default=",".join(SPAN))
    ap.add_argument("--reps", type=int, default=3, help="passes per query (the median per stage is shown)")
    ap.add_argument("--keep", type=Path, default=None, help="generate (or reuse) the streams in this directory")
    args = ap.parse_args(argv)
    where = args.keep or Path(tempfile.mkdtemp(prefix="nexmark-stages-"))
    bids = where / "bids.jsonl"
    if not bids.exists():
        generate(where, args.events)
    print(f"per 1 M elements, CPU-s (median of {args.reps}); pyarrow pool: {_pool()}")
    print(f"{'query':6} " + " ".join(f"{s:>7}" for s in STAGES) + f" {'total':>7} {'k el/CPU-s':>10}")
    for q in args.queries.split(","):
        runs = [run_once(bids, q, where / f"out-{q}.jsonl") for _ in range(args.reps)]
        n = runs[0][0]
        med = {s: statistics.median(r[1][s] for r in runs) * 1e6 / n for s in STAGES}
        total = sum(med.values())
        print(f"{q:6} " + " ".join(f"{med[s]:7.3f}" for s in STAGES) + f" {total:7.3f} {1e3 / total:10.0f}")
        print(f"{'share':6} " + " ".join(f"{med[s] / total:7.0%}" for s in STAGES), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
