"""Row windows (SEMANTICS §9): ``rows{n, slide, partial}``, SQL/ESL ``ROWS n-1 PRECEDING SLIDE slide``.

The group's events are numbered 1, 2, ... in canonical order (LE, RE, canonical value JSON; the id only
makes the sort total). The window of yield row ``k`` (a multiple of ``slide``) is keyed by ``k`` and lists
rows ``max(1, k-n+1) .. k``; its interval is ``[LE(first row), LE(row k) + 1)``. A window keeps no member
map: its members are a slice of the group's sorted rows, so memory is one entry per row, not per
(row, window).

An element changes rows from some position on: an insert or a full retraction renumbers every later row
(every later window is re-derived), a changed end moves a row only inside its block of equal LEs (only
the windows reaching that block are re-derived). Re-derived windows replace the old ones; the base
operator's minimal-diff output then retracts only outputs that really changed.

Frozen prefix at CTI ``c``: a future insert has ``LE >= c``, so it lands after every row with ``LE < c``;
a future end change needs ``RE >= c`` and moves its row only inside its LE block. Rows before the first
such position can no longer move: windows ending there are final, rows no remaining window lists are
dropped, and the output CTI is the first LE of the earliest window that can still change.
"""

from __future__ import annotations

import copy
import heapq
from typing import Any

from sortedcontainers import SortedDict, SortedKeyList

from udm.host.query.plan import BoundStep

from ..common import INF, Ev
from ..context import Context
from .base import WindowStep
from .state import Group, Window

__all__ = ["RowOrderedStep", "RowsStep", "row_key"]


def row_key(ev: Ev) -> tuple[int, int, str, str]:
    """Canonical row order (SEMANTICS §5/§9, semantics-notes 5); the id only breaks exact ties."""
    return (ev.le, ev.re, ev.canon(), ev.id)


class RowOrderedStep(WindowStep):
    """What the row-ordered families (``rows``, ``session``) share: per group, ``rows`` = the events in
    canonical order (a SortedKeyList) and ``windows`` = a SortedDict of its windows."""

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        """A late row renumbers every later row (``rows``, as for count windows), and a late bridging event
        merges a session that started before the CTI into an earlier one (``session``): an output before
        the CTI can change whatever the UDM promises, so no UDM keeps ``time_bound`` liveliness here."""
        super().attach(ctx, bs)
        self.time_bound = False

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.windows = SortedDict()
        g.rows = SortedKeyList(key=row_key)
        return g

    def state_size(self) -> dict[str, int]:
        out = super().state_size()
        out["rows"] = sum(len(g.rows) for g in self.groups.values())
        return out


