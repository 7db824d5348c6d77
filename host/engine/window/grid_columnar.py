"""Column-wise grid windows: a whole in-order, insert-only batch through a tumbling/hopping window step
over a time-insensitive incremental UDA with a batch form (hopping windows of an algebraic one are
panes, `PaneStep`: not covered), without a Python `Window` object for the windows that are
made, closed, emitted and purged inside the batch (issue 13).

Why: on the in-order path every window used to be an object made, looked up, released, emitted and
purged one by one (4-5 µs a window, the bulk of the engine's time at 10 events per window). Here the
windows of a batch are arrays: their (group, window) slices are cut by one sort, their values made by
one call of the UDA's ``compute_slices`` (no state at all: a window made and emitted inside the batch
starts from the initial state; semantics-notes 62), else by one ``add_batch`` call and ``compute`` per
window, and their output lines built column by column (`udm.host.io.encode.insert_lines`).

Only what outlives the batch is an object, made exactly as the row path makes it: the windows that
existed before the batch, windows still open (or emitted but not yet purged) at its end, and the events
(kept columnar, `ColumnarEvents`, as the vectorized insert keeps them). The emission order, output ids,
statistics and the state left behind are those of the row path (`batch.run_batch` with
`grid.grid_vinsert`): the batch's inserts first, then its CTIs in order, the first effective one (or the
end of the batch) releasing every window whose end the release point reached. The object windows are
emitted by the step's own `_emit_first`; every later CTI is the step's own ``cti``.

`run_grid` takes a batch only when that outcome is certain: every row a valid insert or a CTI (no
retraction, no bad line, no end of input), fresh distinct ids, lifetimes the CTIs allow and that stay
within ``MAX_SPAN`` windows up to the frontier, the UDA's value field numeric, plain group fields and
results, no touched window already emitted. Anything else returns None before any state changes and
the caller runs the batch through the row path (semantics-notes 37). `ENABLED` switches the path off
(the tests compare both).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.errors import ContractViolation
from udm.host.io.encode import EncodedLines, element_lines, element_text, insert_lines, merge_lines

from ..batch import MIN_RUN
from ..columnar import Cols, ColumnarEvents, group_codes, stable_order
from ..common import INF
from ..invoke import PLAIN_TYPES, WindowUDM, contract
from ..span_ids import ids_new
from . import base
from .grid import MAX_SPAN, GridStep
from .state import Window

__all__ = ["ENABLED", "grid_ok", "run_grid"]

#: off: every batch takes the row path (the tests compare the two byte for byte)
ENABLED = True

_INSERT, _CTI = 0, 2
_I64_MIN = -(2**63)
_COLUMN_TYPES = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}


class _Fallback(Exception):
    """The batch needs the row path (raised before any state changes)."""


def grid_ok(runner: Any) -> bool:
    """Can this runner's query take the columnar grid path at all: one input, a single tumbling/hopping
    window step over a time-insensitive incremental UDA with a batch form, released by the watermark or
    CTIs only (no ``early``, no ``time_bound``, no ``max_memory_time``)?"""
    if not ENABLED or not base.FIRST_FAST:
        return False
    if not runner.linear or runner.repair or runner.ctx.multi_input or runner.derived_inputs or runner.finished:
        return False
    ops = runner.ops
    if len(ops) != 1 or type(ops[0]) is not GridStep:
        return False
    st = ops[0]
    wu = st.udm
    return bool(st.reads_input and st.vector_ok() and st.plain_uda and isinstance(wu, WindowUDM)
                and wu.add_batch is not None and st.early is None and not st.time_bound and not st.sees_open_ends
                and st.incremental)


def run_grid(runner: Any, batch: Any) -> EncodedLines | None:
    """The batch through the columnar grid path: its output as encoded JSON Lines (the bytes the row
    path's output would be written as), or None (nothing changed) when it needs the row path."""
    n = len(batch)
    if n == 0:
        return None
    codes = batch.kind_codes()
    if not bool(np.all((codes == _INSERT) | (codes == _CTI))):
        return None
    rows = np.flatnonzero(codes == _INSERT)
    if len(rows) < MIN_RUN:  # (the row path takes short batches one by one)
        return None
    cols = Cols(batch)
    st: GridStep = runner.ops[0]
    try:
        plan = _plan(st, cols, codes, rows)
    except _Fallback:
        return None
    return _commit(runner, st, cols, batch, codes, plan)


class _Plan:
    """Everything a batch does, worked out before any state changes."""

    ctis: tuple[np.ndarray, np.ndarray]  # CTI rows, their times
    first_cti: int  # (index among them of the first that is not stale; -1: none)
    gkeys: list[Any]
    gfields: list[Any]
    gcodes: np.ndarray  # per insert row
    groups: dict[int, Any]  # group code -> existing `Group` (all of the batch's after the commit)
    ids: Any
    le: np.ndarray
    re: np.ndarray
    vals: np.ndarray
    lemax: int
    tmax: int
    # the batch's (group, window) pairs, in key order
    u_code: np.ndarray
    u_k: np.ndarray
    u_le: np.ndarray
    u_re: np.ndarray
    u_count: np.ndarray
    u_w: dict[int, Window]  # pair -> the window that exists already
    new: np.ndarray  # not existing before the batch
    obj: np.ndarray  # a `Window` object (else transient: made, emitted and purged in the batch)
    released: np.ndarray  # released at the first flush
    rp1: int
    wm1: int
    states: list[Any]  # the object windows' states before the batch, in key order
    bounds: np.ndarray
    svals: np.ndarray
    res: list[tuple[str, pa.Array]]  # the transient windows' payload columns
    popped: list[Window]


def _plan(st: GridStep, cols: Cols, codes: np.ndarray, rows: np.ndarray) -> _Plan:
    if st.held or st.spill_groups or st.grave_groups or st.fresh or st.vlater:
        raise _Fallback
    n = cols.n
    tcol = cols.ints_np("t")
    is_cti = codes == _CTI
    # the CTI in force before each row
    cb_all = np.maximum.accumulate(np.where(is_cti, tcol, _I64_MIN))
    cti_rows = np.flatnonzero(is_cti)
    ctis = tcol[cti_rows]
    if len(ctis) and int(ctis.max()) >= INF:
        raise _Fallback  # the end of input: the row path
    ids_all = cols.id_array.take(rows)
    if ids_all.null_count:
        raise _Fallback
    le = cols.le[rows]
    re = cols.re[rows]
    ceff = st.effective_cti if st.effective_cti > _I64_MIN else _I64_MIN
    ok = (le < re) & (le >= ceff) & (le >= cb_all[rows]) & (re < INF)
    spec = st.mapper.spec
    assert isinstance(spec, str)  # (`vector_ok`: a field name)
    vals_all, vmiss = cols.field(spec, 0, n)
    if vmiss is not None and bool(vmiss[rows].any()):
        raise _Fallback
    for _, tp in st.typed:
        bad = tp.bad_mask(vals_all)
        if bad is not None:
            ok &= ~bad[rows]
    gcodes_all, gkeys, gfields, gmiss = group_codes(cols, st.group_by, 0, n)
    if gmiss is not None and bool(gmiss[rows].any()):
        raise _Fallback
    if not bool(ok.all()):
        raise _Fallback
    # ids: distinct, and none live before the batch (in the registry, or held columnar by earlier batches)
    held = [ch.held_id_array() for ch in st.chunks if len(ch)]
    if st.live:
        held.append(pa.array(list(st.live), pa.string()))
    ids_t = cols.id_array.type
    held = [h if h.type == ids_t else h.cast(ids_t) for h in held]
    if not ids_new(cols.id_array, rows, (held[0] if len(held) == 1 else pa.concat_arrays(held)) if held else None):
        raise _Fallback
    gcodes = gcodes_all[rows]
    if not isinstance(vals_all, np.ndarray):
        # (values the reader left as Python values: the row path hands them to the UDA's ``add``, whose
        # float rounding may differ from ``add_batch``'s: the row path, for the same bytes)
        raise _Fallback
    vals = vals_all[rows]
    hop, size, off = st.hop, st.size, st.off
    lo = (le - size - off) // hop + 1
    hi = -((off - re) // hop) - 1
    span = hi - lo + 1
    lemax = int(le.max())
    wm0 = st.watermark
    wm_ins = lemax if (lemax > st.max_le and lemax > wm0) else wm0
    K = max(st.frontier, (max(lemax, wm0) - off) // hop)
    if int(span.min()) < 1 or int(span.max()) > MAX_SPAN or int(hi.max()) > K:
        raise _Fallback  # gaps between hopping windows, long lifetimes, spills: the row path
    # (group, window) pairs, sorted as the vectorized insert sorts them (`grid._bulk_add`)
    if int(span.max()) == 1:
        prow, ks, gs = np.arange(len(rows)), lo, gcodes
    else:
        prow = np.repeat(np.arange(len(rows)), span)
        starts = np.cumsum(span) - span
        ks = np.repeat(lo, span) + (np.arange(len(prow)) - np.repeat(starts, span))
        gs = np.repeat(gcodes, span)
    kmin = int(ks.min())
    kr = int(ks.max()) - kmin + 1
    key = gs * kr + (ks - kmin)
    order = stable_order(key)
    skey = key[order]
    cut = np.flatnonzero(skey[1:] != skey[:-1]) + 1
    starts_u = np.concatenate([[0], cut]).astype(np.int64)
    bounds = np.concatenate([starts_u, [len(skey)]]).astype(np.int64)
    ukey = skey[starts_u]
    u_code, u_kk = np.divmod(ukey, kr)
    u_k = u_kk + kmin
    u_le = off + u_k * hop
    u_re = u_le + size
    nu = len(ukey)
    # release point of the first flush (the first CTI that is not stale, else the batch's end)
    in_cti = st.input_cti
    first_cti = -1
    c1 = None
    for j, t in enumerate(ctis.tolist()):
        if t > in_cti:
            first_cti = j
            c1 = t
            break
    eff1 = st.effective_cti if c1 is None or c1 <= st.effective_cti else c1
    wm1 = wm_ins if c1 is None or c1 <= wm_ins else c1
    d = st.max_delay
    rp1 = eff1 if d >= INF else max(eff1, wm1 - d)
    c_end = max(st.effective_cti, int(ctis.max())) if len(ctis) else st.effective_cti
    if rp1 >= INF or wm1 >= INF:
        raise _Fallback
    # windows that exist already (the open ones of earlier batches)
    u_w: dict[int, Window] = {}
    groups: dict[int, Any] = {}
    ucodes = np.unique(u_code)
    code_lo = np.searchsorted(u_code, ucodes, side="left").tolist()
    code_hi = np.searchsorted(u_code, ucodes, side="right").tolist()
    for code, a, b in zip(ucodes.tolist(), code_lo, code_hi, strict=True):
        g = st.groups.get(gkeys[code])
        if g is None:
            continue
        groups[code] = g
        if g.retired:
            raise _Fallback
        if not g.windows:
            continue
        ks_g = u_k[a:b]
        for k, w in g.windows.items():
            p = int(np.searchsorted(ks_g, k))
            if p < b - a and int(ks_g[p]) == k:
                if w.emitted or w.outputs or w.pending or w.rebuild or not w.alive or w.fresh:
                    raise _Fallback  # a late event in an emitted window: the row path's diff
                u_w[a + p] = w
    new = np.ones(nu, dtype=bool)
    if u_w:
        new[np.fromiter(u_w.keys(), dtype=np.int64, count=len(u_w))] = False
    released = u_re <= rp1
    obj = ~(new & released & (u_re <= c_end))  # what outlives the batch (or came before it) is an object
    # group fields (the payload's leading part) and the output CTI check, per released transient window
    gf_by_code: dict[int, Any] = {}
    for code in ucodes.tolist():
        g = groups.get(code)
        gf = g.fields if g is not None else gfields[code]
        gf_by_code[code] = gf
    trans = np.flatnonzero(~obj)
    if len(trans) and int(u_le[trans].min()) < st.out_cti:
        raise _Fallback  # (the row path reports the internal error)
    # states: transient (fresh) windows first, their values checked before anything changes
    wu = st.udm
    assert isinstance(wu, WindowUDM)
    init = wu.udm.initial_state
    svals = vals[prow[order]]
    ob = np.flatnonzero(obj).tolist()
    tb = np.flatnonzero(~obj)
    t_col = _slices(wu, svals, bounds, tb) if len(tb) else None
    t_states: list[Any] = []
    try:  # (the object windows': a new window, or one without a state yet, starts from the initial state)
        states = []
        for u in ob:
            w = u_w.get(u)
            states.append(init() if w is None or w.state is None else w.state)
        if t_col is None:
            t_states = [init() for _ in range(len(tb))]
    except ContractViolation:
        raise
    except Exception as exc:  # as `WindowUDM._call` reports it
        raise contract(wu.label, None, f"initial_state raised {type(exc).__name__}", exc) from exc
    res: list[Any] | pa.Array = []
    if t_col is not None:
        res = t_col
    elif len(tb):
        # (the transient slices alone first: a fallback after this leaves no old state changed)
        res = _compute(wu, _add(wu, t_states, svals, bounds, tb), u_le[tb], u_re[tb])
    plan = _Plan()
    plan.ctis = (cti_rows, ctis)
    plan.first_cti = first_cti
    plan.gkeys, plan.gfields, plan.gcodes = gkeys, gfields, gcodes
    plan.groups = groups
    plan.ids, plan.le, plan.re, plan.vals = ids_all, le, re, vals
    plan.lemax = lemax
    plan.tmax = int(re.max())
    plan.u_code, plan.u_k, plan.u_le, plan.u_re = u_code, u_k, u_le, u_re
    plan.u_count = np.diff(bounds)
    plan.u_w = u_w
    plan.new, plan.obj, plan.released = new, obj, released
    plan.rp1, plan.wm1 = rp1, wm1
    plan.states = states
    plan.bounds, plan.svals = bounds, svals
    plan.res = _payload(st, res, tb, u_code, gf_by_code)
    plan.popped = _peek_wait(st, rp1, {id(w) for w in u_w.values()})
    return plan


def _cut(svals: np.ndarray, bounds: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slices ``sel`` of the sorted values, packed: (values, offsets)."""
    if len(sel) == len(bounds) - 1:
        return svals, bounds
    a = bounds[sel]
    b = bounds[sel + 1]
    lens = b - a
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    pick = np.repeat(a - offsets[:-1], lens) + np.arange(int(offsets[-1]))
    return svals[pick], offsets


def _add(wu: WindowUDM, states: list[Any], svals: np.ndarray, bounds: np.ndarray, sel: np.ndarray) -> list[Any]:
    """``add_batch`` over the slices ``sel`` of the sorted values (one call)."""
    vals, offsets = _cut(svals, bounds, sel)
    new = wu._call(wu.add_batch, (states, vals, offsets), None, "add_batch")
    if len(new) != len(states):
        raise contract(wu.label, None, f"add_batch returned {len(new)} states for {len(states)} slices", new)
    return list(new)


def _slices(wu: WindowUDM, svals: np.ndarray, bounds: np.ndarray, sel: np.ndarray) -> pa.Array | None:
    """The values of the fresh windows ``sel`` (each holding its slice of the sorted values alone) by the
    UDA's ``compute_slices``, as a payload column; None when it has none, raises, or gives anything but
    one plain value per window (the caller then runs ``initial_state``, ``add_batch`` and ``compute``)."""
    fn = wu.compute_slices
    if fn is None:
        return None
    vals, offsets = _cut(svals, bounds, sel)
    try:
        out = fn(vals, offsets)
    except ContractViolation:
        raise
    except Exception:
        return None  # (the scalar forms report what raised, for its window)
    if isinstance(out, np.ndarray):
        if out.ndim != 1 or len(out) != len(sel) or out.dtype not in (np.int64, np.float64):
            return None
        return pa.array(out)
    try:
        return _column(list(out)) if len(out) == len(sel) else None
    except (_Fallback, TypeError):
        return None


def _compute(wu: WindowUDM, states: list[Any], les: np.ndarray, res_: np.ndarray) -> list[Any]:
    """``compute`` of each state, in one ``map``; one that raises is reported for its window, as
    `WindowUDM._call` reports it (found by computing them one by one again)."""
    compute = wu.udm.compute
    try:
        return list(map(compute, states))
    except ContractViolation:
        raise
    except Exception:
        pass
    for i, s in enumerate(states):
        try:
            compute(s)
        except ContractViolation:
            raise
        except Exception as exc:
            raise contract(wu.label, (int(les[i]), int(res_[i])), f"compute raised {type(exc).__name__}",
                           exc) from exc
    raise contract(wu.label, None, "compute raised, then did not when called again", None)


def _column(values: list[Any]) -> pa.Array:
    """A payload column of one plain JSON type (else `_Fallback`: the row path formats it)."""
    if not values:
        return pa.array([], pa.int64())
    kinds = set(map(type, values))
    if len(kinds) != 1:
        raise _Fallback
    typ = _COLUMN_TYPES.get(kinds.pop())
    if typ is None:
        raise _Fallback
    try:
        return pa.array(values, typ)
    except (OverflowError, pa.ArrowException):
        raise _Fallback from None


def _payload(st: GridStep, res: list[Any] | pa.Array, tb: np.ndarray, u_code: np.ndarray,
             gf_by_code: dict[int, Any]) -> list[tuple[str, pa.Array]]:
    """The transient windows' payload columns in payload order: the group fields, then the UDA's value."""
    alias = st.udm.alias
    if alias in st.group_by:
        raise _Fallback
    for gf in gf_by_code.values():
        if gf is not None and not all(type(v) in PLAIN_TYPES for v in gf.values()):
            raise _Fallback  # (`_emit_first`: not a plain group: the general outputs)
    cols: list[tuple[str, pa.Array]] = []
    if st.group_by and len(tb):
        codes = u_code[tb]
        uc = np.unique(codes)
        for f in next(iter(gf_by_code.values())):
            per = [gf_by_code[c][f] for c in uc.tolist()]
            col = _column(per)
            cols.append((f, col.take(pa.array(np.searchsorted(uc, codes)))))
        for c in uc.tolist():
            if list(gf_by_code[c]) != [f for f, _ in cols]:
                raise _Fallback
    cols.append((alias, res if isinstance(res, pa.Array) else _column(res)))
    return cols


def _peek_wait(st: GridStep, rp: int, touched: set[int]) -> list[Window]:
    """The waiting windows the first flush releases from the wait heap (alive, dirty, ``W.RE <= rp``,
    not ``touched`` by the batch: those go out, or wait on, in the fresh loop before), in the order it
    pops them; an emitted one among them (a diff) sends the batch to the row path."""
    due = sorted((e for e in st.wait if e[0] <= rp), key=lambda e: (e[0], e[1]))
    out = []
    for e in due:
        w = e[2]
        if w.alive and w.dirty and id(w) not in touched:
            if w.outputs or w.pending or w.rebuild:
                raise _Fallback
            out.append(w)
    return out


def _commit(runner: Any, st: GridStep, cols: Cols, batch: Any, codes: np.ndarray, plan: _Plan) -> EncodedLines:
    """Apply the batch (no fallback from here on)."""
    ctx = runner.ctx
    stats = ctx.stats
    nrows = len(plan.le)
    # -- the inserts (`grid_vinsert`'s effects) -----------------------------------------------------
    if plan.tmax > ctx.reached:
        ctx.reached = plan.tmax
    if plan.lemax > st.max_le:
        st.max_le = plan.lemax
        if plan.lemax > st.watermark:
            st._advance(plan.lemax)
    stats.elements_in += nrows
    gobj: dict[int, Any] = dict(plan.groups)
    st._count_new_events(plan.gcodes, gobj, plan.gkeys, plan.gfields)
    plan.groups = gobj
    obj_u = np.flatnonzero(plan.obj)
    u_w = plan.u_w
    wu = st.udm
    assert isinstance(wu, WindowUDM)
    o_states: list[Any] = []
    if obj_u.size:
        o_states = _add(wu, plan.states, plan.svals, plan.bounds, obj_u)
    # windows are numbered (``seq``) in key order, transient ones too
    new_rank = np.cumsum(plan.new) + st.seq
    st.seq += int(plan.new.sum())
    heap = st.close_heap
    size = st.size
    objs: dict[int, Window] = {}
    counts = plan.u_count
    for u, s in zip(obj_u.tolist(), o_states, strict=True):
        w = u_w.get(u)
        if w is None:
            g = gobj[int(plan.u_code[u])]
            k = int(plan.u_k[u])
            le = int(plan.u_le[u])
            w = Window(g, k, le, le + size, None)
            g.windows[k] = w
            heapq.heappush(heap, (w.re, int(new_rank[u]), w))
        w.state = s
        w.count += int(counts[u])
        w.dirty = True
        objs[u] = w
    # events: columnar, as the vectorized insert keeps them
    st.chunks.append(ColumnarEvents(plan.ids, plan.le, plan.re, plan.vals, plan.gcodes, plan.gkeys))
    # -- the CTIs, the first effective one (or the batch's end) releasing the windows -------------------
    lines = batch.lines.tolist()
    cti_rows, ctis = plan.ctis
    out: list[Any] = []
    first_lines: EncodedLines | None = None
    for j, (r, t) in enumerate(zip(cti_rows.tolist(), ctis.tolist(), strict=True)):
        line = lines[r]
        ctx.line = line if line >= 0 else None
        stats.elements_in += 1
        if j == plan.first_cti:
            st._cti_enter(t)
            first_lines = _first_flush(st, plan, objs)
            out.extend(st.flush())
        else:
            out.extend(st.cti(t))
    if first_lines is None:
        first_lines = _first_flush(st, plan, objs)
    out.extend(runner.flush())
    runner._count(out)
    stats.elements_out += first_lines.count
    rest = element_lines(out, element_text)
    return EncodedLines(first_lines.data + rest.data, first_lines.count + rest.count)


def _first_flush(st: GridStep, plan: _Plan, objs: dict[int, Window]) -> EncodedLines:
    """`WindowStep._flush_into` at the first flush of the batch: the touched windows in key order (the
    released ones readied, the others queued to wait), then the wait heap's released ones; each group's
    windows emitted in that order, groups in the order they were first readied."""
    assert st.watermark == plan.wm1 and st.release_point() == plan.rp1
    released = plan.released
    u_code = plan.u_code
    # the fresh loop: queue the object windows not released
    for u, w in objs.items():
        w.fresh = False
        if released[u]:
            w.dirty = False
        elif not w.waiting:
            w.waiting = True
            st.seq += 1
            heapq.heappush(st.wait, (w.re, st.seq, w))
    # the wait heap: stale entries and the released waiting windows (`_peek_wait`)
    wait = st.wait
    popped_set = {id(w) for w in plan.popped}
    while wait and wait[0][0] <= plan.rp1:
        w = heapq.heappop(wait)[2]
        w.waiting = False
        if w.alive and w.dirty:
            assert id(w) in popped_set
            w.dirty = False
    # emission order: (kind, payload) items per group
    rel = np.flatnonzero(released)
    order: list[tuple[Any, list[Any]]] = []  # (group, items) in readied order
    by_group: dict[int, list[Any]] = {}
    if len(rel):
        rc = u_code[rel]
        cut = (np.flatnonzero(rc[1:] != rc[:-1]) + 1).tolist()
        for a, b in zip([0, *cut], [*cut, len(rel)], strict=True):
            seg = rel[a:b]
            g = plan.groups[int(rc[a])]
            items: list[Any] = []
            isobj = plan.obj[seg]
            if not isobj.any():
                items.append(("T", seg))
            else:
                at = 0
                for p in np.flatnonzero(isobj).tolist():
                    if p > at:
                        items.append(("T", seg[at:p]))
                    items.append(("W", objs[int(seg[p])]))
                    at = p + 1
                if at < len(seg):
                    items.append(("T", seg[at:]))
            by_group[id(g)] = items
            order.append((g, items))
    for w in plan.popped:
        gitems = by_group.get(id(w.group))
        if gitems is None:
            gitems = by_group[id(w.group)] = []
            order.append((w.group, gitems))
        gitems.append(("W", w))
    # output: transient lines column-wise, object windows through `_emit_first`
    tb = np.flatnonzero(~plan.obj)
    t_pos = np.full(len(plan.obj), -1, dtype=np.int64)
    t_pos[tb] = np.arange(len(tb))
    oid = st.oid
    t_rows: list[np.ndarray] = []
    t_oids: list[np.ndarray] = []
    t_at: list[np.ndarray] = []  # output position of each transient line
    w_at: list[int] = []
    w_text: list[str] = []
    pos = 0
    count = 0
    for g, items in order:
        for kind, v in items:
            if kind == "T":
                m = len(v)
                t_rows.append(t_pos[v])
                t_oids.append(np.arange(oid + 1, oid + 1 + m, dtype=np.int64))
                t_at.append(np.arange(pos, pos + m, dtype=np.int64))
                oid += m
                pos += m
                count += m
            else:
                st.oid = oid
                els: list[Any] = []
                st._emit_first(g, [v], els)
                oid = st.oid
                if els:
                    w_at.append(pos)
                    w_text.append("\n".join(element_text(e) for e in els))
                    pos += 1
                    count += len(els)
    st.oid = oid
    if not t_rows:
        return EncodedLines(tuple(t.encode() + b"\n" for t in w_text), count)
    trow = np.concatenate(t_rows)
    # statistics of the transient windows (`_first_emission`)
    stats = st.ctx.stats
    tre = plan.u_re[tb]
    stats.windows_emitted += len(trow)
    stats.emission_delay += int(plan.wm1 * len(tre) - int(tre.sum()))
    payload = [(f, col.take(pa.array(trow))) for f, col in plan.res]
    text = insert_lines(np.concatenate(t_oids), plan.u_le[tb][trow], tre[trow], payload)
    enc = merge_lines(np.concatenate(t_at), text, w_at, w_text)
    return EncodedLines(enc.data, count)
