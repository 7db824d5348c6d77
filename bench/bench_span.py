"""Span queries a batch at a time against the same engine fed one element per call, engine and writer only.

``python -m bench.bench_span [--quick] [--events N]``

Over the Nexmark bids (`bench.nexmark.gen`, 200 k events; ``--quick`` 50 k), read once into batches, each
span query of `bench.nexmark.queries` (q0, q1, q2, q14) runs through `QueryRunner` and `JsonlWriter` twice
per side, alternating: a batch at a time (``process_batch_encoded``, what ``udm run`` does) and one element
per call (``process``, each element and its line; the baseline, measured in the same run; the elements are
decoded from the batches before the clock starts). It prints the CPU time per element of each (the better
of two runs: CPU time, which a loaded machine inflates far less than wall time), their ratio, and whether
the two outputs are the same bytes; and, for scale, the CPU time per element of reading the file alone
(the JSON parse that dominates a span query end to end: `python -m bench.nexmark` measures that).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.nexmark import udfs
from bench.nexmark.gen import generate
from bench.nexmark.queries import QUERIES, SPAN


def _batched(bound: Any, batches: list[Any], out: Path) -> float:
    """CPU seconds of the run a batch at a time, its output encoded column-wise."""
    from udm.host.engine import QueryRunner
    from udm.host.io.jsonl import JsonlWriter

    r = QueryRunner(bound)
    t0 = time.process_time()
    with JsonlWriter(out) as w:
        for b in batches:
            w.write_encoded(r.process_batch_encoded(b))
        w.write(r.finish())
    return time.process_time() - t0


def _one_by_one(bound: Any, elements: list[tuple[int | None, Any]], out: Path) -> float:
    """CPU seconds of the run one element per call."""
    from udm.host.engine import QueryRunner
    from udm.host.io.jsonl import JsonlWriter

    r = QueryRunner(bound)
    t0 = time.process_time()
    with JsonlWriter(out) as w:
        for line, el in elements:
            w.write(r.process(el, line))
        w.write(r.finish())
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_span", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="50 k events instead of 200 k")
    ap.add_argument("--events", type=int, default=None)
    args = ap.parse_args(argv)
    from udm.host.catalog import Catalog
    from udm.host.io.jsonl import JsonlReader
    from udm.host.model.plan import bind
    from udm.host.model.spec import QuerySpec
    from udm.host.query.runners import _warm_up, quiet_gc

    events = args.events or (50_000 if args.quick else 200_000)
    with tempfile.TemporaryDirectory(prefix="bench-span-") as tmp:
        where = Path(tmp)
        bids = generate(where, events).bids
        _warm_up()  # pyarrow's one-time lazy imports, outside the clock
        reads = []
        for _ in range(2):
            t0 = time.process_time()
            batches = list(JsonlReader(bids))
            reads.append(time.process_time() - t0)
        read = min(reads)
        elements = [pair for b in batches for pair in b.to_elements()]
        n = len(elements)
        print(f"span queries, engine + writer, {n:,} bid elements; load {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cpus; reading alone {1e6 * read / n:.2f} us/el CPU (one thread)", flush=True)
        print(f"{'query':6} {'batch us/el':>12} {'1 el/call us/el':>16} {'ratio':>7}  same bytes")
        catalog = Catalog.discover(plugins=[udfs])
        for q in SPAN:
            bound = bind(QuerySpec.model_validate(QUERIES[q]), catalog)
            batch_out, one_out = where / f"{q}.batch.jsonl", where / f"{q}.one.jsonl"
            cpu: dict[bool, list[float]] = {True: [], False: []}
            with quiet_gc():  # the garbage-collector setting of `udm run`
                for batched in (True, False, True, False):
                    cpu[batched].append(_batched(bound, batches, batch_out) if batched
                                        else _one_by_one(bound, elements, one_out))
            col, one = min(cpu[True]), min(cpu[False])
            same = batch_out.read_bytes() == one_out.read_bytes()
            print(f"{q:6} {1e6 * col / n:>12.2f} {1e6 * one / n:>16.2f} {one / col:>6.1f}x  {'yes' if same else 'NO'}",
                  flush=True)
        print("ratio: one element per call / a batch at a time (CPU time per element)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
