"""Snapshot windows (SEMANTICS §3): windows between consecutive distinct endpoints of a group's events."""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict

from ..common import INF, Ev
from .base import WindowStep
from .state import Group, Win

__all__ = ["SnapshotStep"]


class SnapshotStep(WindowStep):
    """Windows between consecutive distinct endpoints. Per group: ``a`` = endpoint counts (finite
    endpoints), ``wins`` = one window per endpoint ``e`` spanning to the next endpoint (or INF)."""

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.wins = SortedDict()
        g.a = {}
        return g

    def _mk(self, g: Group, le: int, re: int, members: dict[str, Ev]) -> Win:
        w = Win(g, le, le, re, members)
        w.n = len(members)
        g.wins[le] = w
        return w

    def _split(self, g: Group, x: int) -> None:
        """Make ``x`` a window boundary."""
        wins = g.wins
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
        if w.n or w.out or w.dirty:
            self._destroy(w)
            for c in (left, right):
                c.sticky = w.sticky
                if c.n:
                    c.rebuild = True
                self._touch(c)
        else:
            w.alive = False

    def _merge(self, g: Group, x: int) -> None:
        """``x`` is no longer an endpoint: join the windows on both sides of it."""
        wins = g.wins
        w = wins.pop(x)
        i = wins.bisect_left(x) - 1
        if i < 0:
            self._destroy(w)
            return
        p = wins.peekitem(i)[1]
        merged = self._mk(g, p.le, w.re, dict(p.members))
        if p.n or p.out or w.n or w.out or p.dirty or w.dirty:
            self._destroy(p)
            self._destroy(w)
            merged.sticky = p.sticky or w.sticky
            if merged.n:
                merged.rebuild = True
            self._touch(merged)
        else:
            p.alive = False
            w.alive = False

    def _ep_add(self, g: Group, x: int) -> None:
        eps = g.a
        n = eps.get(x)
        if n is None:
            self._split(g, x)
            eps[x] = 1
        else:
            eps[x] = n + 1

    def _ep_remove(self, g: Group, x: int) -> None:
        eps = g.a
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
        wins = g.wins
        for k in list(wins.irange(le, re, inclusive=(True, False))):
            self._add(wins[k], ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        wins = g.wins
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
        if self.ts_noright and not full:
            a = old if old < new else new
            for k in list(wins.irange(le, a, inclusive=(True, False))):
                self._update(wins[k], ev, le, old, new)
        if old < INF:
            self._ep_remove(g, old)
        if full:
            self._ep_remove(g, le)

    def _cleanup(self, c: int) -> None:
        for g in list(self.groups.values()):
            wins = g.wins
            drop = []
            for k in wins.irange(maximum=c, inclusive=(True, True)):
                w = wins[k]
                if w.re >= c:
                    break
                if self.ts_noright and w.n and self._holds_open(w, c):
                    continue
                drop.append(k)
            for k in drop:
                w = wins.pop(k)
                w.alive = False
            eps = g.a
            if eps:
                for x in [x for x in eps if x < c]:
                    del eps[x]
            if not wins and g.nev <= 0:
                self._drop_group_if_empty(g)

    def _group_idle(self, g: Group) -> bool:
        return not g.a

    def _bound(self, c: int) -> int:
        b = c
        ts = self.ts
        for g in self.groups.values():
            for w in g.wins.values():
                if w.le >= b:
                    break
                if not w.n:
                    continue
                if w.re > c or (w.re == c and ts) or (self.ts_noright and self._holds_open(w, c)):
                    b = w.le
                    break
        return b
