"""Sliding windows as the window grows (seeds/004, ESL Fig. 4), end to end through the local engine.

ESL's claim: with delta computation the cost per tuple of a sliding-window aggregate stays flat as the
window grows. This bench measures CPU µs per input event (the child's CPU time, which a loaded machine
inflates far less than wall time), through `QueryRunner.process_batch` on
`ElementBatch` chunks (no JSON reading or writing; the query bound as ``udm run`` binds it), for

- ``hopping``: ``hopping(size, hop 1)``; ``count_by_start``: ``count_by_start(n = size)``;
  ``rows``: ``rows(n = size)``; ``range``: ``alter_lifetime {le: keep, duration: {const: size}}`` then a
  ``snapshot`` window (SQL's ``RANGE size PRECEDING``),
- at sizes 10, 100, 1,000 and 10,000, each with ``sum``, ``avg``, ``count``, ``min`` and ``max``,
- over in-order point events ``[t, t + 1)`` with ``{"v"}`` (one group), and the same with ``--groups``
  groups (``group_by g``; every tick carries one event per group, so each group sees the one-group
  stream and a window the same number of events),
- then disordered (one group, one ``--disorder-size``): each event's LE up to ``d`` ticks before its
  arrival position, d = 1, 10, 100, 1,000.

Inputs hold ``max(2 * size + 2000, 10000)`` ticks, so a window fills and then slides. A CTI follows every
100 ticks' events (in order) or every 100 events (disordered) at the smallest LE still to come, so nothing
is late and windows are released as the stream goes. The figure is CPU µs per event over the *slide*, the
events after the first ``size`` ticks (the windows have filled), the regime ESL's curve is about. Each
cell runs in a forked child; the fill gets 4 time budgets, then the slide one (``--budget`` seconds of
`process_batch`; chunks start at one event and grow with the measured rate). A cell that runs out is
ended with `finish` and shows ``+``; one whose fill did not end within its budget shows its fill
figure with ``*``. Budgets are wall time (they bound how long the bench takes). A chunk that overruns the
budget by far is stopped: the cell then shows a lower bound (``>``: the CPU time of the chunks before it
plus the wall time until it was stopped, over every event fed, that chunk's included) and cannot be
checked. `finish` is
not in the figure (a stream does not end).

Every cell's output (its final CHT, over the events it fed) is compared with an independent computation:
numpy prefix sums for sum/count/avg and a sparse table for min/max over the members each window of the
spec has (SEMANTICS §3 and §9). A wrong cell prints ``WRONG`` and the bench exits 1: no speed is reported
for wrong answers without saying so. Memory: the largest `QueryRunner.state_size` (events, windows) and
resident-memory growth of the child (MiB) seen between chunks, at the largest size.

Printed per row: the ratio size 10,000 / size 10 (target <= 1.5, issue 26), and for disorder the growth
from d = 1 to d = 1,000 beside log2(d + 2)'s (target: no faster than log d); ``-`` where either figure
is not a slide's. Printed, never asserted.

``--aggregators`` adds (and ``--aggregators-only`` runs only) ns per operation of the ordered aggregators
(`udm.host.engine.aggregation`) against the sorted-fold baseline, in order and out of order.

``python -m bench.bench_sliding [--quick] [--rows hopping,rows] [--sizes 10,1000] [--udas sum,min]
[--budget 0.25] [--groups 10] [--disorder-size 1000] [--distances 1,10,100,1000] [--no-disorder]``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import pyarrow as pa

from bench.machine import rss
from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import quiet_gc
from udm.host.testing.cht import cht

ROWS = ("hopping", "count_by_start", "rows", "range")
UDAS = ("sum", "avg", "count", "min", "max")
SIZES = (10, 100, 1000, 10_000)
DISTANCES = (1, 10, 100, 1000)
CTI_EVERY = 100
FLAT_TARGET = 1.5
FILL_BUDGETS = 4  # the fill's time budget, in slide budgets


# ---- queries and inputs ----------------------------------------------------------------------------------
def query_spec(row: str, size: int, uda: str, grouped: bool) -> dict[str, Any]:
    window = {"hopping": {"type": "hopping", "size": size, "hop": 1}, "count_by_start": {"type": "count_by_start",
              "n": size}, "rows": {"type": "rows", "n": size}, "range": {"type": "snapshot"}}[row]
    step: dict[str, Any] = {"op": "window", "window": window, "udm": uda, "input": "v"}
    if grouped:
        step["group_by"] = ["g"]
    pre = [{"op": "alter_lifetime", "le": "keep", "duration": {"const": size}}] if row == "range" else []
    return {"steps": [*pre, step]}


@dataclass
class Stream:
    """Point events in arrival order (``le``, ``v``, group ``g``) and the batch table with CTIs between."""

    le: np.ndarray
    v: np.ndarray
    g: np.ndarray
    table: pa.Table
    event_rows: np.ndarray  # table row of each event
    groups: int


def point_table(le: np.ndarray, v: np.ndarray, g: np.ndarray, groups: int, after: np.ndarray, cti_t: np.ndarray
                ) -> tuple[pa.Table, np.ndarray]:
    """The batch table of point events ``[le, le + 1)`` with payload ``{"v"}`` (``{"g", "v"}`` with several
    groups, ``g`` as ``"g<k>"``) and a CTI at ``cti_t[j]`` after event ``after[j]``; and each event's row."""
    n = len(le)
    pos = np.arange(n)
    m = n + len(after)
    event_rows = pos + np.searchsorted(after, pos, side="left")
    is_cti = np.zeros(m, bool)
    is_cti[after + np.arange(1, len(after) + 1)] = True
    col_le = np.zeros(m, np.int64)
    col_le[event_rows] = le
    col_t = np.zeros(m, np.int64)
    col_t[is_cti] = cti_t
    ids = np.full(m, None, object)
    ids[event_rows] = [f"e{i}" for i in range(n)]
    col_v = np.zeros(m, np.int64)
    col_v[event_rows] = v
    names = np.full(m, "", object)
    names[event_rows] = [f"g{k}" for k in g]
    mask = pa.array(is_cti)
    fields = [pa.array(col_v, pa.int64())]
    if groups > 1:
        fields.insert(0, pa.array(names, pa.string()))
    payload = pa.StructArray.from_arrays(fields, names=["g", "v"] if groups > 1 else ["v"], mask=mask)
    table = pa.table({
        "kind": pa.array(np.where(is_cti, "cti", "insert"), pa.string()), "id": pa.array(ids, pa.string()),
        "le": pa.array(col_le, pa.int64(), mask=is_cti), "re": pa.array(col_le + 1, pa.int64(), mask=is_cti),
        "re_new": pa.nulls(m, pa.int64()), "t": pa.array(col_t, pa.int64(), mask=~is_cti), "payload": payload,
        "line": pa.array(np.arange(1, m + 1), pa.int64()), "error": pa.nulls(m, pa.string()),
        "raw": pa.nulls(m, pa.string()),
    })
    return table, event_rows


