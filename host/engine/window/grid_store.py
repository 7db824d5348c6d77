"""The grid family's columnar pane store: every group's short events as three columns, valued with numpy.

Under a UDA over a running sweep released by its end alone (`grid_columns.ends_alone`), with windows of a few
panes, a group that holds only short events, none late, nothing retracted, needs no pane, sweep or window
record of its own, nor an object (it is a number, `grid_codes`): its windows are valued together with every
other such group's at each flush. The store holds their events as rows ``(group number, pane, value)`` — new
rows in chunks, merged into the rows sorted by (group, pane) once per flush, insertion order kept within a
pane — and one number ``done``: every window up to it was evaluated for every group in the store. A flush
(`grid_store_flush`) values the windows in ``(done, K]`` (``K`` the last released) holding a row, for all
groups at once (`grid_closed.window_values`): those the CTI closes go out as one column block with no output
record (nothing valid can change them, SEMANTICS §7), the others (released at the watermark before the CTI)
with their records in ``Group.out``, through the usual diff. Cleanup drops the rows of panes
only final windows hold, and the output records of final windows, with numpy.

A group leaves the store for its own panes (`materialize`, `grid_panes.GroupPanes`) the first time the rule
needs per-group state: a retraction, an event spanning panes, or an event late for a window already evaluated
(that window must be diffed against what it emitted). From then on it is evaluated window by window; both
forms are one rule (tests/test_grid_closed.py holds them and the oracle to the same output).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow.compute as pc
from sortedcontainers import SortedDict

from udm.host.io.arrow_numpy import arrow_of, sorted_unique

from ..payload import value_array
from ..rules import INF, NEG
from .geometry import Geometry
from .grid_codes import GroupCodes
from .key_columns import joined
from .state import NO_OUT, Group, OutputRecord

__all__ = ["HI", "LO", "PaneStore", "stable_order"]

#: numpy's int64 holds the window and pane numbers the store computes; NEG / INF are clipped to these
LO = -(2**62)
HI = 2**62


def stable_order(key: np.ndarray) -> np.ndarray:
    """The stable sort order of non-negative int keys, 16 bits at a time from the lowest (numpy sorts 16-bit
    keys stably by radix, several times faster than its stable sort of int64 keys)."""
    order = np.argsort(key.astype(np.uint16), kind="stable")
    top = int(key.max()) >> 16 if len(key) else 0
    shift = 16
    while top:
        order = order[np.argsort((key[order] >> shift).astype(np.uint16), kind="stable")]
        top >>= 16
        shift += 16
    return order


class PaneStore:
    """Rows ``(G, S, V)`` of the groups in the store (see the module doc), sorted by (G, S) after `settle`."""

    def __init__(self, step: Any, geo: Geometry, fill: Any, on: bool) -> None:
        self.step = step
        self.geo = geo
        self.fill = fill
        self.on = on
        #: the groups in the store by number (code): keys, key fields, objects (`grid_codes`)
        self.codes = GroupCodes()
        self.G = np.zeros(0, dtype=np.int64)
        self.S = np.zeros(0, dtype=np.int64)
        self.V: np.ndarray = np.zeros(0, dtype=np.int64)
        #: rows not sorted in yet: chunks (G, S, V), and single rows (g, s, v)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.ones: list[tuple[int, int, Any]] = []
        #: every window up to this one was evaluated for every group in the store
        self.done = NEG
        #: groups in the store holding output records (windows released before the CTI closed them), and a
        #: window at or before the first of them
        self.out: dict[int, Group] = {}
        self.out_first = NEG
        #: windows of groups in the store released before the CTI closes them, written in one block with the
        #: closed ones: chunks (group number, window, output id, value); the group's output record of one is
        #: made when the group leaves the store (`_records`), until then nothing can change it
        self.spec: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        #: the earliest CTI at which a CTI alone changes the store (`due`)
        self.next_due = INF
        #: the panes the rows hold, sorted (a superset: `settle` adds, `cleanup` trims): the rows' merge key
        self.U = np.zeros(0, dtype=np.int64)
        #: per group number: events held and windows holding one, at or after a floor (`held`,
        #: `count_windows`: asked for every group at every batch), while the rows and the floor are unchanged
        self._counts: Any = None
        #: per row, the first and last window holding its pane, while the rows are unchanged (`row_windows`)
        self._rw: Any = None

    def __getstate__(self) -> dict[str, Any]:
        s = dict(self.__dict__)
        s["_counts"] = None
        s["_rw"] = None
        return s

    def __setstate__(self, s: dict[str, Any]) -> None:
        if "U" not in s:  # (a snapshot from before the merge: the panes its rows hold)
            s["U"] = np.unique(s["S"])
        s.pop("_key", None)  # (a snapshot from before the flush found its slices without a search)
        if "codes" not in s:  # (a snapshot from before the codes: every group in the store had its object)
            s["codes"] = GroupCodes.of(s.pop("groups"), s.pop("nums"))
        s.setdefault("_rw", None)  # (a snapshot from before the rows' windows were kept)
        self.__dict__.update(s)

    # -- groups ------------------------------------------------------------------------------------------
    def enrol(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> range:
        """New groups join the store (the store is on): their numbers, in order; none gets an object."""
        return self.codes.add(keys, fields)

    def materialize(self, g: Group, floor_k: int) -> None:
        """Group ``g`` leaves the store: its rows become its panes (in the order they came), its windows up to
        ``done`` count as evaluated, and it is evaluated window by window from now on."""
        self.materialize_all([g], floor_k)

    def materialize_all(self, gs: list[Group], floor_k: int) -> None:
        """`materialize` of several groups (one pass over the rows)."""
        nums = [g.data.num for g in gs]
        self.settle()
        taken = np.isin(self.G, np.array(nums, dtype=np.int64))
        S, V, G = self.S[taken], self.V[taken], self.G[taken]
        if taken.any():
            keep = ~taken
            self.G, self.S, self.V = self.G[keep], self.S[keep], self.V[keep]
        by_num: dict[int, list[tuple[int, list[Any]]]] = {}
        if len(G):
            cuts = np.flatnonzero((G[1:] != G[:-1]) | (S[1:] != S[:-1])) + 1
            starts = [0, *cuts.tolist()]
            ends = [*cuts.tolist(), len(G)]
            vl = V.tolist()
            for n, s, a, b in zip(G[starts].tolist(), S[starts].tolist(), starts, ends, strict=True):
                by_num.setdefault(n, []).append((s, vl[a:b]))
        fill = self.fill
        for g in gs:
            d = g.data
            n = d.num
            d.num = -1
            self.codes.leave(n)
            self.out.pop(n, None)
            d.own(SortedDict((s, fill.made(vals)) for s, vals in by_num.get(n, ())))
            d.done = max(d.done, self.done)
            d.floor = max(d.floor, floor_k)
        if self.spec:
            self._records(gs, nums)

    def _records(self, gs: list[Group], nums: list[int]) -> None:
        """The output records of the groups' windows written in a block before the CTI closed them."""
        G, K, ids, V = self._spec()
        mine = np.isin(G, np.array(nums, dtype=np.int64))
        if not mine.any():
            return
        keep = ~mine
        self.spec = [(G[keep], K[keep], ids[keep], V[keep])]
        by_num = dict(zip(nums, gs, strict=True))
        wu = self.step.udm
        geo = self.geo
        for n, k, i, v in zip(G[mine].tolist(), K[mine].tolist(), ids[mine].tolist(), V[mine].tolist(), strict=True):
            g = by_num[n]
            wle, wre = geo.extent(k)
            le, re, p, pj = wu.outputs(v, wle, wre, g.fields)[0]
            if g.out is NO_OUT:  # (the shared empty map: the group gets its own)
                g.out = SortedDict()
            g.out[k] = [OutputRecord(i, le, re, p, pj)]

    def _spec(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The windows written before the CTI closed them, as one chunk."""
        spec = self.spec
        if len(spec) > 1:
            spec[:] = [(np.concatenate([c[0] for c in spec]), np.concatenate([c[1] for c in spec]),
                        np.concatenate([c[2] for c in spec]), joined([c[3] for c in spec]))]
        return spec[0]

    def enrol_panes(self, g: Group) -> None:
        """A group evaluated window by window joins the store again: its panes' values become rows (it holds
        short events alone and its windows are evaluated up to ``done``, as every group's in the store)."""
        d = g.data
        n = d.num = self.codes.add_objects([g])[0]
        S: list[int] = []
        V: list[Any] = []
        for s, p in d.panes.items():
            if p.count:
                S += [s] * p.count
                V += p.values
        d.panes = SortedDict()
        if g.sweep is not None:
            g.sweep.clear()
        g.swept = None
        if S:
            self.add_rows(np.full(len(S), n, dtype=np.int64), np.array(S, dtype=np.int64), V)
        if g.out:
            self.out[n] = g
            first = int(g.out.peekitem(0)[0])
            self.out_first = first if not self.out_first > NEG else min(self.out_first, first)

    # -- rows ----------------------------------------------------------------------------------------------
    def late(self, s: Any) -> Any:
        """Does a short event in pane ``s`` (an int or a column) reach a window already evaluated?"""
        return self.geo.first_window(s) <= min(max(self.done, LO), HI)

    def add(self, num: int, s: int, v: Any) -> None:
        self.ones.append((num, s, v))

    def add_rows(self, G: np.ndarray, S: np.ndarray, V: Any) -> None:
        self.parts.append((G, S, value_array(V)))

    def settle(self) -> None:
        """The rows not sorted in yet join the sorted columns (stable: a pane's values keep their order)."""
        if self.ones:
            ones, self.ones = self.ones, []
            self.parts.append((np.array([o[0] for o in ones], dtype=np.int64),
                               np.array([o[1] for o in ones], dtype=np.int64), value_array([o[2] for o in ones])))
        if not self.parts:
            return
        parts, self.parts = self.parts, []
        m = len(self.G)
        G = np.concatenate([self.G, *(p[0] for p in parts)])
        S = np.concatenate([self.S, *(p[1] for p in parts)])
        V = joined([self.V, *(p[2] for p in parts)]) if len(self.V) else joined([p[2] for p in parts])
        # the sorted rows and the new ones merge (no sort of them all): by one int key, (group, rank of the
        # pane among the panes held), the new rows sorted among themselves, each placed after its equals. The
        # panes held grow by the batch's distinct panes, found by hashing (a batch's rows fall in a few
        # panes: no sort of its rows)
        U = self.U = sorted_unique(np.concatenate([self.U, pc.unique(arrow_of(S[m:])).to_numpy()]))
        key = G * len(U) + np.searchsorted(U, S)
        o = stable_order(key[m:])
        at = np.searchsorted(key[:m], key[m:][o], side="right") + np.arange(len(o), dtype=np.int64)
        order = np.empty(len(G), dtype=np.int64)
        old = np.ones(len(G), dtype=bool)
        old[at] = False
        order[at] = m + o
        order[old] = np.arange(m, dtype=np.int64)
        self.G, self.S, self.V = G[order], S[order], V[order]

    def row_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the first and last window holding its pane. A flush, its `set_due` and the counts all
        need them; computed once per state of the rows (a new ``S`` is a new state: it is never changed in
        place)."""
        rw = self._rw
        S = self.S
        if rw is None or rw[0] is not S:
            rw = self._rw = (S, self.geo.first_window(S), self.geo.last_windows(S))
        return rw[1], rw[2]

    def held(self, num: int) -> int:
        """How many events group ``num`` holds in the store."""
        return int(self._count(NEG)[0][num])

    def count_windows(self, num: int, floor: int) -> int:
        """How many windows at or after ``floor`` hold an event of group ``num``."""
        return int(self._count(floor)[1][num])

    def totals(self, floor: int) -> tuple[int, int]:
        """Events held and windows at or after ``floor`` holding one, over every group in the store."""
        held, wins = self._count(floor)
        return int(held.sum()), int(wins.sum())

    def _count(self, floor: int) -> tuple[np.ndarray, np.ndarray]:
        """Per group number: its events, and its windows at or after ``floor`` holding one (a group's panes
        rise, and so do their windows: a row counts the windows past its predecessor's in the group)."""
        self.settle()
        c = self._counts
        nums = len(self.codes)
        if c is not None and c[0] is self.G and c[1] == nums and c[2] == floor:
            return c[3], c[4]
        G = self.G
        fw, hi = self.row_windows()
        lo = np.maximum(fw, min(max(floor, LO), HI))
        first = np.ones(len(G), dtype=bool)
        first[1:] = G[1:] != G[:-1]
        prev = np.where(first, LO, np.concatenate(([LO], hi[:-1])))
        n = np.maximum(hi - np.maximum(lo, prev + 1) + 1, 0)
        held = np.bincount(G, minlength=nums)
        wins = np.bincount(G, weights=n, minlength=nums).astype(np.int64)
        self._counts = (self.G, nums, floor, held, wins)
        return held, wins

    # -- flush -----------------------------------------------------------------------------------------------
    # -- cleanup ---------------------------------------------------------------------------------------------
    def cleanup(self, kk: int) -> list[Group]:
        """Windows before ``kk`` are final: the rows only they hold and their output records go; returns the
        groups that now hold nothing (they leave the store)."""
        if kk >= INF:
            final = list(self.codes.objs.values())
            self.__init__(self.step, self.geo, self.fill, self.on)  # type: ignore[misc]
            return final
        self.settle()
        a = self.geo.span(kk)[0]
        if len(self.S) and int(self.S.min()) < a:
            keep = a <= self.S
            self.G, self.S, self.V = self.G[keep], self.S[keep], self.V[keep]
        self.U = self.U[np.searchsorted(self.U, a):]
        for n, g in list(self.out.items()):
            o = g.out
            while o and o.peekitem(0)[0] < kk:
                o.popitem(0)
            if not o:
                del self.out[n]
        if self.spec:
            G, K, ids, V = self._spec()
            if len(K) and int(K.min()) < kk:
                keep = kk <= K
                self.spec = [(G[keep], K[keep], ids[keep], V[keep])]
        self.out_first = kk if self.out else NEG
        codes = self.codes
        held = np.zeros(len(codes), dtype=bool)
        held[self.G] = True
        if self.spec and len(self.spec[0][0]):
            held[self.spec[0][0]] = True
        gone = codes.drop_empty(held, self.step.groups)
        remap = codes.compact(self.step.groups)
        if remap is not None:  # (the rows keep their order: live codes keep theirs)
            self.G = remap[self.G]
            if self.spec:
                G, K, ids, V = self._spec()
                self.spec = [(remap[G], K, ids, V)]
            self.out = {int(remap[n]): g for n, g in self.out.items()}
            self._counts = None
        self.set_due()
        return gone

    def set_due(self) -> None:
        """The earliest CTI at which a CTI alone changes the store: a window to release, a row to drop, an
        output record to drop."""
        geo = self.geo
        due = INF
        if len(self.S):
            fw, lw = self.row_windows()
            x = np.minimum(np.maximum(fw, min(max(self.done + 1, LO), HI)), lw)
            due = int(geo.extent(int(x.min()))[1])
        if self.spec and len(self._spec()[1]):
            due = min(due, int(geo.extent(int(self.spec[0][1].min()))[1]))
        if self.out:  # (a window at or before the first output record's: an early answer is a safe one)
            due = min(due, int(geo.extent(self.out_first)[1]))
        self.next_due = due

    def due(self) -> int:
        return self.next_due
