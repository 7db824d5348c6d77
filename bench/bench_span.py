"""The columnar span path (`udm.host.engine.span_columnar`) against the row path, engine and writer only.

``python -m bench.bench_span [--quick] [--events N]``

Over the Nexmark bids (`bench.nexmark.gen`, 200 k events; ``--quick`` 50 k), read once into batches, each
span query of `bench.nexmark.queries` (q0, q1, q2, q14) runs through `QueryRunner` and `JsonlWriter` twice
per path, alternating: columnar (``process_batch_encoded``) and element by element (``process_batch``,
the baseline, measured in the same run). It prints the CPU time per element of each (the better of two
runs: CPU time, which a loaded machine inflates far less than wall time), their ratio, and whether the
two outputs are the same bytes; and, for scale, the CPU time per element of reading the file alone (the
JSON parse that now dominates a span query end to end: `python -m bench.nexmark` measures that).
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


def _run(bound: Any, batches: list[Any], out: Path, columnar: bool) -> float:
    from udm.host.engine import QueryRunner
    from udm.host.io.jsonl import JsonlWriter

    r = QueryRunner(bound)
    t0 = time.process_time()
    with JsonlWriter(out) as w:
        for b in batches:
            enc = r.process_batch_encoded(b) if columnar else None
            if enc is not None:
                w.write_encoded(enc)
            else:
                w.write(r.process_batch(b))
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

    events = args.events or (50_000 if args.quick else 200_000)
    with tempfile.TemporaryDirectory(prefix="bench-span-") as tmp:
        where = Path(tmp)
        bids = generate(where, events).bids
        from udm.host.query.runners import _warm_up

        _warm_up()  # pyarrow's one-time lazy imports, outside the clock
        reads = []
        for _ in range(2):
            t0 = time.process_time()
            batches = list(JsonlReader(bids))
            reads.append(time.process_time() - t0)
        read = min(reads)
        n = sum(len(b) for b in batches)
        print(f"span queries, engine + writer, {n:,} bid elements; load {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cpus; reading alone {1e6 * read / n:.2f} us/el CPU (one thread)", flush=True)
        print(f"{'query':6} {'columnar us/el':>15} {'row path us/el':>15} {'ratio':>7}  same bytes")
        catalog = Catalog.discover(plugins=[udfs])
        for q in SPAN:
            bound = bind(QuerySpec.model_validate(QUERIES[q]), catalog)
            cpu: dict[bool, list[float]] = {True: [], False: []}
            for columnar in (True, False, True, False):
                cpu[columnar].append(_run(bound, batches, where / f"{q}.{columnar}.jsonl", columnar))
            col, row = min(cpu[True]), min(cpu[False])
            same = (where / f"{q}.True.jsonl").read_bytes() == (where / f"{q}.False.jsonl").read_bytes()
            print(f"{q:6} {1e6 * col / n:>15.2f} {1e6 * row / n:>15.2f} {row / col:>6.1f}x  {'yes' if same else 'NO'}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
