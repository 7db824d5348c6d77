"""Cumulate windows and running aggregates (issue 28), end to end through the local engine.

Cumulate: ``cumulate(size 86,400, step 60)`` ("so far today, every minute") against a step of 3,600 over
the same events, measured in the same run: µs per input event through `QueryRunner.process_batch` on
`ElementBatch` chunks (no JSON reading or writing; the query bound as ``udm run`` binds it), `finish`
included. A window extends the one before it by one pane, so the UDA work per event is the same whether a
day has 1,440 running windows or 24; what step 60 adds is the work per window (its value, its output
event, its pane), spread over the events of a minute. The ratio step 60 / step 3,600 is the figure
(target <= 1.5), for ``sum`` (a UDA with ``remove``) and ``max`` (merge-only), at two densities: the
``--events`` (default 1 M) point events spread over one day (about 11.6 a tick, 694 a minute) and over
``--days`` days (default 35: about 20 a minute). ``--groups`` groups (default 1; event ``i`` goes to group
``i % groups``); a CTI after every 1,000 events at the next event's LE (nothing is late).

Running aggregates (ESL ``ROWS UNBOUNDED PRECEDING``, the query-writer guide's recipe): ``rows{n: 10**12,
partial: true}``, one window per event holding every event before it, at ``--events / 10`` and ``--events``
events (one day): µs per event and the ratio between the two sizes (flat: O(1) UDA calls per event).

Every cell's output (its final CHT) is compared with an independent numpy computation of SEMANTICS §3/§9
over the same events (prefix sums, per-period running maxima); a wrong cell prints ``WRONG`` and the bench
exits 1. Memory: the largest `QueryRunner.state_size` seen between chunks (``held``: what the operators hold)
and the child's resident-memory growth (MiB; the output's CHT, one tuple per output row, is kept for the
check). Each cell runs in a forked child. Printed, never asserted.

``python -m bench.bench_cumulate [--quick] [--events N] [--days D] [--groups G] [--udas sum,max]
[--no-running]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from bench.bench_sliding import Stream, point_table
from bench.machine import load_text, rss
from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import quiet_gc
from udm.host.temporal.elements import Insert, Retract

SIZE = 86_400
STEP, BASE_STEP = 60, 3_600
CTI_EVERY = 1_000
CHUNK = 10_000  # table rows per process_batch call
RUNNING_N = 10**12
FLAT_TARGET = 1.5


def make_stream(n: int, groups: int, ticks: int, seed: int = 7) -> Stream:
    """``n`` point events spread evenly over ``[0, ticks)`` (several may share a tick) with an int ``v``,
    event ``i`` in group ``i % groups``, and a CTI after every `CTI_EVERY` events at the next event's LE."""
    rng = np.random.default_rng(seed)
    pos = np.arange(n)
    le = (pos * ticks) // n
    v = rng.integers(-1000, 1000, n)
    g = pos % groups
    after = pos[(pos + 1) % CTI_EVERY == 0]
    after = after[after < n - 1]
    table, event_rows = point_table(le, v, g, groups, after, le[after + 1])
    return Stream(le, v, g, table, event_rows, groups, after + np.arange(1, len(after) + 1), CTI_EVERY)


def query_spec(window: dict[str, Any], uda: str, grouped: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"op": "window", "window": window, "udm": uda, "input": "v"}
    if grouped:
        step["group_by"] = ["g"]
    return {"steps": [step]}


def cumulate_window(step: int) -> dict[str, Any]:
    return {"type": "cumulate", "size": SIZE, "step": step}


RUNNING = {"type": "rows", "n": RUNNING_N, "partial": True}


