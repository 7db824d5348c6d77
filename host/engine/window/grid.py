"""Tumbling and hopping windows (SEMANTICS §3): ``[off + k*hop, off + k*hop + size)``, and their vectorized
insert for columnar batches (the fast path: in-order stretches of plain inserts go in whole, per
``(group, window)`` run, instead of one event at a time)."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

import numpy as np

from udm.host.errors import ContractViolation
from udm.host.query.plan import BoundStep

from ..columnar import Cols, ColumnarEvents, group_codes, stable_order
from ..common import INF, NEG, Ev
from ..context import Context
from ..ids import BatchIds
from ..invoke import contract
from .base import WindowStep
from .state import Group, Window

__all__ = ["GridStep"]


class GridStep(WindowStep):
    """``[off + k*hop, off + k*hop + size)``. Windows exist lazily up to the frontier ``K`` (the last
    window starting at or before the watermark); events reaching past it wait in the group's *spill*."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        win = bs.step.window
        self.size: int = win.size
        self.hop: int = getattr(win, "hop", win.size)
        self.off: int = win.offset
        self.frontier = NEG  # frontier window index
        self._next_front = NEG  # W.LE of window K + 1: the watermark must reach it to move the frontier
        self.spill_groups: dict[Any, Group] = {}
        self.close_heap: list[tuple] = []
        self.held: list[Window] = []

    def _new_group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        g = Group(key, fields)
        g.windows = {}
        g.spill = {}  # spill: id -> Ev
        return g

    def _group_idle(self, g: Group) -> bool:
        return not g.spill

    def _final_state(self) -> None:
        self.spill_groups = {}
        self.close_heap = []
        self.held = []

    def vector_ok(self) -> bool:
        """Can inserts take the vectorized fast path (`fastpath.grid_vinsert`)?"""
        return not self.time_sensitive and self.mapper.kind == 1 and self.max_memory_time >= INF

    def vinsert(self, cols: Any, rows: Any, cbefore: Any, rets: Any = None, rcbefore: Any = None) -> Any:
        return grid_vinsert(self, cols, rows, cbefore, rets, rcbefore)

    def k_lo(self, le: int) -> int:
        return (le - self.size - self.off) // self.hop + 1

    def k_hi(self, re: int) -> int:
        """Last window index with W.LE < re (INF for an infinite lifetime)."""
        if re >= INF:
            return INF
        return -((self.off - re) // self.hop) - 1

    def _win(self, g: Group, k: int) -> Window:
        le = self.off + k * self.hop
        w = Window(g, k, le, le + self.size, {} if (not self.incremental or self.sees_open_ends) else None)
        g.windows[k] = w
        self.seq += 1
        heapq.heappush(self.close_heap, (w.re, self.seq, w))
        return w

    def _frontier(self, m: int) -> int:
        return (m - self.off) // self.hop

    def _advance(self, m: int) -> None:
        self.watermark = m
        if self.max_memory_time < INF and m - self.max_memory_time > self.effective_cti:
            self.effective_cti = m - self.max_memory_time
        if m < self._next_front:
            return
        # never past T (semantics-notes 2): behind a shift (alter_lifetime) the watermark runs ahead of the
        # query inputs, and windows past T holding only never-ending events must not come out (`_bound`
        # holds the output CTI below the windows the frontier has not reached yet)
        target = min(m, self.ctx.reached)
        if target > NEG:
            reach = self._frontier(target)
            if reach > self.frontier:
                self._extend(reach)

    def _extend(self, K: int) -> None:
        """Move the frontier to window ``K``, materializing the windows spilled events reach."""
        old = self.frontier
        self.frontier = K
        self._next_front = self.off + (K + 1) * self.hop
        if not self.spill_groups:
            return
        for g in list(self.spill_groups.values()):
            spill = g.spill
            wins = g.windows
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
        T = self.ctx.reached
        if T > NEG:
            reach = self._frontier(T)
            if reach > self.frontier:
                self._extend(reach)
        cut = False
        K = self.frontier
        for g in list(self.spill_groups.values()):
            wins = g.windows
            endless = []
            beyond = []  # windows past the frontier that an event with an end makes
            for ev in list(g.spill.values()):
                if ev.re >= INF:
                    cut = True
                    endless.append(ev)
                    continue
                for k in range(max(K + 1, self.k_lo(ev.le)), self.k_hi(ev.re) + 1):
                    w = wins.get(k)
                    if w is None:
                        w = self._win(g, k)
                        beyond.append(w)
                    self._add(w, ev)
                del g.spill[ev.id]
            for w in beyond:  # (past T only behind a shift) such a window holds every event overlapping it
                for ev in endless:
                    if ev.le < w.re:
                        self._add(w, ev)
            if not g.spill:
                del self.spill_groups[g.key]
        if cut:
            self.ctx.truncated(T)

    def _on_insert(self, g: Group, ev: Ev) -> None:
        K = self.frontier
        re = ev.re
        hop = self.hop
        hi = INF if re >= INF else -((self.off - re) // hop) - 1
        top = hi if hi < K else K
        lo = (ev.le - self.size - self.off) // hop + 1
        wins = g.windows
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
            g.spill[ev.id] = ev
            self.spill_groups[g.key] = g

    def _on_change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        le = ev.le
        K = self.frontier
        lo = self.k_lo(le)
        hi_old = self.k_hi(old)
        full = new == le
        hi_new = lo - 1 if full else self.k_hi(new)
        a = old if old < new else new
        start = lo if (self.sees_open_ends or full) else max(lo, self.k_lo(a))
        end = hi_old if hi_old > hi_new else hi_new
        if end > K:
            end = K
        wins = g.windows
        ceff = self.effective_cti
        ts = self.time_sensitive
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
            g.spill[ev.id] = ev
            self.spill_groups[g.key] = g
        elif ev.id in g.spill:
            del g.spill[ev.id]
            if not g.spill:
                self.spill_groups.pop(g.key, None)

    def _empty(self, w: Window) -> None:
        g = w.group
        if g.windows.get(w.key) is w:
            del g.windows[w.key]
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
        pop = heapq.heappop
        soe = self.sees_open_ends
        while h and h[0][0] <= c:
            w = pop(h)[2]
            if not w.alive:
                continue
            if soe and self._holds_open(w, c):
                held.append(w)
                continue
            # (`_purge`, inline: every window ends here)
            w.alive = False
            g = w.group
            gw = g.windows
            if gw.get(w.key) is w:
                del gw[w.key]
            maybe[g.key] = g
        self.held = held
        for g in maybe.values():
            self._drop_group_if_empty(g)

    def _purge(self, w: Window, maybe: dict[Any, Group]) -> None:
        w.alive = False
        g = w.group
        if g.windows.get(w.key) is w:
            del g.windows[w.key]
        maybe[g.key] = g

    def _bound(self, c: int) -> int:
        k0 = self.k_lo(c)  # first window with W.RE > c
        b = self.off + k0 * self.hop
        if self.spill_groups:  # windows past the frontier may still be made (it stops at T: `_advance`)
            b = min(b, self.off + (self.frontier + 1) * self.hop)
        for w in self.held:
            if w.alive and w.le < b:
                b = w.le
        return b



#: the one-loop window insert of a batch (`_bulk_add`); off: `_batch_add` (the tests compare the two)
BULK = True
MAX_SPAN = 64
#: a UDA's add_batch is used when a batch's (group, window) slices average fewer members than this
BATCH_SLICE = 32
_I64_MIN = -(2**63)
NEG_SAFE = -(2**62)


def grid_vinsert(st: Any, cols: Cols, rows: np.ndarray, cbefore: np.ndarray, rets: np.ndarray | None = None,
                 rcbefore: np.ndarray | None = None) -> np.ndarray:
    """Insert the valid plain rows among ``rows`` (insert rows; ``cbefore``: the CTI in force before
    each) into a `GridStep`, net of the retraction rows ``rets`` (``rcbefore``: CTI before each) that
    change them later in the same segment. Returns the rows it took (inserts and the retractions folded
    into them); the caller replays every other row in order.

    A retraction is folded only when the sequential rules accept it at its place (it names the live
    lifetime, respects the CTI before it); one that would be refused, or a retraction that precedes the
    insert of its id, makes the segment (or that insert) go through the general path instead."""
    import pyarrow as pa

    nothing = rows[:0]
    ids_all = cols.id_array.take(rows)
    if ids_all.null_count:
        return nothing
    bi = BatchIds(ids_all)  # id checks without Python strings (`ids`)
    n = len(ids_all)
    le = cols.le[rows]
    re = cols.re[rows]
    ceff = st.effective_cti if st.effective_cti > _I64_MIN else _I64_MIN
    ok = (le < re) & (le >= ceff) & (le >= cbefore) & (le < INF)
    vals_all, vmiss = cols.field(st.mapper.spec, 0, cols.n)
    if vmiss is not None:
        ok &= ~vmiss[rows]
    for _, tp in st.typed:  # a value of the wrong type: the general path dead-letters it
        bad = tp.bad_mask(vals_all)
        if bad is not None:
            ok &= ~bad[rows]
    gcodes_all, gkeys, gfields, gmiss = group_codes(cols, st.group_by, 0, cols.n)
    gcodes = gcodes_all[rows]
    if gmiss is not None:
        ok &= ~gmiss[rows]
    if not bi.distinct():
        return nothing  # an id repeats: order matters, leave it all to the general path
    live = st.live
    if live:
        ok &= ~bi.member_mask(live.keys())
    if st.chunks:
        held = [ch.held_id_array() for ch in st.chunks if len(ch)]
        if held:
            ok &= ~bi.member_mask(held[0] if len(held) == 1 else pa.concat_arrays(held))
    if not ok.any():
        return nothing
    ore = re  # RE as inserted (for T)
    deleted = None
    absorbed: list[int] = []  # retraction rows folded into the inserts they change
    absorbed_rn: list[int] = []
    absorbed_i: list[int] = []  # the insert (local index) each one changes
    r_pa = cols.id_array.take(rets) if rets is not None and len(rets) else None
    if rets is not None and r_pa is not None and (bi.member_mask(r_pa.drop_null()) & ok).any():
        # a retraction of an insert of this stretch: fold it in (or give up), row by row
        ids = bi.ids
        okl = ok.tolist()
        pos_of = dict(zip(ids, range(n), strict=True))
        if not ok.all():
            for i in np.flatnonzero(~ok).tolist():
                del pos_of[ids[i]]
        r_ids = r_pa.to_pylist()
        rn_col = cols.ints_np("re_new")
        r_le = cols.le[rets].tolist()
        r_re = cols.re[rets].tolist()
        r_rn = rn_col[rets].tolist()
        r_cb = rcbefore.tolist() if rcbefore is not None else [_I64_MIN] * len(rets)
        r_pos = rets.tolist()
        i_pos = rows.tolist()
        cur = re.tolist()
        lel = le.tolist()
        dead = [False] * n
        ce = st.effective_cti
        for x, lx, rx, nx, cbx, px in zip(r_ids, r_le, r_re, r_rn, r_cb, r_pos, strict=True):
            j = pos_of.get(x)
            if j is None:
                continue
            i = j
            if i_pos[i] > px:  # retraction before the insert of its id: keep the general path's order
                okl[i] = False
                del pos_of[x]
                continue
            sync = rx if rx < nx else nx
            if dead[i] or lx != lel[i] or rx != cur[i] or nx < lx or sync < cbx or sync < ce:
                return nothing  # it would be refused at its place: leave it all to the general path
            absorbed.append(px)
            absorbed_rn.append(nx)
            absorbed_i.append(i)
            if nx == lx:
                dead[i] = True
            else:
                cur[i] = nx
        ok = np.array(okl, dtype=bool)
        re = np.array(cur, dtype=np.int64)
        deleted = np.array(dead, dtype=bool)
    K0 = st.frontier
    hop, size, off = st.hop, st.size, st.off
    lo = (le - size - off) // hop + 1
    ref = np.where(re < INF, re, le + 1)
    hi = -((off - ref) // hop) - 1
    span = hi - lo + 1
    if not ok.any():
        return nothing
    lemax = int(le[ok].max())
    # the frontier this stretch will reach: rows reaching past it must spill (general path)
    K = max(K0, (max(lemax, st.watermark) - off) // hop) if lemax > NEG_SAFE else K0
    vec = ok & (re < INF) & (hi <= K) & (span <= MAX_SPAN)
    extra = getattr(st, "vmask", None)
    if extra is not None:
        vec &= extra(le, re)
    if deleted is not None:
        gone = ok & deleted
        vec &= ~deleted
    else:
        gone = None
    rn_max = max((x for x in absorbed_rn if x < INF), default=_I64_MIN)
    idx = np.flatnonzero(vec)
    took = idx if gone is None else np.flatnonzero(vec | gone)
    if len(took) == 0:
        return nothing
    # valid inserts left to the general path (long lifetimes): applied right away by the caller with
    # their net lifetime (the retractions folded into them are valid at their places, checked above)
    later = ok & ~vec if deleted is None else ok & ~vec & ~deleted
    st.vlater = list(zip(rows[later].tolist(), re[later].tolist(), strict=True)) if later.any() else []
    if st.reads_input:
        seen = later.copy()
        seen[took] = True
        tmax = int(np.where(ore < INF, ore, le)[seen].max())
        if rn_max > tmax:
            tmax = rn_max
        if tmax > st.ctx.reached:
            st.ctx.reached = tmax
    if lemax > st.max_le:
        st.max_le = lemax
        if lemax > st.watermark:
            st._advance(lemax)
    numeric = isinstance(vals_all, np.ndarray)
    vals = vals_all[rows] if numeric else [vals_all[i] for i in rows.tolist()]
    if len(idx) == 0:
        return _taken(rows, took, absorbed)
    place = getattr(st, "vplace", None)
    if place is not None:
        place(ids_all, idx, le, re, vals, gcodes, gkeys, gfields)
        return _taken(rows, took, absorbed)
    # (group, window) pairs
    sel_g = gcodes[idx]
    sel_lo = lo[idx]
    sel_span = np.maximum(span[idx], 0)  # 0: in a gap between hopping windows, member of none
    if int(sel_span.max()) == 1 and int(sel_span.min()) == 1:
        prow, ks, gs = idx, sel_lo, sel_g
    else:
        prow = np.repeat(idx, sel_span)
        starts = np.cumsum(sel_span) - sel_span
        ks = np.repeat(sel_lo, sel_span) + (np.arange(len(prow)) - np.repeat(starts, sel_span))
        gs = np.repeat(sel_g, sel_span)
    if len(ks) == 0:
        prow = ks = gs = np.zeros(0, dtype=np.int64)
    kmin = int(ks.min()) if len(ks) else 0
    kr = int(ks.max()) - kmin + 1 if len(ks) else 1
    key = gs * kr + (ks - kmin)
    order = stable_order(key)
    skey = key[order]
    srows = prow[order]
    cuts = (np.flatnonzero(skey[1:] != skey[:-1]) + 1).tolist()
    bounds = [0, *cuts, len(skey)] if len(skey) else [0]  # (no pair: every event in a gap between windows)
    if not st.incremental:
        _members_insert(st, cols, rows, idx, bi.ids, le, re, vals, gcodes, gkeys, gfields, skey, srows, bounds, kr,
                        kmin)
        return _taken(rows, took, absorbed)
    numeric = isinstance(vals, np.ndarray)
    svals: Any = vals[srows] if numeric else None
    wu = st.udm
    add_array = wu.add_array if numeric else None
    gobj: dict[int, Any] = {}
    touch = st._touch
    # the batch form pays where there are many short slices (small windows, many groups); long slices are
    # already one vectorized add_array call each
    add_batch = wu.add_batch if add_array is not None else None
    batched = add_batch is not None and len(bounds) > 2 and len(skey) < BATCH_SLICE * (len(bounds) - 1)
    if batched:
        (_bulk_add if BULK else _batch_add)(st, wu, add_batch, svals, skey, bounds, kr, kmin, gkeys, gfields, gobj)
    for s, e, w in () if batched else _key_runs(st, skey, bounds, kr, kmin, gkeys, gfields, gobj):
        if w.pending:
            st._apply(w)
        state = w.state
        if state is None:
            state = wu.initial_state()
        win = (w.le, w.re)
        if add_array is not None:
            state = wu._call(add_array, (state, svals[s:e]), win, "add_array")
        else:
            chunk = [vals[r] for r in srows[s:e].tolist()]
            state = wu.add(state, chunk, win)
        w.state = state
        w.count += e - s
        touch(w)
    # the events themselves: columnar until something needs them one by one
    vv = vals[idx] if numeric else [vals[i] for i in idx.tolist()]
    st.chunks.append(ColumnarEvents(ids_all, le[idx], re[idx], vv, sel_g, gkeys, idx))
    st._count_new_events(sel_g, gobj, gkeys, gfields)
    return _taken(rows, took, absorbed)



def _batch_add(st: Any, wu: Any, add_batch: Any, svals: np.ndarray, skey: np.ndarray, bounds: list[int], kr: int,
               kmin: int, gkeys: Any, gfields: Any, gobj: dict[int, Any]) -> None:
    """Every (group, window) run of a sorted batch in one ``add_batch`` call (the UDA's batch form)."""
    wins = []
    states = []
    for _s, _e, w in _key_runs(st, skey, bounds, kr, kmin, gkeys, gfields, gobj):
        if w.pending:
            st._apply(w)
        wins.append(w)
        states.append(w.state if w.state is not None else wu.initial_state())
    _add_states(st, wu, add_batch, wins, states, svals, bounds)


def _add_states(st: Any, wu: Any, add_batch: Any, wins: list[Window], states: list[Any], svals: np.ndarray,
                bounds: list[int]) -> None:
    """The one ``add_batch`` call over the batch's slices (``bounds``, one per window of ``wins``, whose
    states are ``states``): each window takes its new state and member count and is touched."""
    offsets = np.asarray(bounds, dtype=np.int64)
    new = wu._call(add_batch, (states, svals, offsets), None, "add_batch")
    if len(new) != len(wins):
        raise contract(wu.label, None, f"add_batch returned {len(new)} states for {len(wins)} slices", new)
    fresh = st.fresh
    for w, state, c in zip(wins, new, np.diff(offsets).tolist(), strict=True):
        w.state = state
        w.count += c
        w.dirty = True
        if not w.fresh:
            w.fresh = True
            fresh.append(w)


def _bulk_add(st: Any, wu: Any, add_batch: Any, svals: np.ndarray, skey: np.ndarray, bounds: list[int], kr: int,
              kmin: int, gkeys: Any, gfields: Any, gobj: dict[int, Any]) -> None:
    """`_batch_add` in one loop: the (group, window) of each run decoded column-wise, windows made inline
    (in the order, with the heap entries, `_win` gives), fresh windows' initial states straight from the
    UDA (one that raises is reported as `WindowUDM._call` reports it). Same states, windows and order."""
    starts = np.asarray(bounds[:-1], dtype=np.int64)
    codes, kks = np.divmod(skey[starts], kr)
    kl = (kks + kmin).tolist()
    off, hop, size = st.off, st.hop, st.size
    members = not st.incremental or st.sees_open_ends
    heap = st.close_heap
    push = heapq.heappush
    init = wu.udm.initial_state  # (only a `WindowUDM` has a batch form)
    wins: list[Window] = []
    states: list[Any] = []
    seq = st.seq
    g: Any = None
    gw: Any = None
    last = -1
    try:
        for code, k in zip(codes.tolist(), kl, strict=True):
            if code != last:
                last = code
                g = gobj.get(code)
                if g is None:
                    g = st._group_by_code(code, gobj, gkeys, gfields)
                gw = g.windows
            w = gw.get(k)
            if w is None:
                le = off + k * hop
                w = Window(g, k, le, le + size, {} if members else None)
                gw[k] = w
                seq += 1
                push(heap, (w.re, seq, w))
                states.append(init())
            else:
                if w.pending:
                    st._apply(w)
                states.append(w.state if w.state is not None else init())
            wins.append(w)
    except ContractViolation:
        raise
    except Exception as exc:  # as `WindowUDM._call` reports it
        raise contract(wu.label, None, f"initial_state raised {type(exc).__name__}", exc) from exc
    finally:
        st.seq = seq
    _add_states(st, wu, add_batch, wins, states, svals, bounds)


def _taken(rows: np.ndarray, took: np.ndarray, absorbed: list[int]) -> np.ndarray:
    t = rows[took]
    if absorbed:
        t = np.concatenate([t, np.array(absorbed, dtype=np.int64)])
    return t


def _members_insert(st: Any, cols: Cols, rows: np.ndarray, idx: np.ndarray, ids_all: list[str], le: np.ndarray,
                    re: np.ndarray, vals: Any, gcodes: np.ndarray, gkeys: list[Any], gfields: list[Any],
                    skey: np.ndarray, srows: np.ndarray, bounds: list[int], kr: int, kmin: int) -> None:
    """Non-incremental UDM: the events become ordinary registry entries and window members (in bulk)."""
    ids_v = ids_all if len(idx) == len(ids_all) else [ids_all[i] for i in idx.tolist()]
    le_v = le[idx].tolist()
    re_v = re[idx].tolist()
    vals_v = vals[idx].tolist() if isinstance(vals, np.ndarray) else [vals[i] for i in idx.tolist()]
    codes_v = gcodes[idx].tolist()
    evs = [Ev(i, a, b, v, gkeys[c]) for i, a, b, v, c in zip(ids_v, le_v, re_v, vals_v, codes_v, strict=True)]
    st.live.update(zip(ids_v, evs, strict=True))
    rev = re[idx]
    fin = rev < INF
    if fin.any():
        order = np.argsort(rev[fin], kind="stable")
        st.reruns.append((rev[fin][order], np.asarray(ids_v, dtype=object)[fin][order]))
    # local row -> event
    pos = np.full(len(rows), -1, dtype=np.int64)
    pos[idx] = np.arange(len(idx))
    gobj: dict[int, Any] = {}
    touch = st._touch
    for s, e, w in _key_runs(st, skey, bounds, kr, kmin, gkeys, gfields, gobj):
        mem = w.members
        for r in pos[srows[s:e]].tolist():
            ev = evs[r]
            mem[ev.id] = ev
        w.count += e - s
        touch(w)
    st._count_new_events(gcodes[idx], gobj, gkeys, gfields)


def _key_runs(st: Any, skey: np.ndarray, bounds: list[int], kr: int, kmin: int, gkeys: Any, gfields: Any,
              gobj: dict[int, Any]) -> Iterator[tuple[int, int, Any]]:
    """Each run of equal ``(group, window)`` keys of a sorted batch: its row span and its window (made
    when new). The groups looked up are left in ``gobj`` for `_count_new_events`."""
    skl = skey[np.array(bounds[:-1], dtype=np.int64)].tolist() if len(bounds) > 1 else []
    for j, kk in enumerate(skl):
        code, kk2 = divmod(kk, kr)
        g = st._group_by_code(code, gobj, gkeys, gfields)
        k = kk2 + kmin
        w = g.windows.get(k)
        if w is None:
            w = st._win(g, k)
        yield bounds[j], bounds[j + 1], w
