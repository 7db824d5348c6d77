"""``align`` (SEMANTICS §7, seeds/003 §4.5): output retractions against ``max_delay`` for one disordered stream —
the consistency spectrum's trade of latency for retractions, as a curve.

Workload: one stream of short interval events over 8 groups (``generate``: disorder ``out_of_order``, i.e.
elements up to ~20 ticks late; 30 % speculative inserts later revised, retraction chains; lazy CTIs), fed 8
elements per batch (the window step speculates between batches). The query is a speculating
``tumbling(10)`` ``sum`` per group (``max_delay: 0``) followed by ``align {max_delay: d}``; the baseline,
measured in the same run, is the same window step with no align. For each ``d``: the output retractions (and
their ratio to the baseline's), the output inserts, the mean emission lag (the input watermark when an output
insert goes out, minus its LE: what holding costs in latency), and elements per second. ``"inf"`` is strong
consistency: final output only. Align's watermark moves in window starts (steps of 10 here), so the curve
falls in steps of the window size.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import cht, generate
from udm.sdk import INF

WINDOW = {"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"], "udm": "sum", "input": "v"}
DELAYS: list[Any] = [0, 1, 2, 4, 8, 12, 16, 24, 32, "inf"]
BATCH = 8


def stream(events: int, seed: int) -> list[Element]:
    return generate(seed=seed, events=events, groups=8, disorder="out_of_order", speculation=0.3, chain=2, cti="lazy")


def run(steps: list[dict[str, Any]], els: list[Element]) -> tuple[list[Element], float, float]:
    """(output, seconds, mean emission lag in ticks)."""
    r = QueryRunner(bind(parse_query({"steps": steps})))
    out: list[Element] = []
    lags: list[int] = []
    wm = -(2**63)
    t0 = time.perf_counter()
    for a in range(0, len(els), BATCH):
        chunk = els[a:a + BATCH]
        for e in chunk:
            if isinstance(e, Insert):
                wm = max(wm, e.le)
            elif isinstance(e, Cti) and e.t < INF:
                wm = max(wm, e.t)
        got = r.process_items([(None, e) for e in chunk])
        if not any(isinstance(e, Cti) and e.t >= INF for e in chunk):  # (not the end of input)
            lags += [wm - e.le for e in got if isinstance(e, Insert)]
        out += got
    out += r.finish()
    secs = time.perf_counter() - t0
    return out, secs, (sum(lags) / len(lags) if lags else 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_align", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a shorter stream")
    ap.add_argument("--events", type=int, default=None)
    args = ap.parse_args(argv)
    n = args.events or (500 if args.quick else 2000)
    els = stream(n, seed=27)
    base, base_s, base_lag = run([WINDOW], els)
    base_r = sum(isinstance(e, Retract) for e in base)
    print(f"one disordered stream: {len(els):,} elements, batches of {BATCH}; baseline (window, no align): "
          f"{base_r:,} retractions out, lag {base_lag:.1f} ticks, {len(els) / base_s:,.0f} el/s")
    print(f"{'max_delay':>9} {'retractions':>11} {'vs base':>8} {'inserts':>8} {'lag':>8} {'el/s':>9}")
    want = cht(base)
    for d in DELAYS:
        out, secs, lag = run([WINDOW, {"op": "align", "max_delay": d}], els)
        assert cht(out) == want, f"align {d} changed the CHT"
        n_r = sum(isinstance(e, Retract) for e in out)
        n_i = sum(isinstance(e, Insert) for e in out)
        ratio = n_r / base_r if base_r else 0.0
        print(f"{d!s:>9} {n_r:>11,} {ratio:>8.2f} {n_i:>8,} {lag:>8.1f} {len(els) / secs:>9,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
