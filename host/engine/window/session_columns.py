"""Session windows as columns: the events of groups that hold nothing else, kept as arrays for every group at
once, their sessions found, valued and written together at each flush.

Most of a session step's groups, most of the time, hold only events appended in bulk (`SessionFamily.
bulk_insert`) into sessions that were never output: nothing was emitted for them, so there is nothing to diff,
and no element has reached into them. Such a group is *in the tail*: its events are rows of family-wide arrays
(group code, id, LE, RE, value) with no event object, row structure or session record. At a flush, `Tail.flush`
sorts the rows by (group, LE), finds every group's sessions at once (`session_scan`) and then:

* sessions the CTI closes (``W.RE <= c``, ``< c`` with ``gap`` 0, or the end of input): final, so valued by
  the grid family's rule for closed windows (`grid_closed.window_values`: one call of the UDA's batch form
  where it applies) and written as one column block (`grid_closed.write_closed`), then dropped;
* a session released but not closed (at or below the speculation point): it is output now and may change
  later; the tail keeps what it wrote (`session_released`) and writes nothing more for it while it stays as
  it was; if it changes, its group leaves the tail (`Tail.take`): its rows become events and sessions of
  the per-group structure, its outputs that structure's, which diffs the change;
* the rest wait in the tail, their members before the CTI frozen into one row of the session's *head*
  (`session_heads`), so that a session open for long is not sorted and scanned again at every flush.

Anything else that touches a group in the tail — an insert outside a bulk batch, a retraction, a batch while
the rule needs the per-group form — takes the group out first, so every other case is the per-group rule
itself. It is that rule's vector form (tests/test_session_columns.py holds the two to the same output); a
UDA whose windows are released by their end alone (`ends_alone`) that keeps an aggregate (not the members)
takes part.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any

import numpy as np

from udm.host.io.arrow_numpy import sorted_unique

from ..batch import RowsOut
from ..common import Ev
from ..rules import INF
from .grid_closed import spans
from .grid_columns import ends_alone
from .session_heads import Heads
from .session_quiet import KEEP_GAPS, Quiet
from .session_released import Released
from .session_scan import scan
from .session_store import gather
from .session_tail_out import TailOutput
from .state import Group

__all__ = ["Tail", "columns_ok"]

#: a group's code in the tail (-1: never in it)
_CODE = attrgetter("data.code")


def columns_ok(step: Any) -> bool:
    """Can the step's sessions be valued as columns (a UDA released by its end alone, keeping an aggregate)?"""
    return ends_alone(step) and step.sweep_kind != "members"


