"""Row windows against seeds/004 (Stream Mill ESL) Fig. 4 on the local engine: the cost per element of
``rows{n, slide=1}`` must not grow with ``n``.

Input: in-order point events ``{"v"}`` (one per tick), a CTI every 100 elements right behind the data, fed
in batches of 1,000 elements through `QueryRunner.process_many`. The first ``n + 100`` elements (the
windows filling up) are not timed; then 20,000 elements are. Reported: CPU µs per timed element for each
UDA and ``n`` (the least of ``--repeat`` runs, the sizes taking turns, so a busy machine disturbs them
alike), and the ratio to ``n = 10`` measured in the same run (the baseline). Every ``sum`` run's output is
checked against the window sums computed directly.

Consecutive windows share one running state (`host/engine/window/rows.py`): each row is added once and
removed once, so the paper's shape is a flat line whatever ``n``; recomputing every window from its rows
would grow linearly with ``n``.

``python -m bench.bench_row_windows [--quick]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.query.plan import bind
from udm.host.query.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing.cht import cht

UDAS = ("sum", "avg", "count", "min", "max")


def _query(n: int, uda: str) -> Any:
    step: dict[str, Any] = {"op": "window", "window": {"type": "rows", "n": n}, "udm": uda}
    if uda != "count":
        step["input"] = "v"
    return bind(parse_query({"steps": [step]}))


def _value(i: int) -> int:
    return (i * 7919) % 101


def _stream(count: int) -> list[Element]:
    out: list[Element] = []
    for i in range(count):
        out.append(Insert(f"e{i}", i, i + 1, {"v": _value(i)}))
        if i % 100 == 99:
            out.append(Cti(i + 1))
    return out


def _feed(r: QueryRunner, els: list[Element]) -> list[Element]:
    out: list[Element] = []
    for a in range(0, len(els), 1000):
        out += r.process_many(els[a:a + 1000])
    return out


def _run(n: int, uda: str, timed: int) -> float:
    """µs per timed element of one run (its output checked for ``sum``)."""
    count = n + 100 + timed
    stream = _stream(count)
    cut = next(i for i, el in enumerate(stream) if isinstance(el, Insert) and el.le == n + 100)
    r = QueryRunner(_query(n, uda))
    out = _feed(r, stream[:cut])
    t0 = time.process_time()
    out += _feed(r, stream[cut:])
    secs = time.process_time() - t0
    out += r.finish()
    if uda == "sum":
        pre = [0]
        for i in range(count):
            pre.append(pre[-1] + _value(i))
        got = cht(out)
        want = {(k - n, k, f'{{"sum":{pre[k] - pre[k - n]}}}') for k in range(n, count + 1)}
        assert set(got.elements()) == want and len(list(got.elements())) == len(want), f"n={n}: wrong sums"
    return secs / (len(stream) - cut) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_row_windows", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes, fewer elements")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration (the least counts)")
    args = ap.parse_args(argv)
    sizes = (10, 1000) if args.quick else (10, 100, 1000, 10_000)
    timed = 5000 if args.quick else 20_000
    print(f"rows{{n, slide=1}}, {timed:,} in-order elements timed: µs per element (ratio to n=10)")
    print(f"{'uda':>6} " + " ".join(f"{f'n={n:,}':>18}" for n in sizes))
    for uda in UDAS:
        best = {n: _run(n, uda, timed) for n in sizes}
        for _ in range(args.repeat - 1):
            for n in sizes:
                best[n] = min(best[n], _run(n, uda, timed))
        base = best[sizes[0]]
        cells = [f"{best[n]:>9.1f} ({best[n] / base:4.2f}x)" for n in sizes]
        print(f"{uda:>6} " + " ".join(f"{c:>18}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
