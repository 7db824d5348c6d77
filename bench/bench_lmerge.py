"""``lmerge`` (seeds/001 §VI.C): memory and throughput against the number of inputs per algorithm (the paper's
Fig. 2 and 3), and output size against disorder with and without LMerge (Fig. 4), printed next to the shapes
the paper reports.

Workload (the paper's generator, scaled down): events with an integer field in [0, 400] and a 100-byte string,
strictly increasing LE (gaps 1–20 ticks), lifetimes keeping ~1000 events active, a CTI after ~1 % of the
elements (``--events`` per input). Fig. 2/3 use the ordered insert-only stream (every algorithm is valid), fed
as 2–10 copies (``--inputs``) with other ids, copy ``i`` lagging ``5 * i`` elements behind the first, fed in
arrival order through `QueryRunner.process_interleaved` (one element per call: the copies take turns element
by element); the baseline measured in the same run is a plain ``union`` query over the same inputs (the
cheapest multi-input operator: renames ids and passes everything on). Throughput is elements per CPU-second of
this process (a shared machine's load inflates CPU time far less than wall time). Memory, sampled every 2000
elements (peak): the events the operator holds (`QueryRunner.state_size` ``held``) and the engine's snapshot
bytes (`QueryRunner.snapshot`) beyond the union query's at the same point: what lmerge keeps that a union does
not (the input gates' live events, the same for both, cancel out).

Fig. 4: a sub-query producing retractions (a speculative tumbling count per ``k % 10`` over a disordered
copy of the stream) runs as two replicas, each over its own disordered copy fed one element per call
(`QueryRunner.process`: a stream arriving element by element, so speculation shows; a whole input in one
batch would give final answers only); "without LMerge" is one replica's output (inserts + retractions),
"with LMerge" what the R3 merge of both outputs emits (`QueryRunner.run_all`; `QueryRunner.chattiness`).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from typing import Any

from bench.machine import load_text
from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.sdk import INF

ALGORITHMS = ("R0", "R1", "R2", "R3", "R4")


def events(n: int, seed: int) -> list[tuple[int, int, dict[str, Any]]]:
    rng = random.Random(seed)
    out = []
    le = 0
    for i in range(n):
        le += rng.randint(1, 20)
        out.append((le, le + rng.randint(1, 20_000), {"k": rng.randint(0, 400), "s": f"{i:08d}" + "x" * 92}))
    return out


def ordered_copy(evs: Sequence[tuple[int, int, dict[str, Any]]], copy: int, seed: int) -> list[Element]:
    rng = random.Random(f"{seed}:{copy}")
    out: list[Element] = []
    for i, (le, re, p) in enumerate(evs):
        out.append(Insert(f"c{copy}e{i}", le, re, p))
        if rng.random() < 0.01:
            out.append(Cti(le + 1))
    out.append(Cti(INF))
    return out


def disordered_copy(evs: Sequence[tuple[int, int, dict[str, Any]]], disorder: float, seed: int) -> list[Element]:
    """Arrival order with a fraction ``disorder`` of the events moved back up to 50 places; a CTI (the
    smallest LE still to come) after ~1 % of the elements."""
    rng = random.Random(seed)
    keyed = [(i - (rng.randint(1, 50) if rng.random() < disorder else 0) + rng.random() * 0.5, i)
             for i in range(len(evs))]
    order = [i for _, i in sorted(keyed)]
    suffix_min = [INF] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        suffix_min[j] = min(suffix_min[j + 1], evs[order[j]][0])
    out: list[Element] = []
    last = -1
    for j, i in enumerate(order):
        le, re, p = evs[i]
        out.append(Insert(f"e{i}", le, re, p))
        t = suffix_min[j + 1]
        if rng.random() < 0.01 and last < t < INF:
            out.append(Cti(t))
            last = t
    out.append(Cti(INF))
    return out


def interleave_lagged(copies: Sequence[Sequence[Element]], lag: int) -> list[tuple[str, None, Element]]:
    """Copy ``i`` (input ``i<i>``) runs ``lag * i`` elements behind copy 0: `process_interleaved`'s items."""
    feed: list[tuple[float, int, Element]] = []
    for c, stream in enumerate(copies):
        feed.extend((j + lag * c + c / 100, c, el) for j, el in enumerate(stream))
    feed.sort(key=lambda x: x[0])
    return [(f"i{c}", None, el) for _, c, el in feed]


SAMPLE = 2000


def drive(bound: Any, feed: Sequence[tuple[str, None, Element]], sample: bool
          ) -> tuple[float, list[int], int, int]:
    """CPU seconds, snapshot bytes at every sample, peak events held by the operators, elements out."""
    runner = QueryRunner(bound)
    snaps: list[int] = []
    rows = out = 0
    step = SAMPLE if sample else len(feed)
    t0 = time.process_time()
    for a in range(0, len(feed), step):
        out += len(runner.process_interleaved(feed[a:a + step]))
        if sample:
            snaps.append(len(runner.snapshot()))
            rows = max(rows, runner.state_size()["held"])
    out += len(runner.finish())
    return time.process_time() - t0, snaps, rows, out


