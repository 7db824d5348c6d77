"""Pane evaluation of algebraic aggregates on hopping windows (SEMANTICS §9, seeds/004 §5.1).

For ``hopping(size, hop, offset)`` and a time-insensitive incremental UDA that declares ``algebraic``
(it has ``merge``; or several such UDAs in ``aggregates``), the time axis is cut into panes of width
``p = gcd(size, hop)``; window ``k`` is the union of panes ``k*hop/p .. k*hop/p + size/p - 1``. An
event inside one pane updates that pane's state once (instead of the states of the ``size/hop`` windows
it belongs to); a window's state is the ``merge`` of its ``size/p`` pane states, taken when the window is
recomputed. Memory is ``O(size/p)`` states per window instead of ``O(events in window)``.

An event spanning several panes would be counted once per pane by a merge, so such (long) events are
window members as in `GridStep` and their contribution is merged in separately. The result is the same
output (exactly, for integer data; up to float rounding of ``merge`` otherwise).
"""


from __future__ import annotations

import heapq
from math import gcd
from typing import TYPE_CHECKING, Any

import numpy as np

from udm.host.query.plan import BoundStep

from ..aggregates import mergeable
from ..columnar import ColumnarEvents, stable_order
from ..common import INF, Ev
from ..context import Context
from .grid import GridStep
from .state import Group, Window

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["Pane", "PaneStep", "pane_step"]


