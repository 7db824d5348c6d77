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

Inputs hold the ``size`` ticks that fill the windows, then ``--slide`` events (default 20,000) more. A CTI
follows every 100 ticks' events (in order) or every 100 events (disordered) at the smallest LE still to come,
so nothing is late and windows are released as the stream goes. Each cell runs in a forked child: the fill
is fed untimed in large chunks, then the slide (the events after the first ``size`` ticks: the windows have
filled, the regime ESL's curve is about) in ``--chunks`` chunks of whole CTI periods (so every chunk flushes
as often), each timed in CPU seconds of the whole child process (all its threads; a loaded machine inflates
CPU time far less than wall time). Garbage: the fill's is collected and what survives it frozen before the
slide, then the automatic collector is off and every chunk's timing includes a collection of its own young
garbage: no chunk pays for another's, and none for the state the fill left. A cell's figure is its median
chunk's CPU µs per event, printed with ``[lowest-highest]`` chunk beside it: a difference between sizes inside
that spread is noise, not growth. The cells of a row run their chunks interleaved (each child fills, then they
take turns one chunk each), so load that drifts weighs on every size alike; with ``--repeats R`` the row runs
R times and a cell shows the median of its runs' medians, the spread over all their chunks (the last line
prints the CPU time all the children took). A cell that has worked ``--cap`` wall seconds is stopped and shows the
median of the chunks it measured with ``+`` (``*``: not one). `finish` is not in the figure (a stream does
not end).

Every cell's output (its final CHT, over the events it fed) is compared with an independent computation:
numpy prefix sums for sum/count/avg and a sparse table for min/max over the members each window of the
spec has (SEMANTICS §3 and §9). A wrong cell prints ``WRONG`` and the bench exits 1: no speed is reported
for wrong answers without saying so. Memory: the largest `QueryRunner.state_size` (held, windows) and
resident-memory growth of the child (MiB) seen between chunks, and the values one window's aggregate
state holds (``agg``: a ``min`` that keeps every member shows the window size, one that keeps its extreme
1), at the largest size.

Printed per row: the ratio size 10,000 / size 10 (target <= 1.5, issue 26), and for disorder the growth
from d = 1 to d = 1,000 beside log2(d + 2)'s (target: no faster than log d); ``-`` where either figure
is not a slide's. Printed, never asserted.

``--aggregators`` adds (and ``--aggregators-only`` runs only) ns per operation of the ordered aggregators
(`udm.host.engine.aggregation`) against the sorted-fold baseline, in order and out of order.

``python -m bench.bench_sliding [--quick] [--rows hopping,rows] [--sizes 10,1000] [--udas sum,min]
[--slide 20000] [--chunks 5] [--repeats 1] [--cap 300] [--groups 10] [--disorder-size 1000] [--distances 1,10,100,1000]
[--no-disorder]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing
import random
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import pyarrow as pa

from bench.machine import load_text, rss
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
FILL_CHUNK = 4096  # rows per (untimed) chunk of the fill


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
    cti_rows: np.ndarray  # table row of each CTI
    cti_every: int  # events between CTIs


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
    return Stream(le, v, g, table, event_rows, groups, after + np.arange(1, len(after) + 1), every)


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
    us: float  # median CPU µs per event over the slide's chunks (of its runs' medians, with repeats)
    slid: bool  # the figure is over the slide (events after the windows filled)
    complete: bool  # every slide chunk ran
    ok: bool | None  # None: not checked (the child was stopped by the cap)
    state: dict[str, int] = field(default_factory=dict)
    agg_values: int | None = None  # values in the window aggregate's UDA state at the end of the slide
    chunks: list[float] = field(default_factory=list)  # every timed chunk's CPU µs per event (all runs)

    def text(self) -> str:
        if self.ok is False:
            return "WRONG"
        mark = ("" if self.complete else "+") if self.slid else "*"
        return _fig(self.us) + mark

    def spread(self) -> str:
        """The lowest and highest chunk beside the figure: growth is real only where it leaves this."""
        if self.ok is False or not self.chunks:
            return ""
        return f"{_fig(min(self.chunks))}-{_fig(max(self.chunks))}"


