"""Columnar batches: the vectorized fast path and the column-driven general path.

`run_batch` walks an `ElementBatch` once. Stretches of consecutive *insert* rows (at least `MIN_RUN`)
go to the first step's vectorized insert (`GridStep.vinsert`) when the query qualifies
(`plan`: the first step is a tumbling/hopping window step over a time-insensitive incremental UDA/UDO
with a field-name input and no ``max_memory_time``); every other row (retractions, CTIs, bad rows,
short insert stretches, rows the vectorized insert declines) takes the general path, fed from the
columns without building element objects. So the engine uses the fast path automatically and falls back
the moment input stops qualifying, row by row; both paths leave the same state behind.

Within a vectorized stretch, rows that are not plain valid inserts (late, bad lifetime, missing field,
duplicate id, long or infinite lifetime that must spill past the frontier) are handed back and take the
general path right after the stretch; since insert-only changes commute, the outcome (state, output
CHT, dead letters in line order) is the one the general path gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from udm.host.errors import BadElement
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from .common import INF
from .ids import BatchIds

if TYPE_CHECKING:  # pragma: no cover
    from .runner import QueryRunner

__all__ = ["MIN_RUN", "columns", "plan", "run_batch"]

#: shortest stretch of insert rows worth vectorizing
MIN_RUN = 48
#: ids (payloads) a batch reads one by one (`Cols.id_at`, `Cols.payload_at`) before it converts the whole
#: column to Python
_ID_SCALARS = 64

_INSERT, _RETRACT, _CTI = 0, 1, 2
_MISSING = object()


def plan(runner: QueryRunner) -> Any:
    """The step that takes vectorized inserts, or None."""
    st = runner.steps[0]
    fn = getattr(st, "vector_ok", None)
    return st if fn is not None and fn() else None


class Cols:
    """Per-batch column access, materialized lazily."""

    def __init__(self, batch: Any) -> None:
        self.batch = batch
        self.n = len(batch)
        self._ids: list[Any] | None = None
        self._id_arr: Any = None
        self._id_hits = 0
        self._payload_hits = 0
        self._payloads: list[Any] | None = None
        self.le = batch.column("le")
        self.re = batch.column("re")
        self._lists: dict[str, list[int]] = {}
        self._cache: dict[Any, Any] = {}

    def ints_np(self, name: str) -> np.ndarray:
        if name == "le":
            return self.le
        if name == "re":
            return self.re
        key = ("np", name)
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = self.batch.column(name)
        return v

    @property
    def id_array(self) -> Any:
        """The id column as one pyarrow array (the fast path works on it without Python strings)."""
        if self._id_arr is None:
            from .window import _id_array

            self._id_arr = _id_array(self.batch.table.column("id"))
        return self._id_arr

    def id_at(self, i: int) -> Any:
        """Row ``i``'s id. The first few come one by one from the column (on the in-order path only a
        handful of rows per batch take the general path); after that the whole column is converted."""
        ids = self._ids
        if ids is not None:
            return ids[i]
        self._id_hits += 1
        if self._id_hits > _ID_SCALARS:
            return self.ids[i]
        return self.id_array[i].as_py()

    def ints(self, name: str) -> list[int]:
        """A time column as a Python list (for row-by-row work)."""
        v = self._lists.get(name)
        if v is None:
            src = self.le if name == "le" else self.re if name == "re" else self.batch.column(name)
            v = self._lists[name] = src.tolist()
        return v

    @property
    def ids(self) -> list[Any]:
        if self._ids is None:
            self._ids = self.batch.table.column("id").to_pylist()
        return self._ids

    def payload_at(self, i: int) -> Any:
        """Row ``i``'s payload: one by one for the first few rows (as `id_at`), then the whole batch."""
        if self._payloads is None:
            self._payload_hits += 1
            if self._payload_hits <= _ID_SCALARS:
                return self.batch.payload_at(i)
        return self.payloads[i]

    @property
    def payloads(self) -> list[Any]:
        if self._payloads is None:
            self._payloads = self.batch.payloads()
        return self._payloads

    def field(self, name: str, a: int, b: int) -> tuple[Any, np.ndarray | None]:
        """Values of payload field ``name`` for rows [a, b) and a mask of rows lacking it (None: none
        lack it). Values are a numpy int64/float64 array when the field is uniformly numeric, else a
        list of Python values (what the general path would read from the payload dicts)."""
        key = ("f", name)
        whole = self._cache.get(key)
        if whole is None:
            whole = self._cache[key] = self._field(name, 0, self.n)
        vals, miss = whole
        if a == 0 and b == self.n:
            return whole
        return vals[a:b], (None if miss is None else miss[a:b])

    def _field(self, name: str, a: int, b: int) -> tuple[Any, np.ndarray | None]:
        col = self.batch.payload_field(name)
        if col is not None:
            import pyarrow as pa

            part = col.slice(a, b - a)
            missing = None
            if part.null_count:
                missing = part.is_null().to_numpy(zero_copy_only=False)
                if not missing.any():
                    missing = None
            t = part.type
            if pa.types.is_int64(t) or pa.types.is_float64(t):
                arr = (part.fill_null(0) if missing is not None else part).to_numpy()
                return arr, missing
            return part.to_pylist(), missing
        pls = self.payloads
        vals = [p.get(name, _MISSING) if type(p) is dict else _MISSING for p in pls[a:b]]
        missing = None
        if _MISSING in vals:
            missing = np.fromiter((v is _MISSING for v in vals), dtype=bool, count=len(vals))
            return vals, missing
        kinds = set(map(type, vals))
        if kinds == {int}:
            try:
                return np.array(vals, dtype=np.int64), None
            except OverflowError:
                return vals, None
        if kinds == {float}:
            return np.array(vals, dtype=np.float64), None
        return vals, None