def pane_step(name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> PaneStep | None:
    """A `PaneStep` when pane evaluation applies to this step, else None."""
    step = bs.step
    win = step.window
    if win.type != "hopping" or not mergeable(bs):  # (every UDA of ``aggregates``)
        return None
    if win.size // gcd(win.size, win.hop) < 2:
        return None
    return PaneStep(name, ctx, bs, reads_input)


class Pane:
    __slots__ = ("count", "dirty", "pending", "state")

    def __init__(self) -> None:
        self.state: Any = None
        self.count = 0
        self.pending: dict[str, list] | None = None
        self.dirty = False

    def __getstate__(self) -> tuple:
        return (self.state, self.count, self.pending, self.dirty)

    def __setstate__(self, s: tuple) -> None:
        self.state, self.count, self.pending, self.dirty = s


class PaneStep(GridStep):
    """`GridStep` whose window states are merged from pane states."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        self.pane_width = gcd(self.size, self.hop)
        self.panes_per_window = self.size // self.pane_width  # panes per window
        self.panes_per_hop = self.hop // self.pane_width  # panes per hop
        self.dirty_panes: list[Pane] = []
        self.pane_heap: list[tuple] = []

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = super()._new_group(key, fields)
        g.panes = {}  # pane index -> Pane
        return g

    def _group_idle(self, g: Group) -> bool:
        return not g.spill and not g.panes

    def _win(self, g: Group, k: int) -> Window:
        w = super()._win(g, k)
        w.members = {}  # multi-pane members only
        return w

    # -- panes -------------------------------------------------------------------------------------
    def _single(self, le: int, re: int) -> bool:
        return re < INF and (le - self.off) // self.pane_width == (re - 1 - self.off) // self.pane_width

    def _pane(self, g: Group, q: int) -> Pane:
        pn = g.panes.get(q)
        if pn is None:
            pn = g.panes[q] = Pane()
            self.seq += 1
            heapq.heappush(self.pane_heap, (self.off + q * self.pane_width + self.size, self.seq, g.key, q))
        return pn

    def _pane_delta(self, pn: Pane, id: str, old: Any, new: Any) -> None:
        p = pn.pending
        if p is None:
            pn.pending = {id: [old, new]}
        else:
            e = p.get(id)
            if e is None:
                p[id] = [old, new]
            else:
                e[1] = new
        if not pn.dirty:
            pn.dirty = True
            self.dirty_panes.append(pn)

    def _pane_apply(self, pn: Pane) -> None:
        p = pn.pending
        pn.pending = None
        pn.dirty = False
        if not p:
            return
        if pn.count == 0:
            pn.state = None
            return
        wu = self.udm
        removes = [a for a, b in p.values() if a is not None and b is None]
        adds = [b for a, b in p.values() if b is not None and a is None]
        st = pn.state if pn.state is not None else wu.initial_state()
        win = (0, 1)
        if removes:
            st = wu.remove(st, removes, win)
        if adds:
            st = wu.add(st, adds, win)
        pn.state = st

    def _windows_of_pane(self, q: int) -> range:
        hpp = self.panes_per_hop
        lo = -((self.panes_per_window - 1 - q) // hpp)  # ceil((q - ppw + 1) / hpp)
        return range(lo, q // hpp + 1)

    # -- events --------------------------------------------------------------------------------------
    def _add(self, w: Window, ev: Ev) -> None:
        w.count += 1
        if not self._single(ev.le, ev.re):
            w.members[ev.id] = ev  # type: ignore[index]
        self._touch(w)

    def _on_insert(self, g: Group, ev: Ev) -> None:
        if self._single(ev.le, ev.re):
            q = (ev.le - self.off) // self.pane_width
            pn = self._pane(g, q)
            pn.count += 1
            self._pane_delta(pn, ev.id, None, ev.val)
        super()._on_insert(g, ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        # detach the old lifetime ...
        if self._single(le, old):
            pn = g.panes.get((le - self.off) // self.pane_width)
            if pn is not None:  # else: purged, every window holding it is closed
                pn.count -= 1
                self._pane_delta(pn, ev.id, ev.val, None)
        hi = self.k_hi(old)
        top = hi if hi < self.frontier else self.frontier
        wins = g.windows
        for k in range(self.k_lo(le), top + 1):
            w = wins.get(k)
            if w is None:
                continue  # closed and purged
            w.count -= 1
            w.members.pop(ev.id, None)
            self._touch(w)
        if ev.id in g.spill:
            del g.spill[ev.id]
            if not g.spill:
                self.spill_groups.pop(g.key, None)
        # ... and attach the new one
        if new > le:
            ev.re = new
            if self._single(le, new):
                pn = self._pane(g, (le - self.off) // self.pane_width)
                pn.count += 1
                self._pane_delta(pn, ev.id, None, ev.val)
            hi = self.k_hi(new)
            top = hi if hi < self.frontier else self.frontier
            ceff = self.effective_cti
            for k in range(self.k_lo(le), top + 1):
                w = wins.get(k)
                if w is None:
                    if self.off + k * self.hop + self.size <= ceff:
                        continue
                    w = self._win(g, k)
                self._add(w, ev)
            if hi > self.frontier:
                g.spill[ev.id] = ev
                self.spill_groups[g.key] = g
            ev.re = old

    # -- window state = merge of pane states ----------------------------------------------------------
    def _apply(self, w: Window) -> None:
        w.pending = None
        w.rebuild = False
        if w.count == 0:
            w.state = None
            return
        wu = self.udm
        panes = w.group.panes
        st = None
        q0 = w.key * self.panes_per_hop
        for q in range(q0, q0 + self.panes_per_window):
            pn = panes.get(q)
            if pn is not None and pn.count:
                st = pn.state if st is None else wu.merge(st, pn.state)
        if w.members:
            extra = wu.add(wu.initial_state(), [ev.val for ev in w.members.values()], (w.le, w.re))
            st = extra if st is None else wu.merge(st, extra)
        w.state = st

    def flush(self) -> list[Any]:
        if self.dirty_panes:
            for pn in self.dirty_panes:
                self._pane_apply(pn)
            self.dirty_panes = []
        return super().flush()

    def _final_state(self) -> None:
        super()._final_state()
        self.pane_heap = []
        self.dirty_panes = []

    def _cleanup(self, c: int) -> None:
        super()._cleanup(c)
        h = self.pane_heap
        groups = self.groups
        while h and h[0][0] <= c:
            _, _, gk, q = heapq.heappop(h)
            g = groups.get(gk)
            if g is not None:
                g.panes.pop(q, None)
                self._drop_group_if_empty(g)

    # -- vectorized inserts (fast path) ------------------------------------------------------------------
    def vmask(self, le: np.ndarray, re: np.ndarray) -> np.ndarray:
        return (le - self.off) // self.pane_width == (np.where(re < INF, re, le + 1) - 1 - self.off) // self.pane_width

    def vplace(self, ids_all: pa.Array, idx: np.ndarray, le: np.ndarray, re: np.ndarray, vals: Any,
               gcodes: np.ndarray, gkeys: list[Any], gfields: list[Any]) -> None:
        q = (le[idx] - self.off) // self.pane_width
        gs = gcodes[idx]
        qmin = int(q.min())
        qr = int(q.max()) - qmin + 1
        key = gs * qr + (q - qmin)
        order = stable_order(key)
        skey = key[order]
        srows = idx[order]
        cuts = (np.flatnonzero(skey[1:] != skey[:-1]) + 1).tolist()
        bounds = [0, *cuts, len(skey)]
        numeric = isinstance(vals, np.ndarray)
        wu = self.udm
        add_array = wu.add_array if numeric else None
        gobj: dict[int, Group] = {}
        touch = self._touch
        firsts = skey[np.array(bounds[:-1], dtype=np.int64)].tolist()
        for j, kk in enumerate(firsts):
            s, e = bounds[j], bounds[j + 1]
            code, qq = divmod(kk, qr)
            qq += qmin
            g = self._group_by_code(code, gobj, gkeys, gfields)
            pn = self._pane(g, qq)
            if pn.pending:
                self._pane_apply(pn)
            st = pn.state if pn.state is not None else wu.initial_state()
            if add_array is not None:
                st = wu._call(add_array, (st, vals[srows[s:e]]), None, "add_array")
            else:
                st = wu.add(st, [vals[r] for r in srows[s:e].tolist()], (0, 1))
            pn.state = st
            pn.count += e - s
            wins = g.windows
            for k in self._windows_of_pane(qq):
                w = wins.get(k)
                if w is None:
                    w = self._win(g, k)
                w.count += e - s
                touch(w)
        vv = vals[idx] if numeric else [vals[i] for i in idx.tolist()]
        self.chunks.append(ColumnarEvents(ids_all, le[idx], re[idx], vv, gs, gkeys, idx))
        self._count_new_events(gs, gobj, gkeys, gfields)