def _fig(us: float) -> str:
    return f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def _values(x: Any) -> int:
    """How many scalar values a UDA state holds (containers are walked)."""
    if x is None:
        return 0
    if isinstance(x, (int, float, str, bool)):
        return 1
    if isinstance(x, dict):
        return sum(_values(v) for v in x.values())
    if isinstance(x, (list, tuple, set, frozenset)) or hasattr(x, "__iter__"):
        return sum(_values(v) for v in x)
    return 1


def agg_values(r: QueryRunner) -> int | None:
    """The most values one group's window aggregate state holds (a sweep's ``state()``: a ``min``
    holding every member shows the window size, one holding its extreme 1); None: no sweep."""
    got = None
    for op in r.ops:
        for g in getattr(op, "groups", {}).values():
            sw = getattr(g, "sweep", None)
            if sw is not None and getattr(g, "swept", None) is not None:
                got = max(got or 0, _values(sw.state()))
    return got


def slide_cuts(size: int, s: Stream, slide: int, chunks: int) -> tuple[int, list[int]]:
    """Where the slide starts and where each of its chunks ends, as table rows: right after a CTI, so
    that every chunk holds the same number of CTIs (a CTI releases windows: a chunk with one more costs
    more) and about ``slide / chunks`` events."""
    first = min((size + 1) * s.groups, len(s.le) - 1)  # the first event after the first ``size`` ticks
    i = int(np.searchsorted(s.cti_rows, s.event_rows[first]))
    if i >= len(s.cti_rows):
        return len(s.table), []
    per = max(1, round(slide / chunks / s.cti_every))  # CTIs per chunk
    ends = [int(s.cti_rows[j]) + 1 for j in range(i + per, min(i + per * chunks, len(s.cti_rows) - 1) + 1, per)]
    return int(s.cti_rows[i]) + 1, ends


def _events(s: Stream, a: int, b: int) -> int:
    """The events among table rows ``[a, b)``."""
    return int(np.searchsorted(s.event_rows, b) - np.searchsorted(s.event_rows, a))


def _cell_child(row: str, size: int, uda: str, s: Stream, slide: int, chunks: int, conn: Connection) -> None:
    """Feed the fill in large untimed chunks, collect its garbage and freeze it (the engine's long-lived state
    is then never rescanned by a timed chunk); then, on each ``go`` from the parent, one slide chunk timed in
    CPU seconds of the whole process (all threads), the collection of its own young garbage included (the
    automatic collector is off, so that no chunk pays for another's); on ``end``, finish and check."""
    r = QueryRunner(bind(parse_query(query_spec(row, size, uda, s.groups > 1))))
    table = s.table
    fill_row, ends = slide_cuts(size, s, slide, chunks)
    out: list[Any] = []
    state: dict[str, int] = {}
    with quiet_gc():
        done = 0
        while done < fill_row:
            n = min(FILL_CHUNK, fill_row - done)
            out += r.process_batch(ElementBatch.from_table(table.slice(done, n)))
            done += n
    gc.collect()
    gc.freeze()
    gc.disable()
    rss0 = rss()
    us: list[float] = []
    conn.send(("ready", len(ends)))
    for end in ends:
        if conn.recv() != "go":
            break
        batch = ElementBatch.from_table(table.slice(done, end - done))
        c0 = time.process_time()
        got = r.process_batch(batch)
        gc.collect(0)
        us.append((time.process_time() - c0) / max(_events(s, done, end), 1) * 1e6)
        out += got
        done = end
        for k, x in (*r.state_size().items(), ("rss_mib", (rss() - rss0) >> 20)):
            state[k] = max(state.get(k, 0), x)
        conn.send(("chunk", us, state, agg_values(r)))
    if conn.recv() != "end":
        return
    gc.enable()
    out += r.finish()
    fed = int(np.searchsorted(s.event_rows, done))
    conn.send(("checked", same(observed(out, uda), expected(row, size, uda, s, fed))))


