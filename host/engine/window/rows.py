"""Row windows (SEMANTICS §9): ``rows{n, slide, partial}``, SQL/ESL ``ROWS n-1 PRECEDING SLIDE slide``.

A group keeps its events as *rows* in canonical order (LE, RE, canonical JSON of the value; the id only makes
the order total: semantics-notes 26) — as columns (`rows_store`), no event object per row — numbered 1, 2, ...
from its first row ever (``purged`` counts the rows dropped, so numbers survive cleanup). The window of yield
row ``k`` (a multiple of ``slide``, and ``>= n`` unless ``partial``) is keyed by ``k``, holds rows
``max(1, k-n+1) .. k`` and spans ``[LE(first row), LE(row k) + 1)``; windows are implied by the rows, nothing
is kept per window but what it emitted. Evaluated in order, a window is the previous one plus the rows that
enter minus those that leave (the sweep: rows leave in the order they entered; a UDA with ``remove`` keeps one
running state, one add and one remove per row, a merge-only one its partials in two stacks), so an in-order
event costs O(1) UDA calls whatever ``n``; panes of ``gcd(n, slide)`` rows are not needed for that
(semantics-notes 29).

An insert that is not appended, or a full retraction, renumbers every later row: every window from its row
on that was evaluated is *dirty* and is evaluated again, the touched range diffed as one against what it
emitted (minimal diffs keep what did not change), and the sweep is rebuilt if it had taken in a renumbered
row. A changed end moves a row only inside its block of equal LEs: only the windows holding part of the
rows between its old and new place change (every window holding it, for a time-sensitive UDM).

Which rows are frozen at a CTI, cleanup and the output CTI: `rows_cti`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..common import Ev
from ..rules import INF, final_end
from .emit import first_emission
from .family import Family, merged
from .rows_bulk import bulk_rows
from .rows_closed import ClosedRows
from .rows_cti import RowsCleanup, forget
from .rows_shared import RowStore
from .rows_store import RowColumns
from .rows_sweep import RowWindows
from .state import Group, by_identity

__all__ = ["RowOrderedFamily", "RowsFamily", "forget", "replace_range"]


def replace_range(fam: Family, g: Group, lo: int, top: int, news: list[tuple[Any, int, int, list]], out: Any,
                  em: Any) -> None:
    """The windows keyed in ``[lo, top]`` are now ``news`` — (key, W.LE, W.RE, outputs): one minimal diff
    against everything windows keyed there emitted (a window that vanished or was renumbered included)."""
    olds = []
    for key in list(g.out.irange(lo, top)):
        olds.extend(g.out.pop(key))
    if not olds:
        for key, wle, wre, vals in news:
            fam.put(g, key, wle, wre, vals, out, em)
    else:
        em.emit(fam.step, g, olds, news, out)


class _Data:
    __slots__ = ("dirty", "done", "fixed", "floor", "num", "purged", "rows", "settled")

    def __init__(self) -> None:
        #: the group's rows in canonical order; row number of list position ``i``: ``purged + i + 1``
        self.rows = RowColumns()
        #: how many leading rows were dropped
        self.purged = 0
        #: windows with a yield row at or below this were evaluated
        self.done = 0
        #: (lo, hi): windows with a yield row in [lo, hi] to evaluate again
        self.dirty: list[tuple[int, int]] = []
        #: windows with a yield row below this are final (cleaned up)
        self.floor = 0
        #: leading list positions that can no longer move (at the last CTI)
        self.fixed = 0
        #: the stamp of its entry in the family's settled heap (None: visited at every CTI)
        self.settled: int | None = None
        #: its number in the step's `RowStore` (-1: not there; its rows are ``rows``)
        self.num = -1

    def __getstate__(self) -> tuple:
        return (self.rows, self.purged, self.done, self.dirty, self.floor, self.fixed, self.settled, self.num)

    def __setstate__(self, s: tuple) -> None:
        rows, self.purged, self.done, self.dirty, self.floor, self.fixed, self.settled, *num = s
        self.num = num[0] if num else -1  # (a snapshot from before the store: its own rows)
        if isinstance(rows, list):  # (a snapshot from before the columns: the rows as events)
            rows = RowColumns([e.id for e in rows], [e.le for e in rows], [e.re for e in rows],
                              [e.val for e in rows])
        self.rows = rows


class RowOrderedFamily(Family):
    """What the row-ordered families (``rows``, ``session``) share: a group's windows are keyed by an int,
    evaluated in order up to ``done``; changed ones are ``dirty`` key ranges (clipped to ``floor``, the
    first key cleanup kept) evaluated again, each range as one diff."""

    #: ``rows``: a new row makes a window over rows before the CTI, and an end that can still move reorders
    #: a block of equal LEs: an output before the CTI can change whatever the UDM promises window by window
    #: (semantics-notes 72)
    time_bound_ok = False

    def _dirty(self, d: Any, lo: int, hi: int) -> None:
        """Windows keyed in ``[lo, hi]`` changed: those already evaluated are evaluated again."""
        lo = max(lo, d.floor)
        hi = min(hi, d.done)
        if lo <= hi:
            d.dirty.append((lo, hi))

    def _evaluate(self, g: Group, d: Any, todo: list[tuple[int, int]], out: Any, em: Any) -> None:
        """Evaluate the key ranges ``todo``; the parts not released yet stay dirty."""
        keep = []
        for lo, hi in merged(todo):
            rest = self._range(g, d, lo, hi, out, em)
            if rest is not None:
                keep.append((rest, hi))
        d.dirty = keep
        self._pending(g, d)

    def _range(self, g: Group, d: Any, lo: int, hi: int, out: Any, em: Any) -> int | None:
        """Evaluate the windows keyed in ``[lo, hi]``; returns the first key not released yet (None: all
        were)."""
        raise NotImplementedError

    def _pending(self, g: Group, d: Any) -> None:
        """Register the group's first window still to release with the step."""
        raise NotImplementedError


