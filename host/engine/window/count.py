"""Count windows (SEMANTICS §3): ``count_by_start`` and ``count_by_end`` over distinct LE / finite RE values.

A group keeps its events in *buckets*, one per distinct value (LE for count_by_start, finite RE for
count_by_end; an event that never ends belongs to no count_by_end window). The windows are implied: every
``hop``-th run of ``n`` consecutive buckets, keyed by its first bucket's value; ``purged`` counts the leading
buckets dropped, so the ``hop`` alignment survives cleanup. Evaluated in order, a window is the previous one
plus the buckets that enter minus those that leave (the sweep), so each event costs O(1) whatever ``n``.

A change in a bucket touches the windows holding it; a bucket that appears or vanishes re-derives the
windows from ``n - 1`` buckets before it (with ``hop > 1``, every later one: the alignment shifts). Windows
already evaluated there are *dirty* and are evaluated again, as one diff against what they emitted.

The bucket values are a plain sorted list beside a dict of the buckets: a window is found by position
(its first and last bucket) a dozen times per event, which a list answers by index; a sorted container
answered each with a search of its position index, a cost that grew with the window (issue 26). A new value
is inserted where it sorts (at the end, in order; a memmove of the values after it otherwise), the cleanup
cuts a prefix. What a CTI finalizes and lets go is `count_cti`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import chain, takewhile
from typing import Any

from ..common import Ev
from ..rules import INF, NEG
from .count_cti import CountCti
from .family import merged
from .state import Group

__all__ = ["CountFamily"]


class _Data:
    __slots__ = ("buckets", "dirty", "done", "endless", "floor", "keys", "purged")

    def __init__(self) -> None:
        #: value -> {id: event}
        self.buckets: dict[int, dict[int, Ev]] = {}
        #: the values of ``buckets``, ascending (a bucket's position is its index here)
        self.keys: list[int] = []
        #: count_by_end: events that never end (members of no window)
        self.endless: dict[int, Ev] = {}
        #: how many leading distinct values were dropped (keeps the ``hop`` alignment)
        self.purged = 0
        #: windows keyed at or below this were evaluated
        self.done = NEG
        #: (lo, hi): windows keyed in [lo, hi] to evaluate again
        self.dirty: list[tuple[int, int]] = []
        #: windows keyed below this are final (cleaned up)
        self.floor = NEG

    def __getstate__(self) -> tuple:
        return (self.buckets, self.endless, self.purged, self.done, self.dirty, self.floor)

    def __setstate__(self, s: tuple) -> None:
        buckets, self.endless, self.purged, self.done, self.dirty, self.floor = s
        self.buckets = dict(buckets)  # (a sorted dict in snapshots before the list of values)
        self.keys = sorted(self.buckets)


class CountFamily(CountCti):
    """``count_by_start{n, hop}`` and ``count_by_end{n, hop}``."""

    #: a later distinct value can create a window over members before the CTI, or take one away: a UDM
    #: that keeps the ``time_bound`` promise window by window may still change output before the CTI
    #: there (semantics-notes 72); the promise only lifts the hold of member ends that can still move
    time_bound_ok = False
    fifo = True

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        self.by_end = spec.type == "count_by_end"
        self.n: int = spec.n
        self.hop: int = spec.hop

    def new_group(self, g: Group) -> None:
        g.data = _Data()

    def _bounds(self, first: int, last: int) -> tuple[int, int]:
        if self.by_end:
            return first - 1, last
        return first, last + 1

    def _value(self, ev: Ev) -> int:
        return ev.re if self.by_end else ev.le

    def _start(self, d: _Data, j: int) -> int:
        """The first window start at or after bucket position ``j``."""
        r = (d.purged + j) % self.hop
        return j + (self.hop - r) % self.hop

    # -- per event -------------------------------------------------------------------------------------
    def _touch(self, g: Group, p: int, v: int, appeared: bool) -> None:
        """Bucket value ``v`` at position ``p`` changed (``appeared``: it is new or gone, so windows after it
        may shift; a gone one's window goes too)."""
        d: _Data = g.data
        keys = d.keys
        lo_pos = max(0, p - self.n + 1)
        lo = min(keys[lo_pos], v) if lo_pos < len(keys) else v
        hi = INF if appeared and self.hop > 1 else max(keys[min(p, len(keys) - 1)], v) if keys else v
        sw = g.swept
        if sw is not None and sw[0] <= v <= sw[1]:
            g.swept = None  # the sweep took in the bucket as it was (one past its last, or before its first,
            # leaves what it holds as it was: the sweep names its buckets by value)
        lo = max(lo, d.floor)
        if lo <= d.done:
            d.dirty.append((lo, min(hi, d.done)))

    def insert(self, g: Group, ev: Ev) -> None:
        d: _Data = g.data
        if self.by_end and ev.re >= INF:
            d.endless[ev.id] = ev
            return
        v = self._value(ev)
        b = d.buckets.get(v)
        keys = d.keys
        if b is None:
            d.buckets[v] = {ev.id: ev}
            if not keys or v > keys[-1]:
                p = len(keys)
                keys.append(v)
            else:
                p = bisect_left(keys, v)
                keys.insert(p, v)
            self._touch(g, p, v, True)
        else:
            b[ev.id] = ev
            self._touch(g, bisect_left(keys, v), v, False)

    def _remove(self, g: Group, v: int, ev: Ev) -> None:
        d: _Data = g.data
        b = d.buckets.get(v)
        if b is None or ev.id not in b:
            return  # a purged bucket: its windows are final
        p = bisect_left(d.keys, v)
        if len(b) == 1:
            del d.buckets[v]
            del d.keys[p]
            self._touch(g, p, v, True)
        else:
            del b[ev.id]
            self._touch(g, p, v, False)

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        d: _Data = g.data
        if not self.by_end:
            if new == ev.le:
                self._remove(g, ev.le, ev)
                ev.re = new
                return
            ev.re = new
            if self.step.time_sensitive and ev.le in d.buckets:
                self._touch(g, bisect_left(d.keys, ev.le), ev.le, False)
            return
        if old >= INF:
            d.endless.pop(ev.id, None)
        else:
            self._remove(g, old, ev)
        ev.re = new
        if new == ev.le:
            return
        self.insert(g, ev)

    # -- evaluation ------------------------------------------------------------------------------------
    def _windows(self, d: _Data, lo: int, hi: int) -> Iterator[tuple[int, int, int, int]]:
        """(first bucket position, key, W.LE, W.RE) of the windows keyed in ``[lo, hi]``, in order."""
        keys = d.keys
        L = len(keys)
        j = self._start(d, bisect_left(keys, lo))
        while j + self.n - 1 < L:
            k = keys[j]
            if k > hi:
                break
            wle, wre = self._bounds(k, keys[j + self.n - 1])
            yield j, k, wle, wre
            j += self.hop

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: _Data = g.data
        todo = list(d.dirty)
        d.dirty = []
        new = list(takewhile(lambda w: self.step.releasable(w[2], w[3], False),
                             self._windows(d, d.done + 1 if d.done > NEG else NEG, INF)))
        if new:
            todo.append((new[0][1], new[-1][1]))
            d.done = max(d.done, new[-1][1])
        keep = []
        for lo, hi in merged(todo):
            rest = self._range(g, lo, hi, out, em)
            if rest is not None:
                keep.append((rest, hi))
        d.dirty = keep
        self._pending(g)

    def _range(self, g: Group, lo: int, hi: int, out: Any, em: Any) -> int | None:
        d: _Data = g.data
        step = self.step
        news = []
        stop = None
        for j, k, wle, wre in self._windows(d, lo, hi):
            if not step.releasable(wle, wre, k in g.out):
                stop = k
                break
            if g.sweep is not None:
                self._sweep_to(g, j)
                vals = self.value(g, wle, wre, None)
            else:
                vals = self.value(g, wle, wre, self._members(d, j))
            news.append((k, wle, wre, vals))
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

    def _members(self, d: _Data, j: int) -> Iterable[Ev]:
        b = d.buckets
        keys = d.keys
        return chain.from_iterable(b[keys[i]].values() for i in range(j, j + self.n))

    def _sweep_to(self, g: Group, j: int) -> None:
        d: _Data = g.data
        b = d.buckets
        keys = d.keys
        sweep = g.sweep
        first, last = keys[j], keys[j + self.n - 1]
        prev = g.swept
        if prev is None or prev[0] > first:
            sweep.clear()
            start = j
        else:
            sweep.leave_before(first)
            start = max(j, bisect_right(keys, prev[1]))
        for i in range(start, j + self.n):
            v = keys[i]
            sweep.enter(v, [ev.val for ev in b[v].values()])
        g.swept = (first, last)

    def _pending(self, g: Group) -> None:
        d: _Data = g.data
        w = next(self._windows(d, d.done + 1 if d.done > NEG else NEG, INF), None)
        if w is not None:
            self.step.pending(g, w[3], w[2])
        if d.dirty:
            w = next(self._windows(d, d.dirty[0][0], d.dirty[0][1]), None)
            if w is not None:
                self.step.pending(g, w[3], w[2])

    def windows(self, g: Group) -> int:
        d: _Data = g.data
        return sum(1 for _ in self._windows(d, NEG, INF))
