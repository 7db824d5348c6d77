"""Snapshot windows (SEMANTICS §3): windows between consecutive distinct endpoints of a group's events."""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict

from ..common import INF, Ev
from .base import WindowStep
from .state import Group, Window

__all__ = ["SnapshotStep"]


class SnapshotStep(WindowStep):
    """Windows between consecutive distinct endpoints. Per group: ``a`` = endpoint counts (finite
    endpoints), ``wins`` = one window per endpoint ``e`` spanning to the next endpoint (or INF)."""

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.windows = SortedDict()
        g.endpoints = {}
        return g

    def _mk(self, g: Group, le: int, re: int, members: dict[str, Ev]) -> Window:
        w = Window(g, le, le, re, members)
        w.count = len(members)
        g.windows[le] = w
        return w

    def _split(self, g: Group, x: int) -> None:
        """Make ``x`` a window boundary."""
        wins = g.windows
        i = wins.bisect_right(x) - 1
        if i < 0:
            nxt = wins.peekitem(0)[0] if wins else INF
            self._mk(g, x, nxt, {})
            return
        w = wins.peekitem(i)[1]
        if w.le == x:
            return
        left = self._mk(g, w.le, x, dict(w.members))
        right = self._mk(g, x, w.re, dict(w.members))
        if w.count or w.outputs or w.dirty:
            self._destroy(w)
            for c in (left, right):
                c.emitted = w.emitted
                if c.count:
                    c.rebuild = True
                self._touch(c)
        else:
            w.alive = False

    def _merge(self, g: Group, x: int) -> None:
        """``x`` is no longer an endpoint: join the windows on both sides of it."""
        wins = g.windows
        w = wins.pop(x)
        i = wins.bisect_left(x) - 1
        if i < 0:
            self._destroy(w)
            return
        p = wins.peekitem(i)[1]
        merged = self._mk(g, p.le, w.re, dict(p.members))
        if p.count or p.outputs or w.count or w.outputs or p.dirty or w.dirty:
            self._destroy(p)
            self._destroy(w)
            merged.emitted = p.emitted or w.emitted
            if merged.count:
                merged.rebuild = True
            self._touch(merged)
        else:
            p.alive = False
            w.alive = False

    def _ep_add(self, g: Group, x: int) -> None:
        eps = g.endpoints
        n = eps.get(x)
        if n is None:
            self._split(g, x)
            eps[x] = 1
        else:
            eps[x] = n + 1

    def _ep_remove(self, g: Group, x: int) -> None:
        eps = g.endpoints
        n = eps[x] - 1
        if n:
            eps[x] = n
        else:
            del eps[x]
            self._merge(g, x)

    def _on_insert(self, g: Group, ev: Ev) -> None:
        le, re = ev.le, ev.re
        self._ep_add(g, le)
        if re < INF:
            self._ep_add(g, re)
        wins = g.windows
        for k in list(wins.irange(le, re, inclusive=(True, False))):
            self._add(wins[k], ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        wins = g.windows
        full = new == le
        if not full and new < INF:
            self._ep_add(g, new)
        if new > old:
            ev.re = new
            for k in list(wins.irange(old, new, inclusive=(True, False))):
                self._add(wins[k], ev)
            ev.re = old
        else:
            lo = le if full else new
            for k in list(wins.irange(lo, old, inclusive=(True, False))):
                self._remove(wins[k], ev, le, old)
        if self.sees_open_ends and not full:
            a = old if old < new else new
            for k in list(wins.irange(le, a, inclusive=(True, False))):
                self._update(wins[k], ev, le, old, new)
        if old < INF:
            self._ep_remove(g, old)
        if full:
            self._ep_remove(g, le)

    def _cleanup(self, c: int) -> None:
        for g in list(self.groups.values()):
            wins = g.windows
            drop = []
            for k in wins.irange(maximum=c, inclusive=(True, True)):
                w = wins[k]
                if w.re >= c:
                    break
                if self.sees_open_ends and w.count and self._holds_open(w, c):
                    continue
                drop.append(k)
            for k in drop:
                w = wins.pop(k)
                w.alive = False
            eps = g.endpoints
            if eps:
                for x in [x for x in eps if x < c]:
                    del eps[x]
            if not wins and g.event_count <= 0:
                self._drop_group_if_empty(g)

    def _group_idle(self, g: Group) -> bool:
        return not g.endpoints

    def _bound(self, c: int) -> int:
        b = c
        ts = self.time_sensitive
        for g in self.groups.values():
            for w in g.windows.values():
                if w.le >= b:
                    break
                if not w.count:
                    continue
                if w.re > c or (w.re == c and ts) or (self.sees_open_ends and self._holds_open(w, c)):
                    b = w.le
                    break
        return b
