"""The grid family's closed windows, valued and written together at the end of a flush from their panes.

Most windows a flush releases are also *closed* by it: the CTI has passed their end, so no valid element can
change them again (SEMANTICS §7, a time-insensitive UDA), and none was emitted before, so there is nothing to
diff. Such a window needs no sweep step, no output record and no entry in its group's ``out``. A group hands
over a run of such windows at once (`ClosedWindows.take_range`, or one window at a time from the family's
window-by-window loop, `take`); after every group was evaluated, `flush` reads the panes of all the runs once
(a running sweep's panes keep their values) and, as arrays over every group: which windows hold a member, where
each window's members lie in the panes' values, their values — the UDA's fresh-window batch form
``compute_slices(values, offsets)`` (note 62) over one numeric column when it has one, else ``add`` and
``compute`` per window — and the outputs, one column block in window order (per row when a value is not a
plain JSON kind or an output would fall below the output CTI). It is the sweep's vector form
(tests/test_grid_closed.py holds the two to the same output).
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from ..batch import RowsOut
from .geometry import Geometry
from .grid_columns import FlushJobs, ends_alone
from .grid_panes import GroupPanes
from .state import Group

__all__ = ["ClosedWindows"]


class ClosedWindows(FlushJobs):
    """A flush's closed windows of one grid step: runs ``(group, first window, last window)``, in output order."""

    __slots__ = ()

    def __init__(self, step: Any, kind: str) -> None:
        self.step = step
        #: a UDA over a running sweep (its panes keep their values), released by its end alone
        self.on = kind == "running" and ends_alone(step)
        self.jobs: list[tuple[Group, int, int]] = []

    def take(self, g: Group, geo: Geometry, k: int, wle: int, wre: int) -> bool:
        """Window ``k`` of ``g`` (released) is valued here if it is closed and was never emitted."""
        d: GroupPanes = g.data
        if wre > self.step.effective_cti or d.longs or k in g.out:
            return False
        self._add(g, k, k)
        return True

    def take_range(self, g: Group, geo: Geometry, lo: int, hi: int) -> bool:
        """Windows ``lo..hi`` of ``g`` (released, those holding a member written) are valued here if every one
        is closed and none was emitted; else nothing is taken."""
        d: GroupPanes = g.data
        if geo.extent(hi)[1] > self.step.effective_cti or d.longs or d.endless:
            return False
        if g.out and next(iter(g.out.irange(lo, hi)), None) is not None:
            return False
        if d.panes:  # (windows before its first pane's hold nothing: ``lo`` may be NEG + 1)
            lo = max(lo, geo.first_window(d.panes.peekitem(0)[0]))
            if lo <= hi:
                self._add(g, lo, hi)
        return True

    def _add(self, g: Group, lo: int, hi: int) -> None:
        jobs = self.jobs
        if jobs:
            last = jobs[-1]
            if last[0] is g and last[2] + 1 == lo:
                jobs[-1] = (g, last[1], hi)
                return
        jobs.append((g, lo, hi))

    def flush(self, out: RowsOut, em: Any, geo: Geometry) -> None:
        """Value every window taken since the last call and write its outputs."""
        jobs = self.jobs
        if not jobs:
            return
        self.jobs = []
        # the panes of every run, in run order and pane order: run, pane, member count, values
        jl: list[int] = []
        sl: list[int] = []
        cl: list[int] = []
        pv: list[list[Any]] = []
        for j, (g, lo, hi) in enumerate(jobs):
            panes = g.data.panes
            i0 = panes.bisect_left(geo.span(lo)[0])
            i1 = panes.bisect_left(geo.span(hi)[1])
            if i1 > i0:
                ps = panes.values()[i0:i1]
                sl += panes.keys()[i0:i1]
                cl += [p.count for p in ps]
                pv += [p.values for p in ps]
                jl += [j] * (i1 - i0)
        if not jl:
            return
        J = np.array(jl, dtype=np.int64)
        S = np.array(sl, dtype=np.int64)
        C = np.array(cl, dtype=np.int64)
        lo_j = np.array([j[1] for j in jobs], dtype=np.int64)
        hi_j = np.array([j[2] for j in jobs], dtype=np.int64)
        # the windows of its run each pane is in; a window holds a member when one of its panes does
        kf = np.maximum(geo.first_window(S), lo_j[J])
        kl = np.minimum(geo.last_windows(S), hi_j[J])
        nwin = np.maximum(kl - kf + 1, 0)
        inw = (nwin > 0) & (C > 0)
        if not inw.all():  # (an empty pane, or one no window of its run holds: its values take no part)
            J, S, C, kf, nwin = J[inw], S[inw], C[inw], kf[inw], nwin[inw]
            pv = [v for v, keep in zip(pv, inw.tolist(), strict=True) if keep]
            if not len(J):
                return
        rows = np.repeat(np.arange(len(J), dtype=np.int64), nwin)
        firsts = np.concatenate(([0], np.cumsum(nwin)[:-1]))
        wk = kf[rows] + (np.arange(len(rows), dtype=np.int64) - firsts[rows])
        kmin = int(wk.min())
        width = int(wk.max()) - kmin + 1
        wkey = np.unique(J[rows] * width + (wk - kmin))  # (run order, then window order: the output order)
        wj = wkey // width
        wk = wkey % width + kmin
        # each window's members: a run of consecutive panes, so one slice of the values laid end to end
        smin = int(S.min())
        m = int(S.max()) - smin + 1
        pkey = J * m + (S - smin)
        a, b = geo.span(wk)
        i0 = np.searchsorted(pkey, wj * m + np.clip(a - smin, 0, m))
        i1 = np.searchsorted(pkey, wj * m + np.clip(b - smin, 0, m))
        voff = np.concatenate(([0], np.cumsum(C)))
        st = voff[i0]
        lens = voff[i1] - st
        wle, wre = geo.extent(wk)
        res = self._values(list(chain.from_iterable(pv)), st, lens, wle, wre)
        self._write(out, em, [jobs[j][0] for j in wj.tolist()], wle, wre, res)
