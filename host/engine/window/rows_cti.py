"""The rows family's cleanup and output CTI (SEMANTICS §7, §9), and the row numbering both share with it.

Frozen prefix at CTI ``c``: a future insert has ``LE >= c``, so it lands after every row with ``LE < c``; a
future end change needs ``RE >= c`` and moves its row only inside its LE block. Rows before the first block
holding such an open row can no longer move: windows ending there are final, rows no remaining window lists
are dropped, and the output CTI is SEMANTICS §7's, lowered to the first LE of the earliest window holding
part of a block where a row can still move (semantics-notes 26; ``_contribution``). A group whose rows are
all fixed contributes the same at every later CTI until an element touches it: it leaves the per-CTI visit
list for a heap of settled contributions, so the per-CTI work does not grow with the number of groups.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..common import Ev
from ..rules import INF
from .state import Group

__all__ = ["RowsCleanup", "forget"]


def forget(g: Group, dropped: Iterable[Ev]) -> None:
    """Rows dropped by cleanup leave the group's events (unless an insert reused the id of a closed one:
    semantics-notes 63)."""
    held = g.events
    for ev in dropped:
        if held.get(ev.id) is ev:
            del held[ev.id]


class RowsCleanup:
    """What `rows.RowsFamily` does at a CTI: cleanup, the output-CTI bound, and the settled groups that leave
    the per-CTI visit list; with the row numbers of its windows."""

    step: Any
    #: `rows_shared.RowStore`
    store: Any
    n: int
    slide: int
    partial: bool
    #: per CTI, visit only the groups touched since the last one or not yet settled (off: every group, the
    #: tests compare the two)
    tracks_settled = True

    def _settling(self) -> None:
        """The bookkeeping of the groups a CTI visits (made empty)."""
        #: groups to visit at the next CTI, by id
        self._active: dict[int, Group] = {}
        #: (bound contribution, stamp, group) of settled groups
        self._quiet: list[tuple[int, int, Group]] = []
        self._stamp = 0
        #: compact ``_quiet`` when it is longer than this (stale entries below its top pile up otherwise)
        self._quiet_cap = 64
        self._forget_bounds()

    def _forget_bounds(self) -> None:
        """`bound`'s cache: the CTI it is for (None: none), each candidate group's contribution there (by id),
        and the groups touched since (their contribution is computed again). Between two CTIs only touched
        groups change theirs, so a flush per element costs O(touched groups), not O(groups)."""
        self._bc: int | None = None
        self._cval: dict[int, int] = {}
        self._stale: dict[int, Group] = {}
    # -- row numbers -------------------------------------------------------------------------------------
    def _first(self, k: int) -> int:
        """The first row of the window of yield row ``k``."""
        return k - self.n + 1 if k > self.n else 1

    def _up(self, x: int) -> int:
        """The smallest multiple of ``slide`` at or above ``x``."""
        return -(-x // self.slide) * self.slide

    def _yield_at(self, x: int) -> int:
        """The first window at or after row ``x``."""
        return self._up(max(x, 1 if self.partial else self.n))

    # (the same as arrays, for `rows_shared`)
    def first(self, k: np.ndarray) -> np.ndarray:
        return np.maximum(k - self.n + 1, 1)

    def up(self, x: np.ndarray) -> np.ndarray:
        return -(-x // self.slide) * self.slide

    def yield_at(self, x: np.ndarray) -> np.ndarray:
        return self.up(np.maximum(x, 1 if self.partial else self.n))

    def _le(self, d: Any, r: int) -> int:
        return d.rows.le[r - 1 - d.purged]

    def _extent(self, d: Any, k: int) -> tuple[int, int]:
        return self._le(d, self._first(k)), self._le(d, k) + 1

    def _touch(self, g: Group, d: Any) -> None:
        self._active[id(g)] = g
        d.settled = None
        if self._bc is not None:
            self._stale[id(g)] = g
    # -- cleanup, output CTI ------------------------------------------------------------------------------
    def _candidates(self) -> list[Group]:
        """Groups whose cleanup or output-CTI contribution can change."""
        groups = self.step.groups
        if not self.tracks_settled:
            return [g for g in groups.values() if g.data.num < 0]
        return [g for g in self._active.values() if groups.get(g.key) is g and g.data.num < 0]

    def _fix(self, d: Any, c: int) -> None:
        """Set ``d.fixed`` to the first list position a valid element can still change after CTI ``c``: the
        start of the first LE block holding a row with ``RE >= c``, else the first row with ``LE >= c``.
        Rows before the last such position are not looked at again."""
        rows = d.rows
        pm = rows.lower(c)
        f = d.fixed
        if f >= pm:
            d.fixed = pm
            return
        res = rows.re
        for i in range(f, pm):
            if res[i] >= c:
                d.fixed = rows.lower(rows.le[i])
                return
        d.fixed = pm

    def cleanup(self, c: int) -> Iterable[Group]:
        self._forget_bounds()
        if c >= INF:
            return list(self.step.groups.values())
        gone = self.store.cleanup(self, c)
        visit = self._candidates()
        self._active = {}
        for g in visit:
            d: Any = g.data
            self._fix(d, c)
            base = d.purged
            k_open = self._up(base + d.fixed + 1)  # the earliest window that can still change or appear
            out = g.out
            while out and out.peekitem(0)[0] < k_open:
                out.popitem(0)
            drop = min(d.fixed, self._first(k_open) - 1 - base)
            if drop > 0:
                d.rows.drop_front(drop)
                d.purged += drop
                d.fixed -= drop
            if k_open > d.floor:
                d.floor = k_open
                d.dirty = [(max(lo, k_open), hi) for lo, hi in d.dirty if hi >= k_open]
            if self.tracks_settled and d.fixed == len(d.rows):
                # every row fixed: it cleans up and bounds the output CTI alike until an element touches it
                self._stamp += 1
                d.settled = self._stamp
                heapq.heappush(self._quiet, (self._contribution(d, c), self._stamp, g))
                if len(self._quiet) > self._quiet_cap:
                    groups = self.step.groups
                    self._quiet = [e for e in self._quiet
                                   if e[2].data.settled == e[1] and groups.get(e[2].key) is e[2]]
                    heapq.heapify(self._quiet)
                    self._quiet_cap = 2 * len(self._quiet) + 64
            else:
                d.settled = None
                self._active[id(g)] = g
        return [*visit, *gone]

    def _part_holder(self, s0: int, e0: int, held: int) -> int | None:
        """The earliest window (yield row) holding part, not all, of rows ``s0..e0`` (``s0 < e0``)."""
        k = self._yield_at(s0)
        if k < e0:
            return k  # it holds row k of the block, not row e0
        k = self._up(max(k, s0 + self.n))  # the first one past k that lost row s0
        return k if k <= e0 + self.n - 1 and k <= held else None

    def _contribution(self, d: Any, c: int) -> int:
        """The smallest LE the group lets the output CTI reach at input CTI ``c`` (``INF``: none), with
        ``d.fixed`` as ``cleanup`` left it for ``c`` (semantics-notes 26)."""
        rows = d.rows
        base = d.purged
        held = base + len(rows)
        if self.step.ends_hold_cti:  # every window from the first row that can still change
            r = self._first(self._up(base + d.fixed + 1))
        else:
            pm = rows.lower(c)
            r = self._first(self._up(base + pm + 1))  # a new row lands after the rows with LE < c
            last = None
            les, res = rows.le, rows.re
            for i in range(d.fixed, pm):
                le = les[i]
                if res[i] < c or le == last:
                    continue
                last = le
                s0 = base + rows.lower(le) + 1  # its block's row numbers: s0..e0
                e0 = base + rows.lower(le + 1)
                if e0 > s0:
                    k = self._part_holder(s0, e0, held)
                    if k is not None:
                        r = min(r, self._first(k))
        return self._le(d, r) if r <= held else INF

    def idle(self, g: Group) -> bool:
        """A group without rows may go when a new group (numbering from 1) would number its future rows
        alike: only the ``slide`` alignment of the dropped rows matters."""
        d: Any = g.data
        return d.num < 0 and not d.rows and d.purged % self.slide == 0

    def _settled(self, le: int, stamp: int, g: Group) -> bool:
        """Is this `_quiet` entry still its group's?"""
        return g.data.settled == stamp and self.step.groups.get(g.key) is g

    def bound(self, c: int) -> int:
        b = c
        quiet = self._quiet
        while quiet:
            le, stamp, g = quiet[0]
            if self._settled(le, stamp, g):
                b = min(b, le)
                break
            heapq.heappop(quiet)
        if self._bc != c:
            self._bc = c
            self._cval = {id(g): self._contribution(g.data, c) for g in self._candidates()}
        elif self._stale:
            groups = self.step.groups
            for gid, g in self._stale.items():
                if groups.get(g.key) is g:
                    self._cval[gid] = self._contribution(g.data, c)
        self._stale = {}
        if self._cval:
            b = min(b, min(self._cval.values()))
        sb, rest = self.store.bound(self, c)
        for rows, purged, fixed in rest:  # (a row whose end can still move in a block of equal LEs)
            sb = min(sb, self._contribution(SimpleNamespace(rows=rows, purged=purged, fixed=fixed), c))
        return min(b, sb)

    def final_state(self) -> None:
        self.store.reset()
        self._active = {}
        self._quiet = []
        self._forget_bounds()
