"""Pane evaluation of algebraic UDAs on row windows (SEMANTICS §9, seeds/004 §5.1, §6.2).

For ``rows{n, slide}`` and time-insensitive incremental UDAs that declare ``algebraic`` (every one of
``aggregates``), rows are cut into panes of ``p = gcd(n, slide)`` rows: pane ``j`` holds rows
``j*p+1 .. (j+1)*p``, and window ``k`` (``k``, ``n`` multiples of ``p``) is the union of panes
``(k-n)/p .. k/p - 1`` (from pane 0 for a partial window). A window's state is the ``merge`` of its
``n/p`` pane states; a pane's state is computed once from its rows and kept until a row in it changes
(a late or retracted row renumbers every later row, so every later pane is recomputed).

Rows that can no longer move (the frozen prefix of `RowsStep`) are folded into their pane's state and
dropped, keeping only the pane's first LE (a window's interval starts at a pane start). So a group holds
``O(n/p)`` pane states plus the rows that can still move, not the ``n`` rows of a window: 40,000-row
windows sliding by 10,000 keep 4 pane states (seeds/004 §6.2).
"""

from __future__ import annotations

from math import gcd
from typing import Any

from udm.host.query.plan import BoundStep

from ..aggregates import mergeable
from ..common import INF
from ..context import Context
from .rows import RowsStep
from .state import Group, Window

__all__ = ["RowPaneStep", "row_pane_step"]


def row_pane_step(name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> RowPaneStep | None:
    """A `RowPaneStep` when pane evaluation applies (algebraic UDAs, at least 2 panes a window, panes of
    at least 2 rows: one-row panes would merge ``n`` states per window instead of adding ``n`` rows), else
    None."""
    win = bs.step.window
    p = gcd(win.n, win.slide)
    if not mergeable(bs) or win.n // p < 2 or p < 2:
        return None
    return RowPaneStep(name, ctx, bs, reads_input)


class RowPaneStep(RowsStep):
    """`RowsStep` whose window states are merged from pane states. Per group, besides the rows:
    ``panes`` = pane index -> [first LE, state, rows folded] for panes whose leading rows were dropped,
    ``endpoints`` = pane index -> computed state of a complete pane (a cache, cleared when a row moves)."""

    slides = False  # window states come from panes
    tracks_settled = False  # its own `_cleanup` visits every group

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        self.p: int = gcd(self.n, self.slide)

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = super()._new_group(key, fields)
        g.panes = {}
        g.endpoints = {}
        return g

    def _group_idle(self, g: Group) -> bool:
        return super()._group_idle(g) and not g.panes

    def _row_le(self, g: Group, r: int) -> int:
        if r > g.purged:
            return super()._row_le(g, r)
        return g.panes[(r - 1) // self.p][0]  # a dropped row a window starts at: its pane's first row

    def _members(self, w: Window) -> Any:  # pragma: no cover - pane windows never list their rows
        raise AssertionError("pane-evaluated row windows have no member list")

    def _rederive(self, g: Group, lo: int, hi: int = INF, cut: tuple[int, int] | None = None) -> None:
        p, base = self.p, g.purged
        j0 = (base + lo) // p
        j1 = (base + hi) // p if hi < INF else INF
        cache = g.endpoints
        for j in [j for j in cache if j0 <= j <= j1]:
            del cache[j]
        super()._rederive(g, lo, hi, cut)

    def _pane_state(self, g: Group, j: int) -> Any:
        st = g.endpoints.get(j)
        if st is not None:
            return st
        wu = self.udm
        p, base = self.p, g.purged
        folded = g.panes.get(j)
        a = j * p + (folded[2] if folded is not None else 0) - base
        b = (j + 1) * p - base
        st = folded[1] if folded is not None else None
        if b > a:
            evs = g.rows[a:b]
            fresh = wu.add(wu.initial_state(), wu.ordered(evs, 0, 1), (0, 1))
            st = fresh if st is None else wu.merge(st, fresh)
        g.endpoints[j] = st
        return st

    def _apply(self, w: Window) -> None:
        if not w.rebuild:
            return
        w.rebuild = False
        w.pending = None
        g = w.group
        p = self.p
        st = None
        for j in range((self._first(w.key) - 1) // p, w.key // p):
            s = self._pane_state(g, j)
            st = s if st is None else self.udm.merge(st, s)
        w.state = st

    def _cleanup(self, c: int) -> None:
        p = self.p
        wu = self.udm
        for g in list(self.groups.values()):
            pm = self._movable(g, c)
            base = g.purged
            k_open = -(-(base + pm + 1) // self.slide) * self.slide
            wins = g.windows
            while wins and wins.peekitem(0)[0] < k_open:
                wins.popitem(0)[1].alive = False
            need = (self._first(k_open) - 1) // p  # the first pane a remaining or future window uses
            for store in (g.panes, g.endpoints):
                for j in [j for j in store if j < need]:
                    del store[j]
            if pm:
                rows = g.rows
                i = 0
                while i < pm:  # fold the frozen rows, pane by pane
                    num = base + i + 1
                    j = (num - 1) // p
                    e = min(pm, (j + 1) * p - base)
                    if j >= need:
                        evs = rows[i:e]
                        f = g.panes.get(j)
                        if f is None:
                            f = g.panes[j] = [evs[0].le, wu.initial_state(), 0]
                        f[1] = wu.add(f[1], wu.ordered(evs, 0, 1), (0, 1))
                        f[2] += e - i
                    i = e
                del rows[:pm]
                g.purged += pm
            if not wins and g.event_count <= 0:
                self._drop_group_if_empty(g)

    def state_size(self) -> dict[str, int]:
        out = super().state_size()
        out["panes"] = sum(len(g.panes) + len(g.endpoints) for g in self.groups.values())
        return out
