"""The window operator of seeds/000 §V: group & apply a UDA/UDO over windows (SEMANTICS §3–7).

Per group a *WindowIndex* (windows by their key) and the events they hold (the *EventIndex*: the step's
id registry plus per-window member maps or, for count windows, buckets of events by LE/RE). An element
touches exactly the windows whose member set (or, for time-sensitive UDMs, a member's clipped lifetime)
changes; those are marked dirty. Incremental UDMs additionally get per-window add/remove deltas.

Output is produced at *flush* points (after every `QueryRunner.process` call, per batch, and before
every output CTI): each dirty window that is *released* (``W.RE <= max(CTI, m - max_delay)``, or already
emitted, or ``W.LE < CTI`` under ``time_bound``) is recomputed, and the outputs of all recomputed windows
of a group are diffed against what was emitted for them: an unchanged output stays, a changed end is one
retraction, the rest are full retractions and inserts (minimal diffs).

Output CTIs follow SEMANTICS §7 (computed per window family in ``_bound``) and are never violated: a
`time_bound` UDM that changes output before the CTI is reported as a contract violation.
Windows that can no longer change are purged at every CTI (``_cleanup``), and ids of closed events are
forgotten, so state stays bounded when CTIs advance.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np
from sortedcontainers import SortedDict

from udm.host.errors import ContractViolation
from udm.host.query.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from .common import INF, NEG, Ev
from .invoke import Mapper, WindowUDM, contract
from .operator import Operator

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from .runner import Context

__all__ = ["WindowStep", "make_window_step"]


class OutRec:
    """One live output event: engine id, lifetime, payload and its canonical JSON."""

    __slots__ = ("id", "le", "p", "pj", "re")

    def __init__(self, id: str, le: int, re: int, p: dict[str, Any], pj: str) -> None:
        self.id = id
        self.le = le
        self.re = re
        self.p = p
        self.pj = pj

    def __getstate__(self) -> tuple:
        return (self.id, self.le, self.re, self.p, self.pj)

    def __setstate__(self, s: tuple) -> None:
        self.id, self.le, self.re, self.p, self.pj = s


class Win:
    """One window of one group."""

    __slots__ = ("alive", "dirty", "fresh", "g", "key", "le", "members", "n", "out", "pend", "re", "rebuild",
                 "state", "sticky", "waiting")

    def __init__(self, g: Group, key: int, le: int, re: int, members: dict[str, Ev] | None) -> None:
        self.g = g
        self.key = key
        self.le = le
        self.re = re
        self.members = members
        self.n = 0
        self.state: Any = None
        self.pend: dict[str, list] | None = None
        self.out: list[OutRec] = []
        self.dirty = False
        self.fresh = False
        self.waiting = False
        self.alive = True
        self.sticky = False  # has been emitted: later changes are released at once
        self.rebuild = False

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, s) for s in Win.__slots__)

    def __setstate__(self, s: tuple) -> None:
        for k, v in zip(Win.__slots__, s, strict=True):
            setattr(self, k, v)

    def __repr__(self) -> str:  # pragma: no cover
        return f"Win([{self.le}, {self.re}), n={self.n})"


class Group:
    __slots__ = ("a", "b", "base", "fields", "grave", "key", "nev", "wins")

    def __init__(self, key: Any, fields: dict[str, Any] | None) -> None:
        self.key = key
        self.fields = fields
        self.wins: Any = None
        self.nev = 0  # events of this group in the step registry
        self.grave: list[OutRec] = []  # outputs of destroyed windows, retracted at the next flush
        self.a: Any = None  # family-specific structures
        self.b: Any = None
        self.base = 0

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, s) for s in Group.__slots__)

    def __setstate__(self, s: tuple) -> None:
        for k, v in zip(Group.__slots__, s, strict=True):
            setattr(self, k, v)


class Chunk:
    """Events inserted by the vectorized fast path, kept columnar (sorted by RE, so a CTI closes a
    prefix) until something needs them one by one (`WindowStep.pull`, `WindowStep.materialize`) or a
    CTI closes them.

    Their ids stay a pyarrow string array: on the in-order path nobody asks for them one by one, so
    building per-id Python objects (a set of live fast-path ids, updated per batch and trimmed per CTI)
    would be pure overhead. Closing a prefix only moves ``lo``; a pulled row is only marked in ``gone``;
    the id -> row map ``pos`` is built the first time the general path looks an id up (a retraction, or
    an insert the fast path did not vouch for) and stays valid because rows never move.
    """

    __slots__ = ("gcodes", "gone", "ids", "keys", "le", "lo", "ngone", "order", "pos", "re", "vals")

    def __init__(self, ids: Any, le: np.ndarray, re: np.ndarray, vals: Any, gcodes: np.ndarray,
                 keys: list[Any], sel: np.ndarray | None = None) -> None:
        """Events ``i``: ``ids[sel[i]]`` (``sel`` None: ``ids[i]``), ``le[i]``, ... (a batch's id column
        is kept whole rather than copied for the rows taken)."""
        order = np.argsort(re, kind="stable")
        self.order = order if sel is None else sel[order]  # row (RE order) -> position in ``ids``
        self.ids: pa.Array = _id_array(ids)  # as inserted: reordering strings costs, and is seldom needed
        self.le = le[order]
        self.re = re[order]
        self.vals = (vals if isinstance(vals, np.ndarray) else np.asarray(vals, dtype=object))[order]
        self.gcodes = gcodes[order]
        self.keys = keys
        self.lo = 0  # rows before it are closed (forgotten)
        self.gone: np.ndarray | None = None  # rows pulled into the registry
        self.ngone = 0
        self.pos: dict[str, int] | None = None  # id -> row

    def __getstate__(self) -> tuple:
        # plain data in snapshots: ids as a list, the lookup map is rebuilt on demand
        return tuple(self.ids.to_pylist() if s == "ids" else None if s == "pos" else getattr(self, s)
                     for s in Chunk.__slots__)

    def __setstate__(self, st: tuple) -> None:
        for k, v in zip(Chunk.__slots__, st, strict=True):
            setattr(self, k, _id_array(v) if k == "ids" else v)

    def __len__(self) -> int:
        """Events still held (not closed, not pulled)."""
        return len(self.re) - self.lo - self.ngone

    def closed(self, c: int) -> int:
        """Row index up to which RE < c (never below ``lo``: RE is sorted and earlier CTIs were lower)."""
        return int(np.searchsorted(self.re, c, side="left"))

    def find(self, id: str) -> int:
        """The row holding event ``id``, or -1."""
        pos = self.pos
        if pos is None:
            ids = self.ids.take(self.order).to_pylist()
            pos = self.pos = dict(zip(ids, range(len(ids)), strict=True))
        i = pos.get(id, -1)
        if i < self.lo or (self.gone is not None and self.gone[i]):
            return -1
        return i

    def take_out(self, i: int) -> None:
        """Row ``i`` moves to the registry (`WindowStep.pull`)."""
        if self.gone is None:
            self.gone = np.zeros(len(self.re), dtype=bool)
        self.gone[i] = True
        self.ngone += 1

    def close(self, p: int) -> np.ndarray:
        """Forget rows [lo, p) (closed by a CTI); their group codes (pulled rows left out)."""
        a = self.lo
        codes = self.gcodes[a:p]
        if self.gone is not None:
            g = self.gone[a:p]
            n = int(g.sum())
            if n:
                codes = codes[~g]
                self.ngone -= n
        self.lo = p
        return codes

    def held(self) -> np.ndarray:
        """Rows still held, in RE order."""
        r = np.arange(self.lo, len(self.re))
        return r if self.gone is None else r[~self.gone[self.lo:]]

    def held_id_array(self) -> pa.Array:
        """Ids of the events still held (pyarrow)."""
        return self.ids.take(self.order[self.held()])

    def held_ids(self) -> list[str]:
        """Ids of the events still held."""
        return self.held_id_array().to_pylist()


def _id_array(ids: Any) -> pa.Array:
    """An id column as one pyarrow array (a chunked column combined; a list converted). pyarrow is
    imported here, not at module level: the engine without batches does not need it."""
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray):
        return ids.combine_chunks() if ids.num_chunks != 1 else ids.chunk(0)
    if isinstance(ids, pa.Array):
        return ids
    return pa.array(ids, type=pa.string())


class FastIds:
    """Read-only view of the ids the fast path holds in `WindowStep.chunks` (not yet in ``live``)."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks

    def __len__(self) -> int:
        return sum(len(ch) for ch in self.chunks)

    def __bool__(self) -> bool:
        return any(len(ch) for ch in self.chunks)

    def __contains__(self, id: object) -> bool:
        return type(id) is str and any(ch.find(id) >= 0 for ch in self.chunks)

    def __iter__(self) -> Iterator[str]:
        for ch in self.chunks:
            yield from ch.held_ids()

    def overlaps(self, ids: set[str]) -> bool:
        """Does any held id appear in ``ids``? (Costs one pass over the held ids, not over ``ids``.)"""
        return any(not ids.isdisjoint(ch.held_ids()) for ch in self.chunks if len(ch))


