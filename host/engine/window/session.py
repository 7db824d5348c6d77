"""Session windows (SEMANTICS §9): ``session{gap}``, maximal runs of a group's events (by LE) in which
each next LE is ``< gap +`` the largest RE so far; window ``[first LE, largest RE + gap)``, INF when a
member never ends.

Sessions are found by one left-to-right scan whose state resets at every session boundary, so after a
change at LE ``x`` the scan restarts at the session holding (or preceding) ``x`` and stops at the first
boundary past ``x`` that the old sessions share: everything after it is unchanged. A late event that
bridges sessions merges them (the old outputs are retracted, the merged one inserted); a retraction that
shortens or deletes a member may split one. An event appended at the end joins or opens the last session
directly (the common in-order case costs no scan).

Frozen prefix at CTI ``c``: a session is final once ``W.RE <= c`` and no member can still end at or after
``c`` (a future event has ``LE >= c``, so it can no longer join it, and no member can change); final
sessions are a prefix (a later session starts after an earlier one's window). They are dropped with their
rows, and the output CTI is the first LE of the earliest session that is not final.

Per CTI, only groups that can have a final session are visited, and the earliest open session is found
without a scan over every group: two lazy heaps, pushed when a session window opens — ``(W.RE, group)``
(a window's end only grows, so the key is a lower bound) and ``(W.LE, group)`` (a window's key never
changes; an entry whose window is no longer its group's first is stale and popped when it surfaces).
With thousands of keys (Nexmark's bidders) the per-CTI cost no longer grows with the number of groups.
"""

from __future__ import annotations

import heapq
from typing import Any

from udm.host.query.plan import BoundStep

from ..common import INF, NEG, Ev
from ..context import Context
from .rows import RowOrderedStep
from .state import Group, Window

__all__ = ["SessionStep"]


