"""External CTIs (SEMANTICS §11): how soon results become final with ``ecti`` ranges announced before their data,
against plain CTIs that trail the data by a fixed lag (the baseline, measured in the same run).

Workload: one disordered stream (``generate``: disorder ``out_of_order``, elements up to ~20 ticks late, 30 %
speculated and revised, over 8 groups), a speculating ``tumbling(10)`` count per group. Two physical forms
of the same data, fed one element at a time:

* **plain CTIs**: after each element, ``cti(max sync seen - lag)`` whenever that rises; the lag is the
  stream's largest lateness (smaller would make late elements CTI violations);
* **ECTIs**: one ``ecti(10k, 10k + 10, count)`` per 10-tick range, each just before the first element of its
  range (the source knows each range's count: a partitioned log, a batch export).

Latency of a range = how many input elements arrive between the element that completes it (its last one) and
the output CTI that passes the range's end, and the same in ticks (input watermark then minus the range's
end). Printed: mean and 95th percentile for both forms, their ratio, and elements per second.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Ecti, Element, Insert, Retract, sync_time
from udm.host.testing import cht, generate
from udm.sdk import INF

WIDTH = 10
QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": WIDTH}, "group_by": ["g"],
                    "udm": "count", "as": "n"}]}


def data(events: int, seed: int) -> list[Element]:
    return [e for e in generate(seed=seed, events=events, groups=8, disorder="out_of_order", speculation=0.3,
                                chain=2, cti="none") if isinstance(e, (Insert, Retract))]


def lateness(els: list[Element]) -> int:
    top, worst = -(2**63), 0
    for e in els:
        s = sync_time(e)
        worst = max(worst, top - s)
        top = max(top, s)
    return worst


def with_plain_ctis(els: list[Element], lag: int) -> list[Element]:
    out: list[Element] = []
    top, last = -(2**63), -(2**63)
    for e in els:
        out.append(e)
        top = max(top, sync_time(e))
        if top - lag > last:
            last = top - lag
            out.append(Cti(last))
    return [*out, Cti(INF)]


def with_ectis(els: list[Element]) -> list[Element]:
    counts: dict[int, int] = {}
    for e in els:
        k = sync_time(e) // WIDTH
        counts[k] = counts.get(k, 0) + 1
    out: list[Element] = []
    announced: set[int] = set()
    for e in els:
        k = sync_time(e) // WIDTH
        if k not in announced:
            announced.add(k)
            out.append(Ecti(k * WIDTH, (k + 1) * WIDTH, counts[k]))
        out.append(e)
    return [*out, Cti(INF)]


def measure(els: list[Element], data_els: list[Element]) -> tuple[list[int], list[int], float, list[Element]]:
    """(latency in elements, latency in ticks, seconds, output) per range, over the stream ``els``."""
    last_of: dict[int, int] = {}  # range -> position (in data elements) of its last element
    for i, e in enumerate(data_els):
        last_of[sync_time(e) // WIDTH] = i
    r = QueryRunner(bind(parse_query(QUERY)))
    out: list[Element] = []
    final_at: dict[int, tuple[int, int]] = {}  # range -> (data position, watermark) when its end went final
    pos, wm, cti = -1, -(2**63), -(2**63)
    t0 = time.perf_counter()
    for e in els:
        if isinstance(e, (Insert, Retract)):
            pos += 1
            wm = max(wm, sync_time(e))
        got = r.process(e)
        out += got
        for o in got:
            if isinstance(o, Cti) and o.t > cti and o.t < INF:
                cti = o.t
                for k in range((cti // WIDTH) - 1, -1, -1):  # ranges whose end the CTI has reached
                    if k in final_at:
                        break
                    if k in last_of:
                        final_at[k] = (pos, wm)
    out += r.finish()
    secs = time.perf_counter() - t0
    by_el = [final_at[k][0] - last_of[k] for k in sorted(final_at)]
    by_tick = [final_at[k][1] - (k + 1) * WIDTH for k in sorted(final_at)]
    return by_el, by_tick, secs, out


def _stats(xs: list[int]) -> tuple[float, int]:
    s = sorted(xs)
    return (sum(s) / len(s) if s else 0.0), (s[int(0.95 * (len(s) - 1))] if s else 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_ecti", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a shorter stream")
    ap.add_argument("--events", type=int, default=None)
    args = ap.parse_args(argv)
    n = args.events or (1500 if args.quick else 6000)
    els = data(n, seed=11)
    lag = lateness(els)
    plain = with_plain_ctis(els, lag)
    ectis = with_ectis(els)
    p_el, p_tick, p_s, p_out = measure(plain, els)
    e_el, e_tick, e_s, e_out = measure(ectis, els)
    assert cht(p_out) == cht(e_out), "the two forms must give the same result"
    print(f"one disordered stream: {len(els):,} data elements, lateness up to {lag} ticks; "
          f"{len(p_el)} ranges of {WIDTH} ticks made final")
    print(f"{'form':<26} {'mean el':>8} {'p95 el':>7} {'mean ticks':>11} {'p95 ticks':>10} {'el/s':>9}")
    rows: list[tuple[str, Any, Any, float]] = [
        (f"plain CTIs, lag {lag} (base)", _stats(p_el), _stats(p_tick), len(plain) / p_s),
        ("ECTIs before their data", _stats(e_el), _stats(e_tick), len(ectis) / e_s),
    ]
    for name, (me, pe), (mt, pt), rate in rows:
        print(f"{name:<26} {me:>8.1f} {pe:>7} {mt:>11.1f} {pt:>10} {rate:>9,.0f}")
    base = rows[0][2][0]
    print(f"latency in ticks, ECTIs / plain CTIs: {(rows[1][2][0] / base) if base else 0.0:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
