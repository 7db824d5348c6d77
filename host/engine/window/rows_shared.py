"""One columnar store for the groups of a rows step (`RowStore`): every in-order group's rows as shared arrays.

Per group, a flush of an in-order stream does the same few things — append the batch's rows, value the
windows the CTI made final, drop the rows no open window holds, give the output CTI a bound — and visiting the
groups one by one for them cost more than the rows themselves (thousands of groups a flush, a few rows each).
So the groups that need nothing but that keep their rows here: rows ``(group number, LE, RE, id, value)``
sorted by group number then canonical order (SEMANTICS §9), with the group's row numbering (``purged``), the
last window evaluated (``done``) and the first one cleanup kept (``floor``) as arrays by group number, and a
flush does each of those things for all of them at once with numpy: the final windows of every group valued
in one ``compute_slices`` call (`grid_closed.window_values`) and written as one column block, cleanup by runs,
the output-CTI bound as a minimum (the rules are `rows_cti`'s, as arrays). What a flush does besides valuing
windows follows the groups and the rows it touches, not the rows held (issue 26: a few groups of long windows
fed small batches): runs are found by searching the group column, rows below a time by a search of each run,
rows that may be open at a CTI among the last ``dur`` ticks before it only, and the columns are rebuilt as
whole slices when few groups change (`store_runs`).

A bulk insert's rows all go into the store, late and tied ones included: every new row is first put after
its group's held rows, every column rebuilt once (`_append`); the run of a group a row lands among is then
sorted in place (lexsort, ties by canonical JSON: `rows_store.canonical_ties`; `_merge`), only those runs
read and written again. A window released before it is final is
emitted with its output record in the group's ``out`` (`rows_fresh`); a sorted-in row renumbers the windows
from its row on, so those of them already released are valued again at the next flush and diffed as one
against their records (``redo``, `rows_shared_flush`); cleanup drops the records of windows become final. A
group leaves the store (`materialize`: its rows become its `RowColumns`, nothing else changes) only for what
needs per-group state — a retraction or end change, an element fed alone (a batch below the bulk size) — and
comes back when a bulk insert finds it with nothing dirty. Both forms are one rule: tests/test_rows_shared.py
holds the store, the group-by-group form and the oracle to the same output.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

from ..payload import value_array
from .grid_closed import spans
from .key_columns import CodeFields
from .rows_shared_cti import StoreCti
from .rows_shared_flush import StoreFlush
from .rows_store import RowColumns, canonical_ties
from .state import Group
from .store_runs import gather_runs, interleave, longest

__all__ = ["RowStore"]

_I64 = np.int64
_NUM = attrgetter("data.num")


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=_I64)


def _unite(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two value columns of one kind (an int stays an int among floats: Python objects then)."""
    if a.dtype == b.dtype:
        return a, b
    if not len(a):
        return a.astype(b.dtype), b
    if not len(b):
        return a, b.astype(a.dtype)
    return a.astype(object), b.astype(object)


def _by_group(g: np.ndarray, le: np.ndarray, re: np.ndarray) -> np.ndarray:
    """The order of rows by (group, LE, RE), ties as they come: ``np.lexsort((re, le, g))``, cheaper. A
    batch's rows come nearly in time order, so sorting them by (LE, RE) first costs little; group numbers
    come in no order, and numpy's stable sort of 64-bit ints is a merge sort, of 16-bit ones a radix sort:
    so the groups go in 16 bits at a time, low bits first (``g`` is never negative)."""
    order = np.lexsort((re, le))
    top = int(g.max()) if len(g) else 0
    shift = 0
    while True:
        order = order[np.argsort(((g[order] >> shift) & 0xFFFF).astype(np.uint16), kind="stable")]
        shift += 16
        if not top >> shift:
            return order


