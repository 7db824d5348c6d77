"""Count windows at a CTI (`count.CountFamily`): which windows are final, what a CTI lets go, and how far the
output CTI may advance — the rules that read a group's buckets against a CTI, apart from those that keep them.

A window's membership is implied by bucket positions (the ``n`` buckets from its first), so these rules walk
the implied windows in order and stop at the first one still open: the cost is the open windows, not the
group's history.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..common import Ev
from ..rules import INF, NEG
from .family import Family
from .state import Group

__all__ = ["CountCti"]


class CountCti(Family):
    """Final point, cleanup, idleness and the output-CTI bound of count windows."""

    by_end: bool
    n: int
    hop: int

    _bounds: Callable[[int, int], tuple[int, int]]
    _windows: Callable[[Any, int, int], Iterator[tuple[int, int, int, int]]]
    _members: Callable[[Any, int], Iterable[Ev]]

    def final_point(self, g: Group, c: int) -> int:
        # count_by_end: a window ending at c ends at a member's RE, which can still move; a window ending
        # before c holds members ending before c only. count_by_start: up to the first window holding a
        # member whose end the UDM sees and can still move (with hop > n, a member may sit in no window)
        if self.by_end:
            return c - 1
        if not self.step.sees_open_ends:
            return c
        d = g.data
        for j, _k, _wle, wre in self._windows(d, NEG, INF):
            if wre > c:
                break
            if self._holds_open(d, j, c):
                return wre - 1
        return c

    def _holds_open(self, d: Any, j: int, c: int) -> bool:
        return any(ev.re >= c for ev in self._members(d, j))

    def cleanup(self, c: int) -> Iterable[Group]:
        groups = list(self.step.groups.values())
        if c >= INF:
            return groups
        soe = self.step.sees_open_ends
        by_end = self.by_end
        n, hop = self.n, self.hop
        for g in groups:
            d = g.data
            b = d.buckets
            keys = d.keys
            L = len(keys)
            first_open = None  # bucket position of the first window that is not final
            for j, _k, _wle, wre in self._windows(d, NEG, INF):
                final = wre < c if by_end else wre <= c
                if not final or (soe and self._holds_open(d, j, c)):
                    first_open = j
                    break
            if first_open is None:
                j = max(0, L - n + 1)
                r = (d.purged + j) % hop
                if r:
                    j += hop - r
                first_open = min(j, L)
            drop = 0
            while drop < first_open and keys[drop] < c:  # (a value at or after c can still go away)
                drop += 1
            if drop:
                cut = keys[drop] if drop < L else INF
                for v in keys[:drop]:
                    for eid in b.pop(v):
                        g.events.pop(eid, None)
                del keys[:drop]
                d.purged += drop
                for key in list(g.out.irange(maximum=cut, inclusive=(True, False))):
                    del g.out[key]
                sw = g.swept
                if sw is not None and sw[0] < cut:  # the sweep held dropped buckets: they leave it
                    if cut <= sw[1]:
                        g.sweep.leave_before(cut)
                        g.swept = (cut, sw[1])
                    else:
                        g.sweep.clear()
                        g.swept = None
                d.dirty = [(max(lo, cut), hi) for lo, hi in d.dirty if hi >= cut]
                d.floor = max(d.floor, min(cut, c))
            elif b and first_open < L:
                k0 = keys[first_open]
                for key in list(g.out.irange(maximum=k0, inclusive=(True, False))):
                    del g.out[key]
                d.floor = max(d.floor, min(k0, c))
        return groups

    def idle(self, g: Group) -> bool:
        """A group without values may go when a new group (counting from its first value) would align its
        windows alike: only the ``hop`` alignment of the dropped values matters."""
        d = g.data
        return not d.buckets and not d.endless and d.purged % self.hop == 0

    def bound(self, c: int) -> int:
        b = c
        n, hop = self.n, self.hop
        by_end = self.by_end
        step = self.step
        ends = step.ends_hold_cti and not step.strong
        for g in step.groups.values():
            d = g.data
            keys = d.keys
            cand = None
            gp = self.final_point(g, c) if step.strong else INF  # (strong: windows past it wait)
            for j, _k, wle, wre in self._windows(d, NEG, INF):
                if wle >= b:
                    break
                if (wre >= c if by_end else wre > c) or wre > gp or (ends and self._holds_open(d, j, c)):
                    cand = wle
                    break
            if cand is None:
                L = len(keys)
                j = max(0, L - n + 1)
                r = (d.purged + j) % hop
                if r:
                    j += hop - r
                if j < L:
                    cand = self._bounds(keys[j], keys[j])[0]
            if cand is not None and cand < b:
                b = cand
            # count_by_end: an event starting before c may still end at c, making a window [c - 1, ...) if
            # one starts at that value's position
            if by_end and b >= c and (d.purged + bisect_left(keys, c)) % hop == 0:
                if any(ev.le < c for ev in d.endless.values()):
                    b = c - 1
                else:
                    buckets = d.buckets
                    for i in range(bisect_right(keys, c), len(keys)):
                        if any(ev.le < c for ev in buckets[keys[i]].values()):
                            b = c - 1
                            break
        return b

