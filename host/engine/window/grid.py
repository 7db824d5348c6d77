"""Tumbling, hopping and cumulate windows (SEMANTICS §3), over panes shared by overlapping windows.

The time axis is cut into *panes* of width ``p`` (``gcd(size, hop)``; a cumulate window's ``step``). Every
window is a run of consecutive panes: hopping window ``k`` covers panes ``[k*H, k*H + L)`` (``H = hop/p``,
``L = size/p``); cumulate window ``j`` (period ``P = j // n``, ``n = size/step``) covers ``[P*n, j + 1)``. An
event inside one pane is kept in that pane once, whatever the number of windows it belongs to; an event
spanning panes (a *long* event, or one that never ends) is kept aside and enters the sweep at its first
pane and leaves after its last. So an insert costs O(1), and the windows of a group are evaluated in order by
the sweep (`sweep`): window ``k + 1`` is window ``k`` plus the panes that enter minus those that leave.

Windows are evaluated when released; an element that touches a window already evaluated marks it *dirty*,
and the next flush evaluates it again (the sweep is rebuilt there). Endless events give windows only up to
the watermark, never past T (semantics-notes 2): at the end of input up to ``W.LE <= T``, and the run
reports the truncation.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from math import gcd
from typing import Any

import numpy as np
from sortedcontainers import SortedDict, SortedKeyList

from ..invoke import contract
from ..rules import INF, NEG
from .family import Family
from .grid_columns import Fresh, column_block
from .state import Ev, Group

__all__ = ["COLUMN_PANES", "GridFamily"]

#: windows of at most this many panes may be valued column-wise (`grid_columns`: a window's values are
#: copied once per window there, so longer windows are swept, at a cost per window that does not grow)
COLUMN_PANES = 8


class _Pane:
    """The short events of one pane. How they are held follows how windows are evaluated (`sweep`):

    * ``members`` (event objects by id) when windows are computed from their members;
    * otherwise ``count`` values folded into ``partial`` (the UDA state of the pane, for the merge sweep),
      and the values themselves in ``values`` while something still needs them: the running sweep (it
      removes what leaves), or a UDA without ``remove`` whose pane a retraction may still change (dropped
      once the CTI passes the pane: a ``min`` pane then holds one value)."""

    __slots__ = ("count", "members", "partial", "values")

    def __init__(self) -> None:
        self.members: dict[int, Ev] | None = None
        self.partial: Any = None
        self.count = 0
        self.values: list[Any] | None = None

    def __getstate__(self) -> tuple:
        return (self.members, self.partial, self.count, self.values)

    def __setstate__(self, s: tuple) -> None:
        self.members, self.partial, self.count, self.values = s

    def empty(self) -> bool:
        return not self.count and not self.members


def _long_key(item: tuple[int, int, Ev]) -> tuple[int, int]:
    return (item[0], item[2].id)


class _Data:
    """A group's panes, long events, and how far its windows were evaluated."""

    __slots__ = ("col", "dirty", "done", "endless", "floor", "longs", "panes", "vfloor")

    def __init__(self) -> None:
        self.panes: SortedDict = SortedDict()
        #: (first pane, last pane or INF, event) of events spanning panes, by first pane
        self.longs: SortedKeyList = SortedKeyList(key=_long_key)
        #: the last window evaluated in order
        self.done = NEG
        #: windows at or before ``done`` to evaluate again: (lo, hi) index ranges
        self.dirty: list[tuple[int, int]] = []
        #: how many of the long events never end
        self.endless = 0
        #: windows before this one are final (cleaned up): nothing valid can change them
        self.floor = NEG
        #: panes before this one no longer keep their values (no retraction can reach them)
        self.vfloor = NEG
        #: this flush's column windows (first, last, the bulk insert's record), or None
        self.col: Any = None

    def __getstate__(self) -> tuple:
        assert self.col is None  # (a snapshot is taken between flushes)
        return (self.panes, list(self.longs), self.done, self.dirty, self.endless, self.floor, self.vfloor)

    def __setstate__(self, s: tuple) -> None:
        self.panes, longs, self.done, self.dirty, self.endless, self.floor, self.vfloor = s
        self.col = None
        self.longs = SortedKeyList(longs, key=_long_key)


