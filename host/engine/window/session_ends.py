"""What a CTI does to session windows (the per-group structure, `session_groups`): the final sessions it drops
and the output CTI.

Frozen prefix at CTI ``c``: a session is final once ``W.RE <= c`` (``W.RE < c`` with ``gap`` 0: a member
ending at ``c`` can still be extended); final sessions are a prefix, dropped with their rows, and the output
CTI is the first LE of the earliest session that is not final. Per CTI, only groups that can have a final
session are visited, and the earliest open session is found without a scan over every group: two lazy heaps,
pushed when a session opens — ``(W.RE, group)`` (a session's end only grows, so the key is a lower bound)
and ``(W.LE, group)`` (an entry whose session is no longer its group's first is stale and popped when it
surfaces). With thousands of keys the per-CTI cost does not grow with the number of groups.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from ..rules import INF, NEG
from .rows import RowOrderedFamily, forget
from .state import Group

__all__ = ["SessionEnds"]


class SessionEnds(RowOrderedFamily):
    """The CTI side of `session_groups.SessionGroups`: a group's data is its `SessionData` (``wins``: first LE
    -> [W.RE, member count]; ``rows``; ``floor``; ``dirty``)."""

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        self.gap: int = spec.gap
        #: (W.RE when pushed, seq, group): groups that may hold a final session
        self._by_end: list[tuple[int, int, Group]] = []
        #: (W.LE, seq, group): output-CTI candidates
        self._by_le: list[tuple[int, int, Group]] = []
        self._seq = 0
        #: compact the heaps when longer than this (stale entries below the top pile up otherwise)
        self._cap = 64

    def _end(self, top: int) -> int:
        """A session's end when its members' largest RE is ``top``."""
        return INF if top >= INF else top + self.gap

    def _watch(self, g: Group, key: int, end: int) -> None:
        """Session ``key`` of ``g`` opened (or changed): it ends at ``end`` at the earliest."""
        self._seq += 1
        heapq.heappush(self._by_end, (end, self._seq, g))
        heapq.heappush(self._by_le, (key, self._seq, g))
        if len(self._by_le) + len(self._by_end) > self._cap:
            self._compact()

    def _revisit(self, g: Group) -> None:
        """Visit ``g`` at the next CTI (its sessions all went: it may be idle then)."""
        self._seq += 1
        heapq.heappush(self._by_end, (NEG, self._seq, g))

    def _compact(self) -> None:
        """Drop the heaps' stale entries: in ``_by_le`` those of sessions that are gone (every live session
        keeps one), in ``_by_end`` all but each live group's earliest."""
        groups = self.step.groups

        def alive(g: Group) -> bool:
            return groups.get(g.key) is g

        seen: set[tuple[int, int]] = set()
        by_le = []
        for e in self._by_le:
            k, _, g = e
            if alive(g) and k in g.data.wins and (k, id(g)) not in seen:
                seen.add((k, id(g)))
                by_le.append(e)
        heapq.heapify(by_le)
        self._by_le = by_le
        first: dict[int, tuple[int, int, Group]] = {}
        for e in self._by_end:
            g = e[2]
            if alive(g) and (id(g) not in first or e < first[id(g)]):
                first[id(g)] = e
        self._by_end = list(first.values())
        heapq.heapify(self._by_end)
        self._cap = 2 * (len(self._by_le) + len(self._by_end)) + 64

    def cleanup(self, c: int) -> Iterable[Group]:
        groups = self.step.groups
        if c >= INF:
            return list(groups.values())
        by_end = self._by_end
        visit: dict[int, Group] = {}
        while by_end and by_end[0][0] <= c:
            g = heapq.heappop(by_end)[2]
            if groups.get(g.key) is g:
                visit[id(g)] = g
        gap = self.gap
        for g in visit.values():
            d = g.data
            wins = d.wins
            while wins:
                end = wins.peekitem(0)[1][0]
                if not (end < c or (end == c and gap > 0)):
                    break
                wins.popitem(0)
            first = wins.peekitem(0)[0] if wins else None
            rows = d.rows
            cut = rows.bisect_key_left((first,)) if first is not None else len(rows)
            if cut:
                forget(g, rows.islice(0, cut))
                del rows[:cut]
            out = g.out
            while out and (first is None or out.peekitem(0)[0] < first):
                out.popitem(0)
            if g.swept is not None and (first is None or g.swept[0] < first):
                g.sweep.clear()  # it held a final session
                g.swept = None
            floor = c if first is None else min(first, c)
            if floor > d.floor:
                d.floor = floor
                d.dirty = [(max(lo, floor), hi) for lo, hi in d.dirty if hi >= floor]
            if first is not None:
                self._seq += 1
                heapq.heappush(by_end, (wins[first][0], self._seq, g))
        return list(visit.values())

    def idle(self, g: Group) -> bool:
        d = g.data
        return not d.rows

    def final_point(self, g: Group, c: int) -> int:
        # a session ending at or before c holds members ending before c; with gap 0 one ending at c has a
        # member ending at c, which can still be extended
        return c - 1 if self.gap == 0 else c

    def bound(self, c: int) -> int:
        by_le = self._by_le
        groups = self.step.groups
        while by_le:
            k, _, g = by_le[0]
            wins = g.data.wins
            if groups.get(g.key) is g and wins and wins.peekitem(0)[0] == k:
                return k if k < c else c
            heapq.heappop(by_le)
        return c

    def final_state(self) -> None:
        self._by_end = []
        self._by_le = []