def columns(batch: Any) -> Cols:
    return Cols(batch)


def run_batch(runner: QueryRunner, batch: Any) -> list[Element]:
    n = len(batch)
    out: list[Element] = []
    if n == 0:
        return out
    codes = batch.kind_codes()
    cols = Cols(batch)
    lines = batch.lines.tolist()
    codes_l = codes.tolist()
    st = plan(runner) if not runner.finished else None
    done = np.zeros(n, dtype=bool)  # rows already taken by the vectorized insert
    if st is not None:
        # segments free of retractions and bad rows (and before an end-of-input CTI): their valid inserts
        # commute with each other and with the CTIs between them, so they can go first, all at once
        tcol = cols.ints_np("t")
        ends = np.flatnonzero((codes == _CTI) & (tcol >= INF))
        limit = int(ends[0]) if len(ends) else n  # nothing after the end of input is vectorized
        stop = np.flatnonzero(codes[:limit] < 0).tolist()
        start = 0
        for pos in [*stop, limit]:
            if pos - start >= MIN_RUN:
                seg = slice(start, pos)
                kinds = codes[seg]
                rows = np.flatnonzero(kinds == _INSERT) + start
                if len(rows) >= MIN_RUN:
                    # the CTI in force before each row
                    cb = np.maximum.accumulate(np.where(kinds == _CTI, tcol[seg], _I64_MIN))
                    rets = np.flatnonzero(kinds == _RETRACT) + start
                    taken = st.vinsert(cols, rows, cb[rows - start], rets, cb[rets - start])
                    if len(taken):
                        done[taken] = True
                        runner.ctx.stats.elements_in += len(taken)
                        # valid inserts the vectorized insert left alone (long lifetimes): they commute too,
                        # so they go now, before the CTIs are replayed (else windows released early would
                        # have to be revised)
                        # (their ids were checked against the fast path's ids and each other: fresh)
                        st.vfresh = True
                        try:
                            for i, re_net in st.vlater:
                                r = _row(runner, cols, codes_l, lines, i, re_net)
                                if r:
                                    out.extend(r)
                                done[i] = True
                        finally:
                            st.vfresh = False
                        st.vlater = []
            start = pos + 1
    todo = np.flatnonzero(~done).tolist() if done.any() else range(n)
    for i in todo:
        r = _row(runner, cols, codes_l, lines, i)
        if r:
            out.extend(r)
    out.extend(runner.flush())
    return out


