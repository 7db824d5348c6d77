"""Engine-only throughput (no JSON reading or writing): ``python -m bench.bench_engine_micro [N] [--quick]``.

Inputs (``N`` elements, default 200 k; ``--quick`` 20 k) are built in memory like ``bench.gen`` writes them
(insert-only in order, or disordered with ~20% retractions; a CTI every 1000 elements; payload
``{"sym", "price"}``) and fed to the engine three ways: `QueryRunner.process_batch` on pyarrow struct
batches of 65536 rows (what the JSON reader hands the engine), `process_many` over element objects (the
engine makes batches of them), and `process`, one element per call: the baseline, measured in the same run,
that every line's ratio is against. Figures are CPU seconds of this process, with the garbage-collector
setting of ``udm run`` (`udm.host.query.runners.quiet_gc`).
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

import pyarrow as pa

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract

SYMS = ("AAA", "BBB", "CCC", "DDD")
BATCH = 65536


def in_order(n: int, seed: int = 1) -> list[Element]:
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    for k in range(1, n + 1):
        if k % 1000 == 0:
            out.append(Cti(t))
        else:
            out.append(Insert(f"e{k}", t, t + 1 + rng.randrange(8),
                              {"sym": SYMS[rng.randrange(4)], "price": rng.randrange(1000) / 10}))
            t += 1
    return out


def disordered(n: int, seed: int = 2, jitter: int = 50) -> list[Element]:
    rng = random.Random(seed)
    out: list[Element] = []
    pending: list[tuple[int, Element]] = []
    base = 0
    for k in range(1, n + 1):
        if k % 1000 == 0:
            out.append(Cti(max(0, base - 2 * jitter - 20)))
        elif pending and pending[0][0] <= k:
            out.append(pending.pop(0)[1])
        else:
            le = max(0, base + rng.randint(-jitter, jitter))
            d = 1 + rng.randrange(20)
            out.append(Insert(f"e{k}", le, le + d, {"sym": SYMS[rng.randrange(4)], "price": rng.randrange(1000) / 10}))
            base += 1
            if rng.random() < 0.2:
                pending.append((k + 1 + rng.randrange(10), Retract(f"e{k}", le, le + d, le + rng.randrange(d))))
                pending.sort(key=lambda p: p[0])
    return out


def struct_batches(elements: list[Element]) -> list[ElementBatch]:
    batches = []
    for a in range(0, len(elements), BATCH):
        part = elements[a:a + BATCH]
        cols: dict[str, list[Any]] = {c: [] for c in ("kind", "id", "le", "re", "re_new", "t", "payload")}
        for e in part:
            if isinstance(e, Insert):
                row = ("insert", e.id, e.le, e.re, None, None, e.payload)
            elif isinstance(e, Retract):
                row = ("retract", e.id, e.le, e.re, e.re_new, None, None)
            else:
                row = ("cti", None, None, None, None, e.t, None)  # type: ignore[union-attr]
            for c, v in zip(cols, row, strict=True):
                cols[c].append(v)
        n = len(part)
        table = pa.table({
            "kind": pa.array(cols["kind"], pa.string()), "id": pa.array(cols["id"], pa.string()),
            **{c: pa.array(cols[c], pa.int64()) for c in ("le", "re", "re_new", "t")},
            "payload": pa.array(cols["payload"]), "line": pa.array(range(a + 1, a + n + 1), pa.int64()),
            "error": pa.nulls(n, pa.string()), "raw": pa.nulls(n, pa.string()),
        })
        batches.append(ElementBatch.from_table(table))
    return batches


def query(udm: str, window: dict[str, Any]) -> Any:
    return bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["sym"], "udm": udm,
                                        "input": "price"}]}))


def measure(label: str, bound: Any, feed: Any, n: int, base: float | None) -> float:
    """Run ``feed`` on a fresh runner and print its el/s (and its ratio to ``base`` el/s); returns el/s."""
    from udm.host.query.runners import quiet_gc  # the GC setting `udm run` uses

    r = QueryRunner(bound)
    with quiet_gc():
        t0 = time.process_time()
        out = feed(r)
        out += r.finish()
        dt = time.process_time() - t0
    rate = n / dt
    vs = f"x{rate / base:>6.1f}" if base else "baseline"
    print(f"  {label:<48} {rate:>12,.0f} el/s {vs:>8}  ({dt:.2f}s CPU, {len(out):,} out)", flush=True)
    return rate


def main(argv: list[str]) -> None:
    args = [a for a in argv[1:] if a != "--quick"]
    n = int(args[0]) if args else 20_000 if "--quick" in argv else 200_000
    data = {"in_order": in_order(n), "disordered": disordered(n)}
    batches = {k: struct_batches(v) for k, v in data.items()}
    print(f"engine only, {n:,} elements; ratios against one element per call", flush=True)
    for udm, window in (("avg", {"type": "tumbling", "size": 1000}), ("median", {"type": "tumbling", "size": 1000}),
                        ("sum", {"type": "hopping", "size": 1000, "hop": 250})):
        bound = query(udm, window)
        print(f"{udm} over {window}:")
        for name in ("in_order", "disordered"):
            base = measure(f"{name} process (one element per call)", bound,
                           lambda r, name=name: [o for el in data[name] for o in r.process(el)], n, None)
            measure(f"{name} process_many (element objects)", bound,
                    lambda r, name=name: r.process_many(data[name]), n, base)
            measure(f"{name} process_batch (65,536-row batches)", bound,
                    lambda r, name=name: [o for b in batches[name] for o in r.process_batch(b)], n, base)
    from bench.machine import load_text

    print(load_text())


if __name__ == "__main__":
    main(sys.argv)
