"""What strong consistency (``max_delay: "inf"``, semantics-notes 72) costs against speculation
(``max_delay: 0``), measured in the same run, through the local engine (`QueryRunner.process_many`).

The stream is in order: event ``i`` is ``[i, i + 60)`` with ``{"v"}``; forty events later its end is
moved to ``i + 45`` (a retraction with sync time ``i + 45``, after the CTI then in force); a CTI at the
next LE follows every 10 events; one group; fed in chunks of 20 elements (so speculation shows). Per
window family and UDM — ``sum`` (time-insensitive: nothing waits but an end at the CTI) and ``members``
clipped on the left only, output ``unaltered`` (time-sensitive: a window waits while a member's end can
still move; speculation retracts each output whose end moved) — it prints µs per input element under
each ``max_delay`` (after one warm-up cell), the ratio inf / 0 (the baseline is speculation in the same
run), and the output retractions of each (strong: 0 by construction; a nonzero count is printed as
``WRONG`` and the bench exits 1). Printed, never asserted.

``python -m bench.bench_strong [--quick] [--events 20000] [--families tumbling,rows] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract

FAMILIES: dict[str, dict[str, Any]] = {
    "tumbling": {"type": "tumbling", "size": 10},
    "hopping": {"type": "hopping", "size": 20, "hop": 5},
    "snapshot": {"type": "snapshot"},
    "count_by_start": {"type": "count_by_start", "n": 5},
    "rows": {"type": "rows", "n": 5},
}
UDMS: dict[str, dict[str, Any]] = {"sum": {"udm": "sum", "input": "v"},
                                   "members": {"udm": "members", "clip": "left", "output": "unaltered"}}


def stream(n: int) -> list[Element]:
    out: list[Element] = []
    for i in range(n):
        out.append(Insert(f"e{i}", i, i + 60, {"v": i % 17}))
        if i >= 40:
            j = i - 40
            out.append(Retract(f"e{j}", j, j + 60, j + 45))
        if i % 10 == 9:
            out.append(Cti(i + 1))
    return out


def run(window: dict[str, Any], udm: dict[str, Any], max_delay: Any, els: list[Element]) -> tuple[float, int]:
    """(seconds in the engine, output retractions), fed in chunks of 20 elements."""
    q = bind(parse_query({"steps": [{"op": "window", "window": window, **udm, "max_delay": max_delay}]}))
    r = QueryRunner(q)
    retractions = 0
    t0 = time.perf_counter()
    for k in range(0, len(els), 20):
        for e in r.process_many(els[k:k + 20]):
            retractions += isinstance(e, Retract)
    for e in r.finish():
        retractions += isinstance(e, Retract)
    return time.perf_counter() - t0, retractions


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_strong", description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per cell")
    ap.add_argument("--quick", action="store_true", help="2,000 events, one run per cell")
    a = ap.parse_args()
    if a.quick:
        a.events, a.repeat = 2_000, 1
    els = stream(a.events)
    run(FAMILIES["tumbling"], UDMS["sum"], 0, els[:2000])  # (warm-up: imports, first allocations)
    wrong = False
    print(f"{a.events} events ({len(els)} elements), best of {a.repeat}; us per element")
    print(f"{'family':<15}{'udm':<8}{'max_delay 0':>12}{'inf':>10}{'inf/0':>8}{'retr. 0':>9}{'retr. inf':>10}")
    for fam in a.families.split(","):
        for name, udm in UDMS.items():
            cells = []
            for md in (0, "inf"):
                best, retr = min(run(FAMILIES[fam], udm, md, els) for _ in range(a.repeat))
                cells.append((best * 1e6 / len(els), retr))
            (t0, r0), (ti, ri) = cells
            flag = "" if ri == 0 else "  WRONG"
            wrong |= ri != 0
            print(f"{fam:<15}{name:<8}{t0:>12.1f}{ti:>10.1f}{ti / t0:>8.2f}{r0:>9}{ri:>10}{flag}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
