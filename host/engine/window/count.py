"""Count windows (SEMANTICS §3): ``count_by_start`` and ``count_by_end`` over distinct LE / RE values."""

from __future__ import annotations

from itertools import chain
from typing import Any

from sortedcontainers import SortedDict

from udm.host.query.plan import BoundStep

from ..common import INF, Ev
from ..context import Context
from .base import WindowStep
from .state import Group, Window

__all__ = ["CountByEndStep", "CountByStartStep"]


class _CountStep(WindowStep):
    """Count windows over distinct bucket values (LE for count_by_start, finite RE for count_by_end).

    Per group: ``a`` = buckets (SortedDict value -> {id: Ev}), ``wins`` = SortedDict first value -> Window,
    ``base`` = how many leading distinct values were purged (keeps the ``hop`` alignment), ``b`` = events
    with an infinite RE (count_by_end only: they belong to no window).
    """

    by_end = False

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        """Count windows come into existence (or change extent) when a *later* distinct value arrives
        (a window needs ``n`` values; count_by_end membership follows RE, which retractions move), so
        outputs before the CTI can change whatever the UDM promises: no UDM can keep the
        ``time_bound`` promise here. Liveliness and release use the general rule for count windows
        (output stays correct and never violates a CTI)."""
        super().attach(ctx, bs)
        self.time_bound = False

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        win = bs.step.window
        self.width: int = win.n
        self.hop_n: int = win.hop

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.windows = SortedDict()
        g.buckets = SortedDict()
        g.endless = {}
        return g

    def _group_idle(self, g: Group) -> bool:
        return not g.buckets and not g.endless

    def _bounds(self, first: int, last: int) -> tuple[int, int]:
        if self.by_end:
            return first - 1, last
        return first, last + 1

    def _members(self, w: Window) -> Any:
        g = w.group
        a = g.buckets
        i = a.index(w.key)
        keys = a.keys()
        return chain.from_iterable(a[keys[j]].values() for j in range(i, i + self.width))

    def _holds_open(self, w: Window, c: int) -> bool:
        return any(ev.re >= c for ev in self._members(w))

    def _windows_at(self, g: Group, p: int) -> list[Window]:
        """Existing windows that contain bucket position ``p``."""
        a = g.buckets
        n, hop, base = self.width, self.hop_n, g.purged
        L = len(a)
        keys = a.keys()
        out = []
        j = max(0, p - n + 1)
        r = (base + j) % hop
        if r:
            j += hop - r
        wins = g.windows
        while j <= p and j + n - 1 < L:
            w = wins.get(keys[j])
            if w is not None:
                out.append(w)
            j += hop
        return out

    def _restructure(self, g: Group, p: int, v: int) -> None:
        """Bucket value ``v`` appeared at (or vanished from) position ``p``: re-derive the windows whose
        extent may change (those reaching position ``p``; with ``hop > 1`` every later one shifts too)."""
        a = g.buckets
        n, hop, base = self.width, self.hop_n, g.purged
        L = len(a)
        keys = a.keys()
        wins = g.windows
        lo = max(0, p - n + 1)
        lo_key = min(keys[lo], v) if lo < L else v
        if hop == 1:
            hi = min(p, L - n)
            hi_key = keys[p] if p < L else INF
            old = {k: wins[k] for k in list(wins.irange(lo_key, hi_key))}
        else:
            hi = L - n
            old = {k: wins[k] for k in list(wins.irange(minimum=lo_key))}
        j = lo
        r = (base + j) % hop
        if r:
            j += hop - r
        created = []
        while j <= hi:
            first, last = keys[j], keys[j + n - 1]
            le, re = self._bounds(first, last)
            w = old.get(first)
            if w is not None and w.re == re:
                del old[first]
            else:
                nw = Window(g, first, le, re, None)
                nw.count = sum(len(a[keys[i]]) for i in range(j, j + n))
                if w is not None:
                    nw.emitted = w.emitted
                    del old[first]
                    self._destroy(w)
                    if wins.get(first) is w:
                        del wins[first]
                created.append(nw)
            j += hop
        for k, w in old.items():
            self._destroy(w)
            if wins.get(k) is w:
                del wins[k]
        for nw in created:
            wins[nw.key] = nw
            nw.rebuild = True
            self._touch(nw)

    def _bucket_add(self, g: Group, key: int, ev: Ev) -> None:
        a = g.buckets
        b = a.get(key)
        if b is None:
            a[key] = {ev.id: ev}
            self._restructure(g, a.index(key), key)
        else:
            b[ev.id] = ev
            for w in self._windows_at(g, a.index(key)):
                self._add(w, ev)

    def _bucket_remove(self, g: Group, key: int, ev: Ev, le: int, re: int) -> None:
        a = g.buckets
        b = a.get(key)
        if b is None or ev.id not in b:
            return  # purged bucket: its windows are closed
        if len(b) == 1:
            p = a.index(key)
            del a[key]
            self._restructure(g, p, key)
        else:
            del b[ev.id]
            for w in self._windows_at(g, a.index(key)):
                self._remove(w, ev, le, re)

    def _cleanup(self, c: int) -> None:
        ts_noright = self.sees_open_ends
        by_end = self.by_end
        for g in list(self.groups.values()):
            wins = g.windows
            a = g.buckets
            while wins:
                k, w = wins.peekitem(0)
                final = w.re < c if by_end else w.re <= c
                if not final or (ts_noright and self._holds_open(w, c)):
                    break
                del wins[k]
                w.alive = False
            # drop leading buckets no remaining or future window can use
            if wins:
                first = a.index(wins.peekitem(0)[0])
            else:
                L = len(a)
                j = max(0, L - self.width + 1)
                r = (g.purged + j) % self.hop_n
                if r:
                    j += self.hop_n - r
                first = min(j, L)
            drop = 0
            keys = a.keys()
            while drop < first and (not by_end or keys[drop] < c):
                drop += 1
            if drop:
                for k in list(keys[:drop]):
                    del a[k]
                g.purged += drop
            if not wins and g.event_count <= 0:
                self._drop_group_if_empty(g)

    def _bound(self, c: int) -> int:
        b = c
        n, hop = self.width, self.hop_n
        for g in self.groups.values():
            wins = g.windows
            a = g.buckets
            cand = None
            for w in wins.values():
                if w.le >= b:
                    break
                if (w.re >= c if self.by_end else w.re > c) or (self.sees_open_ends and self._holds_open(w, c)):
                    cand = w.le
                    break
            if cand is None:
                L = len(a)
                j = max(0, L - n + 1)
                r = (g.purged + j) % hop
                if r:
                    j += hop - r
                if j < L:
                    cand = self._bounds(a.keys()[j], a.keys()[j])[0]
            if cand is not None and cand < b:
                b = cand
            if self.by_end and b >= c:
                if any(ev.le < c for ev in g.endless.values()):
                    b = c - 1
                else:
                    for k in a.irange(minimum=c, inclusive=(False, True)):
                        if any(ev.le < c for ev in a[k].values()):
                            b = c - 1
                            break
        return b


class CountByStartStep(_CountStep):
    by_end = False

    def _on_insert(self, g: Group, ev: Ev) -> None:
        self._bucket_add(g, ev.le, ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        if new == ev.le:
            self._bucket_remove(g, ev.le, ev, ev.le, old)
            return
        if not self.time_sensitive:
            return
        a = g.buckets
        if ev.le not in a:
            return
        for w in self._windows_at(g, a.index(ev.le)):
            self._update(w, ev, ev.le, old, new)


class CountByEndStep(_CountStep):
    by_end = True

    def _on_insert(self, g: Group, ev: Ev) -> None:
        if ev.re >= INF:
            g.endless[ev.id] = ev
            return
        self._bucket_add(g, ev.re, ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        if old >= INF:
            g.endless.pop(ev.id, None)
        else:
            self._bucket_remove(g, old, ev, le, old)
        if new == le:
            return
        ev.re = new
        if new >= INF:
            g.endless[ev.id] = ev
        else:
            self._bucket_add(g, new, ev)