class SessionStep(RowOrderedStep):
    """Per group: ``rows`` = the events in canonical order, ``windows`` = SortedDict first LE -> Window
    (members by id; a session's members are a contiguous run of ``rows``)."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        self.gap: int = bs.step.window.gap
        self._by_end: list[tuple[int, int, Group]] = []  # (W.RE at open, seq, group): cleanup candidates
        self._by_le: list[tuple[int, int, Group]] = []  # (W.LE, seq, group): output CTI candidates
        self._hseq = 0

    def _heaps(self) -> tuple[list[tuple[int, int, Group]], list[tuple[int, int, Group]]]:
        """The two heaps (rebuilt from the groups for a step restored from a snapshot that predates them)."""
        if "_by_end" not in self.__dict__:
            self._by_end, self._by_le, self._hseq = [], [], 0
            for g in self.groups.values():
                self._push(g, g.windows.peekitem(0)[1] if g.windows else None)
        return self._by_end, self._by_le

    def _push(self, g: Group, w: Any, end: int | None = None) -> None:
        self._hseq += 1
        if w is None:  # no window: visit the group at the next CTI (it may be idle then)
            heapq.heappush(self._by_end, (NEG if end is None else end, self._hseq, g))
            return
        heapq.heappush(self._by_end, (w.re, self._hseq, g))
        heapq.heappush(self._by_le, (w.key, self._hseq, g))

    def _final_state(self) -> None:
        self._by_end, self._by_le = [], []

    def _group_idle(self, g: Group) -> bool:
        return not g.rows

    def _end(self, top: int) -> int:
        return INF if top >= INF else top + self.gap

    def _open(self, g: Group, members: list[Ev], top: int, old: Window | None) -> None:
        """A new window for a session (replacing ``old``, whose emitted flag it takes over)."""
        first = members[0]
        w = Window(g, first.le, first.le, self._end(top), {e.id: e for e in members})
        w.count = len(members)
        if old is not None:
            w.emitted = old.emitted
            self._destroy(old)
        w.rebuild = True
        g.windows[w.key] = w
        self._touch(w)
        self._heaps()
        self._push(g, w)

    def _on_insert(self, g: Group, ev: Ev) -> None:
        rows = g.rows
        rows.add(ev)
        wins = g.windows
        if rows[-1] is ev and wins:  # appended: it joins the last session or opens one after it
            w = wins.peekitem(-1)[1]
            if w.re < INF and ev.le >= w.re:
                self._open(g, [ev], ev.re, None)
                return
            re = self._end(max(w.re - self.gap, ev.re)) if w.re < INF else INF
            if re != w.re:
                w.re = re  # it only grows: the wait heap re-queues it at its new end
                if self.time_sensitive:
                    w.rebuild = True
            self._add(w, ev)
            return
        if not wins:
            self._open(g, [ev], ev.re, None)
            return
        if self._join_inside(g, ev):
            return
        self._rescan(g, ev.le, None)

    def _join_inside(self, g: Group, ev: Ev) -> bool:
        """A late event inside a session ``w`` (``W.LE <= LE < W.RE``) that does not reach the next one
        joins ``w`` directly: the scan would put it in ``w``'s run (the row after it in ``w`` was within
        ``gap`` of the same running maximum; ahead of it, maxima only grow) and keep the next boundary,
        so no rescan (a rescan is O(session), and a hot group's session spans its whole stream)."""
        wins = g.windows
        i = wins.bisect_right(ev.le) - 1
        if i < 0:
            return False
        w = wins.peekitem(i)[1]
        if not (ev.le < w.re):
            return False
        re = w.re if w.re >= INF else max(w.re, self._end(ev.re))
        if i + 1 < len(wins) and wins.peekitem(i + 1)[0] < re:
            return False  # it bridges into the next session: merge by rescan
        if re != w.re:
            w.re = re
        if self.time_sensitive:
            w.rebuild = True  # a member in the middle: clipped views and order change
        self._add(w, ev)
        return True

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        rows = g.rows
        p = rows.bisect_key_left((ev.le, old, ev.canon(), ev.id))
        if p >= len(rows) or rows[p] is not ev:
            return  # a dropped row: it was final (RE < CTI), so no valid element reaches it
        del rows[p]
        if new != ev.le:
            ev.re = new
            rows.add(ev)
        self._rescan(g, ev.le, (ev, old, new) if new != ev.le else None)

    def _rescan(self, g: Group, x: int, changed: tuple[Ev, int, int] | None) -> None:
        """Re-derive the sessions from the one holding (or preceding) LE ``x`` up to the first old
        boundary past ``x``; keep a window whose extent and members did not change."""
        rows = g.rows
        wins = g.windows
        gap = self.gap
        i = wins.bisect_right(x) - 1
        start_key = wins.peekitem(i)[0] if i >= 0 else None
        j = rows.bisect_key_left((start_key,)) if start_key is not None else 0
        n = len(rows)
        runs: list[tuple[int, int, int]] = []
        while j < n:
            a = j
            top = rows[j].re
            j += 1
            while j < n and (top >= INF or rows[j].le < top + gap):
                r = rows[j].re
                if r > top:
                    top = r
                j += 1
            runs.append((a, j, top))
            if j < n and rows[j].le > x and rows[j].le in wins:
                break
        stop = rows[j].le if j < n else None
        old = {k: wins[k] for k in list(wins.irange(start_key, stop, inclusive=(True, False)))}
        for a, b, top in runs:
            members = rows[a:b]
            key = members[0].le
            w = old.pop(key, None)
            if (w is not None and w.re == self._end(top) and w.count == len(members)
                    and all(e.id in w.members for e in members)):
                if changed is not None and self.time_sensitive and changed[0].id in w.members:
                    ev, o, nw = changed
                    self._update(w, ev, ev.le, o, nw)
                continue
            if w is not None:
                del wins[key]
            self._open(g, members, top, w)
        for k, w in old.items():
            self._destroy(w)
            if wins.get(k) is w:
                del wins[k]
        if not wins:
            self._heaps()
            self._push(g, None)

    # ---------------------------------------------------------------------------------------------
    # cleanup, output CTI
    # ---------------------------------------------------------------------------------------------
    def _final(self, w: Window, c: int) -> bool:
        return w.re < c or (w.re == c and self.gap > 0)

    def _cleanup(self, c: int) -> None:
        by_end, _ = self._heaps()
        seen: set[int] = set()
        visit = []
        while by_end and by_end[0][0] <= c:
            g = heapq.heappop(by_end)[2]
            if id(g) not in seen and self.groups.get(g.key) is g:
                seen.add(id(g))
                visit.append(g)
        for g in visit:
            wins = g.windows
            while wins and self._final(wins.peekitem(0)[1], c):
                wins.popitem(0)[1].alive = False
            cut = g.rows.bisect_key_left((wins.peekitem(0)[0],)) if wins else len(g.rows)
            if cut:
                del g.rows[:cut]
            if wins:
                self._push(g, wins.peekitem(0)[1])
            elif g.event_count <= 0:
                self._drop_group_if_empty(g)
            if not wins and self.groups.get(g.key) is g:
                self._push(g, None, c)  # not idle yet: look again at the next CTI

    def _bound(self, c: int) -> int:
        _, by_le = self._heaps()
        groups = self.groups
        while by_le:
            k, _, g = by_le[0]
            wins = g.windows
            if groups.get(g.key) is g and wins and wins.peekitem(0)[0] == k:
                return k if k < c else c
            heapq.heappop(by_le)
        return c