class RowsStep(RowOrderedStep):
    """Per group: ``rows`` = the events in canonical order (a SortedKeyList), ``purged`` = how many
    leading rows were dropped (row numbers stay global), ``windows`` = SortedDict yield row -> Window."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        win = bs.step.window
        self.n: int = win.n
        self.slide: int = win.slide
        self.partial: bool = win.partial

    def _group_idle(self, g: Group) -> bool:
        """A group without rows may go when a new group (numbering from 1) would number its future rows
        alike: every remaining window lists rows after the purged ones, so only the ``slide`` alignment
        of the purged count matters."""
        return not g.rows and g.purged % self.slide == 0

    def _first(self, k: int) -> int:
        return k - self.n + 1 if k > self.n else 1

    def _row_le(self, g: Group, r: int) -> int:
        """LE of row number ``r`` (a row that is still held)."""
        return g.rows[r - 1 - g.purged].le

    def _members(self, w: Window) -> Any:
        g = w.group
        return g.rows[self._first(w.key) - 1 - g.purged: w.key - g.purged]

    def _holds_open(self, w: Window, c: int) -> bool:
        return any(ev.re >= c for ev in self._members(w))

    def _rederive(self, g: Group, lo: int, hi: int = INF, cut: tuple[int, int] | None = None) -> None:
        """Rows from list position ``lo`` on changed: replace the windows whose yield row is in
        ``[purged + lo + 1, purged + hi]`` (and drop those past the last row). ``cut``: only the rows at
        list positions ``cut[0]..cut[1]`` were permuted, so only windows holding part of them change."""
        base = g.purged
        rows = g.rows
        last = base + len(rows)
        s, n = self.slide, self.n
        k0 = base + lo + 1
        k = -(-k0 // s) * s
        top = min(last, base + hi) if hi < INF else last
        wins = g.windows
        old = {kk: wins[kk] for kk in list(wins.irange(k0, None if hi >= INF else base + hi))}
        while k <= top:
            if cut is not None and self._holds_all_or_none(k, base + cut[0] + 1, base + cut[1] + 1):
                old.pop(k, None)  # same members: kept as it is
            elif k >= n or self.partial:
                first = self._first(k)
                nw = Window(g, k, self._row_le(g, first), rows[k - 1 - base].le + 1, None)
                nw.count = k - first + 1
                w = old.pop(k, None)
                if w is not None:
                    nw.emitted = w.emitted
                    self._destroy(w)
                nw.rebuild = True
                wins[k] = nw
                self._touch(nw)
            k += s
        for kk, w in old.items():
            self._destroy(w)
            if wins.get(kk) is w:
                del wins[kk]

    def _holds_all_or_none(self, k: int, a: int, b: int) -> bool:
        """Does the window of yield row ``k`` hold every row numbered ``a..b``, or none of them?"""
        f = self._first(k)
        return (f <= a and k >= b) or k < a or f > b

    #: derive a new window's state from the previous window's (incremental UDAs, in-order appends)
    slides = True

    def _on_insert(self, g: Group, ev: Ev) -> None:
        self._touched(g)
        rows = g.rows
        rows.add(ev)
        pos = rows.bisect_key_left(row_key(ev))
        if pos == len(rows) - 1 and self._slide(g):
            return
        self._rederive(g, pos)

    def _slide(self, g: Group) -> bool:
        """A row appended at the end renumbers nothing: at most the window of the new last row appears.
        For a time-insensitive incremental UDA its state is the previous window's state with the rows
        that left removed and the new rows added (seeds/004 §4: ``O(slide)`` per window, not ``O(n)``);
        the previous window keeps a copy while it still has to be output."""
        base = g.purged
        k = base + len(g.rows)
        s = self.slide
        if k % s:
            return True  # not a yield row: no window changes
        if k < self.n and not self.partial:
            return True
        prev = g.windows.get(k - s)
        if (not self.slides or not self.incremental or self.time_sensitive or s >= self.n or prev is None
                or prev.pending or not prev.alive):
            return False  # (windows that share no rows are simply built)
        if prev.rebuild:  # not computed yet (a batch of appends): compute it now, once
            self._apply(prev)
        if prev.state is None:
            return False
        wu = self.udm
        rows = g.rows
        first = self._first(k)
        win = (self._row_le(g, first), rows[k - 1 - base].le + 1)
        if prev.dirty:  # still to be output: it keeps its state (a UDA may update states in place)
            st = copy.deepcopy(prev.state)
        else:
            st = prev.state
            prev.state = None
        gone = rows[self._first(k - s) - 1 - base: first - 1 - base]
        if gone:
            st = wu.remove(st, wu.ordered(gone, *win), win)
        st = wu.add(st, wu.ordered(rows[k - s - base: k - base], *win), win)
        nw = Window(g, k, win[0], win[1], None)
        nw.count = k - first + 1
        nw.state = st
        g.windows[k] = nw
        self._touch(nw)
        return True

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        self._touched(g)
        rows = g.rows
        p = rows.bisect_key_left((ev.le, old, ev.canon(), ev.id))
        if p >= len(rows) or rows[p] is not ev:
            return  # a dropped row: it was final (RE < CTI), so no valid element reaches it
        del rows[p]
        if new == ev.le:  # full retraction: every later row is renumbered
            self._rederive(g, p)
            return
        ev.re = new
        rows.add(ev)
        q = rows.bisect_key_left(row_key(ev))
        lo, hi = (p, q) if p <= q else (q, p)
        if self.time_sensitive:
            self._rederive(g, lo, hi + self.n)  # every window holding it: its end may matter
        elif q != p:  # permuted within its block of equal LEs: windows holding all of them keep members
            self._rederive(g, lo, hi + self.n, (lo, hi))

    # ---------------------------------------------------------------------------------------------
    # frozen prefix, cleanup, output CTI
    # ---------------------------------------------------------------------------------------------
    def _movable(self, g: Group, c: int) -> int:
        """First list position a valid element can still change after CTI ``c`` (see the module doc)."""
        rows = g.rows
        pm = rows.bisect_key_left((c,))
        for ev in rows.islice(0, pm):
            if ev.re >= c:
                return rows.bisect_key_left((ev.le,))
        return pm

    def _first_open(self, g: Group, c: int) -> int:
        """The yield row of the earliest window that can still change or appear."""
        k0 = g.purged + self._movable(g, c) + 1
        return -(-k0 // self.slide) * self.slide

    #: per CTI, visit only the groups touched since the last one or not yet settled (`_settle`); a
    #: subclass with its own `_cleanup` scans every group instead
    tracks_settled = True

    def _touched(self, g: Group) -> None:
        act = self.__dict__.get("_active")
        if act is not None:
            act[id(g)] = g
            g.settled = None

    def _candidates(self) -> list[Group]:
        """Groups whose cleanup or output-CTI contribution can change (all of them for a step restored
        from a snapshot that predates the bookkeeping)."""
        act = self.__dict__.get("_active")
        if act is None or not self.tracks_settled:
            if act is None:
                self._active: dict[int, Group] = {}
                self._quiet: list[tuple[int, int, Group]] = []  # (bound contribution, stamp, settled group)
                self._stamp = 0
            return list(self.groups.values())
        groups = self.groups
        out: list[Group] = []
        for g in act.values():
            live = groups.get(g.key)
            if live is not None and live is g:
                out.append(live)
        return out

    def _cleanup(self, c: int) -> None:
        visit = self._candidates()
        self._active = {}
        for g in visit:
            pm = self._movable(g, c)
            k_open = -(-(g.purged + pm + 1) // self.slide) * self.slide
            wins = g.windows
            while wins and wins.peekitem(0)[0] < k_open:
                wins.popitem(0)[1].alive = False
            drop = min(pm, self._first(k_open) - 1 - g.purged)
            if drop > 0:
                del g.rows[:drop]
                g.purged += drop
            if not wins and g.event_count <= 0:
                self._drop_group_if_empty(g)
            if self.groups.get(g.key) is g:
                self._settle(g, c, pm - max(drop, 0))

    def _settle(self, g: Group, c: int, movable: int) -> None:
        """A group all of whose rows have ``LE < c`` and ``RE < c`` (nothing movable) cleans up and bounds
        the output CTI the same way at every later CTI until an element touches it: it leaves the visit
        list, its bound contribution goes to the ``_quiet`` heap. Any other group is visited again."""
        rows = g.rows
        if movable == len(rows) and (not rows or rows[-1].le < c) and all(ev.re < c for ev in rows):
            self._stamp += 1
            g.settled = self._stamp
            heapq.heappush(self._quiet, (self._contribution(g, c), self._stamp, g))
        else:
            g.settled = None
            self._active[id(g)] = g

    def _contribution(self, g: Group, c: int) -> int:
        """The smallest LE group ``g`` lets the output CTI reach at input CTI ``c`` (``INF``: none)."""
        slide = self.slide
        rows = g.rows
        base = g.purged
        held = base + len(rows)
        if self.sees_open_ends:
            r = self._first(self._first_open(g, c))
        else:
            pm = rows.bisect_key_left((c,))
            r = self._first(-(-(base + pm + 1) // slide) * slide)
            done = None
            for ev in rows.islice(0, pm):
                if ev.re < c or ev.le == done:
                    continue
                done = ev.le
                s0 = base + rows.bisect_key_left((ev.le,)) + 1  # the block's row numbers: s0..e0
                e0 = base + rows.bisect_key_left((ev.le + 1,))
                if e0 == s0:
                    continue  # alone in its block: it cannot move
                k = -(-max(s0, 1 if self.partial else self.n) // slide) * slide
                while k <= held and self._first(k) <= e0:
                    if not self._holds_all_or_none(k, s0, e0):
                        r = min(r, self._first(k))
                        break
                    k += slide
        return self._row_le(g, r) if r <= held else INF

    def _bound(self, c: int) -> int:
        """For a time-sensitive UDM without right clipping, the frozen prefix's bound. Otherwise (the UDM
        sees members, not ends past the window), SEMANTICS §7's: the first LE of the earliest window with ``W.RE > c``,
        held back only where a row with ``RE >= c`` can still move inside its block of equal LEs — the
        first LE of the earliest window holding part of that block (one holding all of it keeps its
        members). Settled groups' contributions come from the ``_quiet`` heap (stale entries popped)."""
        b = c
        if not self.tracks_settled or "_active" not in self.__dict__:
            groups = list(self.groups.values())
        else:
            groups = self._candidates()
            quiet = self._quiet
            live = self.groups
            while quiet:
                le, stamp, g = quiet[0]
                if g.settled == stamp and live.get(g.key) is g:
                    b = min(b, le)
                    break
                heapq.heappop(quiet)
        for g in groups:
            le = self._contribution(g, c)
            if le < b:
                b = le
        return b

    def _final_state(self) -> None:
        self._active = {}
        self._quiet = []