class Tail(TailOutput):
    """The rows of every group in the tail (see the module docstring), sorted by (group code, LE, RE, id) after
    each flush; ``pending``: those added since, not sorted yet."""

    def __init__(self, gap: int) -> None:
        self.gap = gap
        self.gid = np.zeros(0, dtype=np.int64)
        self.ids = np.zeros(0, dtype=np.int64)
        self.le = np.zeros(0, dtype=np.int64)
        self.re = np.zeros(0, dtype=np.int64)
        #: per row, where its value is in the store (values never move with the rows: they may be objects);
        #: -1: a head's row (`session_heads`), with id -1
        self.vix = np.zeros(0, dtype=np.int64)
        #: the frozen members of open sessions (`session_heads`)
        self.heads = Heads()
        #: the sessions output before their close (`session_released`)
        self.released = Released()
        #: the values, batch by batch (`gather`)
        self.store: list[np.ndarray] = []
        self.stored = 0
        self.pending: list[tuple[np.ndarray, ...]] = []
        #: code -> group, for the groups in the tail (those holding nothing, quiet, too: `session_quiet`)
        self.groups: dict[int, Group] = {}
        #: codes of groups taken out whose rows are still in the arrays (dropped at the next sort)
        self.dead: set[int] = set()
        #: the smallest LE in the tail (its earliest session's start: the output CTI's bound; `lowest`), and
        #: whether a group taken out may have held it
        self.min_le = INF
        self._stale = False
        #: when to drop the groups the tail holds with nothing (`drained`)
        self.quiet = Quiet()
        self.next_code = 0
        #: the (CTI, release point) of the last flush: with no row added since, a flush at the same ones finds
        #: nothing to write or release
        self.seen: tuple[int, int] | None = None
        #: rows per code (None: to count again)
        self._held: dict[int, int] | None = None

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__dict__.update(s)
        quiet = s.get("quiet")
        if not isinstance(quiet, Quiet):  # (a snapshot from before: the quiet groups had left ``groups``)
            self.__dict__.pop("emptied", None)  # (before `drained`: the step dropped the groups it had emptied)
            self.quiet = Quiet()
            self.quiet.grow(self.next_code)
            for code, (t, g) in (quiet or OrderedDict()).items():
                self.groups[code] = g
                self.quiet.sleep(np.array([code]), np.array([t]))
        if "heads" not in s:  # (a snapshot from before the heads)
            self.heads = Heads()
        if "released" not in s:  # (a snapshot from before: such groups had left the tail)
            self.released = Released()

    def drained(self, c: int) -> list[Group]:
        """The groups to drop at CTI ``c``: a group the tail holds with nothing is kept until the CTI is a
        ``gap`` past its last session's end, unless a row comes for it (`session_quiet`)."""
        pop = self.groups.pop
        return [pop(code) for code in self.quiet.due(c)]

    def _clear(self) -> None:
        """Nothing held: drop the arrays (codes stay as they are)."""
        self._held = None
        self.gid = self.ids = self.le = self.re = self.vix = np.zeros(0, dtype=np.int64)
        self.store = []
        self.stored = 0
        self.pending = []
        self.dead = set()
        self.min_le = INF
        self._stale = False
        self.heads = Heads()
        self.released = Released()

    def admit(self, groups: list[Group], touched: dict[int, Group]) -> tuple[np.ndarray, np.ndarray]:
        """Which of the groups take rows here (in the tail, or holding nothing: they enter it, and leave
        ``touched``, as the tail values their sessions) and their codes (-1: not here)."""
        tg = self.groups
        got = list(map(_CODE, groups))
        # (a group in the tail is its code's group; the others, few, one by one)
        for j in compress(range(len(groups)), map(is_not, map(tg.get, got), groups)):
            g = groups[j]
            d = g.data
            code = d.code
            if d.rows or d.wins or g.out:
                got[j] = -1
                continue
            if code < 0:
                code = d.code = self.next_code
                self.next_code += 1
            tg[code] = g
            got[j] = code
        codes = np.array(got, dtype=np.int64)
        col = codes >= 0
        self.quiet.grow(self.next_code)
        self.quiet.wake(codes[col])  # (a quiet group's key is back)
        deque(map(touched.pop, map(id, compress(groups, col.tolist())), repeat(None)), maxlen=0)
        return col, codes

    def add(self, gid: np.ndarray, ids: np.ndarray, le: np.ndarray, re: np.ndarray, val: np.ndarray) -> None:
        """Rows for groups `admit`ted, of codes ``gid``."""
        self.pending.append((gid, ids, le, re, np.arange(self.stored, self.stored + len(val), dtype=np.int64)))
        self.store.append(np.asarray(val))
        self.stored += len(val)
        self._held = None
        m = int(le.min())
        if m < self.min_le:
            self.min_le = m

    def lowest(self) -> int:
        """The smallest LE in the tail (INF: none)."""
        if self._stale:
            self._sort()
            self.min_le = int(self.le.min()) if len(self.le) else INF
            self._stale = False
        return self.min_le

    def has(self, g: Group) -> bool:
        return self.groups.get(g.data.code) is g

    def held(self, g: Group) -> int:
        """How many rows the group has in the tail."""
        code = g.data.code
        if not self.has(g):
            return 0
        if self._held is None:
            if self.pending:
                self._sort()
            codes, n = np.unique(self.gid, return_counts=True)
            self._held = dict(zip(codes.tolist(), n.tolist(), strict=True))
        return self._held.get(code, 0) + self.heads.extra(code)

    def size(self) -> int:
        """How many rows the groups in the tail hold."""
        if self.pending or self.dead:
            self._sort()
        return len(self.gid) + self.heads.total_extra()

    def _sort(self) -> None:
        """Pending rows into the sorted arrays (rows of groups taken out leave)."""
        self._held = None
        keep = None
        if self.dead:
            gone = np.zeros(self.next_code, dtype=bool)
            gone[list(self.dead)] = True
            keep = ~gone[self.gid]
            self.dead = set()
        cols = [self.gid, self.ids, self.le, self.re, self.vix]
        if keep is not None:
            cols = [c[keep] for c in cols]
        if not self.pending:
            self.gid, self.ids, self.le, self.re, self.vix = cols
            return
        new = [np.concatenate([c, *(p[i] for p in self.pending)]) for i, c in enumerate(cols)]
        self.pending = []
        # (the order of equal LEs changes no session, nor a UDA's value: an unstable sort will do) one key
        # where it fits in 63 bits, the sorted rows and the new ones sorted at once (the sort of a sorted run
        # and a short one costs little more than merging them)
        gid, le = new[0], new[2]
        lo = int(le.min())
        span = int(le.max()) - lo + 1
        fits = (int(gid.max()) + 1) * span < 2**62
        o = np.argsort(gid * span + (le - lo)) if fits else np.lexsort((le, gid))
        new = [a[o] for a in new]
        self.gid, self.ids, self.le, self.re, self.vix = new

    def take(self, gs: list[Group]) -> list[tuple[list[Ev], int | None]]:
        """The groups leave the tail: each one's rows as events, in LE order (their values gathered at once),
        and the start of its last session output before its close (None: none), whose records are now its
        ``out`` (`session_released`)."""
        if self.pending:
            self._sort()
        codes = np.fromiter((g.data.code for g in gs), dtype=np.int64, count=len(gs))
        for code in codes.tolist():
            del self.groups[code]
            self.dead.add(code)
        self.quiet.wake(codes)
        a = np.searchsorted(self.gid, codes, "left")
        b = np.searchsorted(self.gid, codes, "right")
        lens = b - a
        if bool((self.le[a[lens > 0]] <= self.min_le).any()):  # (a first row may have been the smallest LE)
            self._stale = True
        st, idx = spans(a, lens)
        real = self.vix[idx] >= 0  # (a head's row stands for its frozen rows, which the heads give)
        st = np.concatenate(([0], np.cumsum(real))).astype(np.int64)[st]
        idx = idx[real]
        evs = [Ev(*t) for t in zip(self.ids[idx].tolist(), self.le[idx].tolist(), self.re[idx].tolist(),
                                   gather(self.store, self.vix[idx]).tolist(), strict=True)]
        frozen = self.heads.take(codes.tolist())
        rel = self.released.restore
        return [(f + evs[x:y], rel(g, code)) for g, code, f, x, y in zip(gs, codes.tolist(), frozen, st[:-1].tolist(),
                                                                        st[1:].tolist(), strict=True)]

    def flush(self, step: Any, out: RowsOut, em: Any) -> list[Group]:
        """Write the sessions the CTI closes; returns the groups whose released sessions are not closed (they
        leave the tail: the caller takes them out)."""
        if not self.groups:
            self._clear()
            return []
        c = step.effective_cti
        rp = step.rp
        if not self.pending and self.seen == (c, rp):
            return []
        self.seen = (c, rp)
        self._sort()
        if not len(self.gid):  # (only quiet groups)
            self.store, self.stored, self.min_le, self._stale = [], 0, INF, False
            return []
        gid, le = self.gid, self.le
        gap = self.gap
        first, top, s0, s1, wtop, wre = scan(gid, le, self.re, gap)
        closed = (wre < c) | ((wre == c) & (gap > 0)) | (c >= INF)
        out_now = ((wre <= rp) | (rp >= INF)) & ~closed
        known, changed = self.released.match(gid[s0], le[s0], wre, s1 - s0, self.vix[s0] < 0, self.heads)
        # the group's per-event form: an end past INF, a session output before that changed (`session_released`)
        # or one to output now that has a head; such a group leaves with all its rows
        odd = ((wtop < INF) & (wtop > INF - gap)) | (out_now & ~known & (self.vix[s0] < 0))
        leave = sorted_unique(np.concatenate([gid[s0[odd]], np.fromiter(changed, dtype=np.int64, count=len(changed))]))
        going = np.isin(gid[s0], leave)
        closed &= ~going
        spec = out_now & ~known & ~going
        if spec.any():
            self._release(step, out, em, s0[spec], s1[spec], wre[spec])
        keep = None
        if closed.any():
            for code, k in zip(gid[s0[closed & known]].tolist(), le[s0[closed & known]].tolist(), strict=True):
                self.released.forget(code, k)  # (output already: its rows go without output)
            if not (closed & known).all():
                w = closed & ~known
                self._write(step, out, em, s0[w], s1[w], wre[w])
            # groups none of whose sessions stays (sessions opening a group: ``first`` at their first row)
            opens = np.flatnonzero(first[s0])
            stays = np.add.reduceat((~closed).astype(np.int64), opens)
            done = stays == 0
            until = wre[np.append(opens[1:], len(s0))[done] - 1]  # (its last session's end)
            keep_for = KEEP_GAPS * gap
            self.quiet.sleep(gid[s0[opens[done]]], np.minimum(until, INF - keep_for) + keep_for)
            keep = np.repeat(~closed, s1 - s0)
        if c < INF:
            keep = self._freeze(c, s0, s1, ~closed & ~going & ~out_now, top, keep)
        if keep is not None:
            self.gid, self.ids, self.le, self.re, self.vix = (a[keep] for a in (gid, self.ids, le, self.re, self.vix))
            if self.stored > 2 * len(self.vix) + 4096:  # (values no row holds: the store keeps the rest)
                real = self.vix >= 0
                self.store = [gather(self.store, self.vix[real])]
                self.stored = int(real.sum())
                self.vix[real] = np.arange(self.stored, dtype=np.int64)
            self._held = None
        self.min_le = int(self.le.min()) if len(self.le) else INF
        self._stale = False
        return [self.groups[code] for code in leave.tolist() if code in self.groups]

    def _freeze(self, c: int, s0: np.ndarray, s1: np.ndarray, stay: np.ndarray, top: np.ndarray,
                keep: np.ndarray | None) -> np.ndarray | None:
        """The members before CTI ``c`` of each session that ``stay``s (open, its group not leaving) join its
        head (`session_heads`): the session's first row becomes the head's row (its RE the largest of theirs,
        ``top``'s running maximum at the last of them), the others leave the arrays. Returns which rows stay
        (``keep``: those that stay so far; None: all)."""
        vix = self.vix
        got = self.heads.fold(c, (self.gid, self.ids, self.le, self.re, vix), self.store, s0, stay)
        if got is None:
            return keep
        f0, fn = got
        n = len(vix)
        if keep is None:
            keep = np.ones(n, dtype=bool)
        drop = np.zeros(n + 1, dtype=np.int64)
        drop[f0 + 1] += 1  # (no two sessions share a start, nor an end)
        drop[f0 + fn] -= 1
        keep &= np.cumsum(drop[:-1]) == 0
        self.re = self.re.copy()  # (``top`` may be it)
        self.re[f0] = top[f0 + fn - 1]
        self.vix = vix.copy()
        self.vix[f0] = -1
        self.ids = self.ids.copy()
        self.ids[f0] = -1
        return keep
