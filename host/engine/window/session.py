"""Session windows (SEMANTICS §9): ``session{gap}`` — the per-group structure (`session_groups`) and the
groups held as columns (`session_columns`).

Where the step's sessions can be columns (`session_columns.columns_ok`), a group that holds nothing here takes
a batch's inserts into the family's *tail* instead, and stays there (no event object, row or session of its
own) until a session of it comes out before it is final or an element reaches it another way: then it leaves
the tail for the per-group structure (`_untail`). The tail values the sessions a CTI closes at the start of
each flush (`prepare`), for every group at once; the output CTI takes its earliest start into account.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import Any

import numpy as np

from ..common import Ev
from ..rules import NEG
from .session_columns import Tail, columns_ok
from .session_groups import SessionData, SessionGroups
from .state import Group

__all__ = ["SessionFamily"]

_OUT = attrgetter("out")
_EVENTS = attrgetter("events")

#: engine snapshots taken before the session family was split pickled a group's data as ``session._Data``
_Data = SessionData


class SessionFamily(SessionGroups):
    """``session{gap}``."""

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        #: the groups held as columns (`session_columns`)
        self.tail = Tail(self.gap)

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__dict__.update(s)
        if "tail" not in s:  # (a snapshot from before the tail)
            self.tail = Tail(self.gap)

    # -- per event -------------------------------------------------------------------------------------
    def insert(self, g: Group, ev: Ev) -> None:
        if g.data.code >= 0 and self.tail.has(g):
            self._untail([g])
        super().insert(g, ev)

    def bulk_insert(self, groups: list[Group], codes: Any, ids: Any, le: Any, re: Any, vals: Any,
                    closing: int | None = None) -> None:
        """A batch's inserts. The rows of a group in the tail, or holding nothing, go to the tail when the step's
        sessions can be columns (`Tail.admit`); else, group by group in (LE, RE) order, a group's events that
        all come after its last row are appended (`_append`), and otherwise they go in one by one."""
        if columns_ok(self.step):
            col, tcode = self.tail.admit(groups, self.step.touched)
            if col.any():
                if not isinstance(vals, np.ndarray):
                    vals = np.fromiter(vals, dtype=object, count=len(vals))
                if col.all():
                    self.tail.add(tcode[codes], ids, le, re, vals)
                    return
                rows = col[codes]
                self.tail.add(tcode[codes[rows]], ids[rows], le[rows], re[rows], vals[rows])
                rest = np.flatnonzero(~rows)
                codes, ids, le, re, vals = codes[rest], ids[rest], le[rest], re[rest], vals[rest]
        order = np.argsort(codes, kind="stable")
        cl = codes[order]
        starts = np.flatnonzero(np.concatenate(([True], cl[1:] != cl[:-1])))
        lens = np.diff(np.append(starts, len(cl)))
        gl = [groups[k] for k in cl[starts].tolist()]
        order = order[np.lexsort((re[order], le[order], codes[order]))]
        il, ll, rl = ids[order].tolist(), le[order].tolist(), re[order].tolist()
        vl = vals[order].tolist() if isinstance(vals, np.ndarray) else [vals[i] for i in order.tolist()]
        a = 0
        for g, n in zip(gl, lens.tolist(), strict=True):
            d: SessionData = g.data
            evs = [Ev(il[i], ll[i], rl[i], vl[i]) for i in range(a, a + n)]
            a += n
            held = g.events
            for ev in evs:
                held[ev.id] = ev
            rows = d.rows
            if rows and (rows[-1].le, rows[-1].re) >= (evs[0].le, evs[0].re):
                for ev in evs:  # (not after every row: placed and joined one by one)
                    self.insert(g, ev)
                continue
            self._append(g, d, evs)

    def _untail(self, gs: list[Group]) -> None:
        """The groups leave the tail: their rows become their events and sessions (they hold nothing else but
        the outputs of sessions the tail released before their close: those sessions count as evaluated, and
        are evaluated again, diffed against those outputs)."""
        for g, (evs, last) in zip(gs, self.tail.take(gs), strict=True):
            held = g.events
            for ev in evs:
                held[ev.id] = ev
            d: SessionData = g.data
            if evs:  # (none: a quiet group, `session_quiet`)
                self._append(g, d, evs)
            if last is not None:
                d.done = last
                d.dirty.append((NEG, last))

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        if g.data.code >= 0 and self.tail.has(g):
            self._untail([g])
            real = g.events.get(ev.id)
            if real is not None and real is not ev:  # (the step made a stand-in for a row of the tail)
                if new == real.le:
                    del g.events[ev.id]
                elif new == real.re:
                    return
                ev, old = real, real.re
        super().change(g, ev, old, new)

    def bulk_held(self, g: Group) -> int:
        return self.tail.held(g)

    def sizes(self, groups: Iterable[Group]) -> tuple[int, int]:
        """``groups``: all of the step's (the tail's rows are counted at once)."""
        gs = list(groups)
        return (sum(map(len, map(_OUT, gs))) + self.tail.released.windows(),
                sum(map(len, map(_EVENTS, gs))) + self.tail.size())

    # -- per flush ---------------------------------------------------------------------------------------
    def prepare(self, out: Any, em: Any) -> None:
        """The tail's closed sessions are written; groups with a session out now but not final leave it (the
        step evaluates them)."""
        leave = self.tail.flush(self.step, out, em)
        if leave:
            self._untail(leave)
            touched = self.step.touched
            for g in leave:
                touched[id(g)] = g

    def cleanup(self, c: int) -> Iterable[Group]:
        return [*super().cleanup(c), *self.tail.drained(c)]

    def idle(self, g: Group) -> bool:
        return super().idle(g) and not self.tail.has(g)

    def bound(self, c: int) -> int:
        return min(super().bound(c), self.tail.lowest())

    def final_state(self) -> None:
        super().final_state()
        self.tail = Tail(self.gap)