def make_stream(ticks: int, groups: int, d: int, seed: int = 4) -> Stream:
    """``ticks`` ticks of ``groups`` events each; with ``d > 0`` (one group) each LE is its arrival
    position minus up to ``d``."""
    rng = np.random.default_rng(seed + d)
    n = ticks * groups
    pos = np.arange(n)
    le = pos // groups if d == 0 else np.maximum(0, pos - rng.integers(0, d + 1, n))
    v = rng.integers(0, 1000, n)
    g = pos % groups
    every = CTI_EVERY * groups if d == 0 else CTI_EVERY
    # a CTI after every `every` events, at the smallest LE still to come (nothing is late)
    after = pos[(pos + 1) % every == 0]
    after = after[after < n - 1]
    later_min = np.minimum.accumulate(le[::-1])[::-1]
    table, event_rows = point_table(le, v, g, groups, after, later_min[after + 1])
    return Stream(le, v, g, table, event_rows, groups)


# ---- the independent answer ------------------------------------------------------------------------------
def _range_agg(vals: np.ndarray, lo: np.ndarray, hi: np.ndarray, uda: str) -> np.ndarray:
    """``uda`` over ``vals[lo:hi]`` for every (non-empty) range: prefix sums, or a sparse table of
    min/max over power-of-two spans (two overlapping lookups per range)."""
    cnt = hi - lo
    if uda == "count":
        return cnt
    if uda in ("sum", "avg"):
        pre = np.concatenate(([0], np.cumsum(vals, dtype=np.int64)))
        s = pre[hi] - pre[lo]
        return s if uda == "sum" else s / cnt
    op = np.minimum if uda == "min" else np.maximum
    levels = [vals]
    while (1 << len(levels)) <= max(int(cnt.max(initial=1)), 1):
        prev, half = levels[-1], 1 << (len(levels) - 1)
        levels.append(op(prev[:-half], prev[half:]))
    j = np.floor(np.log2(np.maximum(cnt, 1))).astype(int)
    out = np.empty(len(lo), vals.dtype)
    for k in np.unique(j):
        sel = j == k
        lv = levels[k]
        out[sel] = op(lv[lo[sel]], lv[hi[sel] - (1 << k)])
    return out


