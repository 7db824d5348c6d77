"""Tumbling, hopping and cumulate windows (SEMANTICS §3), over panes shared by overlapping windows.

Every window is a run of consecutive panes (`geometry`: hopping window ``k`` covers panes ``[k*H, k*H + L)``;
cumulate window ``j`` of period ``P = j // n`` covers ``[P*n, j + 1)``, so it extends its predecessor by one
pane). A group keeps each short event in its pane once and each event spanning panes aside (`grid_panes`),
so an insert costs O(1), and the windows of a group are evaluated in order by the sweep (`sweep`): window
``k + 1`` is window ``k`` plus the panes that enter minus those that leave. Cumulate windows only grow within
a period (one pane enters, nothing leaves), so their sweep is one state (`prefix_sweep`), started again with
each period and taken back to an earlier window when a late change reaches a pane it holds. A batch's
inserts come in at once (`grid_intake`); windows a batch both fills and closes are valued as arrays
(`grid_columns`). Under a running UDA released by its end alone, with short windows, groups holding short
events alone keep them in the family's columnar pane store instead of panes (`grid_store`): every such group's
windows are valued, written and cleaned up with numpy at each flush; a group leaves it for panes of its own
when a retraction, an event spanning panes or a late event needs them, and joins it again once evaluated.

Windows are evaluated when released (a group with panes of its own window by window, `grid_evaluate`); an
element that touches a window already evaluated marks it *dirty*, and the next flush evaluates it again (the
sweep is rebuilt there, or taken back for cumulate). What a CTI finalizes is `grid_cleanup`'s. Endless
events give windows only up to the watermark, never past T (semantics-notes 2): at the end of input up to
``W.LE <= T``, and the run reports the truncation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..rules import INF, NEG
from .family import Family
from .geometry import geometry_of
from .grid_cleanup import bound_of, clean_up
from .grid_codes import numbers
from .grid_columns import Fresh, column_block, ends_alone
from .grid_evaluate import evaluate_own, touch, unsweep
from .grid_intake import bulk_insert
from .grid_pane_windows import count_windows, windows_with_members
from .grid_panes import GroupPanes, PaneFill, panes_of
from .grid_prefix import PrefixWindows
from .grid_store import PaneStore
from .grid_store_flush import flush
from .prefix_sweep import PrefixSweep
from .state import Ev, Group, by_identity

__all__ = ["COLUMN_PANES", "GridFamily"]

#: windows of at most this many panes may be valued column-wise (`grid_columns`: a window's values are
#: copied once per window there, so longer windows are swept, at a cost per window that does not grow)
COLUMN_PANES = 8


class GridFamily(Family):
    """``tumbling{size, offset}``, ``hopping{size, hop, offset}``, ``cumulate{size, step, offset}``."""

    exact = True
    bulk = True
    tracks_events = False

    def __init__(self, step: Any, spec: Any) -> None:
        super().__init__(step, spec)
        self.geo = geometry_of(spec)
        #: how panes hold their events (`grid_panes.PaneFill`), after how windows are evaluated
        self.fill = PaneFill(step)
        #: the groups holding short events alone, none late, as columns valued with numpy (`grid_store`): a
        #: UDA over a running sweep released by its end alone, short windows (a window's values are copied
        #: once per window there)
        self.store = PaneStore(step, self.geo, self.fill, self.fill.kind == "running" and ends_alone(step)
                               and self.geo.width <= COLUMN_PANES)
        #: windows valued column-wise (`grid_columns`): a merge-sweep UDA with the fresh-window batch form,
        #: released only by its end (no progressive output, no time_bound liveliness)
        self.columns = (self.fill.kind in ("merge", "running") and self.geo.width <= COLUMN_PANES
                        and step.early is None and not step.time_bound and not self.store.on
                        and getattr(step.udm, "compute_slices", None) is not None)
        #: closed windows that grow (cumulate), valued a run at a time from the running state (`grid_prefix`;
        #: short ones are in the `store`)
        self.prefix = PrefixWindows(step, self.fill.kind, self.geo.grows)
        self.prefix.on = self.prefix.on and not self.store.on
        #: a bulk insert's short events at or after a group's last pane join its tail as columns, no pane
        #: made (`grid_tail`: only `prefix` reads them without making their panes)
        self.tail = self.prefix.on and not self.columns
        #: groups this flush evaluated one by one (they may join the store again)
        self.back: list[Group] = []
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
        #: a bulk insert came since the last flush (`busy`: the groups it put in the store are not touched)
        self.fed = False

    def __getstate__(self) -> dict[str, Any]:
        # ``endless_groups`` and ``held`` are keyed by id(group): lists in a snapshot (`by_identity`)
        s = dict(self.__dict__)
        s["endless_groups"] = list(self.endless_groups.values())
        s["held"] = list(self.held.values())
        return s

    def __setstate__(self, s: dict[str, Any]) -> None:
        s["endless_groups"] = {id(g): g for g in by_identity(s["endless_groups"])}
        s["held"] = {id(h[1]): h for h in by_identity(s["held"])}
        s.setdefault("tail", False)  # (a snapshot from before the tail: its groups keep panes only)
        s.pop("closed", None)  # (a snapshot from before the store: its groups keep panes)
        s.setdefault("store", PaneStore(s["step"], s["geo"], s["fill"], False))
        s.setdefault("back", [])
        s.setdefault("fed", False)
        self.__dict__.update(s)

    def closing(self, c: int) -> int | None:
        return self.geo.last_closed(c)

    # -- per event -------------------------------------------------------------------------------------
    def new_sweep(self) -> Any:
        """A group's sweep (`new_groups` gives it; a group the store takes gets one when it leaves,
        `materialize`)."""
        sweep = super().new_sweep()
        if self.geo.grows and sweep is not None:  # (windows only grow within a period)
            return PrefixSweep(self.step.udm, self.fill.kind == "merge")
        return sweep

    def new_groups(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> list[Group] | list[int]:
        """Codes in the store (`grid_codes`: no object) when it is on, else groups with panes of their own."""
        if self.store.on:
            return list(self.store.enrol(keys, fields))
        return self.own_groups(keys, fields)

    def own_groups(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> list[Group]:
        """New groups with panes and a sweep of their own."""
        gs = list(map(Group, keys, fields))
        for g in gs:
            self._panes(g, GroupPanes())
            g.sweep = self.new_sweep()
        return gs

    def group_of(self, code: int) -> Group:
        """The object of store group ``code`` (its events stay in the store)."""
        codes = self.store.codes
        g = codes.objs.get(code)
        if g is None:
            key = codes.keys[code]
            g = codes.objs[code] = self.step.groups[key] = Group(key, codes.fields.row(code))
            self._panes(g, GroupPanes(True)).num = code
        return g

    def _panes(self, g: Group, d: GroupPanes) -> GroupPanes:
        """``d`` becomes the panes of new group ``g``: windows the CTI already closed are final for a group
        made now too (it may hold an event that ended exactly at the CTI, extended now: SEMANTICS §1 allows
        it; its old windows must not come out again)."""
        g.data = d
        d.floor = floor = self.floor_k
        d.done = floor - 1 if floor > NEG else NEG
        return d

    def _add(self, g: Group, ev: Ev) -> tuple[int, int]:
        s1, s2 = g.data.add(g, self.geo, self.fill, ev)
        if s2 >= INF:
            self.endless_groups[id(g)] = g
        return s1, s2

    def bulk_insert(self, groups: list[Any], codes: Any, ids: Any, le: Any, re: Any, vals: list[Any],
                    closing: int | None = None) -> None:
        self.fed = True
        bulk_insert(self, groups, codes, ids, le, re, vals, closing)

    def to_evaluate(self, groups: list[Group]) -> list[Group]:
        # (a group in the store is valued with every other one in `after`: `fed` keeps the step busy until then)
        return [groups[j] for j in np.flatnonzero(numbers(groups) < 0).tolist()]

    def bulk_held(self, g: Group) -> int:
        d: GroupPanes = g.data
        return self.store.held(d.num) if d.num >= 0 else d.held()

    def materialize(self, gs: list[Group]) -> None:
        """Groups leave the store for panes of their own (`PaneStore.materialize`), and get their sweep."""
        self.store.materialize_all(gs, self.floor_k)
        for g in gs:
            if g.sweep is None:
                g.sweep = self.new_sweep()

    def insert(self, g: Group, ev: Ev) -> None:
        d: GroupPanes = g.data
        if d.num >= 0:
            s1, s2 = panes_of(self.geo, ev)
            if s1 == s2 and not self.store.late(s1):
                self.store.add(d.num, s1, ev.val)
                return
            self.materialize([g])
        s1, s2 = self._add(g, ev)
        touch(self, g, s1, s2)

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        if g.data.num >= 0:
            self.materialize([g])
        a1, a2 = g.data.drop(self.geo, self.fill, ev)
        unsweep(self, g, a1)  # (the sweep took the event in as it was)
        ev.re = new
        if new > ev.le:
            _, b2 = self._add(g, ev)
        else:
            b2 = a1 - 1
        if self.step.time_sensitive or old >= INF:
            # (an endless event's windows past the frontier were held back: now that it ends they may come out)
            touch(self, g, a1, max(a2, b2))
        else:
            lo, hi = (a2, b2) if a2 < b2 else (b2, a2)
            if lo != hi:
                touch(self, g, max(a1, lo + 1) if new > ev.le else a1, hi)

    def advanced(self, m: int) -> None:
        target = min(m, self.step.ctx.reached)
        if target > NEG:
            k = self.geo.last_started(target)
            if k > self.frontier:
                self._extend(k)

    def _extend(self, k: int) -> None:
        """The frontier moves to window ``k``: endless events now belong to the windows up to it (those
        already evaluated without them are dirty)."""
        old = self.frontier
        self.frontier = k
        for g in self.endless_groups.values():
            d: GroupPanes = g.data
            if d.endless and old < d.done:  # (only windows holding a member: ``old`` may be NEG)
                d.dirty.extend(windows_with_members(d, self.geo, max(old + 1, d.floor), min(k, d.done), k))
                g.swept = None
                self.step.touched[id(g)] = g

    def finish_ready(self) -> None:
        """End of input (semantics-notes 2): endless events give windows up to ``W.LE <= T``."""
        T = self.step.ctx.reached
        if T > NEG:
            self.advanced(T)
        if any(g.data.endless for g in self.endless_groups.values()):
            self.truncated = True
            self.step.ctx.truncated(T)

    # -- evaluation ------------------------------------------------------------------------------------
    def last_releasable(self) -> int:
        st = self.step
        geo = self.geo
        k = geo.last_closed(st.rp)
        if st.tb > NEG:
            k = max(k, geo.last_starting_before(st.tb))
        if st.tick:
            k = max(k, geo.last_started(st.watermark))
        return k

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        d: GroupPanes = g.data
        if d.num >= 0:  # (in the store: valued with every other group's windows by `after`)
            return
        if self.store.on:
            self.back.append(g)
        col = d.col
        if col is not None:  # window by window up to the column windows, which `after` values at once
            d.col = None
            lo, hi, rec, code = col
            evaluate_own(self, g, out, em, lo - 1)
            self.jobs.append((rec, code))
            d.done = max(d.done, hi)
        evaluate_own(self, g, out, em, None)

    def after(self, out: Any, em: Any) -> None:
        """After every group's evaluation: the store's windows, and the column windows, as one block each."""
        store = self.store
        self.fed = False
        flush(store, self.last_releasable(), out, em)
        if self.back:  # groups evaluated one by one that need it no more join the store again
            for g in self.back:
                d: GroupPanes = g.data
                if (d.num < 0 and d.done == store.done and not d.dirty and not d.longs and not d.tail
                        and d.col is None and not g.events and self.step.groups.get(g.key) is g):
                    store.enrol_panes(g)
            self.back = []
        self.prefix.flush(self, out, em)
        jobs = self.jobs
        self.fresh = []
        if not jobs:
            return
        self.jobs = []
        block = column_block(self, jobs, em)
        if block is not None:
            out.block(block)

    # -- cleanup, output CTI ------------------------------------------------------------------------------
    def cleanup(self, c: int) -> Iterable[Group]:
        return clean_up(self, c)

    def idle(self, g: Group) -> bool:
        d: GroupPanes = g.data
        return d.num < 0 and not d.holds()

    def bound(self, c: int) -> int:
        return bound_of(self, c)

    def final_state(self) -> None:
        self.endless_groups = {}
        self.clean = []
        self.held = {}

    def windows(self, g: Group) -> int:
        """The windows holding a member that are not final yet."""
        d: GroupPanes = g.data
        if d.num >= 0:
            return self.store.count_windows(d.num, max(d.floor, self.floor_k))
        return count_windows(d, self.geo, self.frontier)

    def sizes(self, groups: Iterable[Group]) -> tuple[int, int]:
        own = [g for g in groups if type(g) is not int and g.data.num < 0]
        nwin, events = super().sizes(own)
        if self.store.on:
            held, wins = self.store.totals(self.floor_k)
            nwin += wins
            events += held
        return nwin, events

    def busy(self) -> bool:
        return self.fed or any(type(g) is not int and g.data.dirty for g in self.step.groups.values())

    def due(self) -> int:
        best = min(self.clean[0][0] if self.clean else INF, self.store.due())
        if any(g.data.endless for g in self.endless_groups.values()):  # windows are made as the frontier moves
            best = min(best, self.geo.extent(self.frontier + 1)[0])
        return best
