"""Session windows (SEMANTICS §9): ``session{gap}``, maximal runs of a group's events (by LE) in which each
next LE is ``< gap +`` the largest RE so far; window ``[first LE, largest RE + gap)``, INF when a member never
ends (semantics-notes 27).

A group keeps its events as rows in canonical order (`session_order.row_key`) and its sessions by first LE,
each with its end and member count: a session's members are the rows from its first LE to the next
session's (sessions hold whole blocks of equal LEs). An event appended at the end joins or opens the last session
directly, and one that lands inside a session without reaching the next joins it directly: no scan. Any
other change re-derives the sessions by one left-to-right scan whose state resets at every session
boundary, from the session holding (or preceding) the change up to the first old boundary past it that
still holds; sessions whose extent and count did not change are kept (a merge by a late bridging event
replaces the sessions it joins, a retraction that cuts a session replaces it by its parts). Sessions
already evaluated that changed are *dirty* and are evaluated again, as one diff against what they emitted.

A session's value is kept in the group's sweep with nothing ever leaving: evaluating the session again
after in-order appends adds only the new members (a late member inside it enters at once), so a long
session re-evaluated at every flush (progressive output, speculation) costs O(new members); a merge or a
split rebuilds the sessions it touched.

What a CTI makes final, and the output CTI: `session_ends`.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict, SortedKeyList

from ..common import Ev
from ..rules import INF, NEG
from .rows import replace_range
from .session_ends import SessionEnds
from .session_order import row_key, take_out
from .state import Group

__all__ = ["SessionData", "SessionGroups"]


#: a group's rows and sessions until it has some (shared, never changed: `SessionData.ready` makes its own); a group
#: in the tail never needs them
_NO_ROWS: SortedKeyList = SortedKeyList(key=row_key)
_NO_WINS: SortedDict = SortedDict()


class SessionData:
    __slots__ = ("code", "dirty", "done", "floor", "rows", "wins")

    def __init__(self) -> None:
        #: the group's events in canonical order
        self.rows: SortedKeyList = _NO_ROWS
        #: first LE -> [W.RE, member count] of each session
        self.wins: SortedDict = _NO_WINS
        #: sessions starting at or before this were evaluated
        self.done = NEG
        #: (lo, hi): sessions starting in [lo, hi] to evaluate again
        self.dirty: list[tuple[int, int]] = []
        #: sessions starting before this are final (cleaned up)
        self.floor = NEG
        #: the group's code in the family's tail (-1: none yet)
        self.code = -1

    def ready(self) -> None:
        """Rows and sessions of its own, before the first is added."""
        if self.rows is _NO_ROWS:
            self.rows = SortedKeyList(key=row_key)
            self.wins = SortedDict()

    def __getstate__(self) -> tuple:
        return (list(self.rows), self.wins if self.rows is not _NO_ROWS else None, self.done, self.dirty,
                self.floor, self.code)

    def __setstate__(self, s: tuple) -> None:
        rows, wins, self.done, self.dirty, self.floor, *code = s
        self.code = code[0] if code else -1
        if wins is None:
            self.rows, self.wins = _NO_ROWS, _NO_WINS
        else:
            self.rows, self.wins = SortedKeyList(rows, key=row_key), wins


class SessionGroups(SessionEnds):
    """``session{gap}``, group by group (the module docstring); what a CTI finalizes: `SessionEnds`."""

    #: nothing leaves a session's sweep (its partials combine into one entry)
    fifo = True
    #: a batch's inserts come in group by group (`bulk_insert`)
    bulk = True
    #: an element at or after the CTI changes sessions only at or after it: it joins (or merges into) a
    #: session that is still open, whose members before the CTI stay, or opens, splits off or takes away one
    #: that starts after the CTI (semantics-notes 72), so ``time_bound`` gives the input CTI
    time_bound_ok = True


    def new_group(self, g: Group) -> None:
        g.data = SessionData()

    def _open(self, g: Group, d: SessionData, key: int, end: int, count: int) -> None:
        """A new session (or a changed one) at ``key``; evaluated again if sessions past it were (its
        group's sessions all went, or a retraction moved its start)."""
        d.wins[key] = [end, count]
        self._dirty(d, key, key)
        self._watch(g, key, end)

    # -- per event -------------------------------------------------------------------------------------
    def insert(self, g: Group, ev: Ev) -> None:
        d: SessionData = g.data
        d.ready()
        rows = d.rows
        wins = d.wins
        rows.add(ev)
        if not wins:
            self._open(g, d, ev.le, self._end(ev.re), 1)
            return
        if rows[-1] is ev:  # appended: it joins the last session or opens one after it
            key, w = wins.peekitem(-1)
            if w[0] < INF and ev.le >= w[0]:
                self._open(g, d, ev.le, self._end(ev.re), 1)
            else:
                self._join(g, d, key, w, ev)
            return
        if not self._join_inside(g, d, ev):
            self._rescan(g, d, ev.le, None)

    def _append(self, g: Group, d: SessionData, evs: list[Ev]) -> None:
        """Events in (LE, RE) order that all come after the group's last row: cut into sessions in one pass,
        each session touched once (what `insert` does event by event)."""
        d.ready()
        rows = d.rows
        if rows:
            for ev in evs:
                rows.add(ev)
        else:
            rows.update(evs)
        wins = d.wins
        key: int | None = None
        end = count = 0
        old = False  # (is ``key`` the group's last session, which the first events may join?)
        if wins:
            key, (end, count) = wins.peekitem(-1)
            old = True
        for ev in evs:
            if key is None or (end < INF and ev.le >= end):
                if key is not None:
                    self._close_run(g, d, key, end, count, old)
                key, end, count, old = ev.le, self._end(ev.re), 1, False
                continue
            e = self._end(ev.re)
            if e > end:
                end = e
            count += 1
        assert key is not None
        self._close_run(g, d, key, end, count, old)

    def _close_run(self, g: Group, d: SessionData, key: int, end: int, count: int, old: bool) -> None:
        """`bulk_insert`: session ``key`` ends at ``end`` with ``count`` members (``old``: the group's last
        session, which may have grown)."""
        if not old:
            self._open(g, d, key, end, count)
            return
        w = d.wins[key]
        if w[1] != count:
            w[0], w[1] = end, count
            self._dirty(d, key, key)

    def _join(self, g: Group, d: SessionData, key: int, w: list[int], ev: Ev) -> None:
        """``ev`` joins session ``key`` (``w``: its end and count), reaching no other session."""
        end = self._end(ev.re)
        if end > w[0]:
            w[0] = end
        w[1] += 1
        self._dirty(d, key, key)
        sw = g.swept
        if sw is not None and sw[0] == key and row_key(ev) < sw[1]:
            g.sweep.enter(0, [ev.val])  # a member among those the sweep took in already

    def _join_inside(self, g: Group, d: SessionData, ev: Ev) -> bool:
        """A late event inside a session (``W.LE <= LE < W.RE``) that does not reach the next one joins it
        directly: the scan would put it in that session's run (the row after it was within ``gap`` of the
        same running maximum; ahead of it, maxima only grow) and keep the next boundary."""
        wins = d.wins
        i = wins.bisect_right(ev.le) - 1
        if i < 0:
            return False
        key, w = wins.peekitem(i)
        if not ev.le < w[0]:
            return False
        end = max(w[0], self._end(ev.re))
        if i + 1 < len(wins) and wins.peekitem(i + 1)[0] < end:
            return False  # it bridges into the next session: merge by rescan
        self._join(g, d, key, w, ev)
        return True

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        d: SessionData = g.data
        if take_out(d.rows, ev, old, new) is None:
            return
        if new != ev.le:
            d.rows.add(ev)
        i = d.wins.bisect_right(ev.le) - 1
        if g.swept is not None and i >= 0 and g.swept[0] == d.wins.peekitem(i)[0]:
            g.swept = None  # the sweep took the member in as it was
        self._rescan(g, d, ev.le, ev if new != ev.le else None)

    def _rescan(self, g: Group, d: SessionData, x: int, changed: Ev | None) -> None:
        """Re-derive the sessions from the one holding (or preceding) LE ``x`` up to the first old boundary
        past ``x``; keep a session whose extent and count did not change (one element changed, so its
        members did not either). ``changed``: an event whose end changed (a time-sensitive UDM sees it)."""
        rows = d.rows
        wins = d.wins
        gap = self.gap
        i = wins.bisect_right(x) - 1
        start_key = wins.peekitem(i)[0] if i >= 0 else None
        j = rows.bisect_key_left((start_key,)) if start_key is not None else 0
        runs: list[tuple[int, int, int]] = []
        it = rows.islice(j)
        row = next(it, None)
        while row is not None:
            if row.le > x and row.le in wins:
                break  # an old boundary past the change: everything from here on is unchanged
            a = j
            top = row.re
            j += 1
            row = next(it, None)
            while row is not None and (top >= INF or row.le < top + gap):
                if row.re > top:
                    top = row.re
                j += 1
                row = next(it, None)
            runs.append((a, j, top))
        stop = row.le if row is not None else None
        old = {k: wins[k] for k in wins.irange(start_key, stop, inclusive=(True, False))}
        touched = []
        ts = self.step.time_sensitive
        for a, b, top in runs:
            key = rows[a].le
            end = self._end(top)
            w = old.pop(key, None)
            if w is not None and w[0] == end and w[1] == b - a:
                if changed is not None and ts and key <= changed.le <= rows[b - 1].le:
                    touched.append(key)  # the same members, but the UDM sees the changed end
                continue
            self._open(g, d, key, end, b - a)
            touched.append(key)
        for k in old:
            del wins[k]
            touched.append(k)
        if touched:
            lo, hi = min(touched), max(touched)
            if g.swept is not None and lo <= g.swept[0] <= hi:
                g.swept = None
            self._dirty(d, lo, hi)
        if not wins:  # visit it at the next CTI: it may be idle then
            self._revisit(g)

    # -- evaluation ------------------------------------------------------------------------------------
    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: SessionData = g.data
        if not d.wins and not d.dirty:
            return
        step = self.step
        todo = d.dirty
        d.dirty = []
        wins = d.wins
        first = last = None
        for key in wins.irange(d.done, inclusive=(False, True)):
            if not step.releasable(key, wins[key][0], False):
                break
            if first is None:
                first = key
            last = key
        if first is not None and last is not None:
            todo.append((first, last))
            d.done = last
        self._evaluate(g, d, todo, out, em)

    def _range(self, g: Group, d: SessionData, lo: int, hi: int, out: Any, em: Any) -> int | None:
        step = self.step
        rows = d.rows
        news = []
        stop = None
        for key in list(d.wins.irange(lo, hi)):
            end, count = d.wins[key]
            if not step.releasable(key, end, key in g.out):
                stop = key
                break
            a = rows.bisect_key_left((key,))
            if g.sweep is not None:
                self._sweep_to(g, d, key, a, a + count)
                vals = self.value(g, key, end, None)
            else:
                vals = self.value(g, key, end, list(rows.islice(a, a + count)))
            news.append((key, key, end, vals))
        replace_range(self, g, lo, hi if stop is None else stop - 1, news, out, em)
        return stop

    def _sweep_to(self, g: Group, d: SessionData, key: int, a: int, b: int) -> None:
        """Bring the sweep to session ``key`` (rows ``a .. b-1``): the members after the last one it took
        in enter (all of them when it held another session). ``g.swept``: (session, last row taken in)."""
        sweep = g.sweep
        sw = g.swept
        rows = d.rows
        if sw is None or sw[0] != key:
            sweep.clear()
            start = a
        else:
            start = rows.bisect_key_right(sw[1])
        if start < b:
            sweep.enter(0, [ev.val for ev in rows.islice(start, b)])
        g.swept = (key, row_key(rows[b - 1]))

    def _pending(self, g: Group, d: SessionData) -> None:
        wins = d.wins
        key = next(iter(wins.irange(d.done, inclusive=(False, True))), None)
        if key is not None:
            self.step.pending(g, wins[key][0], key)
        if d.dirty:
            lo, hi = d.dirty[0]
            key = next(iter(wins.irange(lo, hi)), None)
            if key is not None:
                self.step.pending(g, wins[key][0], key)
