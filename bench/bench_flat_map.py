"""``flat_map`` on the local engine: CPU per input event of ``explode`` and of a time-sensitive span UDO,
against a ``project`` step over the same batches, measured in the same run.

``python -m bench.bench_flat_map [--quick] [--events N]``

Orders (interval events, 3 SKUs each, a CTI every 64 events, one in ten shortened later by a retraction)
run through `QueryRunner` batch by batch (engine only, no writer): ``project`` (``set`` a constant: the
columnar span path, one output per event: the baseline), ``explode`` (one output per SKU: three) and a
time-sensitive span UDO giving the first tick of each event (its outputs recomputed and diffed on a
retraction). It prints CPU µs per input event (the better of two runs: CPU time, which a loaded machine
inflates far less than wall time), output elements (inserts, retractions, CTIs) per input event, the
ratio to ``project``, and the step's largest state (events with a record) at a batch's end: bounded by
the events a CTI has not closed, not by the stream.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from typing import Any

from udm.sdk import Event, TimeSensitiveSpanUDO, udm


@udm(name="first_tick", version="1.0.0", time_bound=True)
class FirstTick(TimeSensitiveSpanUDO):
    """The event's first tick (time-bound: a lifetime change never alters it)."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le, event.le + 1, dict(event.payload)


def _batches(n: int) -> list[Any]:
    from udm.host.io.batch import ElementBatch
    from udm.host.temporal.elements import Cti, Insert, Retract

    els: list[Any] = []
    for i in range(n):
        le = i * 2
        els.append(Insert(f"o{i}", le, le + 40, {"order": i, "skus": [f"s{i % 7}", f"s{i % 5}", f"s{i % 3}"]}))
        if i % 10 == 9:
            j = i - 5
            els.append(Retract(f"o{j}", j * 2, j * 2 + 40, j * 2 + 20))
        if i % 64 == 63:
            els.append(Cti(le - 30))
    els.append(Cti(2**63 - 1))
    return [ElementBatch.from_elements(els[k:k + 4096]) for k in range(0, len(els), 4096)]


def _run(bound: Any, batches: list[Any]) -> tuple[float, int, int]:
    from udm.host.engine import QueryRunner

    r = QueryRunner(bound)
    outs = 0
    most = 0
    t0 = time.process_time()
    for b in batches:
        outs += len(r.run_batch(b))
        most = max(most, sum(r.ops[-1].state_size().values()))
    outs += len(r.finish_batch())
    return time.process_time() - t0, outs, most


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_flat_map", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 k events instead of 200 k")
    ap.add_argument("--events", type=int, default=None)
    args = ap.parse_args(argv)
    from udm.host.catalog import Catalog
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query

    n = args.events or (20_000 if args.quick else 200_000)
    catalog = Catalog.discover()
    catalog.add(FirstTick)
    batches = _batches(n)
    steps = {
        "project": {"op": "project", "set": {"seen": True}},
        "explode": {"op": "flat_map", "udm": "explode", "params": {"field": "skus", "as": "sku"}},
        "first_tick": {"op": "flat_map", "udm": "first_tick"},
    }
    print(f"flat_map, engine only, {n:,} orders (3 SKUs each, 10 % shortened); load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cpus", flush=True)
    print(f"{'step':11} {'us/event':>9} {'elements out/event':>19} {'vs project':>11} {'largest state':>14}")
    base = None
    for name, step in steps.items():
        bound = bind(parse_query({"steps": [step]}), catalog)
        runs = [_run(bound, batches) for _ in range(2)]
        cpu = min(r[0] for r in runs)
        _, outs, most = runs[0]
        base = cpu if base is None else base
        print(f"{name:11} {1e6 * cpu / n:>9.2f} {outs / n:>19.2f} {cpu / base:>10.1f}x {most:>14,}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
