"""One columnar store for the groups of a rows step (`RowStore`): every in-order group's rows as shared arrays.

Per group, a flush of an in-order stream does the same few things — append the batch's rows, value the
windows the CTI made final, drop the rows no open window holds, give the output CTI a bound — and visiting the
groups one by one for them cost more than the rows themselves (thousands of groups a flush, a few rows each).
So the groups that need nothing but that keep their rows here: rows ``(group number, LE, RE, id, value)``
sorted by group number then canonical order (SEMANTICS §9), with the group's row numbering (``purged``), the
last window evaluated (``done``) and the first one cleanup kept (``floor``) as arrays by group number, and a
flush does each of those things for all of them at once with numpy: the final windows of every group valued
in one ``compute_slices`` call (`grid_closed.window_values`) and written as one column block, cleanup by mask,
the output-CTI bound as a minimum (the rules are `rows_cti`'s, as arrays).

A bulk insert's rows all go into the store, late and tied ones included: the rows of the groups a row lands
among are sorted together with their new rows (lexsort, ties by canonical JSON: `rows_store.canonical_ties`)
and spliced back, every column copied once (`_merge`, `_splice`). A window released before it is final is
emitted with its output record in the group's ``out`` (`Family.put`); a sorted-in row renumbers the windows
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
from .rows_shared_cti import StoreCti
from .rows_shared_flush import StoreFlush
from .rows_store import RowColumns, canonical_ties
from .state import Group

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


class RowStore(StoreFlush, StoreCti):
    """The rows of the groups in the store (see the module doc); ``on``: the step's windows are valued by the
    fresh-window batch form (`rows_closed.ClosedRows.vector`), else no group ever enters."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.reset()

    def reset(self) -> None:
        """No group in the store."""
        #: the groups in the store by number, and the next number
        self.groups: dict[int, Group] = {}
        self.nums = 0
        #: rows, sorted by (G, canonical order): group number, LE, RE, engine id, value
        self.G = _empty()
        self.L = _empty()
        self.R = _empty()
        self.I = _empty()
        self.V: np.ndarray = _empty()
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
            self.L = np.concatenate((self.L, np.array([x for c in cols for x in c[1]], dtype=_I64)))
            self.R = np.concatenate((self.R, np.array([x for c in cols for x in c[2]], dtype=_I64)))
            self.V, new = _unite(self.V, value_array([v for c in cols for v in c[3]]))
            self.V = np.concatenate((self.V, new))
            self.seen = None

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

    def _keep(self, keep: np.ndarray) -> None:
        self.G, self.L, self.R, self.I, self.V = (self.G[keep], self.L[keep], self.R[keep], self.I[keep],
                                                  self.V[keep])

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
        order = np.lexsort((rr, ln, gn))
        mine, gn, ln, rr = mine[order], gn[order], ln[order], rr[order]
        col = value_array(vals)
        mine = canonical_ties((gn[1:] == gn[:-1]) & (ln[1:] == ln[:-1]) & (rr[1:] == rr[:-1]), mine, col, ids)
        G, L, R = self.G, self.L, self.R
        last = np.maximum(np.searchsorted(G, gn, "right") - 1, 0)
        late = (G[last] == gn) & ((ln < L[last]) | ((ln == L[last]) & (rr <= R[last]))) if len(G) else None
        if late is not None and late.any():
            self._merge(fam, np.unique(gn[late]), gn, ln, rr, ids[mine], col[mine])
        else:
            self._splice(None, gn, ln, rr, ids[mine], col[mine])
        rest = np.ones(len(codes), dtype=bool)
        rest[mine] = False
        return np.flatnonzero(rest), outside

    def _merge(self, fam: Any, bad: np.ndarray, gn: np.ndarray, ln: np.ndarray, rr: np.ndarray, ni: np.ndarray,
               nv: np.ndarray) -> None:
        """New rows (sorted, in canonical order) of which those of the groups ``bad`` are not all after their
        group's rows: those groups' rows and new rows sorted together into canonical order, the others'
        appended. The windows a sorted-in row renumbers (from its row on) that were released are valued again
        at the next `prepare` and diffed against what they emitted (``redo``)."""
        G = self.G
        a = np.searchsorted(G, bad, "left")
        old = spans(a, np.searchsorted(G, bad, "right") - a)[1]  # the held rows of those groups
        inb = np.isin(gn, bad)
        cg = np.concatenate((G[old], gn[inb]))
        cl = np.concatenate((self.L[old], ln[inb]))
        cr = np.concatenate((self.R[old], rr[inb]))
        ci = np.concatenate((self.I[old], ni[inb]))
        cv = np.concatenate(_unite(self.V[old], nv[inb]))
        o = np.lexsort((cr, cl, cg))
        sg, sl, sr = cg[o], cl[o], cr[o]
        o = canonical_ties((sg[1:] == sg[:-1]) & (sl[1:] == sl[:-1]) & (sr[1:] == sr[:-1]), o, cv, ci)
        heads = np.flatnonzero(np.concatenate(([True], sg[1:] != sg[:-1])))  # one per group of ``bad``
        idx = np.arange(len(o), dtype=_I64)
        first = np.minimum.reduceat(np.where(o >= len(old), idx, len(o)), heads) - heads  # its first new row
        k = fam.yield_at(np.maximum(self.P[bad] + first + 1, self.F[bad]))
        hit = k <= self.D[bad]  # windows from ``k`` on were released: valued again, diffed
        if hit.any():
            redo = self.redo
            for x, top in zip(bad[hit].tolist(), self.D[bad[hit]].tolist(), strict=True):
                redo[x] = max(redo.get(x, top), top)
            self.D[bad[hit]] = k[hit] - 1
        app = ~inb
        self._splice(old, np.concatenate((gn[app], sg)), np.concatenate((ln[app], sl)),
                     np.concatenate((rr[app], sr)), np.concatenate((ni[app], ci[o])),
                     np.concatenate(_unite(nv[app], cv[o])))

    def _splice(self, drop: np.ndarray | None, g: np.ndarray, le: np.ndarray, re: np.ndarray, ids: np.ndarray,
                vals: np.ndarray) -> None:
        """Rows ``drop`` leave, rows (group, LE, RE, id, value) enter after the held rows of their group (a
        group's in their order), every column copied once."""
        keep = None
        if drop is not None and len(drop):
            keep = np.ones(len(self.G), dtype=bool)
            keep[drop] = False
        Gk = self.G if keep is None else self.G[keep]
        pos = np.searchsorted(Gk, g, "right")
        srt = np.lexsort((g, pos))  # (stable: a group's rows keep their order)
        pos = pos[srt]
        m = len(Gk) + len(pos)
        dnew = pos + np.arange(len(pos), dtype=_I64)
        dold = np.ones(m, dtype=bool)
        dold[dnew] = False
        V, vals = _unite(self.V, vals)
        cols = []
        for old, new in ((self.G, g), (self.L, le), (self.R, re), (self.I, ids), (V, vals)):
            col = np.empty(m, dtype=old.dtype)
            col[dnew] = new[srt]
            col[dold] = old if keep is None else old[keep]
            cols.append(col)
        self.G, self.L, self.R, self.I, self.V = cols
        self.seen = None

    def _renumber(self) -> None:
        """Number the groups in the store 0, 1, .. again (the numbers of groups that left are not reused)."""
        self._settle()
        olds = np.array(sorted(self.groups), dtype=_I64)
        new = np.full(self.nums, -1, dtype=_I64)
        new[olds] = np.arange(len(olds), dtype=_I64)
        self.G = new[self.G]
        self.P, self.D, self.F = self.P[olds], self.D[olds], self.F[olds]
        self.groups = {i: self.groups[o] for i, o in enumerate(olds.tolist())}
        self.out = {i: g for i, g in self.groups.items() if g.out}
        self.redo = {int(new[x]): k for x, k in self.redo.items()}
        for i, g in self.groups.items():
            g.data.num = i
        self.nums = len(olds)
        self.seen = None