class RowsFamily(RowsCleanup, RowWindows, RowOrderedFamily):
    """``rows{n, slide, partial}``: its rows, windows and their values (at a CTI: `RowsCleanup`)."""

    #: rows leave the sweep in the order they entered it (a merge-only UDA's partials in two stacks)
    fifo = True
    #: a batch's inserts at once (`bulk_insert`)
    bulk = True
    #: a group's rows are its columns (`rows_store`); a retraction finds its row there by id
    tracks_events = False

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        self.n = spec.n
        self.slide = spec.slide
        self.partial = spec.partial
        #: final windows never emitted, valued together at the end of the flush (`rows_closed`)
        self.closed = ClosedRows(step, step.sweep_kind, self.n, self.slide)
        #: the rows of the groups that need no per-group state, valued and cleaned up together
        self.store = RowStore(self.closed.vector)
        #: the groups outside the store (by key; some may have come back or gone): `sizes` walks only these
        self._own: dict[Any, Group] | None = {}
        #: the groups of the last bulk insert, and those of them outside the store (for `to_evaluate`)
        self._fed: tuple[list[Group], list[Group]] | None = None
        self._settling()

    def __getstate__(self) -> dict[str, Any]:
        s = dict(self.__dict__)
        s["_active"] = list(self._active.values())  # (ids change across a restore)
        for k in ("_bc", "_cval", "_stale", "_fed"):
            s.pop(k, None)
        return s

    def __setstate__(self, s: dict[str, Any]) -> None:
        s["_active"] = {id(g): g for g in by_identity(s["_active"])}
        if "closed" not in s:  # (a snapshot from before the closed form: window by window)
            s["closed"] = ClosedRows(s["step"], "members", 1, 1)
        if "store" not in s:  # (a snapshot from before the store)
            s["store"] = RowStore(s["closed"].vector)
        s.setdefault("_own", None)  # (a snapshot from before: `sizes` finds them once)
        s["_fed"] = None
        self.__dict__.update(s)
        self._forget_bounds()

    def new_groups(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> list[Group]:
        """A batch's new groups enter the store together (a group gets its sweep when it leaves: `_leave`)."""
        gs = list(map(Group, keys, fields))
        for g in gs:
            g.data = _Data()
        self.store.enter(gs)
        for g in gs:
            if g.data.num < 0:
                g.sweep = self.new_sweep()
        self._outside(gs)
        return gs

    def _outside(self, gs: list[Group]) -> None:
        own = self._own
        if own is not None:
            own.update((g.key, g) for g in gs if g.data.num < 0)

    def _leave(self, gs: list[Group]) -> None:
        """The groups leave the store (see `rows_shared`): evaluated group by group from now on."""
        self.store.materialize(gs)
        for g in gs:
            self._touch(g, g.data)
            if g.sweep is None:
                g.sweep = self.new_sweep()
        self._outside(gs)

    def to_evaluate(self, groups: list[Group]) -> list[Group]:
        # (a group in the store is valued with every other one in `prepare`; `bulk_insert` found the others)
        fed, self._fed = self._fed, None
        if fed is not None and fed[0] is groups:
            return fed[1]
        return [g for g in groups if g.data.num < 0]

    def busy(self) -> bool:
        store = self.store
        return store.seen is None and bool(store.groups)

    def bulk_held(self, g: Group) -> int:
        return len(g.data.rows)

    def sizes(self, groups: Iterable[Group]) -> tuple[int, int]:
        """Only the groups outside the store are walked; the store sums its rows and output records."""
        store = self.store
        own = self._own
        live = self.step.groups
        if own is None:
            own = self._own = {g.key: g for g in groups if g.data.num < 0}
        for k in [k for k, g in own.items() if g.data.num >= 0 or live.get(k) is not g]:
            del own[k]
        gs = [*own.values(), *store.out.values()]
        return (sum(len(g.out) for g in gs), sum(len(g.data.rows.le) for g in gs) + store.held())

    def final_point(self, g: Group, c: int) -> int:
        if not self.step.sees_open_ends:
            return c
        p = c
        rows = g.data.rows
        for le, re in zip(rows.le, rows.re, strict=True):
            e = final_end(c, le, re)
            if e < p:
                p = e
        return p

    def _moved(self, g: Group, d: _Data, r: int, hi: int) -> None:
        """Rows from number ``r`` on changed (windows up to yield row ``hi`` hold them)."""
        if g.swept is not None and r <= g.swept[1]:
            g.swept = None  # the sweep took in a row that is no longer where it was
        self._dirty(d, r, hi)

    def insert(self, g: Group, ev: Ev) -> None:
        d: _Data = g.data
        if d.num >= 0:
            self._leave([g])
        self._touch(g, d)
        rows = d.rows
        p = rows.add(ev.id, ev.le, ev.re, ev.val)
        if p == len(rows) - 1:
            return  # appended: no row is renumbered, at most a new last window appears
        self._moved(g, d, d.purged + p + 1, INF)

    def bulk_insert(self, groups: list[Group], codes: Any, ids: Any, le: Any, re: Any, vals: Any,
                    closing: int | None = None) -> None:
        """A batch's inserts at once: in the store those that follow their group's rows (`rows_shared`; a group
        with nothing emitted that can still change comes back to it first), the others a group at a time
        (`rows_bulk`)."""
        store = self.store
        if store.on:
            rest, outside = store.bulk(self, groups, codes, le, re, ids, vals)
            self._fed = (groups, outside)
            if not len(rest):
                return
            codes, ids, le, re = codes[rest], ids[rest], le[rest], re[rest]
            vals = vals[rest] if isinstance(vals, np.ndarray) else [vals[i] for i in rest.tolist()]
        bulk_rows(self, groups, codes, ids, le, re, vals)

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        d: _Data = g.data
        if d.num >= 0:
            self._leave([g])
        self._touch(g, d)
        rows = d.rows
        ev.re = new
        p = rows.find(ev.id, ev.le, old)
        if p is None:
            return  # (cleanup dropped it, as final — RE < CTI — so no valid element reaches it)
        val = rows.vals[p]
        rows.pop(p)
        if new == ev.le:  # full retraction: every later row is renumbered
            self._moved(g, d, d.purged + p + 1, INF)
            d.done = min(d.done, d.purged + len(rows))
            return
        q = rows.add(ev.id, ev.le, new, val)
        if q == p and not self.step.time_sensitive:
            return  # same place, and the UDM does not see ends: no window changes
        a, b = (p, q) if p <= q else (q, p)
        # (moved inside its LE block: only the windows holding part of rows a..b change; those holding all
        # of them are evaluated again too, and their outputs stay)
        self._moved(g, d, d.purged + a + 1, d.purged + b + self.n)

    # -- evaluation ------------------------------------------------------------------------------------
    def prepare(self, out: Any, em: Any) -> None:
        """The windows of the groups in the store that the flush releases, valued and written together."""
        self.store.prepare(self, out, em)

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: _Data = g.data
        if d.num >= 0:
            return  # (in the store: `prepare` did its windows)
        step = self.step
        if self.closed.on:  # (above every dirty range, which ``done`` bounds)
            self._take_final(g, d)
        todo = d.dirty
        d.dirty = []
        total = d.purged + len(d.rows)
        k0 = self._yield_at(max(d.done + 1, d.floor))
        # released by the release point: the windows whose last row has LE < rp (one bisection)
        k = max(k0, self._up(d.purged + d.rows.lower(step.rp) + 1))
        while k <= total and step.releasable(*self._extent(d, k), False):  # (progressive output)
            k += self.slide
        if k > k0:
            todo.append((k0, k - self.slide))
            d.done = k - self.slide
        self._evaluate(g, d, todo, out, em)

    def _take_final(self, g: Group, d: _Data) -> None:
        """The group's next windows that are final at the CTI and were never emitted go to `closed` (valued
        at the end of the flush), as one run: those whose rows all lie before the first row that can still
        move (`_fix`; at the end of input, every row)."""
        c = self.step.effective_cti
        if c >= INF:
            fix = len(d.rows)
        else:
            self._fix(d, c)
            fix = d.fixed
        lo = self._yield_at(max(d.done + 1, d.floor))
        hi = (d.purged + fix) // self.slide * self.slide  # the last window whose rows are all fixed
        if hi < lo or (g.out and next(iter(g.out.irange(lo, hi)), None) is not None):
            return
        d.done = hi
        closed = self.closed
        if closed.vector:
            closed.take(g, lo, hi)
            if g.swept is not None:  # (the sweep would resume from a window before the run: start it again)
                g.sweep.clear()
                g.swept = None
            return
        wu = self.step.udm
        for k in range(lo, hi + 1, self.slide):
            self._sweep_to(g, d, k)
            wle, wre = self._extent(d, k)
            closed.put(g, wle, wre, wu.compute_state(g.sweep.state(), wle, wre))

    def after(self, out: Any, em: Any) -> None:
        self.closed.flush(self, out, em)

    def _range(self, g: Group, d: _Data, lo: int, hi: int, out: Any, em: Any) -> int | None:
        step = self.step
        news = []
        stop = None
        top_k = min(hi, d.purged + len(d.rows))
        k = self._yield_at(lo)
        whole = step.strong and step.rp < INF and not step.sees_open_ends
        spans = []
        while k <= top_k:
            wle, wre = self._extent(d, k)
            if not step.releasable(wle, wre, k in g.out) or (whole and not self._whole(d, k)):
                stop = k
                break
            spans.append((k, wle, wre))
            k += self.slide
        top = hi if stop is None else stop - 1
        if spans and self.closed.vector and not (g.out and next(iter(g.out.irange(lo, top)), None) is not None):
            self.closed.fresh(g, spans[0][0], spans[-1][0])  # (never emitted: valued with the final ones)
            return stop
        for k, wle, wre in spans:
            if g.sweep is not None:
                self._sweep_to(g, d, k)
                vals = self.value(g, wle, wre, None)
            else:
                vals = self.value(g, wle, wre, self._members(d, k))
            news.append((k, wle, wre, vals))
        self.rewrite(g, lo, top, news, out, em)
        return stop

    def rewrite(self, g: Group, lo: int, top: int, news: list[tuple[Any, int, int, list]], out: Any,
                em: Any) -> None:
        """`replace_range`, counting the windows first out among others that change (`put` counts the rest)."""
        if g.out and news:
            had = set(g.out.irange(lo, top))
            if had:
                for key, _wle, wre, vals in news:
                    if vals and key not in had:
                        first_emission(self.step, wre)
        replace_range(self, g, lo, top, news, out, em)

    def _pending(self, g: Group, d: _Data) -> None:
        total = d.purged + len(d.rows)
        k = self._yield_at(max(d.done + 1, d.floor))
        if k <= total:
            wle, wre = self._extent(d, k)
            self.step.pending(g, wre, wle)
        if d.dirty:
            k = self._yield_at(d.dirty[0][0])
            if k <= total:
                wle, wre = self._extent(d, k)
                self.step.pending(g, wre, wle)
