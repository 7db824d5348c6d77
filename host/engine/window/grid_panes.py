"""A grid group's panes: what each pane holds, and which windows of the group hold something.

An event inside one pane is kept in that pane once, whatever the number of windows it belongs to; an event
spanning panes (a *long* event, or one that never ends) is kept aside, by first pane, and enters a window's
sweep at its first pane and leaves after its last. How a pane holds its short events follows how windows
are evaluated (`sweep.sweep_kind`), which `PaneFill` decides once per step:

* ``members`` (event objects by id) when windows are computed from their members;
* otherwise ``count`` values folded into ``partial`` (the UDA state of the pane, for the merge sweep), and
  the values themselves in ``values`` while something still needs them: the running sweep (it removes what
  leaves), or a UDA without ``remove`` whose pane a retraction may still change (dropped once the CTI passes
  the pane: a ``min`` pane then holds one value). A retraction leaves such a pane's partial `STALE`: it is
  folded again from the values once, when next read (`PaneFill.partial`), not once per retraction (a pane
  of many values, many retracted, cost a fold of the whole pane for each; any chunking of the adds gives
  the state one add of all members gives, SEMANTICS §4 ``incremental``).

`GroupPanes` is what a group holds off the columnar path (a group in the family's pane store, `grid_store`,
holds nothing here): its panes, long events, how far its windows were evaluated, what joins, leaves and is
cleaned up; which of its windows hold something is `grid_pane_windows`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sortedcontainers import SortedDict, SortedKeyList

from ..invoke import contract
from ..rules import INF, NEG
from .geometry import Geometry
from .grid_tail import PaneTail
from .state import Ev, Group

__all__ = ["STALE", "GroupPanes", "Pane", "PaneFill", "panes_of"]


class _Stale:
    """The partial of a pane a retraction changed, to fold again from its values when read."""

    __slots__ = ()

    def __reduce__(self) -> str:  # (pickled by name: a restored pane's marker is this one)
        return "STALE"

    def __repr__(self) -> str:  # pragma: no cover
        return "STALE"


#: a pane's ``partial`` after a retraction, until `PaneFill.partial` folds it again (merge-only UDAs)
STALE = _Stale()


class Pane:
    """The short events of one pane (see the module docstring)."""

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


class PaneFill:
    """How the panes of a window step hold their events, and how values join and leave them."""

    def __init__(self, step: Any) -> None:
        self.step = step
        self.kind: str = step.sweep_kind
        #: the running sweep removes what leaves; a merge-only UDA (no ``remove``: `sweep.sweep_kind`) folds a
        #: pane a retraction changed again from them
        self.keep_values = self.kind in ("running", "merge")

    def new(self) -> Pane:
        p = Pane()
        if self.kind == "members":
            p.members = {}
        elif self.keep_values:
            p.values = []
        return p

    def fold(self, p: Pane, vals: list[Any]) -> None:
        """Values join pane ``p`` (a `STALE` partial stays so: its fold will take them)."""
        p.count += len(vals)
        if p.values is not None:
            p.values.extend(vals)
        if self.kind == "merge" and p.partial is not STALE:
            wu = self.step.udm
            p.partial = wu.add(p.partial if p.partial is not None else wu.initial_state(), vals, None)

    def unfold(self, p: Pane, val: Any) -> None:
        """Value ``val`` leaves pane ``p``; a merge-only UDA's partial is `STALE` until read (what stays is
        folded again then)."""
        p.count -= 1
        if p.values is None:
            raise AssertionError("a retraction reached a pane closed by the CTI")
        p.values.remove(val)
        if self.kind == "merge":
            p.partial = STALE if p.count else None

    def partial(self, p: Pane) -> Any:
        """Pane ``p``'s partial (merge sweep), folded again from its values if a retraction left it `STALE`."""
        part = p.partial
        if part is STALE:
            wu = self.step.udm
            part = p.partial = wu.add(wu.initial_state(), list(p.values), None)  # type: ignore[arg-type]
        return part

    def fold_runs(self, panes: list[Pane], sl: list[Any] | None, svals: Any, starts: Any, ends: Any,
                  contiguous: bool = True) -> None:
        """Each run ``starts[i]:ends[i]`` of the sorted values (``svals`` a column, or ``sl`` a list) joins
        ``panes[i]`` (``contiguous``: the runs cover the values end to end, as the batch form's offsets need):
        one ``add_batch`` call for every pane's partial (the UDA's batch form, semantics-notes 35), else one
        ``add_array`` or ``add`` call per pane."""
        st = starts.tolist()
        en = ends.tolist()
        wu = self.step.udm
        if sl is None:  # (every pane kind here keeps its values)
            sl = svals.tolist()
        if self.kind == "merge":  # (a stale partial is folded first: the runs join it below)
            for p in panes:
                if p.partial is STALE:
                    self.partial(p)
        for p, a, b in zip(panes, st, en, strict=True):
            p.count += b - a
            if p.values is not None:
                p.values.extend(sl[a:b])
        if self.kind != "merge":
            return
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

    def made(self, values: list[Any]) -> Pane:
        """A pane holding ``values`` (a short event each), made at once."""
        p = self.new()
        self.fold(p, values)
        return p

    def state(self, p: Pane | None) -> Any:
        """The UDM state of a pane's events (None: it has none)."""
        if p is None or not p.count:
            return None
        if self.kind == "merge":
            return self.partial(p)
        wu = self.step.udm
        return wu.add_values(wu.initial_state(), list(p.values), None)  # type: ignore[arg-type]