class RowStore(StoreFlush, StoreCti):
    """The rows of the groups in the store (see the module doc); ``on``: the step's windows are valued as arrays
    (`rows_closed.ClosedRows.vector`: the sliding form, or short windows by the fresh-window form), else no
    group ever enters."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.reset()

    def reset(self) -> None:
        """No group in the store."""
        #: the groups in the store by number, and the next number; their key fields by number (what the
        #: windows are written with, `_write`: one take, no Python step per window)
        self.groups: dict[int, Group] = {}
        self.nums = 0
        self.fields = CodeFields()
        #: rows, sorted by (G, canonical order): group number, LE, RE, engine id, value
        self.G = _empty()
        self.L = _empty()
        self.R = _empty()
        self.I = _empty()
        self.V: np.ndarray = _empty()
        #: at least the longest lifetime (RE - LE) of a row held: a row open at a CTI ``c`` has ``LE >= c -
        #: dur``, so the rules at a CTI look at those rows only (`rows_shared_cti`)
        self.dur = 0
        #: by group number: rows dropped before the first held, last window evaluated, first window kept
        self.P = _empty()
        self.D = _empty()
        self.F = _empty()
        #: groups in the store holding output records (windows released before they were final), by number
        self.out: dict[int, Group] = {}
        #: by group number: the last released window a sorted-in row renumbered (those from ``D + 1`` to it are
        #: valued again and diffed, `_again`)
        self.redo: dict[int, int] = {}
        #: group numbers that left the store, their rows not removed yet (`_settle`)
        self.left: list[int] = []
        #: (effective CTI, release point) of the last `prepare` that looked at the rows, and whether rows
        #: came in since
        self.seen: tuple[int, int] | None = None
        self.memo: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "memo": None}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__dict__.update(s)
        self.memo = None
        if "fields" not in s:  # (a snapshot from before the key columns)
            self.fields = CodeFields.of(self.groups, self.nums)
        if "dur" not in s:
            self.dur = longest(self.L, self.R)

    # -- groups in and out ---------------------------------------------------------------------------------
    def _grow(self, n: int) -> None:
        cap = len(self.P)
        if n <= cap:
            return
        pad = max(n, 2 * cap, 1024) - cap
        self.P = np.concatenate((self.P, np.zeros(pad, dtype=_I64)))
        self.D = np.concatenate((self.D, np.zeros(pad, dtype=_I64)))
        self.F = np.concatenate((self.F, np.zeros(pad, dtype=_I64)))

    def enter(self, gs: list[Group]) -> None:
        """The groups ``gs`` (none in the store) enter it with their rows and numbering."""
        if not self.on or not gs:
            return
        first = self.nums
        self.nums = first + len(gs)
        self._grow(self.nums)
        self.fields.add([g.fields for g in gs])
        cols: list[tuple[list[int], list[int], list[int], list[Any], int]] = []
        for num, g in enumerate(gs, first):
            d = g.data
            self.groups[num] = g
            if g.out:
                self.out[num] = g
            self.P[num] = d.purged
            self.D[num] = d.done
            self.F[num] = d.floor
            d.num = num
            d.dirty = []
            d.fixed = 0
            d.settled = None
            if g.swept is not None:
                g.sweep.clear()
                g.swept = None
            rows: RowColumns = d.rows
            if rows:
                cols.append((rows.ids, rows.le, rows.re, rows.vals, num))
                d.rows = RowColumns()
        if cols:  # (numbers above every one held: the rows go at the end)
            self._settle()
            self.G = np.concatenate((self.G, np.repeat(np.array([c[4] for c in cols], dtype=_I64),
                                                       [len(c[1]) for c in cols])))
            self.I = np.concatenate((self.I, np.array([i for c in cols for i in c[0]], dtype=_I64)))
            le = np.array([x for c in cols for x in c[1]], dtype=_I64)
            re = np.array([x for c in cols for x in c[2]], dtype=_I64)
            self.L = np.concatenate((self.L, le))
            self.R = np.concatenate((self.R, re))
            self.V, new = _unite(self.V, value_array([v for c in cols for v in c[3]]))
            self.V = np.concatenate((self.V, new))
            self.dur = max(self.dur, longest(le, re))
            self.seen = self.memo = None

    def materialize(self, gs: list[Group]) -> None:
        """The groups ``gs`` (in the store) leave it: their rows become their own columns."""
        G = self.G
        for g in gs:
            d = g.data
            num = d.num
            a = int(np.searchsorted(G, num, "left"))
            b = int(np.searchsorted(G, num, "right"))
            d.rows = RowColumns(self.I[a:b].tolist(), self.L[a:b].tolist(), self.R[a:b].tolist(),
                                self.V[a:b].tolist())
            self._release(g, num)
            if b > a:
                self.left.append(num)

    def _release(self, g: Group, num: int) -> None:
        d = g.data
        self.out.pop(num, None)
        self.redo.pop(num, None)
        d.purged = int(self.P[num])
        d.done = int(self.D[num])
        d.floor = int(self.F[num])
        d.fixed = 0
        d.num = -1
        del self.groups[num]

    def _settle(self) -> None:
        """Remove the rows of the groups that left."""
        if self.left:
            keep = ~np.isin(self.G, np.array(self.left, dtype=_I64))
            self.left = []
            self._keep(keep)
            self.dur = longest(self.L, self.R)

    def _keep(self, keep: np.ndarray) -> None:
        self.G, self.L, self.R, self.I, self.V = (self.G[keep], self.L[keep], self.R[keep], self.I[keep],
                                                  self.V[keep])
        self.memo = None

    def _keep_runs(self, starts: np.ndarray, lens: np.ndarray) -> None:
        """Keep the rows ``starts[j] .. starts[j] + lens[j] - 1`` of each run (every run's, in order), the others
        go (`store_runs.gather_runs`: whole slices when few)."""
        self.G, self.L, self.R, self.I, self.V = (gather_runs(c, starts, lens) for c in (
            self.G, self.L, self.R, self.I, self.V))
        self.memo = None

    def held(self) -> int:
        """Rows held for the groups in the store."""
        self._settle()
        return len(self.G)

    # -- a batch's inserts -------------------------------------------------------------------------------
    def bulk(self, fam: Any, groups: list[Group], codes: np.ndarray, le: np.ndarray, re: np.ndarray,
             ids: np.ndarray, vals: Any) -> tuple[np.ndarray, list[Group]]:
        """Take the inserts (row ``j`` in ``groups[codes[j]]``) of the groups in the store, the groups outside
        with nothing dirty entering first; returns the rows not taken. A row not after its group's rows is
        sorted in among them (`_merge`). Returns the rows left to the groups outside, and those groups."""
        nums = np.fromiter(map(_NUM, groups), dtype=_I64, count=len(groups))
        out = np.flatnonzero(nums < 0)
        outside: list[Group] = []
        if len(out):
            back = [g for g in map(groups.__getitem__, out.tolist()) if not g.data.dirty]
            self.enter(back)
            nums[out] = [g.data.num for g in map(groups.__getitem__, out.tolist())]
            outside = [g for g in map(groups.__getitem__, out.tolist()) if g.data.num < 0]
        rn = nums[codes]
        mine = np.flatnonzero(rn >= 0)
        if not len(mine):
            return np.arange(len(codes)), outside
        self._settle()
        gn, ln, rr = rn[mine], le[mine], re[mine]
        order = _by_group(gn, ln, rr)
        mine, gn, ln, rr = mine[order], gn[order], ln[order], rr[order]
        col = value_array(vals)
        mine = canonical_ties((gn[1:] == gn[:-1]) & (ln[1:] == ln[:-1]) & (rr[1:] == rr[:-1]), mine, col, ids)
        G, L, R = self.G, self.L, self.R
        last = np.maximum(np.searchsorted(G, gn, "right") - 1, 0)
        late = (G[last] == gn) & ((ln < L[last]) | ((ln == L[last]) & (rr <= R[last]))) if len(G) else None
        self._append(gn, ln, rr, ids[mine], col[mine])
        if late is not None and late.any():
            self._merge(fam, np.unique(gn[late]), gn)
        rest = np.ones(len(codes), dtype=bool)
        rest[mine] = False
        return np.flatnonzero(rest), outside

    def _append(self, g: np.ndarray, le: np.ndarray, re: np.ndarray, ids: np.ndarray, vals: np.ndarray) -> None:
        """Rows (group, LE, RE, id, value), sorted by group, enter after the held rows of their group (a
        group's in their order): each column rebuilt once, by `store_runs.interleave` (whole slices when few
        groups get rows: the streaming case, long runs)."""
        if not len(g):
            return
        starts = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
        cuts = np.concatenate((starts, [len(g)])).astype(_I64)
        pos = np.searchsorted(self.G, g[starts], "right")
        V, vals = _unite(self.V, vals)
        self.G, self.L, self.R, self.I, self.V = (interleave(old, new, pos, cuts) for old, new in (
            (self.G, g), (self.L, le), (self.R, re), (self.I, ids), (V, vals)))
        self.dur = max(self.dur, longest(le, re))
        self.seen = self.memo = None

    def _merge(self, fam: Any, bad: np.ndarray, gn: np.ndarray) -> None:
        """The rows of the groups ``bad``, their new rows (``gn``: every new row's group, sorted) appended
        after their held ones (`_append`), not all in canonical order: each such group's run sorted in place.
        The windows a sorted-in row renumbers (from its row on) that were released are valued again at the
        next `prepare` and diffed against what they emitted (``redo``)."""
        G = self.G
        a = np.searchsorted(G, bad, "left")
        lens = np.searchsorted(G, bad, "right") - a
        added = np.searchsorted(gn, bad, "right") - np.searchsorted(gn, bad, "left")
        offs, at = spans(a, lens)  # the runs of those groups, run after run
        heads = offs[:-1]
        rel = np.arange(len(at), dtype=_I64) - np.repeat(heads, lens)
        new = rel >= np.repeat(lens - added, lens)  # (a run's new rows are its last ones)
        sg, sl, sr, si, sv = G[at], self.L[at], self.R[at], self.I[at], self.V[at]
        o = np.lexsort((sr, sl, sg))
        tg, tl, tr = sg[o], sl[o], sr[o]
        o = canonical_ties((tg[1:] == tg[:-1]) & (tl[1:] == tl[:-1]) & (tr[1:] == tr[:-1]), o, sv, si)
        idx = np.arange(len(o), dtype=_I64)
        first = np.minimum.reduceat(np.where(new[o], idx, len(o)), heads) - heads  # its first new row
        self.L[at], self.R[at], self.I[at], self.V[at] = sl[o], sr[o], si[o], sv[o]
        self.memo = None
        k = fam.yield_at(np.maximum(self.P[bad] + first + 1, self.F[bad]))
        hit = k <= self.D[bad]  # windows from ``k`` on were released: valued again, diffed
        if hit.any():
            redo = self.redo
            for x, top in zip(bad[hit].tolist(), self.D[bad[hit]].tolist(), strict=True):
                redo[x] = max(redo.get(x, top), top)
            self.D[bad[hit]] = k[hit] - 1

    def _renumber(self) -> None:
        """Number the groups in the store 0, 1, .. again (the numbers of groups that left are not reused)."""
        self._settle()
        olds = np.array(sorted(self.groups), dtype=_I64)
        new = np.full(self.nums, -1, dtype=_I64)
        new[olds] = np.arange(len(olds), dtype=_I64)
        self.G = new[self.G]
        self.P, self.D, self.F = self.P[olds], self.D[olds], self.F[olds]
        self.groups = {i: self.groups[o] for i, o in enumerate(olds.tolist())}
        self.fields.keep(olds)
        self.out = {i: g for i, g in self.groups.items() if g.out}
        self.redo = {int(new[x]): k for x, k in self.redo.items()}
        for i, g in self.groups.items():
            g.data.num = i
        self.nums = len(olds)
        self.seen = self.memo = None