class _Kid:
    """One cell's forked child (it inherits the stream) and what it reported; ``budget``: the wall seconds
    it may still spend working (a runaway engine is stopped, not waited for)."""

    def __init__(self, row: str, size: int, uda: str, s: Stream, plan: Plan) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_cell_child, args=(row, size, uda, s, plan.slide, plan.chunks, theirs),
                                daemon=True)
        self.what = f"the {row} {uda} cell at size {size:,}"
        self.budget = plan.cap
        self.want = 0
        self.us: list[float] = []
        self.state: dict[str, int] = {}
        self.held: int | None = None
        self.ok: bool | None = None
        self.live = True
        self.proc.start()
        theirs.close()
        got = self._reply()
        if got is not None:
            self.want = got[1]

    def _reply(self) -> Any:
        """The child's next message, or None (it was stopped by the cap, or died)."""
        t0 = time.monotonic()
        try:
            if self.conn.poll(max(self.budget, 0)):
                return self.conn.recv()
        except EOFError:
            pass
        finally:
            self.budget -= time.monotonic() - t0
        self.stop()
        return None

    def step(self, cmd: str) -> None:
        if not self.live:
            return
        self.conn.send(cmd)
        got = self._reply()
        if got is None:
            return
        if got[0] == "checked":
            self.ok = got[1]
            self.stop()
        else:
            _, self.us, self.state, self.held = got

    def stop(self) -> None:
        self.live = False
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        if self.ok is None and self.proc.exitcode not in (0, -9):
            raise RuntimeError(f"{self.what} failed in its child (exit code {self.proc.exitcode})")

    def cell(self) -> Cell:
        us = self.us
        return Cell(float(np.median(us)) if us else math.inf, bool(us), len(us) == self.want, self.ok, self.state,
                    self.held, list(us))


def run_cells(row: str, uda: str, runs: list[tuple[int, Stream]], plan: Plan) -> list[Cell]:
    """One run of each (size, stream) of ``runs``, their slide chunks interleaved: every child fills (one at a
    time), then the children take turns one chunk each (the first to go rotating), so a load that drifts
    during the row weighs on every cell alike; then each finishes and is checked."""
    kids = [_Kid(row, size, uda, s, plan) for size, s in runs]
    try:
        for k in range(max(kd.want for kd in kids)):
            for j in range(len(kids)):
                kd = kids[(j + k) % len(kids)]
                if k < kd.want:
                    kd.step("go")
        for kd in kids:
            kd.step("end")
    finally:
        for kd in kids:
            kd.stop()
    return [kd.cell() for kd in kids]


def run_cell(row: str, size: int, uda: str, s: Stream, slide: int = 3000, chunks: int = 5, cap: float = 120.0
             ) -> Cell:
    """One cell alone (see `run_cells`)."""
    return run_cells(row, uda, [(size, s)], Plan(slide, chunks, cap))[0]