class GridFamily(Family):
    """``tumbling{size, offset}``, ``hopping{size, hop, offset}``, ``cumulate{size, step, offset}``."""

    exact = True
    bulk = True
    tracks_events = False

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        self.off: int = spec.offset
        self.cumulate = spec.type == "cumulate"
        if self.cumulate:
            self.size: int = spec.size
            self.p: int = spec.step
            self.n = self.size // self.p
            self.hop = self.size  # (a period)
        else:
            self.size = spec.size
            self.hop = getattr(spec, "hop", spec.size)
            self.p = gcd(self.size, self.hop)
        self.L = self.size // self.p
        self.H = self.hop // self.p
        #: how panes hold their events (`_Pane`), after how windows are evaluated (`sweep.sweep_kind`)
        self.kind: str = step.sweep_kind
        self.has_remove = bool(getattr(step.udm, "invertible", False))
        self.keep_values = self.kind == "running" or (self.kind == "merge" and not self.has_remove)
        #: windows valued column-wise (`grid_columns`): a merge-sweep UDA with the fresh-window batch form,
        #: released only by its end (no progressive output, no time_bound liveliness)
        self.columns = (self.kind in ("merge", "running") and self.L <= COLUMN_PANES and step.early is None
                        and not step.time_bound and getattr(step.udm, "compute_slices", None) is not None)
        #: this batch's bulk-insert records, and the column windows to value at the flush
        self.fresh: list[Fresh] = []
        self.jobs: list[tuple[Fresh, int]] = []
        #: the window index the frontier reached: windows of endless events exist up to it
        self.frontier = NEG
        #: windows before this one are final for every group (the CTI passed their end; a group holding
        #: windows whose members' ends can still move keeps its own lower ``floor``)
        self.floor_k = NEG
        #: groups holding endless events
        self.endless_groups: dict[int, Group] = {}
        #: (W.RE of a group's first window, seq, group): groups with something to clean up
        self.clean: list[tuple[int, int, Group]] = []
        self.seq = 0
        #: held windows (time-sensitive, open member ends): (W.LE, seq, group) of groups holding one
        self.held: dict[int, tuple[int, Group]] = {}
        self.truncated = False

    # -- geometry ------------------------------------------------------------------------------------------
    def pane(self, t: int) -> int:
        return (t - self.off) // self.p

    def span(self, k: int) -> tuple[int, int]:
        """Window ``k``'s panes ``[a, b)``."""
        if self.cumulate:
            return (k // self.n) * self.n, k + 1
        a = k * self.H
        return a, a + self.L

    def spans(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`span` over a column of window indexes."""
        if self.cumulate:
            return (k // self.n) * self.n, k + 1
        a = k * self.H
        return a, a + self.L

    def extents(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`extent` over a column of window indexes."""
        a, b = self.spans(k)
        return self.off + a * self.p, self.off + b * self.p

    def extent(self, k: int) -> tuple[int, int]:
        """Window ``k``'s ``[W.LE, W.RE)``."""
        a, b = self.span(k)
        return self.off + a * self.p, self.off + b * self.p

    def first_window(self, s: int) -> int:
        """The first window holding pane ``s``."""
        if self.cumulate:
            return s
        return -((self.L - 1 - s) // self.H)  # ceil((s - L + 1) / H)

    def last_window(self, s: int) -> int:
        """The last window holding pane ``s`` (INF for an endless event)."""
        if s >= INF:
            return INF
        if self.cumulate:
            return (s // self.n) * self.n + self.n - 1
        return s // self.H

    def last_closed(self, t: int) -> int:
        """The last window with ``W.RE <= t``."""
        if t >= INF:
            return INF
        if self.cumulate:
            return (t - self.off) // self.p - 1  # window j ends with pane j
        return (t - self.off - self.size) // self.hop

    def closing(self, c: int) -> int | None:
        return self.last_closed(c)

    def last_starting_before(self, t: int) -> int:
        """The last window with ``W.LE < t``."""
        if t >= INF:
            return INF
        if self.cumulate:
            return self.n * (-((self.off - t) // self.size)) - 1  # every window of a period starting < t
        return -((self.off - t) // self.hop) - 1

    def last_started(self, m: int) -> int:
        """The last window with ``W.LE <= m`` (the frontier of endless events)."""
        if self.cumulate:
            return ((m - self.off) // self.size) * self.n + self.n - 1
        return (m - self.off) // self.hop

    # -- per event -------------------------------------------------------------------------------------
    def new_group(self, g: Group) -> None:
        d = g.data = _Data()
        # windows the CTI already closed are final for a group made now too (it may hold an event that ended
        # exactly at the CTI, extended now: SEMANTICS §1 allows it; its old windows must not come out again)
        d.floor = self.floor_k
        d.done = self.floor_k - 1 if self.floor_k > NEG else NEG

    def _panes_of(self, ev: Ev) -> tuple[int, int]:
        s1 = self.pane(ev.le)
        s2 = INF if ev.re >= INF else self.pane(ev.re - 1)
        return s1, s2

    def _pane(self, d: _Data, s: int) -> _Pane:
        p = d.panes.get(s)
        if p is None:
            p = d.panes[s] = _Pane()
            kind = self.kind
            if kind == "members":
                p.members = {}
            elif self.keep_values:
                p.values = []
        return p

    def _add(self, g: Group, ev: Ev) -> tuple[int, int]:
        d: _Data = g.data
        s1, s2 = self._panes_of(ev)
        if d.floor > NEG and s2 < self.span(d.floor)[0]:
            return s1, s2  # (a retraction left it in final windows only: nothing can need it any more)
        if s1 == s2:
            p = self._pane(d, s1)
            if p.members is not None:
                p.members[ev.id] = ev
                g.events[ev.id] = ev
            else:
                self._fold(p, [ev.val])
        else:
            d.longs.add((s1, s2, ev))
            g.events[ev.id] = ev
            if s2 >= INF:
                d.endless += 1
                self.endless_groups[id(g)] = g
        return s1, s2

    def _fold(self, p: _Pane, vals: list[Any]) -> None:
        """Values join pane ``p``."""
        p.count += len(vals)
        if p.values is not None:
            p.values.extend(vals)
        if self.kind == "merge":
            wu = self.step.udm
            p.partial = wu.add(p.partial if p.partial is not None else wu.initial_state(), vals, None)

    def _drop(self, g: Group, ev: Ev) -> tuple[int, int]:
        d: _Data = g.data
        s1, s2 = self._panes_of(ev)
        if s1 == s2:
            p = d.panes.get(s1)
            if p is not None:
                if p.members is not None:
                    p.members.pop(ev.id, None)
                else:
                    self._unfold(p, ev.val)
                if p.empty():
                    del d.panes[s1]
        else:
            d.longs.discard((s1, s2, ev))
            if s2 >= INF:
                d.endless -= 1
        return s1, s2

    def _unfold(self, p: _Pane, val: Any) -> None:
        """Value ``val`` leaves pane ``p``: its partial loses it (``remove``, or a fold of what stays)."""
        p.count -= 1
        if p.values is not None:
            p.values.remove(val)
        elif self.kind == "merge" and not self.has_remove:
            raise AssertionError("a retraction reached a pane closed by the CTI")
        if self.kind != "merge":
            return
        wu = self.step.udm
        if p.count == 0:
            p.partial = None
        elif self.has_remove:
            p.partial = wu.remove(p.partial, [val], None)
        else:
            assert p.values is not None
            p.partial = wu.add(wu.initial_state(), list(p.values), None)

    def bulk_insert(self, groups: list[Group], codes: Any, ids: Any, le: Any, re: Any, vals: list[Any],
                    closing: int | None = None) -> None:
        """A batch's inserts at once: short events by (group, pane) run, one ``add_batch`` call (the UDA's
        batch form, note 35) for every pane's partial; long events one by one. ``closing``: the last window
        the flush after this batch releases and closes, when the batch holds nothing but these inserts and
        CTIs (the panes only such windows hold need no partial: `grid_columns`)."""
        fin = re < INF
        s1 = (le - self.off) // self.p
        s2 = np.where(fin, (np.where(fin, re, 1) - 1 - self.off) // self.p, s1 - 1)
        short = fin & (s1 == s2)
        arr = vals if isinstance(vals, np.ndarray) else None
        if not short.all():
            closing = None
            vl = vals.tolist() if arr is not None else vals
            for j in np.flatnonzero(~short).tolist():
                self.insert(groups[int(codes[j])], Ev(int(ids[j]), int(le[j]), int(re[j]), vl[j]))
            sel = np.flatnonzero(short)
            if not len(sel):
                return
            codes, ids, s1 = codes[sel], ids[sel], s1[sel]
            le, re = le[sel], re[sel]
            vals = arr[sel] if arr is not None else [vals[j] for j in sel.tolist()]
            arr = vals if arr is not None else None
        smin = int(s1.min())
        key = codes * (int(s1.max()) - smin + 1) + (s1 - smin)
        order = np.argsort(key, kind="stable")
        skey = key[order]
        cuts = np.flatnonzero(skey[1:] != skey[:-1]) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(skey)]))
        run_codes = codes[order[starts]].tolist()
        run_panes = s1[order[starts]].tolist()
        members = self.kind == "members"
        svals: Any = None
        if arr is None and len(vals) and type(vals[0]) in (int, float):
            try:
                a = np.asarray(vals)
            except (OverflowError, ValueError):
                a = None
            if a is not None and a.dtype.kind in "if" and a.dtype.itemsize == 8:
                arr = a
        if arr is not None:
            vals = arr  # type: ignore[assignment]
        ol = order.tolist()
        if not members:
            if arr is not None:
                svals = arr[order]
            sl: Any = None if svals is not None else [vals[i] for i in ol]
        rec = None
        if closing is not None and svals is not None and self.columns:
            rec = Fresh(groups, run_codes, run_panes, starts, ends, svals)
            self._plan(rec, closing)
        if rec is not None and any(rec.transient):
            # transient panes are never made: their windows are valued from the batch (`after`)
            live = [r for r, t in enumerate(rec.transient) if not t]
            self.fresh.append(rec)
            if not live:
                return
            run_codes = [run_codes[r] for r in live]
            run_panes = [run_panes[r] for r in live]
            starts, ends = starts[live], ends[live]
            rec = None
            contiguous = False
        else:
            contiguous = True
        panes: list[_Pane] = []
        for code, s in zip(run_codes, run_panes, strict=True):
            panes.append(self._pane(groups[code].data, s))
        if members:
            ids_l, le_l, re_l = ids.tolist(), le.tolist(), re.tolist()
            vl = vals.tolist() if isinstance(vals, np.ndarray) else vals
            for p, a, b, code in zip(panes, starts.tolist(), ends.tolist(), run_codes, strict=True):
                g = groups[code]
                for i in ol[a:b]:
                    ev = Ev(ids_l[i], le_l[i], re_l[i], vl[i])
                    p.members[ev.id] = ev  # type: ignore[index]
                    g.events[ev.id] = ev
        else:
            self._fold_runs(panes, sl, svals, starts, ends, contiguous)
        for code, s in zip(run_codes, run_panes, strict=True):
            self._touched(groups[code], s, s)

    def _plan(self, rec: Fresh, closing: int) -> None:
        """Which runs' panes are transient (`grid_columns`), and each group's column windows: a pane made
        by this batch whose every window closes at the coming flush and covers only panes of this batch."""
        tops: dict[int, int] = {}
        for code, g in enumerate(rec.groups):
            d: _Data = g.data
            if d.longs or d.dirty:
                tops[code] = INF  # (no column windows for it)
            else:
                tops[code] = d.panes.peekitem(-1)[0] if d.panes else NEG
        cols: dict[int, list[int]] = {}
        for r, (code, s) in enumerate(zip(rec.run_codes, rec.run_panes, strict=True)):
            top = tops[code]
            if top >= INF or s <= top:
                continue
            fw = self.first_window(s)
            if fw <= rec.groups[code].data.done or self.last_window(s) > closing or self.span(fw)[0] <= top:
                continue
            rec.transient[r] = True
            lo_hi = cols.get(code)
            lw = self.last_window(s)
            if lo_hi is None:
                cols[code] = [fw, lw]
            else:
                lo_hi[0] = min(lo_hi[0], fw)
                lo_hi[1] = max(lo_hi[1], lw)
        rec.cols = {code: (a, b) for code, (a, b) in cols.items()}
        for code, (a, b) in rec.cols.items():
            rec.groups[code].data.col = (a, b, rec, code)

    def _fold_runs(self, panes: list[_Pane], sl: list[Any], svals: Any, starts: Any, ends: Any,
                   contiguous: bool = True) -> None:
        """Each run ``starts[i]:ends[i]`` of the sorted values joins ``panes[i]`` (``contiguous``: the runs
        cover the values end to end, as the batch form's offsets need)."""
        st = starts.tolist()
        en = ends.tolist()
        if sl is None and (self.keep_values or self.kind != "merge"
                           or (self.step.udm.add_batch is None and self.step.udm.add_array is None)):
            sl = svals.tolist()
        for p, a, b in zip(panes, st, en, strict=True):
            p.count += b - a
            if p.values is not None:
                p.values.extend(sl[a:b])
        if self.kind != "merge":
            return
        wu = self.step.udm
        add_batch = getattr(wu, "add_batch", None)
        if add_batch is not None and svals is not None:
            init = wu.initial_state
            states = [p.partial if p.partial is not None else init() for p in panes]
            if not contiguous:
                svals = np.concatenate([svals[a:b] for a, b in zip(st, en, strict=True)])
                ln = np.array([b - a for a, b in zip(st, en, strict=True)], dtype=np.int64)
                starts = np.concatenate(([0], np.cumsum(ln)[:-1]))
                ends = np.cumsum(ln)
            offsets = np.concatenate((starts, ends[-1:])).astype(np.int64)
            new = wu._call(add_batch, (states, svals, offsets), None, "add_batch")
            if len(new) != len(panes):
                raise contract(wu.label, None, f"add_batch returned {len(new)} states for {len(panes)} slices", new)
            for p, state in zip(panes, new, strict=True):
                p.partial = state
            return
        add_array = wu.add_array
        if add_array is not None and svals is not None:  # the UDA's array form, one call per pane
            for p, a, b in zip(panes, st, en, strict=True):
                state = p.partial if p.partial is not None else wu.initial_state()
                p.partial = wu._call(add_array, (state, svals[a:b]), None, "add_array")
            return
        for p, a, b in zip(panes, st, en, strict=True):
            p.partial = wu.add(p.partial if p.partial is not None else wu.initial_state(), sl[a:b], None)

    def bulk_held(self, g: Group) -> int:
        return sum(p.count for p in g.data.panes.values())

    def insert(self, g: Group, ev: Ev) -> None:
        s1, s2 = self._add(g, ev)
        self._touched(g, s1, s2)

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        a1, a2 = self._drop(g, ev)
        if g.swept is not None and a1 < self.span(g.swept)[1]:
            g.swept = None  # the sweep took the event in as it was
        ev.re = new
        if new > ev.le:
            _, b2 = self._add(g, ev)
        else:
            b2 = a1 - 1
        if self.step.time_sensitive or old >= INF:
            # (an endless event's windows past the frontier were held back: now that it ends they may come out)
            self._touched(g, a1, max(a2, b2))
        else:
            lo, hi = (a2, b2) if a2 < b2 else (b2, a2)
            if lo != hi:
                self._touched(g, max(a1, lo + 1) if new > ev.le else a1, hi)

    def _touched(self, g: Group, s1: int, s2: int) -> None:
        """Panes ``[s1, s2]`` changed: windows already evaluated that hold them are dirty."""
        d: _Data = g.data
        if g.swept is not None and s1 < self.span(g.swept)[1]:
            g.swept = None  # the sweep already took in what changed: rebuilt at the next evaluation
        lo = max(self.first_window(s1), d.floor)
        if lo <= d.done:
            hi = min(self.last_window(s2), d.done)
            if hi >= lo:
                d.dirty.append((lo, hi))
        self.seq += 1
        heapq.heappush(self.clean, (self.extent(lo)[1], self.seq, g))

    def advanced(self, m: int) -> None:
        target = min(m, self.step.ctx.reached)
        if target > NEG:
            k = self.last_started(target)
            if k > self.frontier:
                self._extend(k)

    def _extend(self, k: int) -> None:
        """The frontier moves to window ``k``: endless events now belong to the windows up to it (those
        already evaluated without them are dirty)."""
        old = self.frontier
        self.frontier = k
        for g in self.endless_groups.values():
            d: _Data = g.data
            if d.endless and old < d.done:
                d.dirty.append((max(old + 1, d.floor), min(k, d.done)))
                g.swept = None
                self.step.touched[id(g)] = g

    def finish_ready(self) -> None:
        """End of input (semantics-notes 2): endless events give windows up to ``W.LE <= T``."""
        T = self.step.ctx.reached
        if T > NEG:
            k = self.last_started(T)
            if k > self.frontier:
                self._extend(k)
        if any(g.data.endless for g in self.endless_groups.values()):
            self.truncated = True
            self.step.ctx.truncated(T)

    # -- evaluation ------------------------------------------------------------------------------------
    def _last_releasable(self) -> int:
        st = self.step
        k = self.last_closed(st.rp)
        if st.tb > NEG:
            k = max(k, self.last_starting_before(st.tb))
        if st.tick:
            k = max(k, self.last_started(st.watermark))
        return k

    def _new_windows(self, g: Group, lo: int, hi: int) -> list[tuple[int, int]]:
        """Index ranges of the windows in ``[lo, hi]`` that hold a member."""
        d: _Data = g.data
        ranges: list[tuple[int, int]] = []
        a = self.span(lo)[0]
        b = self.span(hi)[1]
        for s in d.panes.irange(a, b - 1):
            r0 = max(lo, self.first_window(s))
            r1 = min(hi, self.last_window(s))
            if r0 > r1:
                continue
            if ranges and r0 <= ranges[-1][1] + 1:
                if r1 > ranges[-1][1]:
                    ranges[-1] = (ranges[-1][0], r1)
            else:
                ranges.append((r0, r1))
        if d.longs:
            cap = self.frontier
            for s1, s2, _ev in d.longs.irange_key(max_key=(b, INF)):
                r1 = min(hi, self.last_window(s2))
                if s2 >= INF:
                    r1 = min(r1, cap)
                r0 = max(lo, self.first_window(s1))
                if r0 <= r1:
                    ranges.append((r0, r1))
            ranges = _merged(ranges)
        return ranges

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: _Data = g.data
        col = d.col
        if col is not None:  # window by window up to the column windows, which `after` values at once
            d.col = None
            lo, hi, rec, code = col
            self._evaluate(g, out, em, lo - 1)
            self.jobs.append((rec, code))
            d.done = max(d.done, hi)
        self._evaluate(g, out, em, None)

    def after(self, out: Any, em: Any) -> None:
        """After every group's evaluation: the column windows, as one block."""
        jobs = self.jobs
        self.fresh = []
        if not jobs:
            return
        self.jobs = []
        block = column_block(self, jobs, em)
        if block is not None:
            out.block(block)

    def _evaluate(self, g: Group, out: Any, em: Any, limit: int | None) -> None:
        d: _Data = g.data
        K = self._last_releasable()
        if limit is not None:
            K = min(K, limit)
        todo = list(d.dirty)
        d.dirty = []
        if d.done < K:
            todo += self._new_windows(g, d.done + 1, K)
            d.done = K
        if not todo:
            self._pending(g)
            return
        step = self.step
        sweep = g.sweep
        keep: list[tuple[int, int]] = []
        for lo, hi in _merged(todo):
            k = lo
            while k <= hi:
                wle, wre = self.extent(k)
                if not step.releasable(wle, wre, k in g.out):
                    keep.append((k, k))
                    k += 1
                    continue
                if k > self.frontier and d.endless and not self._has_finite(d, k):
                    news = []  # (past T, never-ending events alone make no window: semantics-notes 2)
                elif sweep is not None:
                    if self.L == 1 and not d.longs:  # (a tumbling window is one pane: no sweep needed)
                        news = self.value(g, wle, wre, None, self._pane_state(d, k * self.H))
                    else:
                        self._sweep_to(g, k)
                        news = self.value(g, wle, wre, None)
                else:
                    news = self.value(g, wle, wre, self._members(g, k))
                self.put(g, k, wle, wre, news, out, em)
                k += 1
        d.dirty = keep
        self._pending(g)

    def _pending(self, g: Group) -> None:
        """Register the group's first window still to release with the step."""
        d: _Data = g.data
        k = None
        s = next(iter(d.panes.irange(self.span(d.done + 1)[0], None)), None) if d.panes else None
        if s is not None:
            k = max(d.done + 1, self.first_window(s))
        for s1, s2, _ev in d.longs:
            last = self.last_window(s2)
            if last > d.done:
                kk = max(d.done + 1, self.first_window(s1))
                if s2 >= INF and kk > self.frontier:
                    kk = self.frontier + 1
                k = kk if k is None else min(k, kk)
                break
        for lo, _hi in d.dirty:
            k = lo if k is None else min(k, lo)
        if k is not None:
            wle, wre = self.extent(k)
            self.step.pending(g, wre, wle)

    def _pane_state(self, d: _Data, s: int) -> Any:
        """The UDM state of pane ``s``'s events (None: it has none)."""
        p = d.panes.get(s)
        if p is None or not p.count:
            return None
        if self.kind == "merge":
            return p.partial
        wu = self.step.udm
        return wu.add(wu.initial_state(), list(p.values), None)

    def _sweep_to(self, g: Group, k: int) -> None:
        """Bring the group's sweep to window ``k``: forward from the window it holds, else rebuilt."""
        d: _Data = g.data
        sweep = g.sweep
        a, b = self.span(k)
        prev = g.swept
        if prev is None or prev > k:
            sweep.clear()
            start = a
            lstart = None
        else:
            _pa, pb = self.span(prev)
            sweep.leave_before(a)
            start = max(pb, a)
            lstart = pb
        partials = self.kind == "merge"
        for s in d.panes.irange(start, b - 1):
            p: _Pane = d.panes[s]
            if not p.count:
                continue
            if partials:
                sweep.enter_partial(s, p.partial)
            else:
                sweep.enter(s, p.values)
        if d.longs:
            lo_key = (NEG, NEG) if lstart is None else (lstart, NEG)
            for _s1, s2, ev in d.longs.irange_key(lo_key, (b - 1, INF)):
                if s2 >= a:
                    sweep.enter(s2 if s2 < INF else INF, [ev.val])
        g.swept = k

    def _has_finite(self, d: _Data, k: int) -> bool:
        """Does window ``k`` hold an event that ends?"""
        a, b = self.span(k)
        if next(iter(d.panes.irange(a, b - 1)), None) is not None:
            return True
        return any(s2 >= a and s2 < INF for _s1, s2, _ev in d.longs.irange_key(max_key=(b - 1, INF)))

    def _members(self, g: Group, k: int) -> list[Ev]:
        d: _Data = g.data
        a, b = self.span(k)
        out: list[Ev] = []
        for s in d.panes.irange(a, b - 1):
            out.extend(d.panes[s].members.values())
        if d.longs:
            for _s1, s2, ev in d.longs.irange_key(max_key=(b - 1, INF)):
                if s2 >= a:
                    out.append(ev)
        return out

    # -- cleanup, output CTI ------------------------------------------------------------------------------
    def cleanup(self, c: int) -> Iterable[Group]:
        h = self.clean
        visit: dict[int, Group] = {}
        while h and h[0][0] <= c:
            g = heapq.heappop(h)[2]
            visit[id(g)] = g
        if c >= INF:
            return list(visit.values())
        kf = self.last_closed(c)
        soe = self.step.sees_open_ends
        # windows past the frontier that endless events will reach once T moves are not final yet (they have
        # not come out: semantics-notes 2)
        endless = any(g.data.endless for g in self.endless_groups.values())
        cap = self.frontier + 1 if endless else INF
        if not soe:
            self.floor_k = max(self.floor_k, min(kf + 1, cap))
        for g in list(visit.values()):
            d: _Data = g.data
            k_keep = kf + 1
            if soe:
                k_keep = self._first_open(g, kf, c)
            if d.endless:
                k_keep = min(k_keep, self.frontier + 1)
            a = self.span(k_keep)[0]
            out = g.out
            while out and out.peekitem(0)[0] < k_keep:
                out.popitem(0)
            panes = d.panes
            while panes and panes.peekitem(0)[0] < a:
                _, p = panes.popitem(0)
                if p.members:
                    for eid in p.members:
                        g.events.pop(eid, None)
            if self.kind == "merge" and self.keep_values:
                # no retraction can reach a pane that ends before c: its partial is all it needs
                limit = (c - 1 - self.off) // self.p
                for s in panes.irange(max(d.vfloor, a), limit, inclusive=(True, False)):
                    panes[s].values = None
                d.vfloor = max(d.vfloor, limit)
            if d.longs:  # (an event ending at c can still be extended: kept until the CTI passes it)
                for item in [it for it in d.longs if it[1] < a and it[2].re < c]:
                    d.longs.remove(item)
                    g.events.pop(item[2].id, None)
            if g.swept is not None and g.swept < k_keep:
                g.sweep.clear()
                g.swept = None
            d.dirty = [(max(lo, k_keep), hi) for lo, hi in d.dirty if hi >= k_keep]
            d.floor = max(d.floor, k_keep)
            if k_keep <= kf:
                self.held[id(g)] = (self.extent(k_keep)[0], g)
            else:
                self.held.pop(id(g), None)
            if panes or d.longs or out:
                first = panes.peekitem(0)[0] if panes else INF
                if d.longs:
                    first = min(first, d.longs[0][0])
                kk = max(k_keep, self.first_window(first)) if first < INF else k_keep
                self.seq += 1
                heapq.heappush(h, (self.extent(kk)[1], self.seq, g))
            if not d.endless:
                self.endless_groups.pop(id(g), None)
        return list(visit.values())

    def _first_open(self, g: Group, kf: int, c: int) -> int:
        """Time-sensitive without right clipping: the first window at or before ``kf`` holding a member
        whose end may still change (``RE >= c``): it and every later one stay."""
        d: _Data = g.data
        first = None
        for ev in g.events.values():
            if ev.re >= c:
                k = self.first_window(self.pane(ev.le))
                first = k if first is None else min(first, k)
        if first is None or first > kf:
            return kf + 1
        del d
        return first

    def idle(self, g: Group) -> bool:
        d: _Data = g.data
        return not d.panes and not d.longs

    def bound(self, c: int) -> int:
        k0 = self.last_closed(c) + 1  # first window with W.RE > c
        b = self.extent(k0)[0]
        if any(g.data.endless for g in self.endless_groups.values()):
            b = min(b, self.extent(self.frontier + 1)[0])
        for le, _g in self.held.values():
            if le < b:
                b = le
        return b

    def final_state(self) -> None:
        self.endless_groups = {}
        self.clean = []
        self.held = {}

    def windows(self, g: Group) -> int:
        """The windows holding a member that are not final yet."""
        d: _Data = g.data
        spans = [(self.first_window(s), self.last_window(s)) for s in d.panes]
        spans += [(self.first_window(s1), min(self.last_window(s2), self.frontier)) for s1, s2, _ev in d.longs]
        n = 0
        for lo, hi in _merged([(max(lo, d.floor), hi) for lo, hi in spans if hi >= max(lo, d.floor)]):
            n += hi - lo + 1
        return n

    def busy(self) -> bool:
        return any(g.data.dirty for g in self.step.groups.values())

    def due(self) -> int:
        best = self.clean[0][0] if self.clean else INF
        if any(g.data.endless for g in self.endless_groups.values()):  # windows are made as the frontier moves
            best = min(best, self.extent(self.frontier + 1)[0])
        return best


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged index ranges."""
    if len(ranges) <= 1:
        return ranges
    ranges = sorted(ranges)
    out = [ranges[0]]
    for lo, hi in ranges[1:]:
        plo, phi = out[-1]
        if lo <= phi + 1:
            if hi > phi:
                out[-1] = (plo, hi)
        else:
            out.append((lo, hi))
    return out
