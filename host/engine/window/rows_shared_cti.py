"""The shared rows store's rules at a CTI (`rows_shared.RowStore`): frozen prefix, cleanup and the output-CTI
bound — `rows_cti`'s rules for one group, as arrays over every group in the store (runs of rows of one
group number)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..rules import INF
from .rows_shared_arrays import StoreArrays
from .rows_store import RowColumns
from .state import Group

__all__ = ["StoreCti"]

_I64 = np.int64


class StoreCti(StoreArrays):
    """Row numbers, cleanup and the output-CTI bound of `rows_shared.RowStore`, as arrays."""

    nums: int
    #: the last look at the rows at a CTI (`_look`): the CTI, each group's run (first position, count, group
    #: number) and its rows fixed at that CTI; None when rows changed since
    memo: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None
    _keep: Callable[[np.ndarray], None]
    _release: Callable[[Group, int], None]
    _renumber: Callable[[], None]

    def _runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each group's rows: first position, count, group number (groups holding rows only)."""
        G = self.G
        heads = np.flatnonzero(np.concatenate(([True], G[1:] != G[:-1])))
        cnt = np.diff(np.concatenate((heads, [len(G)])))
        return heads, cnt, G[heads]

    def _look(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The runs (`_runs`) and their rows fixed at CTI ``c`` (`_fixed`): made once for a flush's `prepare`,
        `cleanup` (which keeps them true for what it drops) and `bound`."""
        m = self.memo
        if m is None or m[0] != c:
            heads, cnt, u = self._runs()
            m = self.memo = (c, heads, cnt, u, self._fixed(heads, cnt, c))
        return m[1], m[2], m[3], m[4]

    def _below(self, heads: np.ndarray, t: int) -> np.ndarray:
        """Per run: its rows with LE below ``t``."""
        return np.add.reduceat((t > self.L).astype(_I64), heads)

    def _fixed(self, heads: np.ndarray, cnt: np.ndarray, c: int) -> np.ndarray:
        """Per run, `RowsCleanup._fix` at CTI ``c``: its rows before the first LE block holding a row with
        ``RE >= c`` (among those with ``LE < c``), else before the first row with ``LE >= c``."""
        if c >= INF:
            return cnt.copy()
        L, R = self.L, self.R
        n = len(L)
        below = c > L
        pm = np.add.reduceat(below.astype(_I64), heads)
        idx = np.arange(n, dtype=_I64)
        fo = np.minimum.reduceat(np.where(below & (c <= R), idx, n), heads)
        has = fo < n
        if not has.any():
            return pm
        block = np.maximum.accumulate(np.where(self._block_heads(), idx, 0))
        return np.where(has, block[np.minimum(fo, n - 1)] - heads, pm)

    def _block_heads(self) -> np.ndarray:
        """Rows that start a block of equal (group, LE)."""
        G, L = self.G, self.L
        return np.concatenate(([True], (G[1:] != G[:-1]) | (L[1:] != L[:-1])))

    def cleanup(self, fam: Any, c: int) -> list[Group]:
        """Cleanup at CTI ``c`` (`RowsCleanup.cleanup`'s rule): the rows before each group's earliest window
        that can still change or appear are dropped; returns the groups that hold nothing (they leave the
        store, for the step to forget)."""
        if not self.groups:
            return []
        self._settle()
        slide = fam.slide
        n = self.nums
        #: by group number: its earliest window that can still change or appear
        opens = fam.up(self.P[:n] + 1)
        if len(self.G):
            heads, cnt, u, fixed = self._look(c)
            P = self.P[u]
            k_open = fam.up(P + fixed + 1)
            drop = np.maximum(np.minimum(fixed, fam.first(k_open) - 1 - P), 0)
            if drop.any():
                keep = np.arange(len(self.G), dtype=_I64) - np.repeat(heads, cnt) >= np.repeat(drop, cnt)
                self._keep(keep)
                self.P[u] = P + drop
                cnt = cnt - drop  # (the runs' dropped rows were fixed ones)
                on = cnt > 0
                cnt = cnt[on]
                self.memo = (c, np.cumsum(cnt) - cnt, cnt, u[on], (fixed - drop)[on])
            self.F[u] = np.maximum(self.F[u], k_open)
            opens[u] = k_open
        for x, g in list(self.out.items()):  # (records of windows now final go)
            o = g.out
            k = int(opens[x])
            while o and o.peekitem(0)[0] < k:
                o.popitem(0)
            if not o:
                del self.out[x]
        held = np.bincount(self.G, minlength=n)[:n] > 0
        live = np.zeros(n, dtype=bool)
        nums = np.fromiter(self.groups, dtype=_I64, count=len(self.groups))
        live[nums] = True
        empty = np.flatnonzero(live & ~held)
        self.F[empty] = np.maximum(self.F[empty], fam.up(self.P[empty] + 1))
        idle = empty[self.P[empty] % slide == 0]
        gone = [g for g in map(self.groups.__getitem__, idle.tolist()) if not g.out]
        for g in gone:
            self._release(g, g.data.num)
        if self.nums > 2 * len(self.groups) + 4096:
            self._renumber()
        return gone

    def bound(self, fam: Any, c: int) -> tuple[int, list[tuple[RowColumns, int, int]]]:
        """The smallest LE the groups in the store let the output CTI reach at CTI ``c`` (`RowsCleanup.
        _contribution`'s rule, as arrays), and the groups it leaves to that rule: those with a row whose end
        can still move in a block of equal LEs (rows, purged, fixed each)."""
        self._settle()
        if not len(self.G):
            return INF, []
        heads, cnt, u, fixed = self._look(c)
        P = self.P[u]
        r = fam.first(fam.up(P + self._below(heads, c) + 1))  # a new row lands after the rows with LE < c
        ok = r <= P + cnt
        b = int(self.L[(heads + r - 1 - P)[ok]].min()) if ok.any() else INF
        L, R = self.L, self.R
        opn = (c > L) & (c <= R)
        if not opn.any():
            return b, []
        bh = self._block_heads()
        alone = bh & np.concatenate((bh[1:], [True]))  # a block of one row
        runs = np.unique(np.searchsorted(heads, np.flatnonzero(opn & ~alone), "right") - 1)
        if not len(runs):
            return b, []
        rest = []
        for j in runs.tolist():
            a, e = int(heads[j]), int(heads[j] + cnt[j])
            rest.append((RowColumns(self.I[a:e].tolist(), L[a:e].tolist(), R[a:e].tolist(), self.V[a:e].tolist()),
                         int(P[j]), int(fixed[j])))
        return b, rest