# ---- tables ------------------------------------------------------------------------------------------------
def _ticks(size: int, slide: int, groups: int, d: int) -> int:
    """Ticks enough to fill the windows and then slide ``slide`` events (d: the disorder), with a CTI period
    to spare at each end for the chunks' cuts."""
    return size + 2 + d + -(-slide // groups) + 2 * CTI_EVERY


def _ratio(small: Cell, big: Cell) -> str:
    """``big``'s figure over ``small``'s, when both measured the slide."""
    if not (small.slid and big.slid and small.us) or small.ok is False or big.ok is False:
        return "-"
    return f"{big.us / small.us:,.2f}x"


def _verdict(labels: list[str], cells: list[Cell]) -> tuple[str, bool]:
    """The check column: ok, WRONG at the cells whose output differed, unchecked at those stopped before
    they could end their run; and whether none was wrong."""
    wrong = [lb for lb, c in zip(labels, cells, strict=True) if c.ok is False]
    unchecked = [lb for lb, c in zip(labels, cells, strict=True) if c.ok is None]
    parts = ([f"WRONG at {','.join(wrong)}"] if wrong else []) + ([f"unchecked at {','.join(unchecked)}"]
                                                                   if unchecked else [])
    return "; ".join(parts) or "ok", not wrong


@dataclass
class Plan:
    """How each cell measures: ``slide`` events after the fill, in ``chunks`` timed chunks (the figure is
    their median); a cell that has worked ``cap`` wall seconds is stopped."""

    slide: int = 20_000
    chunks: int = 5
    cap: float = 300.0
    #: every row runs this many times (its cells' chunks interleaved each time); a cell's figure is the median
    #: of its runs' medians
    repeats: int = 1

    def cells(self, row: str, uda: str, runs: list[tuple[int, Stream]]) -> list[Cell]:
        """One cell per (size, stream) of ``runs``, each the median of ``repeats`` runs."""
        got: list[list[Cell]] = [[] for _ in runs]
        for _ in range(self.repeats):
            for i, c in enumerate(run_cells(row, uda, runs, self)):
                got[i].append(c)
        return [median_cell(cs) for cs in got]


def median_cell(cs: list[Cell]) -> Cell:
    """The repeats of one cell as one: the median of the figures over the slide, checked when every run was
    (wrong when any was), with every run's chunks for the spread."""
    slid = [c for c in cs if c.slid]
    us = float(np.median([c.us for c in slid])) if slid else math.inf
    oks = [c.ok for c in cs]
    ok = False if False in oks else None if None in oks else True
    return Cell(us, bool(slid), all(c.complete for c in cs), ok, cs[-1].state, cs[-1].agg_values,
                [x for c in cs for x in c.chunks])


def _held(c: Cell) -> str:
    st = c.state
    agg = "-" if c.agg_values is None else f"{c.agg_values:,}"
    return f"{st.get('held', 0):,} ev/{st.get('windows', 0):,} win/{agg} agg/{st.get('rss_mib', 0):,} MiB"


COL = 22  # a cell's column: its figure, then the lowest and highest chunk


def _col(c: Cell) -> str:
    spread = c.spread()
    return f"{c.text():>9}" + (f" [{spread}]" if spread else "").ljust(COL - 9)


def _how(plan: Plan) -> str:
    return (f"median of {plan.repeats} run(s) of {plan.chunks} interleaved chunks of ~{plan.slide // plan.chunks:,} "
            f"events; [lowest-highest chunk]; + stopped by the cap")


def in_order(rows: list[str], sizes: list[int], udas: list[str], groups: int, plan: Plan) -> bool:
    ok = True
    streams = {size: make_stream(_ticks(size, plan.slide, groups, 0), groups, 0) for size in sizes}
    label = "1 group" if groups == 1 else f"{groups} groups (one event per group per tick)"
    print(f"\nin order, {label}: CPU µs per event of the slide at window size  ({_how(plan)})", flush=True)
    print(f"{'row':<15} {'uda':<6}" + "".join(f"{s:>9,}".ljust(COL) for s in sizes)
          + f"{'ratio':>7} {'state at ' + format(sizes[-1], ','):>40}  check", flush=True)
    for row in rows:
        for uda in udas:
            cells = plan.cells(row, uda, [(size, streams[size]) for size in sizes])
            ratio = _ratio(cells[0], cells[-1])
            held = _held(cells[-1])
            verdict, good = _verdict([f"{sz:,}" for sz in sizes], cells)
            ok &= good
            print(f"{row:<15} {uda:<6}" + "".join(_col(c) for c in cells)
                  + f"{ratio:>7} {held:>40}  {verdict}", flush=True)
    if len(sizes) > 1:
        print(f"ratio: µs per event at size {sizes[-1]:,} / size {sizes[0]:,} (target <= {FLAT_TARGET}); state: "
              f"the most held members (ev), windows (win), values in one window's aggregate state (agg; "
              f"- without a sweep) and resident-memory growth seen")
    return ok


def disordered(rows: list[str], size: int, udas: list[str], distances: list[int], plan: Plan) -> bool:
    ok = True
    streams = {d: make_stream(_ticks(size, plan.slide, 1, d), 1, d) for d in distances}
    print(f"\ndisordered, 1 group, size {size:,}: CPU µs per event of the slide at disorder d (LE up to d ticks "
          f"early)  ({_how(plan)})", flush=True)
    print(f"{'row':<15} {'uda':<6}" + "".join(f"{'d=' + str(d):>9}".ljust(COL) for d in distances)
          + f"{'growth':>7} {'log2 growth':>12}  check", flush=True)
    lg = math.log2(distances[-1] + 2) / math.log2(distances[0] + 2)
    for row in rows:
        for uda in udas:
            cells = plan.cells(row, uda, [(size, streams[d]) for d in distances])
            growth = _ratio(cells[0], cells[-1])
            verdict, good = _verdict([f"d={d}" for d in distances], cells)
            ok &= good
            print(f"{row:<15} {uda:<6}" + "".join(_col(c) for c in cells)
                  + f"{growth:>7} {lg:>11.2f}x  {verdict}", flush=True)
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
    from udm.host.engine.aggregation import FingerBTree, FingerStacks, SortedFold, TwoStacks

    def merge(a: int, b: int) -> int:  # a Python call, as a UDA's merge is
        return a + b

    makers: dict[str, Callable[[], Any]] = {"SortedFold (baseline)": lambda: SortedFold(merge),
                                            "TwoStacks": lambda: TwoStacks(merge),
                                            "FingerBTree(min_arity=2)": lambda: FingerBTree(merge, 2),
                                            "FingerBTree(min_arity=4)": lambda: FingerBTree(merge, 4),
                                            "FingerStacks": lambda: FingerStacks(merge)}
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
            t.replace(50_000 * gap, 1)  # (untimed: FingerStacks spills its in-order entries into its tree here)
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


def _children_cpu() -> float:
    """CPU seconds (user and system) of the cells' children, ended and waited for."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_sliding", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 10 and 1,000, sum and min, d = 1 and 100")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma list of window sizes")
    ap.add_argument("--udas", default=",".join(UDAS), help=f"comma list of {', '.join(UDAS)}")
    ap.add_argument("--slide", type=int, default=Plan.slide,
                    help=f"events measured per cell after the fill (default {Plan.slide:,})")
    ap.add_argument("--chunks", type=int, default=Plan.chunks,
                    help="timed chunks of the slide, each ending at a CTI; the figure is their median")
    ap.add_argument("--cap", type=float, default=Plan.cap, help="wall seconds of work after which a cell is stopped")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of every row, its cells' chunks interleaved; a cell's figure is the median of its runs' "
                         "medians (default 1; 3 or more for figures to compare under load)")
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
    plan = Plan(args.slide, args.chunks, args.cap, args.repeats)
    if args.quick:
        sizes, udas, distances = [10, 1000], ["sum", "min"], [1, 100]
        plan.slide, plan.repeats = min(plan.slide, 2000), 1
    unknown = [x for x in rows if x not in ROWS] + [x for x in udas if x not in UDAS]
    if unknown:
        ap.error(f"unknown row or UDA {unknown[0]!r} (rows: {', '.join(ROWS)}; UDAs: {', '.join(UDAS)})")
    if args.aggregators_only:
        aggregators(args.quick)
        return 0
    print(f"bench_sliding: local engine, QueryRunner.process_batch; {plan.slide:,} events of slide per cell "
          f"in {plan.chunks} chunks, median of {plan.repeats} runs; {load_text()} at the start", flush=True)
    t0 = time.perf_counter()
    ok = in_order(rows, sizes, udas, 1, plan)
    if args.groups > 1:
        ok &= in_order(rows, sizes, udas, args.groups, plan)
    if not args.no_disorder:
        ok &= disordered(rows, args.disorder_size, udas, distances, plan)
    if args.aggregators or args.quick:
        aggregators(args.quick)
    print(f"\n{'every cell matched the independent computation' if ok else 'SOME CELLS GAVE WRONG ANSWERS'}; "
          f"{time.perf_counter() - t0:.0f}s, {_children_cpu():,.1f} CPU-s in the cells; {load_text()} at the end",
          flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