# ---- the independent answer ------------------------------------------------------------------------------
def expected(window: dict[str, Any], uda: str, s: Stream) -> list[tuple[Any, ...]]:
    """Every output window as sorted (group, le, re, value), from SEMANTICS §3 (cumulate: each period's
    windows [P, P + i*step), members the point events with LE inside) or §9 (rows, unbounded and partial:
    the window of row k is [LE(row 1), LE(row k) + 1) over rows 1..k)."""
    out: list[tuple[Any, ...]] = []
    for grp in range(s.groups):
        sel = s.g == grp
        le, v = s.le[sel], s.v[sel]
        if not len(le):
            continue
        key = f"g{grp}" if s.groups > 1 else None
        if window["type"] == "rows":  # (rows of equal LE in canonical order: by the value's JSON text)
            order = sorted(range(len(le)), key=lambda i: (int(le[i]), str(int(v[i]))))
            run = np.cumsum(v[order]) if uda == "sum" else np.maximum.accumulate(v[order])
            out += [(key, int(le[0]), int(x) + 1, int(y)) for x, y in zip(le[order], run, strict=True)]
            continue
        step = window["step"]
        for p in np.unique(le // SIZE):
            start = int(p) * SIZE
            a, b = np.searchsorted(le, start), np.searchsorted(le, start + SIZE)
            pv = v[a:b]
            run = np.cumsum(pv) if uda == "sum" else np.maximum.accumulate(pv)
            ends = start + step * np.arange(1, SIZE // step + 1)
            hi = np.searchsorted(le[a:b], ends)  # members: LE < W.RE (and >= the period start)
            has = hi > 0
            out += [(key, start, int(e), int(run[h - 1])) for e, h in zip(ends[has], hi[has], strict=True)]
    return sorted(out, key=lambda r: (str(r[0]), r[1], r[2], r[3]))


class Observed:
    """The output's CHT, kept as it comes (by output id), without keeping the output elements."""

    def __init__(self, uda: str) -> None:
        self.uda = uda
        self.live: dict[str, tuple[Any, int, int, Any]] = {}

    def take(self, out: list[Any]) -> None:
        live, uda = self.live, self.uda
        for el in out:
            if isinstance(el, Insert):
                live[el.id] = (el.payload.get("g"), el.le, el.re, el.payload[uda])
            elif isinstance(el, Retract):
                if el.re_new <= el.le:
                    del live[el.id]
                else:
                    g, le, _, val = live[el.id]
                    live[el.id] = (g, le, el.re_new, val)

    def rows(self) -> list[tuple[Any, ...]]:
        """The final CHT as sorted (group, le, re, value)."""
        return sorted(self.live.values(), key=lambda r: (str(r[0]), r[1], r[2], r[3]))


# ---- one cell ----------------------------------------------------------------------------------------------
@dataclass
class Cell:
    us: float  # µs per event, process_batch and finish
    ok: bool
    windows: int
    state: dict[str, int]


def _cell_child(window: dict[str, Any], uda: str, s: Stream, send: Connection) -> None:
    r = QueryRunner(bind(parse_query(query_spec(window, uda, s.groups > 1))))
    seen = Observed(uda)
    state: dict[str, int] = {}
    rss0 = rss()
    spent = 0.0
    table = s.table
    with quiet_gc():
        for a in range(0, table.num_rows, CHUNK):
            batch = ElementBatch.from_table(table.slice(a, CHUNK))
            t0 = time.perf_counter()
            out = r.process_batch(batch)
            spent += time.perf_counter() - t0
            seen.take(out)
            for k, x in (*r.state_size().items(), ("rss_mib", (rss() - rss0) >> 20)):
                state[k] = max(state.get(k, 0), x)
        t0 = time.perf_counter()
        out = r.finish()
        spent += time.perf_counter() - t0
        seen.take(out)
    got = seen.rows()
    send.send(Cell(spent / len(s.le) * 1e6, got == expected(window, uda, s), len(got), state))


def run_cell(window: dict[str, Any], uda: str, s: Stream) -> Cell:
    """One cell in a forked child (it inherits the stream; its memory growth is its own)."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_cell_child, args=(window, uda, s, send), daemon=True)
    child.start()
    send.close()
    try:
        cell: Cell = recv.recv()
    except EOFError:
        child.join()
        raise SystemExit(f"the cell {window} {uda} died (exit code {child.exitcode})") from None
    child.join()
    return cell


def _line(label: str, cell: Cell) -> str:
    st = cell.state
    verdict = "ok" if cell.ok else "WRONG"
    return (f"  {label:<30} {cell.us:8.2f} µs/event  {cell.windows:>9,} windows  state: held {st.get('held', 0):>9,}, "
            f"+{st.get('rss_mib', 0)} MiB  [{verdict}]")


def _cumulate_rows(n: int, groups: int, days: int, udas: list[str]) -> int:
    """The two steps side by side over ``n`` events spread over ``days`` periods; 1 when a cell is wrong."""
    per_min = n / (days * SIZE / STEP)
    print(f"cumulate(size {SIZE:,}, step {STEP}) against step {BASE_STEP:,}: {n:,} point events over {days} "
          f"day(s) ({per_min:,.0f} a minute), {groups} group(s), CTI every {CTI_EVERY:,}; {load_text()}",
          flush=True)
    s = make_stream(n, groups, days * SIZE)
    rc = 0
    for uda in udas:
        fine = run_cell(cumulate_window(STEP), uda, s)
        base = run_cell(cumulate_window(BASE_STEP), uda, s)
        print(_line(f"{uda}, step {STEP}", fine), flush=True)
        print(_line(f"{uda}, step {BASE_STEP:,} (baseline)", base), flush=True)
        ratio = fine.us / base.us
        print(f"  {uda}: step {STEP} / step {BASE_STEP:,} = {ratio:.2f}x per event "
              f"(target <= {FLAT_TARGET}: {'met' if ratio <= FLAT_TARGET else 'MISSED'})", flush=True)
        rc |= int(not (fine.ok and base.ok))
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_cumulate", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 events")
    ap.add_argument("--events", type=int, default=None, help="events per cell (default 1,000,000)")
    ap.add_argument("--days", type=int, default=35, help="the second density: the events over this many days")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--udas", default="sum,max")
    ap.add_argument("--no-running", action="store_true", help="skip the running-aggregate rows")
    args = ap.parse_args(argv)
    n = args.events or (100_000 if args.quick else 1_000_000)
    udas = [u for u in args.udas.split(",") if u]
    rc = 0
    for days in dict.fromkeys((1, args.days)):
        rc |= _cumulate_rows(n, args.groups, days, udas)
        print(flush=True)
    if not args.no_running:
        small = max(n // 10, 1)
        print(f"running aggregate: rows(n {RUNNING_N:.0e}, partial) at {small:,} and {n:,} events over a day "
              f"(ESL ROWS UNBOUNDED PRECEDING); {load_text()}", flush=True)
        s_small, s = make_stream(small, args.groups, SIZE), make_stream(n, args.groups, SIZE)
        for uda in udas:
            a = run_cell(RUNNING, uda, s_small)
            b = run_cell(RUNNING, uda, s)
            print(_line(f"{uda}, {small:,} events", a), flush=True)
            print(_line(f"{uda}, {n:,} events", b), flush=True)
            print(f"  {uda}: {n:,} / {small:,} events = {b.us / a.us:.2f}x per event", flush=True)
            rc |= int(not (a.ok and b.ok))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
