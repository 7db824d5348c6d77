"""A rows-family group's windows read one at a time (`rows.RowsFamily`, window by window): a window's rows as
events (a UDM that reads its members whole), the group's sweep brought to a window (rows leave in the order
they entered: SEMANTICS §9, semantics-notes 29), and whether a window holds part of a block of equal LEs
whose order can still change (strong consistency)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..common import Ev
from .state import Group

__all__ = ["RowWindows"]


class RowWindows:
    """A window's members, sweep and wholeness, from a group's rows (``d.rows``, numbered from ``d.purged``)."""

    step: Any
    n: int
    _first: Callable[[int], int]
    _up: Callable[[int], int]

    def _members(self, d: Any, k: int) -> list[Ev]:
        return d.rows.events(self._first(k) - 1 - d.purged, k - d.purged)

    def _whole(self, d: Any, k: int) -> bool:
        """Strong consistency, a UDM that does not see ends: does window ``k`` hold no part of a block of
        equal LEs in which a row can still move (the block's last row, its largest RE, ends at or after the
        CTI)? A window ending at or before the CTI is final then (a new row lands after it)."""
        rows = d.rows
        les = rows.le
        base = d.purged
        c = self.step.effective_cti
        for a in (self._first(k) - 1, k):  # the boundaries between rows a and a + 1
            i = a - 1 - base
            if i < 0 or i + 1 >= len(les):
                continue  # (dropped rows are fixed; a row still to come lands after the CTI)
            le = les[i]
            if les[i + 1] == le and rows.re[rows.lower(le + 1) - 1] >= c:
                return False
        return True

    def _sweep_to(self, g: Group, d: Any, k: int) -> None:
        """Bring the sweep to window ``k``: the rows before its first leave, the rows after the last window
        swept enter (rebuilt when it went back). A row enters at the last row of its *class* — the rows
        that leave at the same window — so one eviction takes out whole classes."""
        sweep = g.sweep
        f = self._first(k)
        prev = g.swept
        if prev is None or prev[1] > k:
            sweep.clear()
            start = f
        else:
            sweep.leave_before(f)
            start = max(prev[1] + 1, f)
        if start <= k:
            vals = d.rows.vals[start - 1 - d.purged:k - d.purged]
            n = self.n
            i = 0
            r = start
            while r <= k:
                pos = self._up(r + n) - n  # row r leaves at the window of yield row pos + n
                e = min(pos, k)
                sweep.enter(pos, vals[i:i + e - r + 1])
                i += e - r + 1
                r = e + 1
        g.swept = (f, k)
