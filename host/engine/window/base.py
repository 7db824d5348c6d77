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
from collections.abc import Sequence
from typing import Any

import numpy as np

from udm.host.errors import ContractViolation
from udm.host.input_types import step_checks
from udm.host.query.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from ..aggregates import MultiMapper, window_udm
from ..columnar import ColumnarEvents, FastIds, group_key
from ..common import INF, NEG, Ev, cjson
from ..context import Context
from ..invoke import PLAIN_TYPES, Mapper, WindowUDM, contract
from ..operator import Operator
from .state import Group, OutputRecord, Window

__all__ = ["FIRST_FAST", "WindowStep"]

#: first emissions of a plain UDA's windows through `WindowStep._emit_first`; off: the general `_emit`
#: (the tests compare the two byte for byte)
FIRST_FAST = True
_NONE = object()


class WindowStep(Operator):
    """Family-independent part of the window operator."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, reads_input)
        step = bs.step
        self.group_by: tuple[str, ...] = tuple(step.group_by)
        self.input = step.input
        self.max_delay: int = step.max_delay
        self.max_memory_time: int = step.max_memory_time
        #: progressive output (None: off): emit open windows holding the watermark, every ``early`` ticks
        self.early: int | None = step.early
        self.early_next = NEG
        self.early_wait: list[Window] = []
        self.max_le = NEG
        self.watermark = NEG
        self.groups: dict[Any, Group] = {}
        self.fresh: list[Window] = []
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
        self.chunks: list[ColumnarEvents] = []  # events of the fast path, not yet in `live`
        #: closing times of registry events inserted in bulk: (RE sorted, ids), a CTI drops a prefix
        self.reruns: list[tuple[np.ndarray, np.ndarray]] = []
        self.attach(ctx, bs)
        self.fields = tuple(dict.fromkeys(self.group_by + self.mapper.fields))
        self.typed = step_checks(bs)
        self.typed_label = bs.label
        self.typed_tests = tuple((f, tp.test) for f, tp in self.typed)

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "udm", "mapper", "typed_tests")

    @property
    def fast_ids(self) -> FastIds:
        """Ids held in `chunks` (fast path), not yet in `live`: a view, looked up lazily."""
        return FastIds(self.chunks)

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        assert bs is not None
        self.udm = window_udm(bs)
        self.mapper = MultiMapper([p.step.input for p in bs.parts]) if bs.parts else Mapper(self.input)
        self.typed_tests = tuple((f, tp.test) for f, tp in self.typed)
        udm = self.udm
        self.time_sensitive = udm.time_sensitive
        self.incremental = udm.incremental
        #: time-sensitive without right clipping: a member's open end matters to the UDM
        self.sees_open_ends = udm.time_sensitive and not udm.clip_right
        self.time_bound = udm.policy == "time_bound"
        #: one plain value per window (`_emit_first`): a time-insensitive incremental UDA
        self.plain_uda = type(udm) is WindowUDM and udm.is_uda and udm.incremental and not udm.time_sensitive

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
            key = group_key(payload[gb[0]])
        else:
            key = tuple(group_key(payload[f]) for f in gb)
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
            self._group_by_code(code, memo, gkeys, gfields).event_count += int(counts[code])

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
            else:
                for tf, test in self.typed_tests:
                    if not test(payload if tf is None else payload[tf]):
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
            if t > ctx.reached:
                ctx.reached = t
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
        g.event_count += 1
        if re < INF:
            heapq.heappush(self.end_heap, (re, id))
        if le > self.max_le:
            self.max_le = le
            if le > self.watermark:
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
            if t > ctx.reached:
                ctx.reached = t
        if rn == re:
            return
        g = self.groups[ev.group_key]
        if rn <= ev.le:  # full retraction (an adjusted event is quoted with its original LE)
            rn = ev.le
            del self.live[id]
            g.event_count -= 1
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
        self.watermark = m
        if self.max_memory_time < INF and m - self.max_memory_time > self.effective_cti:
            self.effective_cti = m - self.max_memory_time

    def _cti(self, t: int) -> list[Element]:
        if not self._cti_enter(t):
            return []
        return self.flush()

    def _cti_enter(self, t: int) -> bool:
        """A CTI's effect up to its flush (False: a stale CTI, no effect); the columnar grid path
        (`grid_columnar`) does the flush's first part itself."""
        if t <= self.input_cti:
            return False
        if self.reads_input:
            self.ctx.seen(t)
        if t >= INF:
            self.finish_ready()
        self.input_cti = t
        if t > self.effective_cti:
            self.effective_cti = t
        if t > self.watermark:
            self._advance(t)
        return True

    # ---------------------------------------------------------------------------------------------
    # window bookkeeping used by the families
    # ---------------------------------------------------------------------------------------------
    def _touch(self, w: Window) -> None:
        w.dirty = True
        if not w.fresh:
            w.fresh = True
            self.fresh.append(w)

    def _delta(self, w: Window, id: str, old: Any, new: Any) -> None:
        """Record that member ``id`` changes from item ``old`` to ``new`` (None = not a member) in ``w``."""
        if self.incremental and not w.rebuild:
            p = w.pending
            if p is None:
                w.pending = {id: [old, new]}
            else:
                e = p.get(id)
                if e is None:
                    p[id] = [old, new]
                else:
                    e[1] = new
        self._touch(w)

    def _add(self, w: Window, ev: Ev) -> None:
        w.count += 1
        if w.members is not None:
            w.members[ev.id] = ev
        if self.incremental:
            self._delta(w, ev.id, None, self.udm.item(ev, ev.le, ev.re, w.le, w.re))
        else:
            self._touch(w)

    def _remove(self, w: Window, ev: Ev, le: int, re: int) -> None:
        w.count -= 1
        if w.members is not None:
            w.members.pop(ev.id, None)
        if self.incremental:
            self._delta(w, ev.id, self.udm.item(ev, le, re, w.le, w.re), None)
        else:
            self._touch(w)

    def _update(self, w: Window, ev: Ev, le: int, old: int, new: int) -> None:
        """A member's lifetime changed from [le, old) to [le, new); only matters to time-sensitive UDMs."""
        wu = self.udm
        a = wu.item(ev, le, old, w.le, w.re)
        b = wu.item(ev, le, new, w.le, w.re)
        if a == b:
            return
        if self.incremental:
            self._delta(w, ev.id, a, b)
        else:
            self._touch(w)

    def _destroy(self, w: Window) -> None:
        w.alive = False
        if w.outputs:
            g = w.group
            g.retired.extend(w.outputs)
            w.outputs = []
            self.grave_groups[g.key] = g

    def _members(self, w: Window) -> Any:
        return w.members.values()  # type: ignore[union-attr]

    def _holds_open(self, w: Window, c: int) -> bool:
        """Time-sensitive without right clipping: does ``w`` hold a member whose RE may still change?"""
        return any(ev.re >= c for ev in self._members(w))

    # ---------------------------------------------------------------------------------------------
    # flush: apply deltas, release, recompute, diff, emit
    # ---------------------------------------------------------------------------------------------
    def release_point(self) -> int:
        d = self.max_delay
        rp = self.watermark - d if d < INF else NEG
        return rp if rp > self.effective_cti else self.effective_cti

    def _apply(self, w: Window) -> None:
        wu = self.udm
        win = (w.le, w.re)
        if w.rebuild:
            w.rebuild = False
            w.pending = None
            if w.count:
                items = wu.ordered(self._members(w), w.le, w.re)
                w.state = wu.add(wu.initial_state(), items, win)
            else:
                w.state = None
            return
        p = w.pending
        if not p:
            return
        w.pending = None
        if w.count == 0:
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

    def _releasable(self, w: Window, rp: int) -> bool:
        if w.re <= rp or (self.time_bound and w.le < self.effective_cti):
            return True
        # an emitted window's changes go out at once, except an open one emitted early under a rate limit
        return w.emitted and not (w.early and self.early)

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
                self.early_wait = []
                self.adjusted = {}
                self._final_state()
            t = c if c >= INF or self.time_bound else min(c, self._bound(c))
            if t > self.out_cti:
                self.out_cti = t
                out.append(Cti(t))
        return out

    def _flush_into(self, out: list[Element]) -> None:
        fresh = self.fresh
        early = self.early
        wm = self.watermark
        tick = early is not None and wm >= self.early_next  # progressive output: open windows go out now
        if not fresh and not self.grave_groups and not self._wait_ready() and not (tick and self.early_wait):
            return
        rp = self.release_point()
        ready: dict[int, tuple[Group, list[Window]]] = {}
        self.fresh = []
        incr = self.incremental
        # (the base `_apply` has nothing to do without pending changes; a family's own may, e.g. panes)
        own_apply = type(self)._apply is WindowStep._apply
        for w in fresh:
            w.fresh = False
            if not w.alive:
                continue
            if incr and (w.pending or w.rebuild or not own_apply):
                self._apply(w)
            if not w.dirty:
                continue
            if self._releasable(w, rp):
                self._ready(ready, w)
            elif w.count == 0 and not w.outputs:
                w.dirty = False
                self._empty(w)
            elif tick and w.le <= wm:
                w.early = True
                self._ready(ready, w)
            elif not w.waiting:
                w.waiting = True
                self.seq += 1
                heapq.heappush(self.wait, (w.re, self.seq, w))
                if self.time_bound:
                    heapq.heappush(self.wait_le, (w.le, self.seq, w))
                if early is not None:
                    self.early_wait.append(w)
        if tick:
            keep = []
            for w in self.early_wait:
                if not (w.alive and w.waiting):
                    continue
                if w.dirty and w.le <= wm:
                    w.waiting = False  # its heap entry finds it clean and passes
                    w.early = True
                    self._ready(ready, w)
                else:
                    keep.append(w)
            self.early_wait = keep
            self.early_next = wm + early if early else wm
        wait = self.wait
        again = []
        pop = heapq.heappop
        while wait and wait[0][0] <= rp:
            w = pop(wait)[2]
            w.waiting = False
            if w.alive and w.dirty:
                if self._releasable(w, rp):
                    self._ready(ready, w)
                else:  # it grew since it was queued (a session window): wait for its new end
                    again.append(w)
        for w in again:
            w.waiting = True
            self.seq += 1
            heapq.heappush(wait, (w.re, self.seq, w))
        if self.time_bound:
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
        return bool(self.time_bound and self.wait_le and self.wait_le[0][0] < self.effective_cti)

    @staticmethod
    def _ready(ready: dict[int, tuple[Group, list[Window]]], w: Window) -> None:
        w.dirty = False
        g = w.group
        e = ready.get(id(g))
        if e is None:
            ready[id(g)] = (g, [w])
        else:
            e[1].append(w)

    def _empty(self, w: Window) -> None:
        """An empty window with nothing emitted: families may drop it."""

    def _compute(self, w: Window) -> list[tuple]:
        if w.count == 0:
            return []
        wu = self.udm
        if self.incremental:
            res = wu.compute_state(w.state, w.le, w.re)
        else:
            res = wu.compute_items(wu.ordered(self._members(w), w.le, w.re), w.le, w.re)
        return wu.outputs(res, w.le, w.re, w.group.fields)

    def _emit(self, g: Group, wins: list[Window], out: list[Element]) -> None:
        grave = g.retired
        if grave:
            g.retired = []
        elif FIRST_FAST and self.plain_uda:
            for w in wins:
                if w.outputs:
                    break
            else:
                self._emit_first(g, wins, out)
                return
        # fast path: one window, same single output or same-shape change
        if not grave and len(wins) == 1:
            w = wins[0]
            new = self._compute(w)
            if not w.emitted:
                self._first_emission(w)
            w.emitted = True
            old = w.outputs
            if len(old) == 1 and len(new) == 1:
                r = old[0]
                le, re, p, pj = new[0]
                if r.le == le and r.payload_json == (pj if pj is not None else cjson(p)):
                    if r.re != re:
                        self._check(min(r.re, re), w, (le, re, p))
                        out.append(Retract(r.id, r.le, r.re, re))
                        r.re = re
                    if w.count == 0:
                        self._empty(w)
                    return
            w.outputs = self._diff(old, [(w, new)], out)
            if w.count == 0 and not w.outputs:
                self._empty(w)
            return
        news = []
        old = list(grave)
        for w in wins:
            old.extend(w.outputs)
            news.append((w, self._compute(w)))
            if not w.emitted:
                self._first_emission(w)
            w.emitted = True
        self._diff(old, news, out)
        for w in wins:
            if w.count == 0 and not w.outputs:
                self._empty(w)

    def _emit_first(self, g: Group, wins: list[Window], out: list[Element]) -> None:
        """`_emit` of windows with no outputs yet (the common case: windows closing in order) under a
        time-insensitive incremental UDA: one value per window, straight from ``compute`` — the outputs,
        ids, order and statistics `_compute` and `_all_new` give, without their per-window generality."""
        wu = self.udm
        assert isinstance(wu, WindowUDM)  # (`plain_uda`)
        compute = wu.udm.compute
        gf = g.fields
        results: list[Any] = []
        for w in wins:
            if w.count == 0:
                results.append(_NONE)
                continue
            try:
                results.append(compute(w.state))
            except ContractViolation:
                raise
            except Exception as exc:  # as `WindowUDM._call` reports it
                raise contract(wu.label, (w.le, w.re), f"compute raised {type(exc).__name__}", exc) from exc
        alias = wu.alias
        plain_g = gf is None or all(type(v) in PLAIN_TYPES for v in gf.values())
        oc = self.out_cti
        wm = self.watermark
        stats = self.ctx.stats
        oid = self.oid
        for w, res in zip(wins, results, strict=True):
            if not w.emitted:
                w.emitted = True
                if w.re < INF and wm < INF:  # `_first_emission`
                    stats.windows_emitted += 1
                    stats.emission_delay += wm - w.re
            if res is _NONE:
                w.outputs = []
                self._empty(w)
                continue
            if plain_g and type(res) in PLAIN_TYPES:
                le, re = w.le, w.re
                p = {**gf, alias: res} if gf else {alias: res}
                if le < oc:
                    self.oid = oid
                    self._check(le, w, (le, re, p, None))
                oid += 1
                r = OutputRecord(f"o{oid}", le, re, p, None)
                out.append(Insert(r.id, le, re, p))
                w.outputs = [r]
            else:
                self.oid = oid
                w.outputs = self._all_new([(w, wu.outputs(res, w.le, w.re, gf))], out)
                oid = self.oid
                if not w.outputs:
                    self._empty(w)
        self.oid = oid

    def _first_emission(self, w: Window) -> None:
        """Run statistics: how far past its end (watermark - W.RE) a window first comes out."""
        if w.re < INF and self.watermark < INF:  # (at the end of input every window comes out: not timed)
            st = self.ctx.stats
            st.windows_emitted += 1
            st.emission_delay += self.watermark - w.re

    def _diff(self, old: list[OutputRecord], news: list[tuple[Window, list[tuple]]], out: list[Element]
              ) -> list[OutputRecord]:
        if not old:  # first emissions (the common case: windows closing in order): every output is new
            return self._all_new(news, out)
        by_key: dict[tuple[int, str], list[OutputRecord]] = {}
        for r in old:
            k = (r.le, r.payload_json)
            lst = by_key.get(k)
            if lst is None:
                by_key[k] = [r]
            else:
                lst.append(r)
        later: list[tuple[list[OutputRecord], Window, tuple]] = []
        last: list[OutputRecord] = []
        for w, outs in news:
            recs: list[OutputRecord] = []
            for o in outs:
                le, re, p, pj = o
                lst = by_key.get((le, pj if pj is not None else cjson(p)))
                if lst:
                    for i, r in enumerate(lst):
                        if r.re == re:
                            recs.append(lst.pop(i))
                            break
                    else:
                        later.append((recs, w, o))
                else:
                    later.append((recs, w, o))
            w.outputs = recs
            last = recs
        ins: list[Element] = []
        chg: list[Element] = []
        for recs, w, o in later:
            le, re, p, pj = o
            lst = by_key.get((le, pj if pj is not None else cjson(p)))
            if lst:
                r = lst.pop(0)
                self._check(min(r.re, re), w, o)
                chg.append(Retract(r.id, r.le, r.re, re))
                r.re = re
                recs.append(r)
            else:
                self._check(le, w, o)
                self.oid += 1
                r = OutputRecord(f"o{self.oid}", le, re, p, pj)
                ins.append(Insert(r.id, le, re, p))
                recs.append(r)
        for lst in by_key.values():
            for r in lst:
                self._check(r.le, None, (r.le, r.re, r.payload))
                out.append(Retract(r.id, r.le, r.re, r.le))
        out.extend(chg)
        out.extend(ins)
        return last

    def _all_new(self, news: list[tuple[Window, list[tuple]]], out: list[Element]) -> list[OutputRecord]:
        """`_diff` with no old outputs: each output is an insert, in order."""
        last: list[OutputRecord] = []
        oc = self.out_cti
        for w, outs in news:
            recs: list[OutputRecord] = []
            for o in outs:
                le, re, p, pj = o
                if le < oc:
                    self._check(le, w, o)
                self.oid += 1
                r = OutputRecord(f"o{self.oid}", le, re, p, pj)
                out.append(Insert(r.id, le, re, p))
                recs.append(r)
            w.outputs = recs
            last = recs
        return last

    def _check(self, sync: int, w: Window | None, value: Any) -> None:
        if sync < self.out_cti:
            win = (w.le, w.re) if w is not None else None
            if self.time_bound:
                raise contract(self.udm.label, win, f"output policy 'time_bound' broken: output changes before the "
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
            g = groups.get(ev.group_key)
            if g is not None:
                g.event_count -= 1
                if g.event_count <= 0:
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
                            g.event_count -= int(counts[code])
                            if g.event_count <= 0:
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
        if (g.event_count <= 0 and not g.windows and not g.retired and self._group_idle(g)
                and self.groups.get(g.key) is g):
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
            nwin += len(g.windows) if g.windows is not None else 0
        events = len(self.live) + sum(len(ch) for ch in self.chunks)
        return {"events": events, "groups": len(self.groups), "windows": nwin}