def _row(runner: QueryRunner, cols: Cols, codes: list[int], lines: list[int], i: int,
         re_net: int | None = None) -> list[Element]:
    """One row through the general path (what `QueryRunner._one` does for an element); ``re_net``
    replaces an insert's RE (its net lifetime after retractions already folded into it)."""
    ctx = runner.ctx
    line = lines[i]
    ctx.line = line if line >= 0 else None
    ctx.stats.elements_in += 1
    c = codes[i]
    if runner.finished:
        runner.after_end(_element(cols, c, i))
        return []
    first = runner.steps[0]
    if c == _INSERT:
        p = cols.payload_at(i)
        re = cols.ints("re")[i] if re_net is None else re_net
        out = first.ins(cols.id_at(i), cols.ints("le")[i], re, {} if p is None else p)
    elif c == _RETRACT:
        out = first.ret(cols.id_at(i), cols.ints("le")[i], cols.ints("re")[i], cols.ints("re_new")[i])
    elif c == _CTI:
        t = cols.ints("t")[i]
        out = first.cti(t)
        if t >= INF:
            runner.end_input("main")
    else:
        runner.reject_bad(_bad_row(cols, i, ctx.line), ctx.line)
        return []
    if out:
        return runner.push(0, out)
    return []


def _element(cols: Cols, c: int, i: int) -> Any:
    if c == _INSERT:
        return Insert(cols.id_at(i), cols.ints("le")[i], cols.ints("re")[i], cols.payloads[i] or {})
    if c == _RETRACT:
        return Retract(cols.id_at(i), cols.ints("le")[i], cols.ints("re")[i], cols.ints("re_new")[i])
    if c == _CTI:
        return Cti(cols.ints("t")[i])
    return None


def _bad_row(cols: Cols, i: int, line: int | None) -> BadElement:
    tab = cols.batch.table
    reason = tab.column("error")[i].as_py() or "bad element"
    raw_text = tab.column("raw")[i].as_py()
    raw: Any = None
    if raw_text is not None:
        try:
            raw = json.loads(raw_text)
        except ValueError:
            raw = raw_text
    return BadElement(reason, line=line, raw=raw)


# ---------------------------------------------------------------------------------------------------
# vectorized inserts into tumbling/hopping windows
# ---------------------------------------------------------------------------------------------------
#: rows whose lifetime spans more windows than this go through the general path
MAX_SPAN = 64
_I64_MIN = -(2**63)
NEG_SAFE = -(2**62)


def group_codes(cols: Cols, fields: tuple[str, ...], a: int, b: int
                ) -> tuple[np.ndarray, list[Any], list[dict[str, Any] | None], np.ndarray | None]:
    """Per-row group codes for rows [a, b): (codes, group keys by code, key fields by code, missing)."""
    key = ("g", fields)
    whole = cols._cache.get(key)
    if whole is None:
        whole = cols._cache[key] = _group_codes(cols, fields, 0, cols.n)
    codes, keys, gfields, miss = whole
    if a == 0 and b == cols.n:
        return whole
    return codes[a:b], keys, gfields, (None if miss is None else miss[a:b])


def _group_codes(cols: Cols, fields: tuple[str, ...], a: int, b: int
                 ) -> tuple[np.ndarray, list[Any], list[dict[str, Any] | None], np.ndarray | None]:
    from .window import _hashable

    n = b - a
    if not fields:
        return np.zeros(n, dtype=np.int64), [()], [None], None
    per_codes = []
    per_vals = []
    missing: np.ndarray | None = None
    for f in fields:
        codes, vals, miss = _codes_one(cols, f, a, b)
        per_codes.append(codes)
        per_vals.append(vals)
        if miss is not None:
            missing = miss if missing is None else (missing | miss)
    if len(fields) == 1:
        vals = per_vals[0]
        f = fields[0]
        return per_codes[0], [_hashable(v) for v in vals], [{f: v} for v in vals], missing
    combo = np.zeros(n, dtype=np.int64)
    for codes, vals in zip(per_codes, per_vals, strict=True):
        combo = combo * max(len(vals), 1) + codes
    uniq, inv = np.unique(combo, return_inverse=True)
    keys: list[Any] = []
    gfields: list[dict[str, Any] | None] = []
    first_row = np.zeros(len(uniq), dtype=np.int64)
    first_row[inv[::-1]] = np.arange(n - 1, -1, -1)
    for r in first_row.tolist():
        vs = [vals[codes[r]] for codes, vals in zip(per_codes, per_vals, strict=True)]
        keys.append(tuple(_hashable(v) for v in vs))
        gfields.append(dict(zip(fields, vs, strict=True)))
    return inv.astype(np.int64), keys, gfields, missing