def _hashable(v: Any) -> Any:
    """A group key part: strings as they are; other values tagged by type so that 1, 1.0 and True
    (equal in Python, different in JSON) are different groups; unhashable values by canonical JSON."""
    if type(v) is str:
        return v
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        from .common import cjson

        return ("\x00json", cjson(v))


class WindowStep(Operator):
    """Family-independent part of the window operator."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, reads_input)
        step = bs.step
        self.group_by: tuple[str, ...] = tuple(step.group_by)
        self.input = step.input
        self.max_delay: int = step.max_delay
        self.mmt: int = step.max_memory_time
        self.maxle = NEG
        self.m = NEG
        self.groups: dict[Any, Group] = {}
        self.fresh: list[Win] = []
        self.wait: list[tuple] = []
        self.wait_le: list[tuple] = []
        self.grave_groups: dict[Any, Group] = {}
        self.out_cti = NEG
        self.cleaned = NEG
        self.oid = 0
        self.seq = 0
        self.vlater: list[int] = []  # fast path: valid insert rows it left to the general path
        #: set by the fast path while it feeds `vlater` rows: their ids are known not to be in `chunks`
        self.vfresh = False
        self.chunks: list[Chunk] = []  # events of the fast path, not yet in `live`
        #: closing times of registry events inserted in bulk: (RE sorted, ids), a CTI drops a prefix
        self.reruns: list[tuple[np.ndarray, np.ndarray]] = []
        self.attach(ctx, bs)
        self.fields = tuple(dict.fromkeys(self.group_by + self.mapper.fields))

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "w", "mapper")

    @property
    def fast_ids(self) -> FastIds:
        """Ids held in `chunks` (fast path), not yet in `live`: a view, looked up lazily."""
        return FastIds(self.chunks)

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        assert bs is not None
        self.w = WindowUDM(bs)
        self.mapper = Mapper(self.input)
        w = self.w
        self.ts = w.ts
        self.incr = w.incremental
        self.ts_noright = w.ts and not w.clip_right
        self.tb = w.policy == "time_bound"

    # ---------------------------------------------------------------------------------------------
    # element entry points
    # ---------------------------------------------------------------------------------------------
    def feed(self, el: Element) -> list[Element]:
        t = type(el)
        if t is Insert:
            self.ins(el.id, el.le, el.re, el.payload, el)
            return []
        if t is Retract:
            self.ret(el.id, el.le, el.re, el.re_new, el)
            return []
        return self.cti(el.t)

    def _group(self, payload: dict[str, Any]) -> Group:
        gb = self.group_by
        if not gb:
            key: Any = ()
        elif len(gb) == 1:
            key = _hashable(payload[gb[0]])
        else:
            key = tuple(_hashable(payload[f]) for f in gb)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = self._new_group(key, {f: payload[f] for f in gb} if gb else None)
        return g

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        return Group(key, fields)

    def _group_by_code(self, code: int, memo: dict[int, Group], gkeys: Sequence[Any],
                       gfields: Sequence[dict[str, Any] | None]) -> Group:
        """The group a columnar batch's group code stands for, created on first sight; ``memo`` spares
        the key lookup for the rest of the batch (the fast path and panes share this)."""
        g = memo.get(code)
        if g is None:
            gk = gkeys[code]
            g = self.groups.get(gk)
            if g is None:
                g = self.groups[gk] = self._new_group(gk, gfields[code])
            memo[code] = g
        return g

    def _count_new_events(self, codes: Any, memo: dict[int, Group], gkeys: Sequence[Any],
                          gfields: Sequence[dict[str, Any] | None]) -> None:
        """Add a batch's events to their groups' event counts (``codes``: one group code per event)."""
        counts = np.bincount(codes, minlength=len(gkeys))
        for code in np.flatnonzero(counts).tolist():
            self._group_by_code(code, memo, gkeys, gfields).nev += int(counts[code])

    def ins(self, id: str, le: int, re: int, payload: Any, el: Insert | None = None) -> None:
        """An insert (raw fields; ``el`` only serves dead letters)."""
        if self.chunks and not self.vfresh:
            self.pull(id)
        # the common valid case is checked inline; anything odd goes through check_insert
        ok = type(payload) is dict and le < re and le < INF and le >= self.effective_cti and id not in self.live
        if ok:
            for f in self.fields:
                if f not in payload:
                    ok = False
                    break
        if not ok:
            le2 = self.check_insert(el if el is not None else Insert(id, le, re, payload))
            if le2 is None:
                return
            le = le2
        if self.reads_input:
            ctx = self.ctx
            t = re if re < INF else le
            if t > ctx.T:
                ctx.T = t
        gb = self.group_by
        if len(gb) == 1:
            key = payload[gb[0]]
            g = self.groups.get(key) if type(key) is str else None
            if g is None:
                g = self._group(payload)
        else:
            g = self._group(payload)
        mk = self.mapper.kind
        val = payload[self.mapper.spec] if mk == 1 else (payload if mk == 0 else self.mapper(payload))
        ev = Ev(id, le, re, val, g.key)
        self.live[id] = ev
        g.nev += 1
        if re < INF:
            heapq.heappush(self.end_heap, (re, id))
        if le > self.maxle:
            self.maxle = le
            if le > self.m:
                self._advance(le)
        self._on_insert(g, ev)

    def _has_fields(self, payload: dict[str, Any]) -> bool:
        return all(f in payload for f in self.fields)

    def ret(self, id: str, le: int, re: int, rn: int, el: Retract | None = None) -> None:
        """A retraction (raw fields; ``el`` only serves dead letters)."""
        if self.chunks:
            self.pull(id)
        ev = self.live.get(id)
        if (ev is None or ev.le != le or ev.re != re or rn < le or (rn if rn < re else re) < self.effective_cti):
            ev = self.check_retract(el if el is not None else Retract(id, le, re, rn))
            if ev is None:
                return
        if self.reads_input:
            ctx = self.ctx
            t = re if re < INF else le
            if rn < INF and rn > t:
                t = rn
            if t > ctx.T:
                ctx.T = t
        if rn == re:
            return
        g = self.groups[ev.g]
        if rn <= ev.le:  # full retraction (an adjusted event is quoted with its original LE)
            rn = ev.le
            del self.live[id]
            g.nev -= 1
            if self.adjusted:
                self.adjusted.pop(id, None)
        elif rn < INF:
            heapq.heappush(self.end_heap, (rn, id))
        self._on_change(g, ev, re, rn)
        ev.re = rn

    def cti(self, t: int) -> list[Element]:
        return self._cti(t)

    def _advance(self, m: int) -> None:
        """The watermark moved to ``m``."""
        self.m = m
        if self.mmt < INF and m - self.mmt > self.effective_cti:
            self.effective_cti = m - self.mmt

    def _cti(self, t: int) -> list[Element]:
        if t <= self.input_cti:
            return []
        if self.reads_input:
            self.ctx.seen(t)
        if t >= INF:
            self.finish_ready()
        self.input_cti = t
        if t > self.effective_cti:
            self.effective_cti = t
        if t > self.m:
            self._advance(t)
        return self.flush()

    # ---------------------------------------------------------------------------------------------
    # window bookkeeping used by the families
    # ---------------------------------------------------------------------------------------------
    def _touch(self, w: Win) -> None:
        w.dirty = True
        if not w.fresh:
            w.fresh = True
            self.fresh.append(w)

    def _delta(self, w: Win, id: str, old: Any, new: Any) -> None:
        """Record that member ``id`` changes from item ``old`` to ``new`` (None = not a member) in ``w``."""
        if self.incr and not w.rebuild:
            p = w.pend
            if p is None:
                w.pend = {id: [old, new]}
            else:
                e = p.get(id)
                if e is None:
                    p[id] = [old, new]
                else:
                    e[1] = new
        self._touch(w)

    def _add(self, w: Win, ev: Ev) -> None:
        w.n += 1
        if w.members is not None:
            w.members[ev.id] = ev
        if self.incr:
            self._delta(w, ev.id, None, self.w.item(ev, ev.le, ev.re, w.le, w.re))
        else:
            self._touch(w)

    def _remove(self, w: Win, ev: Ev, le: int, re: int) -> None:
        w.n -= 1
        if w.members is not None:
            w.members.pop(ev.id, None)
        if self.incr:
            self._delta(w, ev.id, self.w.item(ev, le, re, w.le, w.re), None)
        else:
            self._touch(w)

    def _update(self, w: Win, ev: Ev, le: int, old: int, new: int) -> None:
        """A member's lifetime changed from [le, old) to [le, new); only matters to time-sensitive UDMs."""
        wu = self.w
        a = wu.item(ev, le, old, w.le, w.re)
        b = wu.item(ev, le, new, w.le, w.re)
        if a == b:
            return
        if self.incr:
            self._delta(w, ev.id, a, b)
        else:
            self._touch(w)

    def _destroy(self, w: Win) -> None:
        w.alive = False
        if w.out:
            g = w.g
            g.grave.extend(w.out)
            w.out = []
            self.grave_groups[g.key] = g

    def _members(self, w: Win) -> Any:
        return w.members.values()  # type: ignore[union-attr]

    def _holds_open(self, w: Win, c: int) -> bool:
        """Time-sensitive without right clipping: does ``w`` hold a member whose RE may still change?"""
        return any(ev.re >= c for ev in self._members(w))

    # ---------------------------------------------------------------------------------------------
    # flush: apply deltas, release, recompute, diff, emit
    # ---------------------------------------------------------------------------------------------
    def release_point(self) -> int:
        d = self.max_delay
        rp = self.m - d if d < INF else NEG
        return rp if rp > self.effective_cti else self.effective_cti

    def _apply(self, w: Win) -> None:
        wu = self.w
        win = (w.le, w.re)
        if w.rebuild:
            w.rebuild = False
            w.pend = None
            if w.n:
                items = wu.ordered(self._members(w), w.le, w.re)
                w.state = wu.add(wu.initial_state(), items, win)
            else:
                w.state = None
            return
        p = w.pend
        if not p:
            return
        w.pend = None
        if w.n == 0:
            w.state = None
            return
        removes = []
        adds = []
        for a, b in p.values():
            if a is not None:
                if b is not None and a == b:
                    continue
                removes.append(a)
            if b is not None:
                adds.append(b)
        st = w.state
        if st is None:
            st = wu.initial_state()
        if removes:
            st = wu.remove(st, removes, win)
        if adds:
            st = wu.add(st, adds, win)
        w.state = st

    def _releasable(self, w: Win, rp: int) -> bool:
        return w.sticky or w.re <= rp or (self.tb and w.le < self.effective_cti)

    def flush(self) -> list[Element]:
        out: list[Element] = []
        self._flush_into(out)
        c = self.effective_cti
        if c > self.cleaned:
            self.cleaned = c
            self._forget(c)
            self._cleanup(c)
            if c >= INF:  # end of input: everything is final
                self.groups = {}
                self.live = {}
                self.chunks = []
                self.reruns = []
                self.end_heap = []
                self.wait = []
                self.wait_le = []
                self.adjusted = {}
                self._final_state()
            t = c if c >= INF or self.tb else min(c, self._bound(c))
            if t > self.out_cti:
                self.out_cti = t
                out.append(Cti(t))
        return out

    def _flush_into(self, out: list[Element]) -> None:
        fresh = self.fresh
        if not fresh and not self.grave_groups and not self._wait_ready():
            return
        rp = self.release_point()
        ready: dict[int, tuple[Group, list[Win]]] = {}
        self.fresh = []
        incr = self.incr
        for w in fresh:
            w.fresh = False
            if not w.alive:
                continue
            if incr:
                self._apply(w)
            if not w.dirty:
                continue
            if self._releasable(w, rp):
                self._ready(ready, w)
            elif w.n == 0 and not w.out:
                w.dirty = False
                self._empty(w)
            elif not w.waiting:
                w.waiting = True
                self.seq += 1
                heapq.heappush(self.wait, (w.re, self.seq, w))
                if self.tb:
                    heapq.heappush(self.wait_le, (w.le, self.seq, w))
        wait = self.wait
        while wait and wait[0][0] <= rp:
            w = heapq.heappop(wait)[2]
            w.waiting = False
            if w.alive and w.dirty:
                self._ready(ready, w)
        if self.tb:
            wl = self.wait_le
            c = self.effective_cti
            while wl and wl[0][0] < c:
                w = heapq.heappop(wl)[2]
                if w.alive and w.dirty:
                    self._ready(ready, w)
        for g in self.grave_groups.values():
            if id(g) not in ready:
                ready[id(g)] = (g, [])
        self.grave_groups = {}
        for g, wins in ready.values():
            self._emit(g, wins, out)

    def _wait_ready(self) -> bool:
        if self.wait and self.wait[0][0] <= self.release_point():
            return True
        return bool(self.tb and self.wait_le and self.wait_le[0][0] < self.effective_cti)

    @staticmethod
    def _ready(ready: dict[int, tuple[Group, list[Win]]], w: Win) -> None:
        w.dirty = False
        g = w.g
        e = ready.get(id(g))
        if e is None:
            ready[id(g)] = (g, [w])
        else:
            e[1].append(w)

    def _empty(self, w: Win) -> None:
        """An empty window with nothing emitted: families may drop it."""

    def _compute(self, w: Win) -> list[tuple]:
        if w.n == 0:
            return []
        wu = self.w
        if self.incr:
            res = wu.compute_state(w.state, w.le, w.re)
        else:
            res = wu.compute_items(wu.ordered(self._members(w), w.le, w.re), w.le, w.re)
        return wu.outputs(res, w.le, w.re, w.g.fields)

    def _emit(self, g: Group, wins: list[Win], out: list[Element]) -> None:
        grave = g.grave
        if grave:
            g.grave = []
        # fast path: one window, same single output or same-shape change
        if not grave and len(wins) == 1:
            w = wins[0]
            new = self._compute(w)
            w.sticky = True
            old = w.out
            if len(old) == 1 and len(new) == 1:
                r = old[0]
                le, re, p, pj = new[0]
                if r.le == le and r.pj == pj:
                    if r.re != re:
                        self._check(min(r.re, re), w, (le, re, p))
                        out.append(Retract(r.id, r.le, r.re, re))
                        r.re = re
                    if w.n == 0:
                        self._empty(w)
                    return
            w.out = self._diff(old, [(w, new)], out)
            if w.n == 0 and not w.out:
                self._empty(w)
            return
        news = []
        old = list(grave)
        for w in wins:
            old.extend(w.out)
            news.append((w, self._compute(w)))
            w.sticky = True
        self._diff(old, news, out)
        for w in wins:
            if w.n == 0 and not w.out:
                self._empty(w)

    def _diff(self, old: list[OutRec], news: list[tuple[Win, list[tuple]]], out: list[Element]) -> list[OutRec]:
        by_key: dict[tuple[int, str], list[OutRec]] = {}
        for r in old:
            k = (r.le, r.pj)
            lst = by_key.get(k)
            if lst is None:
                by_key[k] = [r]
            else:
                lst.append(r)
        later: list[tuple[list[OutRec], Win, tuple]] = []
        last: list[OutRec] = []
        for w, outs in news:
            recs: list[OutRec] = []
            for o in outs:
                le, re, p, pj = o
                lst = by_key.get((le, pj))
                if lst:
                    for i, r in enumerate(lst):
                        if r.re == re:
                            recs.append(lst.pop(i))
                            break
                    else:
                        later.append((recs, w, o))
                else:
                    later.append((recs, w, o))
            w.out = recs
            last = recs
        ins: list[Element] = []
        chg: list[Element] = []
        for recs, w, o in later:
            le, re, p, pj = o
            lst = by_key.get((le, pj))
            if lst:
                r = lst.pop(0)
                self._check(min(r.re, re), w, o)
                chg.append(Retract(r.id, r.le, r.re, re))
                r.re = re
                recs.append(r)
            else:
                self._check(le, w, o)
                self.oid += 1
                r = OutRec(f"o{self.oid}", le, re, p, pj)
                ins.append(Insert(r.id, le, re, p))
                recs.append(r)
        for lst in by_key.values():
            for r in lst:
                self._check(r.le, None, (r.le, r.re, r.p))
                out.append(Retract(r.id, r.le, r.re, r.le))
        out.extend(chg)
        out.extend(ins)
        return last

    def _check(self, sync: int, w: Win | None, value: Any) -> None:
        if sync < self.out_cti:
            win = (w.le, w.re) if w is not None else None
            if self.tb:
                raise contract(self.w.label, win, f"output policy 'time_bound' broken: output changes before the "
                                                  f"CTI {self.out_cti} already emitted", value)
            raise ContractViolation(f"internal error: step {self.name!r} would violate its output CTI "
                                    f"{self.out_cti} with {value!r} (window {win})")

    # ---------------------------------------------------------------------------------------------
    # cleanup
    # ---------------------------------------------------------------------------------------------
    def _forget(self, c: int) -> None:
        groups = self.groups
        emptied = []
        gone = self.forget_closed(c)
        if self.reruns:
            live = self.live
            keep_runs = []
            for res, ids in self.reruns:
                p = int(np.searchsorted(res, c, side="left")) if c < INF else len(res)
                if p:
                    for id, re in zip(ids[:p].tolist(), res[:p].tolist(), strict=True):
                        rec = live.get(id)
                        if rec is not None and rec.re == re:
                            del live[id]
                            gone.append(rec)
                    if self.adjusted:
                        for id in ids[:p].tolist():
                            if id not in live:
                                self.adjusted.pop(id, None)
                if p < len(res):
                    keep_runs.append((res[p:], ids[p:]))
            self.reruns = keep_runs
        for ev in gone:
            g = groups.get(ev.g)
            if g is not None:
                g.nev -= 1
                if g.nev <= 0:
                    emptied.append(g)
        if self.chunks:
            keep = []
            for ch in self.chunks:
                p = ch.closed(c) if c < INF else len(ch.re)
                if p > ch.lo:
                    counts = np.bincount(ch.close(p), minlength=len(ch.keys))
                    for code in np.flatnonzero(counts).tolist():
                        g = groups.get(ch.keys[code])
                        if g is not None:
                            g.nev -= int(counts[code])
                            if g.nev <= 0:
                                emptied.append(g)
                if len(ch):
                    keep.append(ch)
            self.chunks = keep
        for g in emptied:
            self._drop_group_if_empty(g)

    def pull(self, id: str) -> bool:
        """Move event ``id`` from the fast path's columnar store into the registry, if it is there."""
        for ch in self.chunks:
            i = ch.find(id)
            if i >= 0:
                le, re = int(ch.le[i]), int(ch.re[i])
                v = ch.vals[i]
                self.live[id] = Ev(id, le, re, v.item() if isinstance(v, np.generic) else v, ch.keys[ch.gcodes[i]])
                if re < INF:
                    heapq.heappush(self.end_heap, (re, id))
                ch.take_out(i)
                if not len(ch):
                    self.chunks = [c for c in self.chunks if len(c)]
                return True
        return False

    def materialize(self) -> None:
        """Turn the fast path's columnar events into ordinary registry entries."""
        live = self.live
        h = self.end_heap
        push = heapq.heappush
        for ch in self.chunks:
            rows = ch.held()
            keys = ch.keys
            for id, le, re, v, code in zip(ch.ids.take(ch.order[rows]).to_pylist(), ch.le[rows].tolist(),
                                           ch.re[rows].tolist(),
                                           ch.vals[rows].tolist(), ch.gcodes[rows].tolist(), strict=True):
                live[id] = Ev(id, le, re, v, keys[code])
                if re < INF:
                    push(h, (re, id))
        self.chunks = []

    def _drop_group_if_empty(self, g: Group) -> None:
        if g.nev <= 0 and not g.wins and not g.grave and self._group_idle(g) and self.groups.get(g.key) is g:
            del self.groups[g.key]

    def _group_idle(self, g: Group) -> bool:
        return True

    def _final_state(self) -> None:
        """Family-specific state to drop at end of input."""

    # ---------------------------------------------------------------------------------------------
    # family hooks
    # ---------------------------------------------------------------------------------------------
    def _on_insert(self, g: Group, ev: Ev) -> None:
        raise NotImplementedError

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        raise NotImplementedError

    def _cleanup(self, c: int) -> None:
        raise NotImplementedError

    def _bound(self, c: int) -> int:
        """Smallest LE any future output change can have, given input CTI ``c`` (SEMANTICS §7)."""
        raise NotImplementedError

    def state_size(self) -> dict[str, int]:
        """How much the step holds (for tests of bounded state)."""
        nwin = 0
        for g in self.groups.values():
            nwin += len(g.wins) if g.wins is not None else 0
        events = len(self.live) + sum(len(ch) for ch in self.chunks)
        return {"events": events, "groups": len(self.groups), "windows": nwin}


