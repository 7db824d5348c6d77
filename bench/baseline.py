"""A brute-force recompute baseline for the benchmark query (grouped tumbling-window aggregate).

It keeps every live event, and for every element recomputes each affected (group, window) aggregate
from scratch over all of that window's members — no incremental state, no panes. It reads and writes
with the same `udm.host.io` code as ``udm run``, so the comparison is engine against engine. Its
output is the final CHT as inserts (one per non-empty group window), which the benchmark checks
against the engine's output CHT.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from udm.host.errors import BadElement
from udm.host.io.jsonl import JsonlWriter, read_jsonl_batches
from udm.host.query.runners import quiet_gc
from udm.host.temporal.elements import Cti, Insert, Retract

__all__ = ["AGGREGATES", "run_baseline"]

AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "avg": lambda xs: sum(xs) / len(xs),
    "sum": lambda xs: float(sum(xs)),
    "median": lambda xs: float(statistics.median(xs)),
}


def run_baseline(inp: Path, out: Path, *, size: int, group: str, field: str, agg: str, alias: str
                 ) -> dict[str, Any]:
    """Tumbling(size) windows grouped by ``group``, ``agg`` over ``payload[field]``."""
    fn = AGGREGATES[agg]
    t0 = time.perf_counter()
    live: dict[str, tuple[int, int, Any, float]] = {}  # id -> (le, re, key, value)
    members: dict[tuple[Any, int], dict[str, float]] = defaultdict(dict)
    result: dict[tuple[Any, int], float] = {}
    n_in = 0

    def windows(le: int, re: int) -> range:
        return range(le // size, (re - 1) // size + 1)

    def recompute(key: Any, w: int) -> None:
        vals = members.get((key, w))
        if vals:
            result[(key, w)] = fn(list(vals.values()))
        else:
            result.pop((key, w), None)
            members.pop((key, w), None)

    with quiet_gc():
        for batch in read_jsonl_batches(inp, prefetch=2):
            for _, el in batch.to_elements():
                n_in += 1
                if isinstance(el, Insert):
                    key, v = el.payload[group], float(el.payload[field])
                    live[el.id] = (el.le, el.re, key, v)
                    for w in windows(el.le, el.re):
                        members[(key, w)][el.id] = v
                        recompute(key, w)
                elif isinstance(el, Retract):
                    le, re, key, v = live.pop(el.id)
                    for w in windows(le, re):
                        members[(key, w)].pop(el.id, None)
                    if el.re_new > le:
                        live[el.id] = (le, el.re_new, key, v)
                        for w in windows(le, el.re_new):
                            members[(key, w)][el.id] = v
                    for w in windows(le, max(re, el.re_new)):
                        recompute(key, w)
                elif isinstance(el, (Cti, BadElement)):
                    pass
        rows = sorted(result.items(), key=lambda kv: (kv[0][1], str(kv[0][0])))
        with JsonlWriter(out) as wr:
            wr.write(Insert(f"b{i}", w * size, (w + 1) * size, {group: key, alias: value})
                     for i, ((key, w), value) in enumerate(rows))
    return {"elements_in": n_in, "elements_out": len(rows), "seconds": time.perf_counter() - t0}
