"""The shared rows store's rules at a CTI (`rows_shared.RowStore`): frozen prefix, cleanup and the output-CTI
bound — `rows_cti`'s rules for one group, as arrays over every group in the store (runs of rows of one
group number)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..rules import INF
from .grid_closed import spans
from .rows_shared_arrays import StoreArrays
from .rows_store import RowColumns
from .state import Group
from .store_runs import run_lower

__all__ = ["StoreCti"]

_I64 = np.int64


class StoreCti(StoreArrays):
    """Row numbers, cleanup and the output-CTI bound of `rows_shared.RowStore`, as arrays."""

    nums: int
    #: the last look at the rows at a CTI (`_look`): the CTI, each group's run (first position, count, group
    #: number) and its rows fixed at that CTI; None when rows changed since
    memo: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None
    _keep_runs: Callable[[np.ndarray, np.ndarray], None]
    dur: int
    _release: Callable[[Group, int], None]
    _renumber: Callable[[], None]

    def _runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each group's rows: first position, count, group number (groups holding rows only): a search of
        the group column per group in the store, no pass over the rows."""
        nums = np.sort(np.fromiter(self.groups, dtype=_I64, count=len(self.groups)))
        heads = np.searchsorted(self.G, nums, "left")
        cnt = np.searchsorted(self.G, nums, "right") - heads
        on = cnt > 0
        return heads[on], cnt[on], nums[on]

    def _look(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The runs (`_runs`) and their rows fixed at CTI ``c`` (`_fixed`): made once for a flush's `prepare`,
        `cleanup` (which keeps them true for what it drops) and `bound`."""
        m = self.memo
        if m is None or m[0] != c:
            heads, cnt, u = self._runs()
            m = self.memo = (c, heads, cnt, u, self._fixed(heads, cnt, c))
        return m[1], m[2], m[3], m[4]

    def _below(self, heads: np.ndarray, cnt: np.ndarray, t: Any) -> np.ndarray:
        """Per run: its rows with LE below ``t`` (one int, or one per run)."""
        return run_lower(self.L, heads, cnt, t)

    def _open(self, heads: np.ndarray, cnt: np.ndarray, c: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows that may be open at CTI ``c`` (``LE < c <= RE``): per run, those with LE from ``c - dur``
        up to ``c`` (no longer row is held). Returns per run its rows with LE below ``c`` and the span's
        offsets (one more than runs), and the span's rows, run after run: position and whether it is open."""
        pm = self._below(heads, cnt, c)
        lo = self._below(heads, cnt, int(c) - self.dur)
        offs, at = spans(heads + lo, pm - lo)
        return pm, offs, at, self.R[at] >= c

    def _fixed(self, heads: np.ndarray, cnt: np.ndarray, c: int) -> np.ndarray:
        """Per run, `RowsCleanup._fix` at CTI ``c``: its rows before the first LE block holding a row with
        ``RE >= c`` (among those with ``LE < c``), else before the first row with ``LE >= c``."""
        if c >= INF:
            return cnt.copy()
        pm, offs, at, opn = self._open(heads, cnt, c)
        if not opn.any():
            return pm
        op = np.flatnonzero(opn)
        runs, first = np.unique(np.searchsorted(offs, op, "right") - 1, return_index=True)  # (offs ascending)
        out = pm.copy()
        # the first open row's LE block starts at the first row of its run with its LE
        out[runs] = self._below(heads[runs], cnt[runs], self.L[at[op[first]]])
        return out

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
                self._keep_runs(heads + drop, cnt - drop)
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
        held = np.zeros(n, dtype=bool)
        if len(self.G):
            held[self.memo[3] if self.memo is not None else self._runs()[2]] = True
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
        pm, offs, at, opn = self._open(heads, cnt, c)
        r = fam.first(fam.up(P + pm + 1))  # a new row lands after the rows with LE < c
        ok = r <= P + cnt
        b = int(self.L[(heads + r - 1 - P)[ok]].min()) if ok.any() else INF
        if not opn.any():
            return b, []
        L, R = self.L, self.R
        # an open row not alone in its LE block (the span holds whole blocks: LEs below it and from c on differ)
        la = L[at]
        run = np.repeat(np.arange(len(heads), dtype=_I64), np.diff(offs))
        tie = (la[1:] == la[:-1]) & (run[1:] == run[:-1])
        runs = np.unique(run[opn & (np.concatenate(([False], tie)) | np.concatenate((tie, [False])))])
        if not len(runs):
            return b, []
        rest = []
        for j in runs.tolist():
            a, e = int(heads[j]), int(heads[j] + cnt[j])
            rest.append((RowColumns(self.I[a:e].tolist(), L[a:e].tolist(), R[a:e].tolist(), self.V[a:e].tolist()),
                         int(P[j]), int(fixed[j])))
        return b, rest