# =================================================================================================
# tumbling / hopping
# =================================================================================================
class GridStep(WindowStep):
    """``[off + k*hop, off + k*hop + size)``. Windows exist lazily up to the frontier ``K`` (the last
    window starting at or before the watermark); events reaching past it wait in the group's *spill*."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        win = bs.step.window
        self.size: int = win.size
        self.hop: int = getattr(win, "hop", win.size)
        self.off: int = win.offset
        self.K = NEG  # frontier window index
        self._next_front = NEG  # W.LE of window K + 1: the watermark must reach it to move the frontier
        self.spill_groups: dict[Any, Group] = {}
        self.close_heap: list[tuple] = []
        self.held: list[Win] = []

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.wins = {}
        g.a = {}  # spill: id -> Ev
        return g

    def _group_idle(self, g: Group) -> bool:
        return not g.a

    def _final_state(self) -> None:
        self.spill_groups = {}
        self.close_heap = []
        self.held = []

    def vector_ok(self) -> bool:
        """Can inserts take the vectorized fast path (`fastpath.grid_vinsert`)?"""
        return not self.ts and self.mapper.kind == 1 and self.mmt >= INF

    def vinsert(self, cols: Any, rows: Any, cbefore: Any, rets: Any = None, rcbefore: Any = None) -> Any:
        from .fastpath import grid_vinsert

        return grid_vinsert(self, cols, rows, cbefore, rets, rcbefore)

    def k_lo(self, le: int) -> int:
        return (le - self.size - self.off) // self.hop + 1

    def k_hi(self, re: int) -> int:
        """Last window index with W.LE < re (INF for an infinite lifetime)."""
        if re >= INF:
            return INF
        return -((self.off - re) // self.hop) - 1

    def _win(self, g: Group, k: int) -> Win:
        le = self.off + k * self.hop
        w = Win(g, k, le, le + self.size, {} if (not self.incr or self.ts_noright) else None)
        g.wins[k] = w
        self.seq += 1
        heapq.heappush(self.close_heap, (w.re, self.seq, w))
        return w

    def _frontier(self, m: int) -> int:
        return (m - self.off) // self.hop

    def _advance(self, m: int) -> None:
        self.m = m
        if self.mmt < INF and m - self.mmt > self.effective_cti:
            self.effective_cti = m - self.mmt
        if m < self._next_front:
            return
        target = m if m < INF else self.ctx.T
        if target > NEG:
            K = self._frontier(target)
            if K > self.K:
                self._extend(K)

    def _extend(self, K: int) -> None:
        """Move the frontier to window ``K``, materializing the windows spilled events reach."""
        old = self.K
        self.K = K
        self._next_front = self.off + (K + 1) * self.hop
        if not self.spill_groups:
            return
        for g in list(self.spill_groups.values()):
            spill = g.a
            wins = g.wins
            done = []
            for ev in spill.values():
                hi = self.k_hi(ev.re)
                top = hi if hi < K else K
                lo = max(old + 1, self.k_lo(ev.le))
                for k in range(lo, top + 1):
                    w = wins.get(k)
                    if w is None:
                        w = self._win(g, k)
                    self._add(w, ev)
                if hi <= K:
                    done.append(ev.id)
            for id in done:
                del spill[id]
            if not spill:
                del self.spill_groups[g.key]

    def finish_ready(self) -> None:
        """End of input (semantics-notes 2): endless events give windows up to ``W.LE <= T``; events with
        a finite end give all their windows (beyond T only for a step fed by a window step, whose input
        can end after the query input's T)."""
        T = self.ctx.T
        if T > NEG:
            K = self._frontier(T)
            if K > self.K:
                self._extend(K)
        cut = False
        K = self.K
        for g in list(self.spill_groups.values()):
            wins = g.wins
            for ev in list(g.a.values()):
                if ev.re >= INF:
                    cut = True
                    continue
                for k in range(max(K + 1, self.k_lo(ev.le)), self.k_hi(ev.re) + 1):
                    w = wins.get(k)
                    if w is None:
                        w = self._win(g, k)
                    self._add(w, ev)
                del g.a[ev.id]
            if not g.a:
                del self.spill_groups[g.key]
        if cut:
            self.ctx.truncated(T)

    def _on_insert(self, g: Group, ev: Ev) -> None:
        K = self.K
        re = ev.re
        hop = self.hop
        hi = INF if re >= INF else -((self.off - re) // hop) - 1
        top = hi if hi < K else K
        lo = (ev.le - self.size - self.off) // hop + 1
        wins = g.wins
        if lo == top:
            w = wins.get(lo)
            if w is None:
                w = self._win(g, lo)
            self._add(w, ev)
        else:
            for k in range(lo, top + 1):
                w = wins.get(k)
                if w is None:
                    w = self._win(g, k)
                self._add(w, ev)
        if hi > K:
            g.a[ev.id] = ev
            self.spill_groups[g.key] = g

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        K = self.K
        lo = self.k_lo(le)
        hi_old = self.k_hi(old)
        full = new == le
        hi_new = lo - 1 if full else self.k_hi(new)
        a = old if old < new else new
        start = lo if (self.ts_noright or full) else max(lo, self.k_lo(a))
        end = hi_old if hi_old > hi_new else hi_new
        if end > K:
            end = K
        wins = g.wins
        ceff = self.effective_cti
        ts = self.ts
        for k in range(start, end + 1):
            old_in = k <= hi_old
            new_in = k <= hi_new
            w = wins.get(k)
            if w is None:
                if not new_in or self.off + k * self.hop + self.size <= ceff:
                    continue  # closed window (purged): cannot be affected
                w = self._win(g, k)
            if old_in and new_in:
                if ts:
                    self._update(w, ev, le, old, new)
            elif old_in:
                self._remove(w, ev, le, old)
            elif new_in:
                ev.re = new
                self._add(w, ev)
                ev.re = old
        if not full and hi_new > K:
            g.a[ev.id] = ev
            self.spill_groups[g.key] = g
        elif ev.id in g.a:
            del g.a[ev.id]
            if not g.a:
                self.spill_groups.pop(g.key, None)

    def _empty(self, w: Win) -> None:
        g = w.g
        if g.wins.get(w.key) is w:
            del g.wins[w.key]
        w.alive = False
        w.state = None

    def _cleanup(self, c: int) -> None:
        h = self.close_heap
        maybe: dict[Any, Group] = {}
        held = []
        for w in self.held:
            if w.alive and self._holds_open(w, c):
                held.append(w)
            elif w.alive:
                self._purge(w, maybe)
        while h and h[0][0] <= c:
            w = heapq.heappop(h)[2]
            if not w.alive:
                continue
            if self.ts_noright and self._holds_open(w, c):
                held.append(w)
                continue
            self._purge(w, maybe)
        self.held = held
        for g in maybe.values():
            self._drop_group_if_empty(g)

    def _purge(self, w: Win, maybe: dict[Any, Group]) -> None:
        w.alive = False
        g = w.g
        if g.wins.get(w.key) is w:
            del g.wins[w.key]
        maybe[g.key] = g

    def _bound(self, c: int) -> int:
        k0 = self.k_lo(c)  # first window with W.RE > c
        b = self.off + k0 * self.hop
        for w in self.held:
            if w.alive and w.le < b:
                b = w.le
        return b


# =================================================================================================
# snapshot
# =================================================================================================
class SnapshotStep(WindowStep):
    """Windows between consecutive distinct endpoints. Per group: ``a`` = endpoint counts (finite
    endpoints), ``wins`` = one window per endpoint ``e`` spanning to the next endpoint (or INF)."""

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.wins = SortedDict()
        g.a = {}
        return g

    def _mk(self, g: Group, le: int, re: int, members: dict[str, Ev]) -> Win:
        w = Win(g, le, le, re, members)
        w.n = len(members)
        g.wins[le] = w
        return w

    def _split(self, g: Group, x: int) -> None:
        """Make ``x`` a window boundary."""
        wins = g.wins
        i = wins.bisect_right(x) - 1
        if i < 0:
            nxt = wins.peekitem(0)[0] if wins else INF
            self._mk(g, x, nxt, {})
            return
        w = wins.peekitem(i)[1]
        if w.le == x:
            return
        left = self._mk(g, w.le, x, dict(w.members))
        right = self._mk(g, x, w.re, dict(w.members))
        if w.n or w.out or w.dirty:
            self._destroy(w)
            for c in (left, right):
                c.sticky = w.sticky
                if c.n:
                    c.rebuild = True
                self._touch(c)
        else:
            w.alive = False

    def _merge(self, g: Group, x: int) -> None:
        """``x`` is no longer an endpoint: join the windows on both sides of it."""
        wins = g.wins
        w = wins.pop(x)
        i = wins.bisect_left(x) - 1
        if i < 0:
            self._destroy(w)
            return
        p = wins.peekitem(i)[1]
        merged = self._mk(g, p.le, w.re, dict(p.members))
        if p.n or p.out or w.n or w.out or p.dirty or w.dirty:
            self._destroy(p)
            self._destroy(w)
            merged.sticky = p.sticky or w.sticky
            if merged.n:
                merged.rebuild = True
            self._touch(merged)
        else:
            p.alive = False
            w.alive = False

    def _ep_add(self, g: Group, x: int) -> None:
        eps = g.a
        n = eps.get(x)
        if n is None:
            self._split(g, x)
            eps[x] = 1
        else:
            eps[x] = n + 1

    def _ep_remove(self, g: Group, x: int) -> None:
        eps = g.a
        n = eps[x] - 1
        if n:
            eps[x] = n
        else:
            del eps[x]
            self._merge(g, x)

    def _on_insert(self, g: Group, ev: Ev) -> None:
        le, re = ev.le, ev.re
        self._ep_add(g, le)
        if re < INF:
            self._ep_add(g, re)
        wins = g.wins
        for k in list(wins.irange(le, re, inclusive=(True, False))):
            self._add(wins[k], ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        wins = g.wins
        full = new == le
        if not full and new < INF:
            self._ep_add(g, new)
        if new > old:
            ev.re = new
            for k in list(wins.irange(old, new, inclusive=(True, False))):
                self._add(wins[k], ev)
            ev.re = old
        else:
            lo = le if full else new
            for k in list(wins.irange(lo, old, inclusive=(True, False))):
                self._remove(wins[k], ev, le, old)
        if self.ts_noright and not full:
            a = old if old < new else new
            for k in list(wins.irange(le, a, inclusive=(True, False))):
                self._update(wins[k], ev, le, old, new)
        if old < INF:
            self._ep_remove(g, old)
        if full:
            self._ep_remove(g, le)

    def _cleanup(self, c: int) -> None:
        for g in list(self.groups.values()):
            wins = g.wins
            drop = []
            for k in wins.irange(maximum=c, inclusive=(True, True)):
                w = wins[k]
                if w.re >= c:
                    break
                if self.ts_noright and w.n and self._holds_open(w, c):
                    continue
                drop.append(k)
            for k in drop:
                w = wins.pop(k)
                w.alive = False
            eps = g.a
            if eps:
                for x in [x for x in eps if x < c]:
                    del eps[x]
            if not wins and g.nev <= 0:
                self._drop_group_if_empty(g)

    def _group_idle(self, g: Group) -> bool:
        return not g.a

    def _bound(self, c: int) -> int:
        b = c
        ts = self.ts
        for g in self.groups.values():
            for w in g.wins.values():
                if w.le >= b:
                    break
                if not w.n:
                    continue
                if w.re > c or (w.re == c and ts) or (self.ts_noright and self._holds_open(w, c)):
                    b = w.le
                    break
        return b


# =================================================================================================
# count windows
# =================================================================================================
class _CountStep(WindowStep):
    """Count windows over distinct bucket values (LE for count_by_start, finite RE for count_by_end).

    Per group: ``a`` = buckets (SortedDict value -> {id: Ev}), ``wins`` = SortedDict first value -> Win,
    ``base`` = how many leading distinct values were purged (keeps the ``hop`` alignment), ``b`` = events
    with an infinite RE (count_by_end only: they belong to no window).
    """

    by_end = False

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        """Count windows come into existence (or change extent) when a *later* distinct value arrives
        (a window needs ``n`` values; count_by_end membership follows RE, which retractions move), so
        outputs before the CTI can change whatever the UDM promises: no UDM can keep the
        ``time_bound`` promise here. Liveliness and release use the general rule for count windows
        (output stays correct and never violates a CTI)."""
        super().attach(ctx, bs)
        self.tb = False

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        win = bs.step.window
        self.n: int = win.n
        self.hop_n: int = win.hop

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.wins = SortedDict()
        g.a = SortedDict()
        g.b = {}
        return g

    def _group_idle(self, g: Group) -> bool:
        return not g.a and not g.b

    def _bounds(self, first: int, last: int) -> tuple[int, int]:
        if self.by_end:
            return first - 1, last
        return first, last + 1

    def _members(self, w: Win) -> Any:
        g = w.g
        a = g.a
        i = a.index(w.key)
        keys = a.keys()
        return chain.from_iterable(a[keys[j]].values() for j in range(i, i + self.n))

    def _holds_open(self, w: Win, c: int) -> bool:
        return any(ev.re >= c for ev in self._members(w))

    def _windows_at(self, g: Group, p: int) -> list[Win]:
        """Existing windows that contain bucket position ``p``."""
        a = g.a
        n, hop, base = self.n, self.hop_n, g.base
        L = len(a)
        keys = a.keys()
        out = []
        j = max(0, p - n + 1)
        r = (base + j) % hop
        if r:
            j += hop - r
        wins = g.wins
        while j <= p and j + n - 1 < L:
            w = wins.get(keys[j])
            if w is not None:
                out.append(w)
            j += hop
        return out

    def _restructure(self, g: Group, p: int, v: int) -> None:
        """Bucket value ``v`` appeared at (or vanished from) position ``p``: re-derive the windows whose
        extent may change (those reaching position ``p``; with ``hop > 1`` every later one shifts too)."""
        a = g.a
        n, hop, base = self.n, self.hop_n, g.base
        L = len(a)
        keys = a.keys()
        wins = g.wins
        lo = max(0, p - n + 1)
        lo_key = min(keys[lo], v) if lo < L else v
        if hop == 1:
            hi = min(p, L - n)
            hi_key = keys[p] if p < L else INF
            old = {k: wins[k] for k in list(wins.irange(lo_key, hi_key))}
        else:
            hi = L - n
            old = {k: wins[k] for k in list(wins.irange(minimum=lo_key))}
        j = lo
        r = (base + j) % hop
        if r:
            j += hop - r
        created = []
        while j <= hi:
            first, last = keys[j], keys[j + n - 1]
            le, re = self._bounds(first, last)
            w = old.get(first)
            if w is not None and w.re == re:
                del old[first]
            else:
                nw = Win(g, first, le, re, None)
                nw.n = sum(len(a[keys[i]]) for i in range(j, j + n))
                if w is not None:
                    nw.sticky = w.sticky
                    del old[first]
                    self._destroy(w)
                    if wins.get(first) is w:
                        del wins[first]
                created.append(nw)
            j += hop
        for k, w in old.items():
            self._destroy(w)
            if wins.get(k) is w:
                del wins[k]
        for nw in created:
            wins[nw.key] = nw
            nw.rebuild = True
            self._touch(nw)

    def _bucket_add(self, g: Group, key: int, ev: Ev) -> None:
        a = g.a
        b = a.get(key)
        if b is None:
            a[key] = {ev.id: ev}
            self._restructure(g, a.index(key), key)
        else:
            b[ev.id] = ev
            for w in self._windows_at(g, a.index(key)):
                self._add(w, ev)

    def _bucket_remove(self, g: Group, key: int, ev: Ev, le: int, re: int) -> None:
        a = g.a
        b = a.get(key)
        if b is None or ev.id not in b:
            return  # purged bucket: its windows are closed
        if len(b) == 1:
            p = a.index(key)
            del a[key]
            self._restructure(g, p, key)
        else:
            del b[ev.id]
            for w in self._windows_at(g, a.index(key)):
                self._remove(w, ev, le, re)

    def _cleanup(self, c: int) -> None:
        ts_noright = self.ts_noright
        by_end = self.by_end
        for g in list(self.groups.values()):
            wins = g.wins
            a = g.a
            while wins:
                k, w = wins.peekitem(0)
                final = w.re < c if by_end else w.re <= c
                if not final or (ts_noright and self._holds_open(w, c)):
                    break
                del wins[k]
                w.alive = False
            # drop leading buckets no remaining or future window can use
            if wins:
                first = a.index(wins.peekitem(0)[0])
            else:
                L = len(a)
                j = max(0, L - self.n + 1)
                r = (g.base + j) % self.hop_n
                if r:
                    j += self.hop_n - r
                first = min(j, L)
            drop = 0
            keys = a.keys()
            while drop < first and (not by_end or keys[drop] < c):
                drop += 1
            if drop:
                for k in list(keys[:drop]):
                    del a[k]
                g.base += drop
            if not wins and g.nev <= 0:
                self._drop_group_if_empty(g)

    def _bound(self, c: int) -> int:
        b = c
        n, hop = self.n, self.hop_n
        for g in self.groups.values():
            wins = g.wins
            a = g.a
            cand = None
            for w in wins.values():
                if w.le >= b:
                    break
                if (w.re >= c if self.by_end else w.re > c) or (self.ts_noright and self._holds_open(w, c)):
                    cand = w.le
                    break
            if cand is None:
                L = len(a)
                j = max(0, L - n + 1)
                r = (g.base + j) % hop
                if r:
                    j += hop - r
                if j < L:
                    cand = self._bounds(a.keys()[j], a.keys()[j])[0]
            if cand is not None and cand < b:
                b = cand
            if self.by_end and b >= c:
                if any(ev.le < c for ev in g.b.values()):
                    b = c - 1
                else:
                    for k in a.irange(minimum=c, inclusive=(False, True)):
                        if any(ev.le < c for ev in a[k].values()):
                            b = c - 1
                            break
        return b


class CountByStartStep(_CountStep):
    by_end = False

    def _on_insert(self, g: Group, ev: Ev) -> None:
        self._bucket_add(g, ev.le, ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        if new == ev.le:
            self._bucket_remove(g, ev.le, ev, ev.le, old)
            return
        if not self.ts:
            return
        a = g.a
        if ev.le not in a:
            return
        for w in self._windows_at(g, a.index(ev.le)):
            self._update(w, ev, ev.le, old, new)


class CountByEndStep(_CountStep):
    by_end = True

    def _on_insert(self, g: Group, ev: Ev) -> None:
        if ev.re >= INF:
            g.b[ev.id] = ev
            return
        self._bucket_add(g, ev.re, ev)

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        if old >= INF:
            g.b.pop(ev.id, None)
        else:
            self._bucket_remove(g, old, ev, le, old)
        if new == le:
            return
        ev.re = new
        if new >= INF:
            g.b[ev.id] = ev
        else:
            self._bucket_add(g, new, ev)


def make_window_step(name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> WindowStep:
    t = bs.step.window.type
    if t in ("tumbling", "hopping"):
        from .panes import pane_step

        st = pane_step(name, ctx, bs, reads_input)
        return st if st is not None else GridStep(name, ctx, bs, reads_input)
    if t == "snapshot":
        return SnapshotStep(name, ctx, bs, reads_input)
    if t == "count_by_start":
        return CountByStartStep(name, ctx, bs, reads_input)
    return CountByEndStep(name, ctx, bs, reads_input)
