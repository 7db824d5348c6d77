"""Tumbling, hopping and cumulate windows (SEMANTICS §3), over panes shared by overlapping windows.

The time axis is cut into *panes* of width ``p`` (``gcd(size, hop)``; a cumulate window's ``step``). Every
window is a run of consecutive panes: hopping window ``k`` covers panes ``[k*H, k*H + L)`` (``H = hop/p``,
``L = size/p``); cumulate window ``j`` (period ``P = j // n``, ``n = size/step``) covers ``[P*n, j + 1)``. An
event inside one pane is kept in that pane once, whatever the number of windows it belongs to; an event
spanning panes (a *long* event, or one that never ends) is kept aside and enters the sweep at its first
pane and leaves after its last. So an insert costs O(1), and the windows of a group are evaluated in order by
the sweep (`sweep`): window ``k + 1`` is window ``k`` plus the panes that enter minus those that leave.

Windows are evaluated when released; an element that touches a window already evaluated marks it *dirty*,
and the next flush evaluates it again (the sweep is rebuilt there). Endless events give windows only up to
the watermark, never past T (semantics-notes 2): at the end of input up to ``W.LE <= T``, and the run
reports the truncation.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from math import gcd
from typing import Any

from sortedcontainers import SortedDict, SortedKeyList

from ..rules import INF, NEG
from .family import Family
from .state import Ev, Group

__all__ = ["GridFamily"]


class _Pane:
    """The short events of one pane, and their merged partial (cached until the pane changes)."""

    __slots__ = ("members", "partial")

    def __init__(self) -> None:
        self.members: dict[int, Ev] = {}
        self.partial: Any = None

    def __getstate__(self) -> tuple:
        return (self.members, self.partial)

    def __setstate__(self, s: tuple) -> None:
        self.members, self.partial = s


def _long_key(item: tuple[int, int, Ev]) -> tuple[int, int]:
    return (item[0], item[2].id)


class _Data:
    """A group's panes, long events, and how far its windows were evaluated."""

    __slots__ = ("dirty", "done", "endless", "floor", "longs", "panes")

    def __init__(self) -> None:
        self.panes: SortedDict = SortedDict()
        #: (first pane, last pane or INF, event) of events spanning panes, by first pane
        self.longs: SortedKeyList = SortedKeyList(key=_long_key)
        #: the last window evaluated in order
        self.done = NEG
        #: windows at or before ``done`` to evaluate again: (lo, hi) index ranges
        self.dirty: list[tuple[int, int]] = []
        #: how many of the long events never end
        self.endless = 0
        #: windows before this one are final (cleaned up): nothing valid can change them
        self.floor = NEG

    def __getstate__(self) -> tuple:
        return (self.panes, list(self.longs), self.done, self.dirty, self.endless, self.floor)

    def __setstate__(self, s: tuple) -> None:
        self.panes, longs, self.done, self.dirty, self.endless, self.floor = s
        self.longs = SortedKeyList(longs, key=_long_key)