def _windows(row: str, size: int, le: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(W.LE, W.RE, first member, end of members) of every non-empty window over one group's sorted LEs."""
    if row == "hopping":  # [k, k + size) for every k; point events are members iff k <= LE < k + size
        ks = np.arange(le[0] - size + 1, le[-1] + 1)
        lo, hi = np.searchsorted(le, ks), np.searchsorted(le, ks + size)
        wle, wre = ks, ks + size
    elif row == "count_by_start":  # distinct LEs s1 < s2 ...: [s_i, s_(i+n-1) + 1), members s_i <= LE <= ...
        u = np.unique(le)
        i = np.arange(max(len(u) - size + 1, 0))
        a, b = u[i], u[i + size - 1]
        lo, hi = np.searchsorted(le, a), np.searchsorted(le, b, side="right")
        wle, wre = a, b + 1
    elif row == "rows":  # rows k-n+1..k in canonical order: [LE(first), LE(k) + 1)
        k = np.arange(size, len(le) + 1)
        lo, hi = k - size, k
        wle, wre = le[lo], le[np.maximum(hi - 1, 0)] + 1
    else:  # range: lifetimes [LE, LE + size); snapshot windows between consecutive endpoints
        e = np.unique(np.concatenate((le, le + size)))
        wle, wre = e[:-1], e[1:]
        lo, hi = np.searchsorted(le, wle - size, side="right"), np.searchsorted(le, wle, side="right")
    keep = hi > lo
    return wle[keep], wre[keep], lo[keep], hi[keep]


def expected(row: str, size: int, uda: str, s: Stream, n: int) -> list[tuple[Any, ...]]:
    """Every output window of the query over the first ``n`` events, as sorted (group, le, re, value)."""
    out: list[tuple[Any, ...]] = []
    for grp in range(s.groups):
        sel = np.flatnonzero(s.g[:n] == grp)
        if not len(sel):
            continue
        # canonical order (SEMANTICS §5): (LE, RE), ties by the canonical JSON text of the UDM's input (v)
        order = sel[np.argsort(s.le[sel], kind="stable")]
        if np.any(np.diff(s.le[order]) == 0):
            order = np.array(sorted(order.tolist(), key=lambda i: (int(s.le[i]), json.dumps(int(s.v[i])))),
                             dtype=np.int64)
        le, vals = s.le[order], s.v[order]
        wle, wre, lo, hi = _windows(row, size, le)
        val = _range_agg(vals, lo, hi, uda)
        name = f"g{grp}" if s.groups > 1 else None
        out += zip([name] * len(wle), wle.tolist(), wre.tolist(), val.tolist(), strict=True)
    return sorted(out)


def observed(out: list[Any], uda: str) -> list[tuple[Any, ...]]:
    return sorted((p.get("g"), le, re, p[uda]) for le, re, p in cht(out).events())


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    return len(a) == len(b) and all(x[:3] == y[:3] and math.isclose(x[3], y[3], rel_tol=1e-9, abs_tol=1e-9)
                                    for x, y in zip(a, b, strict=True))


# ---- one cell ----------------------------------------------------------------------------------------------
@dataclass
class Cell:
    us: float  # CPU µs per event: over the slide when any of it ran, else over the fill; a lower bound when ``low``
    slid: bool  # the figure is over the slide (events after the windows filled)
    complete: bool  # every event of the phase measured was fed
    ok: bool | None  # None: not checked (the child was stopped before it could end the run)
    state: dict[str, int] = field(default_factory=dict)
    low: bool = False  # stopped in the middle of a chunk

    def text(self) -> str:
        if self.ok is False:
            return "WRONG"
        mark = ("" if self.complete else "+") if self.slid else "*"
        fig = f"{self.us:,.1f}" if self.us < 1000 else f"{self.us:,.0f}"
        return (">" if self.low else "") + fig + mark


def _fill_row(size: int, s: Stream) -> int:
    """The table row of the first event after the first ``size`` ticks: the windows have filled there."""
    return int(s.event_rows[min((size + 1) * s.groups, len(s.le) - 1)])


def _cell_child(row: str, size: int, uda: str, s: Stream, budget: float, send: Connection) -> None:
    """Feed the stream in chunks, the fill and then the slide each until its budget is spent, then finish
    and check; report after every chunk."""
    r = QueryRunner(bind(parse_query(query_spec(row, size, uda, s.groups > 1))))
    table, rows_total = s.table, s.table.num_rows
    fill_row = _fill_row(size, s)
    out: list[Any] = []
    state: dict[str, int] = {}
    rss0 = rss()
    spent = [0.0, 0.0]  # wall seconds of process_batch in the fill, in the slide (the budgets)
    cpu = [0.0, 0.0]  # CPU seconds of the same (the figure)
    budgets = (FILL_BUDGETS * budget, budget)
    done, chunk = 0, 1
    with quiet_gc():
        while done < rows_total:
            phase = int(done >= fill_row)
            if spent[phase] >= budgets[phase]:
                break
            if done < fill_row < done + chunk:  # no chunk runs across the fill: its rate would mislead
                chunk = fill_row - done
            batch = ElementBatch.from_table(table.slice(done, chunk))
            t0, c0 = time.perf_counter(), time.process_time()
            out += r.process_batch(batch)
            cpu[phase] += time.process_time() - c0
            dt = time.perf_counter() - t0
            spent[phase] += dt
            done += min(chunk, rows_total - done)
            for k, x in (*r.state_size().items(), ("rss_mib", (rss() - rss0) >> 20)):
                state[k] = max(state.get(k, 0), x)
            # the next chunk: about half what is left of the phase's budget at the rate seen, at most twice
            # the last; one event again when the slide starts
            rate = chunk / max(dt, 1e-6)
            left = budgets[phase] - spent[phase]
            chunk = 1 if done == fill_row else int(min(max(rate * left / 2, 1), 2 * chunk, 65_536))
            send.send(("chunk", done, tuple(spent), tuple(cpu), state, chunk))
        out += r.finish()
    fed = int(np.searchsorted(s.event_rows, done))
    send.send(("checked", same(observed(out, uda), expected(row, size, uda, s, fed))))


def run_cell(row: str, size: int, uda: str, s: Stream, budget: float) -> Cell:
    """One cell in a forked child (it inherits the stream): a chunk can take far longer than the budget
    on a slow engine, and only a process can be stopped in the middle of one. The fill gets 4 budgets,
    the slide one, each plus twice the budget again (at least 1 s) to end its last chunk;
    the end gets 5 budgets (at least 5 s) to finish and check. A child stopped in the middle of a chunk
    is reported as a lower bound (``>``): the time until it was stopped over every event of that chunk."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_cell_child, args=(row, size, uda, s, budget, send), daemon=True)
    rows_total = s.table.num_rows
    fill_row = _fill_row(size, s)
    grace = max(2 * budget, 1.0)
    t0 = time.monotonic()
    child.start()
    send.close()
    done, spent, cpu, state, ok, chunk = 0, (0.0, 0.0), (0.0, 0.0), {}, None, 1
    deadline, last, finishing = t0 + FILL_BUDGETS * budget + grace, t0, False
    try:
        while True:
            if not recv.poll(max(deadline - time.monotonic(), 0)):
                break  # past the deadline: stopped below
            try:
                msg = recv.recv()
            except EOFError:
                break  # the child died (its exit code is reported below)
            if msg[0] != "chunk":
                ok = msg[1]
                break
            slid_before = done >= fill_row
            _, done, spent, cpu, state, chunk = msg
            last = time.monotonic()
            phase = int(done >= fill_row)
            if done == rows_total or spent[phase] >= (budget if phase else FILL_BUDGETS * budget):
                finishing = True
                deadline = last + max(5 * budget, 5.0)
            elif phase and not slid_before:
                deadline = last + budget + grace
    finally:
        stopped = time.monotonic()
        if child.is_alive():
            child.kill()
        child.join()
    if ok is None and child.exitcode not in (0, -9):
        raise RuntimeError(f"the {row} {uda} cell at size {size} failed in its child (exit code {child.exitcode})")
    low = ok is None and not finishing  # stopped in the middle of a chunk
    end = min(done + chunk, rows_total) if low else done
    slid = end > fill_row
    first, last_row = (fill_row, end) if slid else (0, end)
    events = int(np.searchsorted(s.event_rows, last_row) - np.searchsorted(s.event_rows, first))
    secs = cpu[int(slid)] + (stopped - last if low else 0.0)
    complete = done == rows_total
    return Cell(secs / max(events, 1) * 1e6, slid, complete, ok, state, low)


# ---- tables ------------------------------------------------------------------------------------------------
def _ticks(size: int) -> int:
    return max(2 * size + 2000, 10_000)


def _ratio(small: Cell, big: Cell) -> str:
    """``big``'s figure over ``small``'s, when both measured the slide (a fill figure is another regime);
    ``>`` when ``big``'s is a lower bound."""
    if not (small.slid and big.slid and small.us) or small.low or small.ok is False or big.ok is False:
        return "-"
    return f"{'>' if big.low else ''}{big.us / small.us:,.2f}x"


def _verdict(labels: list[str], cells: list[Cell]) -> tuple[str, bool]:
    """The check column: ok, WRONG at the cells whose output differed, unchecked at those stopped before
    they could end their run; and whether none was wrong."""
    wrong = [lb for lb, c in zip(labels, cells, strict=True) if c.ok is False]
    unchecked = [lb for lb, c in zip(labels, cells, strict=True) if c.ok is None]
    parts = ([f"WRONG at {','.join(wrong)}"] if wrong else []) + ([f"unchecked at {','.join(unchecked)}"]
                                                                   if unchecked else [])
    return "; ".join(parts) or "ok", not wrong


def in_order(rows: list[str], sizes: list[int], udas: list[str], groups: int, budget: float) -> bool:
    ok = True
    streams = {size: make_stream(_ticks(size), groups, 0) for size in sizes}
    label = "1 group" if groups == 1 else f"{groups} groups (one event per group per tick)"
    print(f"\nin order, {label}: CPU µs per event of the slide at window size  (+ budget ran out, * fill only, "
          f"> lower bound)", flush=True)
    print(f"{'row':<15} {'uda':<6}" + "".join(f"{s:>12,}" for s in sizes)
          + f"{'ratio':>9} {'state at ' + format(sizes[-1], ','):>30}  check", flush=True)
    for row in rows:
        for uda in udas:
            cells = [run_cell(row, size, uda, streams[size], budget) for size in sizes]
            ratio = _ratio(cells[0], cells[-1])
            st = cells[-1].state
            held = f"{st.get('events', 0):,} ev/{st.get('windows', 0):,} win/{st.get('rss_mib', 0):,} MiB"
            verdict, good = _verdict([f"{sz:,}" for sz in sizes], cells)
            ok &= good
            print(f"{row:<15} {uda:<6}" + "".join(f"{c.text():>12}" for c in cells)
                  + f"{ratio:>9} {held:>30}  {verdict}", flush=True)
    if len(sizes) > 1:
        print(f"ratio: µs per event at size {sizes[-1]:,} / size {sizes[0]:,} (target <= {FLAT_TARGET})")
    return ok


def disordered(rows: list[str], size: int, udas: list[str], distances: list[int], budget: float) -> bool:
    ok = True
    streams = {d: make_stream(_ticks(size), 1, d) for d in distances}
    print(f"\ndisordered, 1 group, size {size:,}: CPU µs per event of the slide at disorder d (LE up to d ticks early)",
          flush=True)
    print(f"{'row':<15} {'uda':<6}" + "".join(f"{'d=' + str(d):>12}" for d in distances)
          + f"{'growth':>9} {'log2 growth':>12}  check", flush=True)
    lg = math.log2(distances[-1] + 2) / math.log2(distances[0] + 2)
    for row in rows:
        for uda in udas:
            cells = [run_cell(row, size, uda, streams[d], budget) for d in distances]
            growth = _ratio(cells[0], cells[-1])
            verdict, good = _verdict([f"d={d}" for d in distances], cells)
            ok &= good
            print(f"{row:<15} {uda:<6}" + "".join(f"{c.text():>12}" for c in cells)
                  + f"{growth:>9} {lg:>11.2f}x  {verdict}", flush=True)
    print(f"growth: µs per event at d={distances[-1]} / d={distances[0]}; log2 growth: "
          f"log2({distances[-1]}+2) / log2({distances[0]}+2) (target: growth no larger)")
    return ok


# ---- the aggregators alone ---------------------------------------------------------------------------------
def _vs_base(base: dict[int, float], col: int, ns: float) -> str:
    """``ns`` with its speed-up over the first figure of its column (the baseline's, which shows bare)."""
    if col not in base:
        base[col] = ns
        return f"{ns:>20,.0f}"
    return f"{ns:>12,.0f} ({base[col] / ns:>5,.0f}x)"


def aggregators(quick: bool) -> None:
    """ns per operation of each ordered aggregator, a UDA-like Python ``merge`` as the combine."""
    from udm.host.engine.aggregation import FingerBTree, SortedFold, TwoStacks

    def merge(a: int, b: int) -> int:  # a Python call, as a UDA's merge is
        return a + b

    makers: dict[str, Callable[[], Any]] = {"SortedFold (baseline)": lambda: SortedFold(merge),
                                            "TwoStacks": lambda: TwoStacks(merge),
                                            "FingerBTree(min_arity=2)": lambda: FingerBTree(merge, 2),
                                            "FingerBTree(min_arity=4)": lambda: FingerBTree(merge, 4)}
    steps = 20_000 if quick else 100_000
    print("\nordered aggregators: ns per slide (insert the youngest + evict_before + query), Python merge",
          flush=True)
    wins = (10, 1000, 10_000)
    print(f"{'aggregator':<26}" + "".join(f"{'window ' + format(w, ','):>20}" for w in wins), flush=True)
    base: dict[int, float] = {}
    for name, make in makers.items():
        figs = []
        for w in wins:
            t = make()
            for i in range(w):  # a full window first: the figure is the slide's
                t.insert(i, 1)
            n = steps if not name.startswith("SortedFold") else max(200, steps * 10 // w)
            t0 = time.perf_counter()
            for i in range(w, w + n):
                t.insert(i, 1)
                t.evict_before(i - w + 1)
                t.query()
            figs.append(_vs_base(base, w, (time.perf_counter() - t0) / n * 1e9))
        print(f"{name:<26}" + "".join(f"{f:>20}" for f in figs), flush=True)
    print("(Nx): speed-up over the baseline at that window", flush=True)
    print("out of order over 100,000 entries: ns per step (insert a new key at distance d from the young end, "
          "query, remove it)", flush=True)
    ds = (1, 10, 100, 1000)
    print(f"{'aggregator':<26}" + "".join(f"{'d=' + str(d):>20}" for d in ds), flush=True)
    rng = random.Random(7)
    base = {}
    for name, make in makers.items():
        figs = []
        for d in ds:
            t = make()
            gap = 1 << 20
            for i in range(100_000):
                t.insert(i * gap, 1)
            # the sorted fold folds 100,000 entries per query; two-stacks refolds its back per change
            n = 20 if not name.startswith("Finger") else (2000 if quick else 10_000)
            keys = [(100_000 - d) * gap - 1 - rng.randrange(gap // 2) for _ in range(n)]
            t0 = time.perf_counter()
            for k in keys:
                t.insert(k, 1)
                t.query()
                t.remove(k)
            figs.append(_vs_base(base, d, (time.perf_counter() - t0) / n * 1e9))
        print(f"{name:<26}" + "".join(f"{f:>20}" for f in figs), flush=True)
    print("(Nx): speed-up over the baseline at that distance (TwoStacks pays a combine per entry it passes)",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_sliding", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 10 and 1,000, sum and min, d = 1 and 100")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma list of window sizes")
    ap.add_argument("--udas", default=",".join(UDAS), help=f"comma list of {', '.join(UDAS)}")
    ap.add_argument("--budget", type=float, default=0.25,
                    help="seconds of process_batch per cell for the slide, 4 times that for the fill (default 0.25)")
    ap.add_argument("--groups", type=int, default=10, help="groups of the grouped variant (default 10; 1: none)")
    ap.add_argument("--disorder-size", type=int, default=1000, help="window size of the disordered runs")
    ap.add_argument("--distances", default=",".join(map(str, DISTANCES)), help="comma list of disorders d")
    ap.add_argument("--no-disorder", action="store_true", help="skip the disordered runs")
    ap.add_argument("--aggregators", action="store_true", help="also time the ordered aggregators alone")
    ap.add_argument("--aggregators-only", action="store_true", help="only time the ordered aggregators")
    args = ap.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    udas = [u for u in args.udas.split(",") if u]
    sizes = [int(x) for x in args.sizes.split(",") if x]
    distances = [int(x) for x in args.distances.split(",") if x]
    budget = args.budget
    if args.quick:
        sizes, udas, distances, budget = [10, 1000], ["sum", "min"], [1, 100], min(budget, 0.3)
    unknown = [x for x in rows if x not in ROWS] + [x for x in udas if x not in UDAS]
    if unknown:
        ap.error(f"unknown row or UDA {unknown[0]!r} (rows: {', '.join(ROWS)}; UDAs: {', '.join(UDAS)})")
    if args.aggregators_only:
        aggregators(args.quick)
        return 0
    print(f"bench_sliding: local engine, QueryRunner.process_batch; budget {budget}s per cell; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus", flush=True)
    t0 = time.perf_counter()
    ok = in_order(rows, sizes, udas, 1, budget)
    if args.groups > 1:
        ok &= in_order(rows, sizes, udas, args.groups, budget)
    if not args.no_disorder:
        ok &= disordered(rows, args.disorder_size, udas, distances, budget)
    if args.aggregators or args.quick:
        aggregators(args.quick)
    print(f"\n{'every cell matched the independent computation' if ok else 'SOME CELLS GAVE WRONG ANSWERS'}; "
          f"{time.perf_counter() - t0:.0f}s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