def _codes_one(cols: Cols, f: str, a: int, b: int) -> tuple[np.ndarray, list[Any], np.ndarray | None]:
    from .window import _hashable

    col = cols.batch.payload_field(f)
    if col is not None:
        import pyarrow as pa
        import pyarrow.compute as pc

        part = col.slice(a, b - a)
        missing = part.is_null().to_numpy(zero_copy_only=False) if part.null_count else None
        t = part.type
        if pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_large_string(t):
            enc = pc.dictionary_encode(part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part)
            idx = enc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            return idx, enc.dictionary.to_pylist(), missing
        vals_list = part.to_pylist()
    else:
        vals_list = [p.get(f, _MISSING) if type(p) is dict else _MISSING for p in cols.payloads[a:b]]
        missing = None
        if _MISSING in vals_list:
            missing = np.fromiter((v is _MISSING for v in vals_list), dtype=bool, count=len(vals_list))
    table: dict[Any, int] = {}
    values: list[Any] = []
    codes = np.empty(len(vals_list), dtype=np.int64)
    for i, v in enumerate(vals_list):
        k = _hashable(v) if v is not _MISSING else None  # missing rows never take this path
        c = table.get(k)
        if c is None:
            c = table[k] = len(values)
            values.append(v if v is not _MISSING else None)
        codes[i] = c
    return codes, values, missing


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
    K0 = st.K
    hop, size, off = st.hop, st.size, st.off
    lo = (le - size - off) // hop + 1
    ref = np.where(re < INF, re, le + 1)
    hi = -((off - ref) // hop) - 1
    span = hi - lo + 1
    if not ok.any():
        return nothing
    lemax = int(le[ok].max())
    # the frontier this stretch will reach: rows reaching past it must spill (general path)
    K = max(K0, (max(lemax, st.m) - off) // hop) if lemax > NEG_SAFE else K0
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
        if tmax > st.ctx.T:
            st.ctx.T = tmax
    if lemax > st.maxle:
        st.maxle = lemax
        if lemax > st.m:
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
    bounds = [0, *cuts, len(skey)]
    if not st.incr:
        _members_insert(st, cols, rows, idx, bi.ids, le, re, vals, gcodes, gkeys, gfields, skey, srows, bounds, kr,
                        kmin)
        return _taken(rows, took, absorbed)
    numeric = isinstance(vals, np.ndarray)
    svals: Any = vals[srows] if numeric else None
    wu = st.w
    add_array = wu.add_array if numeric else None
    gobj: dict[int, Any] = {}
    touch = st._touch
    for s, e, w in _key_runs(st, skey, bounds, kr, kmin, gkeys, gfields, gobj):
        if w.pend:
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
        w.n += e - s
        touch(w)
    # the events themselves: columnar until something needs them one by one
    vv = vals[idx] if numeric else [vals[i] for i in idx.tolist()]
    st.chunks.append(_chunk(ids_all, le[idx], re[idx], vv, sel_g, gkeys, idx))
    st._count_new_events(sel_g, gobj, gkeys, gfields)
    return _taken(rows, took, absorbed)


def stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for non-negative keys; as int16 when they fit, where numpy's
    stable sort is a radix sort (several times faster than on int64; (group, window) keys of a batch
    mostly fit)."""
    if len(key) and int(key.max()) < 32768:
        return np.argsort(key.astype(np.int16), kind="stable")
    return np.argsort(key, kind="stable")


def _taken(rows: np.ndarray, took: np.ndarray, absorbed: list[int]) -> np.ndarray:
    t = rows[took]
    if absorbed:
        t = np.concatenate([t, np.array(absorbed, dtype=np.int64)])
    return t


def _members_insert(st: Any, cols: Cols, rows: np.ndarray, idx: np.ndarray, ids_all: list[str], le: np.ndarray,
                    re: np.ndarray, vals: Any, gcodes: np.ndarray, gkeys: list[Any], gfields: list[Any],
                    skey: np.ndarray, srows: np.ndarray, bounds: list[int], kr: int, kmin: int) -> None:
    """Non-incremental UDM: the events become ordinary registry entries and window members (in bulk)."""
    from .common import Ev

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
        w.n += e - s
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
        w = g.wins.get(k)
        if w is None:
            w = st._win(g, k)
        yield bounds[j], bounds[j + 1], w


def _chunk(*args: Any) -> Any:
    from .window import Chunk

    return Chunk(*args)
