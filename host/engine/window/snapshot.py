"""Snapshot windows (SEMANTICS §3): windows between consecutive distinct endpoints of a group's events.

A group keeps its endpoints (with how many events have each) and its events by LE; the windows are implied:
``[e_i, e_{i+1})``, and ``[e_m, INF)`` while some event never ends. Evaluated in order, window ``i + 1`` is
window ``i`` plus the events starting at ``e_{i+1}`` minus those ending there (the sweep: no member lists
are copied, however many windows an event spans), so a RANGE-style query (point events given a ``w``-tick
lifetime) costs O(1) per event whatever ``w``.

A change at time ``t`` touches the windows from the one holding ``t`` on (an endpoint that appears splits
that window, one that disappears merges two); windows already evaluated there are *dirty*, and the next
flush evaluates the whole touched range again, diffing it as one against what its old windows emitted (a
split keeps an output whose LE and payload survive, as one retraction to its new end).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from sortedcontainers import SortedDict

from ..common import Ev
from ..rules import INF, NEG
from .family import Family, merged
from .state import Group

__all__ = ["SnapshotFamily"]


class _Data:
    __slots__ = ("dirty", "done", "endless", "ends", "eps", "floor", "starts")

    def __init__(self) -> None:
        #: finite endpoint -> how many events have it (as LE or RE)
        self.eps: SortedDict = SortedDict()
        #: LE -> {id: event}
        self.starts: SortedDict = SortedDict()
        #: events that never end
        self.endless = 0
        #: (RE, LE, id) of every finite end an event had, a heap: cleanup pops the events that ended (an entry
        #: whose event has another end now is stale and skipped), so it costs what it drops, not what stays
        self.ends: list[tuple[int, int, Any]] = []
        #: windows starting before this were evaluated
        self.done = NEG
        #: (lo, hi): windows with LE in [lo, hi] to evaluate again
        self.dirty: list[tuple[int, int]] = []
        #: windows starting before this are final (cleaned up)
        self.floor = NEG

    def __getstate__(self) -> tuple:
        return (self.eps, self.starts, self.endless, self.ends, self.done, self.dirty, self.floor)

    def __setstate__(self, s: tuple) -> None:
        self.eps, self.starts, self.endless, self.ends, self.done, self.dirty, self.floor = s


class SnapshotFamily(Family):
    def new_group(self, g: Group) -> None:
        g.data = _Data()

    # -- structure -------------------------------------------------------------------------------------
    def _ep_add(self, d: _Data, x: int) -> None:
        d.eps[x] = d.eps.get(x, 0) + 1

    def _ep_remove(self, d: _Data, x: int) -> None:
        n = d.eps.get(x, 0) - 1
        if n > 0:
            d.eps[x] = n
        else:
            d.eps.pop(x, None)

    def _next(self, d: _Data, x: int) -> int | None:
        """The end of the window starting at endpoint ``x`` (None: no window starts there)."""
        eps = d.eps
        i = eps.bisect_right(x)
        if i < len(eps):
            return eps.peekitem(i)[0]
        return INF if d.endless else None

    def _window_at(self, d: _Data, t: int) -> int:
        """The start of the window holding time ``t`` (``t`` itself when no endpoint precedes it)."""
        i = d.eps.bisect_right(t) - 1
        return d.eps.peekitem(i)[0] if i >= 0 else t

    def _before(self, d: _Data, t: int) -> int:
        """The start of the window ending at or holding ``t``: the last endpoint below ``t`` (an endpoint
        that goes away at ``t`` merges that window with the next)."""
        i = d.eps.bisect_left(t) - 1
        return d.eps.peekitem(i)[0] if i >= 0 else t

    def _touch(self, g: Group, lo: int, hi: int) -> None:
        """Times ``[lo, hi]`` changed (``lo`` already an endpoint or about to become one)."""
        d: _Data = g.data
        if g.swept is not None and lo < g.swept[1]:
            g.swept = None
        lo = max(lo, d.floor)
        if lo < d.done:
            d.dirty.append((lo, min(hi, d.done)))

    def insert(self, g: Group, ev: Ev) -> None:
        d: _Data = g.data
        lo = self._window_at(d, ev.le)
        self._ep_add(d, ev.le)
        if ev.re < INF:
            self._ep_add(d, ev.re)
            heapq.heappush(d.ends, (ev.re, ev.le, ev.id))
        else:
            d.endless += 1
        got = d.starts.get(ev.le)
        if got is None:
            d.starts[ev.le] = {ev.id: ev}
        else:
            got[ev.id] = ev
        self._touch(g, lo, ev.re)

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        d: _Data = g.data
        le = ev.le
        if g.swept is not None and le < g.swept[1]:
            g.swept = None  # the sweep took the event in as it was
        full = new == le
        a = old if old < new else new
        b = new if old < new else old
        lo = self._before(d, le if (full or self.step.sees_open_ends) else a)
        if not full and new < INF:
            self._ep_add(d, new)
            heapq.heappush(d.ends, (new, le, ev.id))
        if old < INF:
            self._ep_remove(d, old)
        else:
            d.endless -= 1
        if full:
            self._ep_remove(d, le)
            got = d.starts.get(le)
            if got is not None:
                got.pop(ev.id, None)
                if not got:
                    del d.starts[le]
        elif new >= INF:
            d.endless += 1
        ev.re = new
        self._touch(g, lo, b)

    # -- evaluation ------------------------------------------------------------------------------------
    def _last_key(self, d: _Data) -> int | None:
        """The start of the last window released now."""
        st = self.step
        eps = d.eps
        last = None
        # W.RE <= rp: windows whose end endpoint is <= rp
        i = eps.bisect_right(st.rp) - 1
        if i >= 1:
            last = eps.peekitem(i - 1)[0]
        if st.rp >= INF and eps and d.endless:
            last = eps.peekitem(-1)[0]
        lim = NEG
        if st.tb > NEG:
            lim = st.tb - 1
        if st.tick:
            lim = max(lim, st.watermark)
        if lim > NEG and eps:
            j = eps.bisect_right(lim) - 1
            if j >= 0:
                k = eps.peekitem(j)[0]
                if self._next(d, k) is not None:
                    last = k if last is None else max(last, k)
        return last

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: _Data = g.data
        todo = list(d.dirty)
        d.dirty = []
        last = self._last_key(d)
        if last is not None and last >= d.done:
            todo.append((d.done, last))
            end = self._next(d, last)
            d.done = INF if end is None else end
        if todo:
            keep = []
            for lo, hi in merged(todo):
                rest = self._range(g, lo, hi, out, em)
                if rest is not None:
                    keep.append((rest, hi))
            d.dirty = keep
        self._pending(g)

    def _range(self, g: Group, lo: int, hi: int, out: Any, em: Any) -> int | None:
        """Evaluate the windows starting in ``[lo, hi]`` against the outputs of the windows that started
        there; returns where the windows not released yet start (None: all were)."""
        d: _Data = g.data
        step = self.step
        news: list[tuple[Any, int, int, list]] = []
        stop = None
        # each window ends where the next starts: the endpoints from lo on, walked once (looking each end up
        # by position cost a search of the sorted dict's position index per window, growing with its size)
        xs = list(d.eps.irange(lo, hi))
        if xs:
            after = next(iter(d.eps.irange(xs[-1], inclusive=(False, True))), None)
            xs.append(after if after is not None else INF if d.endless else None)
        for x, y in pairwise(xs):
            if y is None:
                break
            if not step.releasable(x, y, x in g.out):
                stop = x
                break
            if g.sweep is not None:
                self._sweep_to(g, x, y)
                vals = self.value(g, x, y, None)
            else:
                vals = self.value(g, x, y, self._members(d, x))
            news.append((x, x, y, vals))
        top = hi if stop is None else stop - 1
        olds = []
        for key in list(g.out.irange(lo, top)):
            olds.extend(g.out.pop(key))
        if not olds:
            for key, wle, wre, vals in news:
                self.put(g, key, wle, wre, vals, out, em)
        else:
            em.emit(step, g, olds, news, out)
        return stop

    def _members(self, d: _Data, x: int) -> list[Ev]:
        out = []
        for le in d.starts.irange(maximum=x):
            for ev in d.starts[le].values():
                if ev.re > x:
                    out.append(ev)
        return out

    def _held(self, d: _Data, x: int) -> bool:
        """Does the window starting at ``x`` have a member (stops at the first)?"""
        starts = d.starts
        for le in starts.irange(maximum=x):
            for ev in starts[le].values():
                if ev.re > x:
                    return True
        return False

    def _sweep_to(self, g: Group, x: int, y: int) -> None:
        d: _Data = g.data
        sweep = g.sweep
        prev = g.swept
        if prev is None or prev[0] > x:
            sweep.clear()
            for le in d.starts.irange(maximum=x):
                for ev in d.starts[le].values():
                    if ev.re > x:
                        sweep.enter(ev.re - 1 if ev.re < INF else INF, [ev.val])
        else:
            sweep.leave_before(x)
            for le in d.starts.irange(prev[0], x, inclusive=(False, True)):
                for ev in d.starts[le].values():
                    if ev.re > x:
                        sweep.enter(ev.re - 1 if ev.re < INF else INF, [ev.val])
        g.swept = (x, y)

    def _pending(self, g: Group) -> None:
        d: _Data = g.data
        x = d.done
        lo = d.dirty[0][0] if d.dirty else None
        if x < INF and d.eps:
            i = d.eps.bisect_left(x)
            if i < len(d.eps):
                k = d.eps.peekitem(i)[0]
                y = self._next(d, k)
                if y is not None:
                    self.step.pending(g, y, k)
        if lo is not None:
            y = self._next(d, lo)
            self.step.pending(g, y if y is not None else INF, lo)

    # -- cleanup, output CTI ------------------------------------------------------------------------------
    def final_point(self, g: Group, c: int) -> int:
        # a window ending at c can still merge with the next (the endpoint c can go away)
        return min(c - 1, super().final_point(g, c))

    def cleanup(self, c: int) -> Iterable[Group]:
        groups = list(self.step.groups.values())
        if c >= INF:
            return groups
        soe = self.step.sees_open_ends
        for g in groups:
            d: _Data = g.data
            eps = d.eps
            # the first window that can still change: the one ending at or after c (ending at c it can still
            # merge with the next), or one holding a member whose end can still move
            keep = None
            for x in eps.irange(maximum=c):
                y = self._next(d, x)
                if y is None or y >= c:
                    keep = x
                    break
                if soe and any(ev.re >= c for ev in self._members(d, x)):
                    keep = x
                    break
            if keep is None:
                keep = c if not eps else min(c, eps.peekitem(-1)[0] if d.endless else c)
            for key in list(g.out.irange(maximum=keep, inclusive=(True, False))):
                del g.out[key]
            for x in list(eps.irange(maximum=keep, inclusive=(True, False))):
                del eps[x]
            ends, starts = d.ends, d.starts
            while ends and ends[0][0] <= keep:
                re, le, eid = heapq.heappop(ends)
                evs = starts.get(le)
                ev = None if evs is None else evs.get(eid)
                if ev is None or ev.re != re:
                    continue  # (stale: the event went, or has another end now)
                del evs[eid]
                g.events.pop(eid, None)
                if not evs:
                    del starts[le]
            if g.swept is not None and g.swept[0] < keep:
                g.sweep.clear()
                g.swept = None
            d.dirty = [(max(lo, keep), hi) for lo, hi in d.dirty if hi >= keep]
            d.floor = max(d.floor, keep)
        return groups

    def idle(self, g: Group) -> bool:
        d: _Data = g.data
        return not d.eps and not d.endless and not d.starts

    def bound(self, c: int) -> int:
        b = c
        # (a window ending at c can still grow: a time-sensitive UDM may see it, and strong consistency
        # holds it)
        ts = self.step.time_sensitive or self.step.strong
        soe = self.step.sees_open_ends
        for g in self.step.groups.values():
            d: _Data = g.data
            for x in d.eps.irange(maximum=b, inclusive=(True, False)):
                y = self._next(d, x)
                if y is None:
                    break
                if not self._held(d, x):
                    continue
                if y > c or (y == c and ts) or (soe and any(ev.re >= c for ev in self._members(d, x))):
                    b = x
                    break
        return b

    def windows(self, g: Group) -> int:
        return max(len(g.data.eps) - 1, 0) + (1 if g.data.endless else 0)