#: a cleanup pops at most this many panes one by one (more, when most of a group's panes go: a new dict)
_POP_MAX = 8


def _long_key(item: tuple[int, int, Ev]) -> tuple[int, int]:
    return (item[0], item[2].id)


#: the empty containers of the groups in the pane store (never written: see `GroupPanes.__init__`)
_NO_PANES: SortedDict = SortedDict()
_NO_TAIL = PaneTail()
_NO_LONGS: SortedKeyList = SortedKeyList(key=_long_key)


class GroupPanes:
    """A group's panes, long events, and how far its windows were evaluated."""

    __slots__ = ("col", "dirty", "done", "endless", "floor", "longs", "num", "panes", "tail", "vfloor")

    def __init__(self, stored: bool = False) -> None:
        """``stored``: the group's events are in the family's pane store (`grid_store`), which it leaves
        (`own`) before anything is written here: until then it shares empty containers with every such group
        (making them cost more than its events do)."""
        self.panes: SortedDict = _NO_PANES if stored else SortedDict()
        #: short events after every pane of ``panes``, as columns (`grid_tail`: cumulate runs only); paths
        #: that read panes one by one make them first (`settle`)
        self.tail = _NO_TAIL if stored else PaneTail()
        #: (first pane, last pane or INF, event) of events spanning panes, by first pane
        self.longs: SortedKeyList = _NO_LONGS if stored else SortedKeyList(key=_long_key)
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
        #: this flush's column windows (first, last, the bulk insert's record, group code), or None
        self.col: Any = None
        #: the group's number in the family's pane store while its events are there (`grid_store`), else -1
        self.num = -1

    def __getstate__(self) -> tuple:
        assert self.col is None  # (a snapshot is taken between flushes)
        return (self.panes, list(self.longs), self.done, self.dirty, self.endless, self.floor, self.vfloor,
                self.tail, self.num)

    def __setstate__(self, s: tuple) -> None:
        self.panes, longs, self.done, self.dirty, self.endless, self.floor, self.vfloor = s[:7]
        self.tail = s[7] if len(s) > 7 else PaneTail()  # (snapshots before the tail hold none)
        self.num = s[8] if len(s) > 8 else -1  # (snapshots before the store: panes only)
        self.col = None
        self.longs = SortedKeyList(longs, key=_long_key)

    def own(self, panes: SortedDict) -> None:
        """The group leaves the pane store: ``panes`` and containers of its own."""
        self.panes = panes
        self.tail = PaneTail()
        self.longs = SortedKeyList(key=_long_key)

    def settle(self, fill: PaneFill) -> SortedDict:
        """The panes, the tail's made now (for the paths that read panes one by one)."""
        if self.tail:
            panes = self.panes
            for s, vals in self.tail.pop_all():
                panes[s] = fill.made(vals)
        return self.panes

    def holds(self) -> bool:
        """Does the group hold a short or long event?"""
        return bool(self.panes or self.tail or self.longs)

    def held(self) -> int:
        """How many short events the group holds."""
        return sum(p.count for p in self.panes.values()) + self.tail.count()

    def first_in(self, a: int, b: int) -> int | None:
        """The first pane ``s`` holding a short event with ``a <= s < b`` (None: none)."""
        s = next(iter(self.panes.irange(a, b - 1)), None) if self.panes else None
        if s is None and self.tail:
            s = self.tail.first_in(a, b)
        return s

    def short_values(self, a: int, b: int) -> tuple[Any, Any] | None:
        """The values of the short events in panes ``[a, b)`` in pane order and the pane of each: two int64
        columns or two float64 columns from the tail alone (new arrays: the caller may hand them to a UDA),
        else two lists; None when a pane keeps its partial alone (a merge-only UDA's, closed by the CTI)."""
        panes = self.panes
        i0 = panes.bisect_left(a)
        i1 = panes.bisect_left(b)
        vals: list[Any] = []
        at: list[int] = []
        for s, p in zip(panes.keys()[i0:i1], panes.values()[i0:i1], strict=True):
            if p.count:
                if p.values is None:
                    return None
                vals.extend(p.values)
                at.extend([s] * p.count)
        parts = self.tail.between(a, b) if self.tail else []
        if parts and not vals and len({v.dtype for _p, v in parts}) == 1:
            if len(parts) == 1:
                return parts[0][1].copy(), parts[0][0]
            return np.concatenate([v for _p, v in parts]), np.concatenate([p for p, _v in parts])
        for p, v in parts:
            vals += v.tolist()
            at += p.tolist()
        return vals, at

    def pane(self, fill: PaneFill, s: int) -> Pane:
        """Pane ``s``, made empty when the group has none there."""
        if self.tail and s >= self.tail.first():
            self.settle(fill)
        p = self.panes.get(s)
        if p is None:
            p = self.panes[s] = fill.new()
        return p

    # -- events ------------------------------------------------------------------------------------------
    def add(self, g: Group, geo: Geometry, fill: PaneFill, ev: Ev) -> tuple[int, int]:
        """Event ``ev`` of group ``g`` joins its pane, or the long events; returns its panes (first, last)."""
        s1, s2 = panes_of(geo, ev)
        if self.floor > NEG and s2 < geo.span(self.floor)[0]:
            return s1, s2  # (a retraction left it in final windows only: nothing can need it any more)
        if s1 == s2:
            p = self.pane(fill, s1)
            if p.members is not None:
                p.members[ev.id] = ev
                g.events[ev.id] = ev
            else:
                fill.fold(p, [ev.val])
        else:
            self.longs.add((s1, s2, ev))
            g.events[ev.id] = ev
            if s2 >= INF:
                self.endless += 1
        return s1, s2

    def drop(self, geo: Geometry, fill: PaneFill, ev: Ev) -> tuple[int, int]:
        """Event ``ev`` leaves (its lifetime as held); returns its panes (first, last)."""
        s1, s2 = panes_of(geo, ev)
        if s1 == s2:
            if self.tail and s1 >= self.tail.first():
                self.settle(fill)
            p = self.panes.get(s1)
            if p is not None:
                if p.members is not None:
                    p.members.pop(ev.id, None)
                else:
                    fill.unfold(p, ev.val)
                if p.empty():
                    del self.panes[s1]
        else:
            self.longs.discard((s1, s2, ev))
            if s2 >= INF:
                self.endless -= 1
        return s1, s2

    def prune(self, g: Group, geo: Geometry, fill: PaneFill, k_keep: int, c: int) -> None:
        """Cleanup at CTI ``c`` (group ``g`` holds these panes): windows before ``k_keep`` are final, so their
        outputs, the panes only they hold and the long events that ended before ``c`` go; panes that end
        before ``c`` keep only their partial (no retraction can reach them)."""
        a = geo.span(k_keep)[0]
        if self.tail:
            self.tail.drop_before(a)
        out = g.out
        while out and out.peekitem(0)[0] < k_keep:
            out.popitem(0)
        panes = self.panes
        i = panes.bisect_left(a)
        if i:
            if fill.kind == "members":  # (only member panes hold event objects)
                for p in panes.values()[:i]:
                    if p.members:
                        for eid in p.members:
                            g.events.pop(eid, None)
            if i == len(panes):  # (all go: the common case of a group whose events all ended)
                panes.clear()
            elif i > _POP_MAX and 2 * i >= len(panes):  # (most of many go: the few that stay make a new dict)
                self.panes = panes = SortedDict(zip(panes.keys()[i:], panes.values()[i:], strict=True))
            else:
                for _ in range(i):
                    panes.popitem(0)
        if fill.kind == "merge":
            limit = geo.pane(c - 1)
            for s in panes.irange(max(self.vfloor, a), limit, inclusive=(True, False)):
                p = panes[s]
                fill.partial(p)  # (folded while its values are there)
                p.values = None
            self.vfloor = max(self.vfloor, limit)
        if self.longs:  # (an event ending at c can still be extended: kept until the CTI passes it)
            for item in [it for it in self.longs if it[1] < a and it[2].re < c]:
                self.longs.remove(item)
                g.events.pop(item[2].id, None)
        if g.swept is not None and geo.span(g.swept)[0] < a:  # the sweep holds panes that are gone:
            if geo.grows:  # a growing window's run is over (its sweep starts again with the next)
                g.sweep.clear()
                g.swept = None
            else:  # they leave it (windows before k_keep are final: it only moves on, as if they had left)
                g.sweep.leave_before(a)
        self.dirty = [(max(lo, k_keep), hi) for lo, hi in self.dirty if hi >= k_keep]
        self.floor = max(self.floor, k_keep)

    def first_pane(self) -> int:
        """The first pane holding something (a pane or a long event's first; INF: none)."""
        first = self.panes.peekitem(0)[0] if self.panes else self.tail.first() if self.tail else INF
        if self.longs:
            first = min(first, self.longs[0][0])
        return first


def panes_of(geo: Geometry, ev: Ev) -> tuple[int, int]:
    """An event's first and last pane (INF: it never ends)."""
    return geo.pane(ev.le), INF if ev.re >= INF else geo.pane(ev.re - 1)