def _bound(names: list[str], op: dict[str, Any]) -> Any:
    return bind(parse_query({"inputs": {n: {} for n in names}, "steps": [{"id": "m", "from": names, **op}]}))


def fig_2_3(n_events: int, widths: Sequence[int]) -> None:
    evs = events(n_events, 1)
    print(f"Fig. 2/3: ordered insert-only stream, {n_events:,} events per input, copies lagging 5 elements each")
    print(f"{'inputs':>6} {'alg':>5} {'el/CPU-s':>11} {'vs union':>9} {'state KB over union':>20} {'peak rows':>9} "
          f"{'out':>7}")
    for n in widths:
        copies = [ordered_copy(evs, c, 1) for c in range(n)]
        feed = interleave_lagged(copies, 5)
        names = [f"i{c}" for c in range(n)]
        union = _bound(names, {"op": "union"})
        drive(union, feed[:SAMPLE], sample=False)  # one-time imports and caches outside the figures
        secs, _, _, out = drive(union, feed, sample=False)
        union_rate = len(feed) / secs
        _, union_snaps, rows, _ = drive(union, feed, sample=True)
        print(f"{n:>6} {'union':>5} {union_rate:>11,.0f} {1:>8.2f}x {0:>20,.1f} {rows:>9,} {out:>7,}")
        for alg in ALGORITHMS:
            bq = _bound(names, {"op": "lmerge", "algorithm": alg})
            secs, _, _, out = drive(bq, feed, sample=False)
            rate = len(feed) / secs
            _, snaps, rows, _ = drive(bq, feed, sample=True)
            extra = max(a - b for a, b in zip(snaps, union_snaps, strict=True))
            print(f"{n:>6} {alg:>5} {rate:>11,.0f} {rate / union_rate:>8.2f}x {extra / 1024:>20,.1f} "
                  f"{rows:>9,} {out:>7,}")
    print("paper: Fig. 2 memory — R0, R1 negligible, R2 slightly higher (rows at the largest LE), R3 (in2t) a")
    print("       little more, almost independent of the number of inputs (payloads shared); R4 like R3.")
    print("paper: Fig. 3 throughput — the simpler the algorithm, the higher (R0 > R1 > R2 > R3 > R4).")


def fig_4(n_events: int, disorders: Sequence[float]) -> None:
    evs = events(n_events, 2)
    sub = bind(parse_query({"steps": [
        {"op": "map", "udf": "in_range", "args": {"field": "k"}, "params": {"lo": 0, "hi": 200}, "as": "low"},
        {"op": "window", "window": {"type": "tumbling", "size": 200}, "group_by": ["low"], "udm": "count",
         "as": "n"}]}))
    print(f"\nFig. 4: output size vs disorder, {n_events:,} events, speculative tumbling count, two replicas")
    print(f"{'disorder':>8} {'without: ins':>12} {'retr':>7} {'with LMerge: ins':>16} {'retr':>7} {'ratio':>6}")
    for d in disorders:
        outs = []
        for r in range(2):
            runner = QueryRunner(sub)
            outs.append([o for el in disordered_copy(evs, d, 100 + r) for o in runner.process(el)] + runner.finish())
        merged = QueryRunner(_bound(["r0", "r1"], {"op": "lmerge", "algorithm": "R3"}))
        merged.run_all({"r0": outs[0], "r1": outs[1]})
        c = merged.chattiness()["m"]
        w_ins = sum(isinstance(e, Insert) for e in outs[0])
        w_ret = sum(isinstance(e, Retract) for e in outs[0])
        m_ret = c["partial_retractions_out"] + c["full_retractions_out"]
        ratio = (c["inserts_out"] + m_ret) / max(1, w_ins + w_ret)
        print(f"{d:>8.0%} {w_ins:>12,} {w_ret:>7,} {c['inserts_out']:>16,} {m_ret:>7,} {ratio:>6.2f}")
    print("paper: Fig. 4 — without LMerge the adjusts grow steeply with disorder; LMerge's output policy keeps")
    print("       them low (it emits no intermediate adjusts that are absent from the final TDB).")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_lmerge", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs (a short smoke run)")
    ap.add_argument("--events", type=int, default=None, help="events per input (default 20,000; --quick 3,000)")
    ap.add_argument("--inputs", default=None, help="comma list of input counts (default 2,4,6,8,10; --quick 2,4)")
    args = ap.parse_args(argv)
    n = args.events or (3_000 if args.quick else 20_000)
    widths = [int(x) for x in args.inputs.split(",")] if args.inputs else [2, 4] if args.quick else [2, 4, 6, 8, 10]
    print(f"lmerge, QueryRunner in process, CPU time; {load_text()}", flush=True)
    fig_2_3(n, widths)
    fig_4(n, (0.0, 0.2, 0.5) if args.quick else (0.0, 0.1, 0.2, 0.4, 0.6, 0.8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