class GridFamily(Family):
    """``tumbling{size, offset}``, ``hopping{size, hop, offset}``, ``cumulate{size, step, offset}``."""

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        self.off: int = spec.offset
        self.cumulate = spec.type == "cumulate"
        if self.cumulate:
            self.size: int = spec.size
            self.p: int = spec.step
            self.n = self.size // self.p
            self.hop = self.size  # (a period)
        else:
            self.size = spec.size
            self.hop = getattr(spec, "hop", spec.size)
            self.p = gcd(self.size, self.hop)
        self.L = self.size // self.p
        self.H = self.hop // self.p
        #: the window index the frontier reached: windows of endless events exist up to it
        self.frontier = NEG
        #: groups holding endless events
        self.endless_groups: dict[int, Group] = {}
        #: (W.RE of a group's first window, seq, group): groups with something to clean up
        self.clean: list[tuple[int, int, Group]] = []
        self.seq = 0
        #: held windows (time-sensitive, open member ends): (W.LE, seq, group) of groups holding one
        self.held: dict[int, tuple[int, Group]] = {}
        self.truncated = False

    # -- geometry ------------------------------------------------------------------------------------------
    def pane(self, t: int) -> int:
        return (t - self.off) // self.p

    def span(self, k: int) -> tuple[int, int]:
        """Window ``k``'s panes ``[a, b)``."""
        if self.cumulate:
            return (k // self.n) * self.n, k + 1
        a = k * self.H
        return a, a + self.L

    def extent(self, k: int) -> tuple[int, int]:
        """Window ``k``'s ``[W.LE, W.RE)``."""
        a, b = self.span(k)
        return self.off + a * self.p, self.off + b * self.p

    def first_window(self, s: int) -> int:
        """The first window holding pane ``s``."""
        if self.cumulate:
            return s
        return -((self.L - 1 - s) // self.H)  # ceil((s - L + 1) / H)

    def last_window(self, s: int) -> int:
        """The last window holding pane ``s`` (INF for an endless event)."""
        if s >= INF:
            return INF
        if self.cumulate:
            return (s // self.n) * self.n + self.n - 1
        return s // self.H

    def last_closed(self, t: int) -> int:
        """The last window with ``W.RE <= t``."""
        if t >= INF:
            return INF
        if self.cumulate:
            return (t - self.off) // self.p - 1  # window j ends with pane j
        return (t - self.off - self.size) // self.hop

    def last_starting_before(self, t: int) -> int:
        """The last window with ``W.LE < t``."""
        if t >= INF:
            return INF
        if self.cumulate:
            return self.n * (-((self.off - t) // self.size)) - 1  # every window of a period starting < t
        return -((self.off - t) // self.hop) - 1

    def last_started(self, m: int) -> int:
        """The last window with ``W.LE <= m`` (the frontier of endless events)."""
        if self.cumulate:
            return ((m - self.off) // self.size) * self.n + self.n - 1
        return (m - self.off) // self.hop

    # -- per event -------------------------------------------------------------------------------------
    def new_group(self, g: Group) -> None:
        g.data = _Data()

    def _panes_of(self, ev: Ev) -> tuple[int, int]:
        s1 = self.pane(ev.le)
        s2 = INF if ev.re >= INF else self.pane(ev.re - 1)
        return s1, s2

    def _add(self, g: Group, ev: Ev) -> tuple[int, int]:
        d: _Data = g.data
        s1, s2 = self._panes_of(ev)
        if s1 == s2:
            p = d.panes.get(s1)
            if p is None:
                p = d.panes[s1] = _Pane()
            p.members[ev.id] = ev
            p.partial = None
        else:
            d.longs.add((s1, s2, ev))
            if s2 >= INF:
                d.endless += 1
                self.endless_groups[id(g)] = g
        return s1, s2

    def _drop(self, g: Group, ev: Ev) -> tuple[int, int]:
        d: _Data = g.data
        s1, s2 = self._panes_of(ev)
        if s1 == s2:
            p = d.panes.get(s1)
            if p is not None:
                p.members.pop(ev.id, None)
                p.partial = None
                if not p.members:
                    del d.panes[s1]
        else:
            d.longs.discard((s1, s2, ev))
            if s2 >= INF:
                d.endless -= 1
        return s1, s2

    def insert(self, g: Group, ev: Ev) -> None:
        s1, s2 = self._add(g, ev)
        self._touched(g, s1, s2)

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        a1, a2 = self._drop(g, ev)
        if g.swept is not None and a1 < self.span(g.swept)[1]:
            g.swept = None  # the sweep took the event in as it was
        ev.re = new
        if new > ev.le:
            _, b2 = self._add(g, ev)
        else:
            b2 = a1 - 1
        if self.step.time_sensitive:
            self._touched(g, a1, max(a2, b2))
        else:
            lo, hi = (a2, b2) if a2 < b2 else (b2, a2)
            if lo != hi:
                self._touched(g, max(a1, lo + 1) if new > ev.le else a1, hi)

    def _touched(self, g: Group, s1: int, s2: int) -> None:
        """Panes ``[s1, s2]`` changed: windows already evaluated that hold them are dirty."""
        d: _Data = g.data
        if g.swept is not None and s1 < self.span(g.swept)[1]:
            g.swept = None  # the sweep already took in what changed: rebuilt at the next evaluation
        lo = max(self.first_window(s1), d.floor)
        if lo <= d.done:
            hi = min(self.last_window(s2), d.done)
            if hi >= lo:
                d.dirty.append((lo, hi))
        self.seq += 1
        heapq.heappush(self.clean, (self.extent(lo)[1], self.seq, g))

    def advanced(self, m: int) -> None:
        target = min(m, self.step.ctx.reached)
        if target > NEG:
            k = self.last_started(target)
            if k > self.frontier:
                self._extend(k)

    def _extend(self, k: int) -> None:
        """The frontier moves to window ``k``: endless events now belong to the windows up to it (those
        already evaluated without them are dirty)."""
        old = self.frontier
        self.frontier = k
        for g in self.endless_groups.values():
            d: _Data = g.data
            if d.endless and old < d.done:
                d.dirty.append((max(old + 1, d.floor), min(k, d.done)))
                g.swept = None
                self.step.touched[id(g)] = g

    def finish_ready(self) -> None:
        """End of input (semantics-notes 2): endless events give windows up to ``W.LE <= T``."""
        T = self.step.ctx.reached
        if T > NEG:
            k = self.last_started(T)
            if k > self.frontier:
                self._extend(k)
        if any(g.data.endless for g in self.endless_groups.values()):
            self.truncated = True
            self.step.ctx.truncated(T)

    # -- evaluation ------------------------------------------------------------------------------------
    def _last_releasable(self) -> int:
        st = self.step
        k = self.last_closed(st.rp)
        if st.tb > NEG:
            k = max(k, self.last_starting_before(st.tb))
        if st.tick:
            k = max(k, self.last_started(st.watermark))
        return k

    def _new_windows(self, g: Group, lo: int, hi: int) -> list[tuple[int, int]]:
        """Index ranges of the windows in ``[lo, hi]`` that hold a member."""
        d: _Data = g.data
        ranges: list[tuple[int, int]] = []
        a = self.span(lo)[0]
        b = self.span(hi)[1]
        for s in d.panes.irange(a, b - 1):
            r0 = max(lo, self.first_window(s))
            r1 = min(hi, self.last_window(s))
            if r0 > r1:
                continue
            if ranges and r0 <= ranges[-1][1] + 1:
                if r1 > ranges[-1][1]:
                    ranges[-1] = (ranges[-1][0], r1)
            else:
                ranges.append((r0, r1))
        if d.longs:
            cap = self.frontier
            for s1, s2, _ev in d.longs.irange_key(max_key=(b, INF)):
                r1 = min(hi, self.last_window(s2))
                if s2 >= INF:
                    r1 = min(r1, cap)
                r0 = max(lo, self.first_window(s1))
                if r0 <= r1:
                    ranges.append((r0, r1))
            ranges = _merged(ranges)
        return ranges

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: _Data = g.data
        K = self._last_releasable()
        todo = list(d.dirty)
        d.dirty = []
        if K > d.done:
            todo += self._new_windows(g, d.done + 1, K)
            d.done = K
        if not todo:
            self._pending(g)
            return
        step = self.step
        sweep = g.sweep
        keep: list[tuple[int, int]] = []
        for lo, hi in _merged(todo):
            k = lo
            while k <= hi:
                wle, wre = self.extent(k)
                if not step.releasable(wle, wre, k in g.out):
                    keep.append((k, k))
                    k += 1
                    continue
                if sweep is not None:
                    self._sweep_to(g, k)
                    news = self.value(g, wle, wre, None)
                else:
                    news = self.value(g, wle, wre, self._members(g, k))
                self.put(g, k, wle, wre, news, out, em)
                k += 1
        d.dirty = keep
        self._pending(g)

    def _pending(self, g: Group) -> None:
        """Register the group's first window still to release with the step."""
        d: _Data = g.data
        k = None
        s = next(iter(d.panes.irange(self.span(d.done + 1)[0], None)), None) if d.panes else None
        if s is not None:
            k = max(d.done + 1, self.first_window(s))
        for s1, s2, _ev in d.longs:
            last = self.last_window(s2)
            if last > d.done:
                kk = max(d.done + 1, self.first_window(s1))
                if s2 >= INF and kk > self.frontier:
                    kk = self.frontier + 1
                k = kk if k is None else min(k, kk)
                break
        for lo, _hi in d.dirty:
            k = lo if k is None else min(k, lo)
        if k is not None:
            wle, wre = self.extent(k)
            self.step.pending(g, wre, wle)

    def _sweep_to(self, g: Group, k: int) -> None:
        """Bring the group's sweep to window ``k``: forward from the window it holds, else rebuilt."""
        d: _Data = g.data
        sweep = g.sweep
        a, b = self.span(k)
        prev = g.swept
        if prev is None or prev > k:
            sweep.clear()
            start = a
            lstart = None
        else:
            pa, pb = self.span(prev)
            sweep.leave_before(a)
            start = max(pb, a)
            lstart = pb
        partials = self.step.sweep_kind == "merge"
        for s in d.panes.irange(start, b - 1):
            p: _Pane = d.panes[s]
            if partials:
                if p.partial is None:
                    wu = self.step.udm
                    p.partial = wu.add(wu.initial_state(), [e.val for e in p.members.values()], None)
                sweep.enter_partial(s, p.partial)
            else:
                sweep.enter(s, [e.val for e in p.members.values()])
        if d.longs:
            lo_key = (NEG, NEG) if lstart is None else (lstart, NEG)
            for s1, s2, ev in d.longs.irange_key(lo_key, (b - 1, INF)):
                if s2 >= a:
                    sweep.enter(s2 if s2 < INF else INF, [ev.val])
        g.swept = k

    def _members(self, g: Group, k: int) -> list[Ev]:
        d: _Data = g.data
        a, b = self.span(k)
        out: list[Ev] = []
        for s in d.panes.irange(a, b - 1):
            out.extend(d.panes[s].members.values())
        if d.longs:
            for s1, s2, ev in d.longs.irange_key(max_key=(b - 1, INF)):
                if s2 >= a and (s2 < INF or k <= self.frontier):
                    out.append(ev)
        return out

    # -- cleanup, output CTI ------------------------------------------------------------------------------
    def cleanup(self, c: int) -> Iterable[Group]:
        h = self.clean
        visit: dict[int, Group] = {}
        while h and h[0][0] <= c:
            g = heapq.heappop(h)[2]
            visit[id(g)] = g
        if c >= INF:
            return list(visit.values())
        kf = self.last_closed(c)
        soe = self.step.sees_open_ends
        for g in list(visit.values()):
            d: _Data = g.data
            k_keep = kf + 1
            if soe:
                k_keep = self._first_open(g, kf, c)
            a = self.span(k_keep)[0]
            out = g.out
            while out and out.peekitem(0)[0] < k_keep:
                out.popitem(0)
            panes = d.panes
            while panes and panes.peekitem(0)[0] < a:
                _, p = panes.popitem(0)
                for eid in p.members:
                    g.events.pop(eid, None)
            if d.longs:
                for item in [it for it in d.longs if it[1] < a]:
                    d.longs.remove(item)
                    g.events.pop(item[2].id, None)
            if g.swept is not None and g.swept < k_keep:
                g.sweep.clear()
                g.swept = None
            d.dirty = [(max(lo, k_keep), hi) for lo, hi in d.dirty if hi >= k_keep]
            d.floor = max(d.floor, k_keep)
            if k_keep <= kf:
                self.held[id(g)] = (self.extent(k_keep)[0], g)
            else:
                self.held.pop(id(g), None)
            if panes or d.longs or out:
                first = panes.peekitem(0)[0] if panes else INF
                if d.longs:
                    first = min(first, d.longs[0][0])
                kk = max(k_keep, self.first_window(first)) if first < INF else k_keep
                self.seq += 1
                heapq.heappush(h, (self.extent(kk)[1], self.seq, g))
            if not d.endless:
                self.endless_groups.pop(id(g), None)
        return list(visit.values())

    def _first_open(self, g: Group, kf: int, c: int) -> int:
        """Time-sensitive without right clipping: the first window at or before ``kf`` holding a member
        whose end may still change (``RE >= c``): it and every later one stay."""
        d: _Data = g.data
        first = None
        for ev in g.events.values():
            if ev.re >= c:
                k = self.first_window(self.pane(ev.le))
                first = k if first is None else min(first, k)
        if first is None or first > kf:
            return kf + 1
        del d
        return first

    def idle(self, g: Group) -> bool:
        d: _Data = g.data
        return not d.panes and not d.longs

    def bound(self, c: int) -> int:
        k0 = self.last_closed(c) + 1  # first window with W.RE > c
        b = self.extent(k0)[0]
        if any(g.data.endless for g in self.endless_groups.values()):
            b = min(b, self.extent(self.frontier + 1)[0])
        for le, _g in self.held.values():
            if le < b:
                b = le
        return b

    def final_state(self) -> None:
        self.endless_groups = {}
        self.clean = []
        self.held = {}

    def windows(self, g: Group) -> int:
        return len(g.out)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged index ranges."""
    if len(ranges) <= 1:
        return ranges
    ranges = sorted(ranges)
    out = [ranges[0]]
    for lo, hi in ranges[1:]:
        plo, phi = out[-1]
        if lo <= phi + 1:
            if hi > phi:
                out[-1] = (plo, hi)
        else:
            out.append((lo, hi))
    return out
