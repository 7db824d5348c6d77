"""The columnar span path: a whole batch through a chain of span steps (filter / map / project) at once,
its output encoded as JSON Lines column by column (`udm.host.io.encode`).

Why: on a span query the row path spends a few microseconds per element on Python objects (the payload
dict, the element, the id registry entry, the JSON line). Here one batch is a few dozen array
operations: the UDFs run through their batch forms (`udm.sdk.UDF.compute_batch`), the output lines are
built with pyarrow compute, and only the events still open after the batch's last CTI enter the steps'
id registries (every other one would be forgotten by that CTI before the batch ends).

It takes a batch only when the outcome is certain to be the row path's, byte for byte: every row a
valid insert or a CTI (no retraction, no bad line, no end of input), every insert with a payload object,
a fresh id (unique in the batch and not live), a lifetime the CTI in force allows, the fields each step
reads, of the declared types, and each filter/map UDF with a batch form over numeric columns. Anything
else — any row that could become a dead letter, a retraction, a UDF without a batch form, a batch form
that raises — and `run_columnar` returns None before touching any state: the caller runs the batch
through the row path, which reports what is wrong, where, in order (semantics-notes 36).

`ENABLED` switches the path off (tests compare both paths).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.io.encode import (
    Const,
    DeferredLines,
    EncodedLines,
    cti_line,
    element_lines,
    element_text,
    insert_lines,
    merge_lines,
)

from .common import INF, NEG
from .ops.alter_lifetime import AlterLifetimeStep
from .ops.span import FilterStep, MapStep, ProjectStep
from .span_ids import ids_distinct

__all__ = ["ENABLED", "chain_ok", "run_columnar"]

#: off: every batch takes the row path (tests compare the two)
ENABLED = True

_INSERT, _CTI = 0, 2
_I64_MIN = np.iinfo(np.int64).min

#: JSON kinds (`udm.host.input_types`) a column of each arrow type holds
_KINDS = (
    (pa.types.is_int64, ("integer", "number")),
    (pa.types.is_float64, ("number",)),
    (pa.types.is_string, ("string",)),
    (pa.types.is_boolean, ("boolean",)),
    (pa.types.is_struct, ("object",)),
    (pa.types.is_list, ("array",)),
)


class _Fallback(Exception):
    """The batch needs the row path (raised before any state changes)."""


def chain_ok(runner: Any) -> bool:
    """Can this runner's query take the columnar span path at all: one input, a chain of filter / map /
    project / alter_lifetime steps, no repair stage?"""
    if not ENABLED or not runner.linear or runner.repair or runner.ctx.multi_input or runner.derived_inputs:
        return False
    ops = runner.ops
    if not ops or not ops[0].reads_input:
        return False
    for op in ops:
        if type(op) not in (FilterStep, MapStep, ProjectStep, AlterLifetimeStep):
            return False
        if isinstance(op, (FilterStep, MapStep)) and (getattr(op.udm, "compute_batch", None) is None or not op.args):
            return False
    return True


def _plain(typ: pa.DataType) -> bool:
    """A column type whose values `udm.host.io.encode` writes as the row path does: JSON's own kinds."""
    if pa.types.is_struct(typ):
        return all(_plain(typ.field(k).type) for k in range(typ.num_fields))
    if pa.types.is_list(typ):
        return _plain(typ.value_type)
    return pa.types.is_int64(typ) or pa.types.is_float64(typ) or pa.types.is_string(typ) or pa.types.is_boolean(typ)


def _col_kinds(col: pa.Array | Const) -> tuple[str, ...] | None:
    if isinstance(col, Const):
        return None
    for test, kinds in _KINDS:
        if test(col.type):
            return kinds
    return ()


def _check_types(op: Any, payload: dict[str, pa.Array | Const]) -> None:
    """The step's fields present and of its UDF's declared type, or `_Fallback`."""
    for f in op.fields:
        if f not in payload:
            raise _Fallback
    for tf, tp in op.typed:
        if tf is None:
            if "object" not in tp.kinds:
                raise _Fallback
            continue
        col = payload[tf]
        kinds = _col_kinds(col)
        if kinds is None:
            if not tp.accepts(col.value):
                raise _Fallback
        elif not any(k in kinds for k in tp.kinds):
            raise _Fallback


def _udf_columns(op: Any, payload: dict[str, pa.Array | Const], m: int) -> dict[str, np.ndarray]:
    cols = {}
    for arg, field in op.args.items():
        col = payload[field]
        if isinstance(col, Const):
            v = col.value
            if type(v) not in (int, float):
                raise _Fallback
            cols[arg] = np.full(m, v)
            continue
        if not (pa.types.is_int64(col.type) or pa.types.is_float64(col.type)):
            raise _Fallback  # the row path calls ``compute`` per row for other columns
        cols[arg] = col.to_numpy(zero_copy_only=False)
    return cols


def _call_batch(op: Any, payload: dict[str, pa.Array | Const], m: int) -> np.ndarray:
    cols = _udf_columns(op, payload, m)
    try:
        res = op.udm.compute_batch(**cols)
    except Exception:
        raise _Fallback from None  # the row path reports what is wrong, on the row where it is
    if not isinstance(res, np.ndarray) or res.ndim != 1 or len(res) != m or res.dtype.kind not in "bif":
        raise _Fallback
    return res


def _project(op: ProjectStep, payload: dict[str, pa.Array | Const]) -> dict[str, pa.Array | Const]:
    """`ProjectStep.reshape` on columns: the same dict operations, in the same order."""
    return op.reshape(payload, {k: Const(v) for k, v in op.set_fields.items()})


def _valid_at(arr: pa.Array, rows: np.ndarray) -> bool:
    """No null at ``rows`` of ``arr``."""
    return bool(np.all(arr.is_valid().to_numpy(zero_copy_only=False)[rows]))


def _take(payload: dict[str, pa.Array | Const], keep: np.ndarray) -> dict[str, pa.Array | Const]:
    mask = pa.array(keep)
    return {k: v if isinstance(v, Const) else v.filter(mask) for k, v in payload.items()}


def run_columnar(runner: Any, batch: Any, *, defer: bool = False) -> EncodedLines | DeferredLines | None:
    """The batch through the runner's span chain (`chain_ok`), its output as encoded lines (``defer``:
    `DeferredLines`, encoded by whoever writes them); None when the batch needs the row path (then
    nothing has changed)."""
    try:
        plan = _plan(runner, batch)
    except _Fallback:
        return _segments(runner, batch)
    return _commit(runner, batch, plan, defer=defer)


#: a stretch of inserts and CTIs between rows the columnar path cannot take (retractions, bad lines) is
#: tried on its own when at least this long; shorter ones go through the row path with those rows
MIN_SEGMENT = 256


def _segments(runner: Any, batch: Any) -> EncodedLines | None:
    """A batch with retractions or bad lines: its long stretches of inserts and CTIs columnar (each as a
    batch of its own, falling back on its own), everything else through the row path (`process_batch`
    on the slice), in row order; None when there is nothing to split (the caller runs the row path)."""
    codes = batch.kind_codes()
    hard = np.flatnonzero((codes != _INSERT) & (codes != _CTI)).tolist()
    n = len(batch)
    if not hard or len(hard) == n:
        return None
    spans: list[tuple[int, int, bool]] = []  # (start, end, columnar?)
    start = 0
    for h in [*hard, n]:
        if h - start >= MIN_SEGMENT:
            spans.append((start, h, True))
            start = h
        if h < n:  # the hard row joins the row-path span before it (or starts one)
            if spans and not spans[-1][2] and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], h + 1, False)
            else:
                spans.append((start, h + 1, False))
            start = h + 1
    if start < n:
        if spans and not spans[-1][2]:
            spans[-1] = (spans[-1][0], n, False)
        else:
            spans.append((start, n, False))
    if not any(col for _, _, col in spans):
        return None
    pieces: list[Any] = []
    count = 0
    for a, b, col in spans:
        part = batch.slice(a, b - a)
        enc = None
        if col:
            try:
                enc = _commit(runner, part, _plan(runner, part))
            except _Fallback:
                enc = None
        if enc is None:
            els = runner.process_batch(part)
            enc = element_lines(els, element_text) if els else EncodedLines((), 0)
        pieces.extend(enc.data)
        count += enc.count
    return EncodedLines(tuple(pieces), count)


class _Step:
    """What one step does to the batch: the inserts reaching it (indexes into the batch's inserts), their
    lifetimes as it receives them, which it keeps (None: all), the CTIs it receives (values, by CTI row)
    and which of them advance, and its output lifetimes and CTI values."""

    __slots__ = ("advancing", "c_final", "cti_in", "keep", "le", "op", "out_cti", "out_le", "out_re", "re",
                 "reach", "received")
    op: Any
    reach: np.ndarray
    le: np.ndarray
    re: np.ndarray
    keep: np.ndarray | None
    cti_in: np.ndarray
    received: np.ndarray
    advancing: np.ndarray
    c_final: int
    out_le: Any
    out_re: Any
    out_cti: np.ndarray

    def __init__(self, op: Any) -> None:
        self.op = op


def _ctis(op: Any, vals: np.ndarray, received: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """The CTIs of the batch that advance at ``op`` (of those it receives), its last CTI after the batch,
    and the CTI in force before each row of ``vals``'s order (its rows' positions come from the caller)."""
    c0 = max(op.input_cti, int(_I64_MIN))  # (NEG lies below int64)
    got = np.where(received, vals, _I64_MIN)
    running = np.maximum.accumulate(np.concatenate(([c0], got)))
    advancing = received & (vals > running[:-1])
    return advancing, int(running[-1]), running


def _plan(runner: Any, batch: Any) -> list[Any]:
    """Everything the batch will do, computed without changing state (or `_Fallback`)."""
    if runner.finished:
        raise _Fallback
    n = len(batch)
    codes = batch.kind_codes()
    is_ins = codes == _INSERT
    is_cti = codes == _CTI
    if not np.all(is_ins | is_cti):
        raise _Fallback  # retractions, bad lines
    ops = runner.ops
    first = ops[0]
    for op in ops:
        if getattr(op, "skip_below", NEG) != NEG or op.effective_cti != op.input_cti:
            raise _Fallback
    ins_rows = np.flatnonzero(is_ins)
    cti_rows = np.flatnonzero(is_cti)
    cti_t = batch.column("t")[cti_rows]
    if len(cti_t) and cti_t.max() >= INF:
        raise _Fallback  # the end of input
    # for each insert, how many CTIs come before it (the CTI in force there is a running max)
    ctis_before = np.searchsorted(cti_rows, ins_rows)
    m = len(ins_rows)
    payload: dict[str, pa.Array | Const] = {}
    le: Any = None
    re: Any = None
    ids: Any = None
    if m:
        le = batch.column("le")[ins_rows]
        re = batch.column("re")[ins_rows]
        tab = batch.table
        # the id and payload columns of every row: CTI rows are dropped from the payload's fields (a filter
        # per field costs a fifth of a take on the struct) and never from the ids (read where needed)
        ids = tab.column("id").combine_chunks()
        pcol = tab.column("payload").combine_chunks()
        if not pa.types.is_string(ids.type) or not pa.types.is_struct(pcol.type):
            raise _Fallback
        if ids.null_count and not _valid_at(ids, ins_rows):
            raise _Fallback  # an insert without an id
        if pcol.null_count and not _valid_at(pcol, ins_rows):
            raise _Fallback  # an insert without a payload object
        if not ids_distinct(ids, ins_rows):
            raise _Fallback  # an id used twice in the batch
        if first.live and pc.any(pc.is_in(ids, value_set=pa.array(list(first.live), pa.string()))).as_py():
            raise _Fallback  # a duplicate live id (a CTI's id is null: never in the set)
        typ = pcol.type
        mask = None if m == n else pa.array(is_ins)
        payload = {}
        for k in range(typ.num_fields):
            col = pcol.field(k)
            if mask is not None:
                col = col.filter(mask)
            if not _plain(col.type) or col.null_count:
                raise _Fallback  # (a table's timestamps, decimals, nulls, ...: the row path's JSON)
            payload[typ.field(k).name] = col
    # the steps, one after the other, over the inserts and CTIs that reach each
    reach = np.arange(m)  # insert index (into ins_rows) of the rows reaching the current step
    cur_le, cur_re = le, re  # lifetimes as the current step receives them (all inserts; ``reach`` selects)
    cti_vals, received = cti_t, np.ones(len(cti_t), dtype=bool)
    steps = []
    for op in ops:
        st = _Step(op)
        st.reach, st.cti_in, st.received = reach, cti_vals, received
        st.advancing, st.c_final, running = _ctis(op, cti_vals, received)
        st.keep = None
        k = len(reach)
        if k:
            st.le, st.re = cur_le[reach], cur_re[reach]
            # validity as the step judges it: a lifetime, and the CTI in force when the insert arrives
            if not (np.all(st.le < st.re) and np.all(st.le < INF)) or np.any(st.le < running[ctis_before[reach]]):
                raise _Fallback  # a bad lifetime or a CTI violation: a dead letter (or an adjusted insert)
            _check_types(op, payload)
            if isinstance(op, FilterStep):
                res = _call_batch(op, payload, k)
                st.keep = res.astype(bool) if res.dtype.kind != "b" else res
                if not st.keep.all():
                    payload = _take(payload, st.keep)
            elif isinstance(op, MapStep):
                res = _call_batch(op, payload, k)
                payload = {**payload, op.as_: pa.array(res)}
            elif isinstance(op, ProjectStep):
                payload = _project(op, payload)
        if isinstance(op, AlterLifetimeStep):
            out_le, out_re = _images(op, cur_le, cur_re) if m else (cur_le, cur_re)
            try:
                out_cti = np.array([op.start(int(t)) for t in cti_vals.tolist()], dtype=np.int64)
            except OverflowError:
                raise _Fallback from None
        else:
            out_le, out_re, out_cti = cur_le, cur_re, cti_vals
        st.out_le, st.out_re, st.out_cti = out_le, out_re, out_cti
        steps.append(st)
        if st.keep is not None:
            reach = reach[st.keep]
        cur_le, cur_re = out_le, out_re
        cti_vals, received = out_cti, st.advancing
    return [ins_rows, cti_rows, le, re, ids, payload, steps, reach]


def _images(op: Any, le: np.ndarray, re: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`AlterLifetimeStep.start` / ``end`` over arrays: each lifetime's image (`_Fallback` when an image
    would leave the int64 ticks the row path's Python integers need no bound for)."""
    finite = re < INF
    lo, hi = int(le.min()), int(le.max())
    if op.snap_size:
        new_le = le - (le - op.snap_offset) % op.snap_size  # (numpy's % floors, as Python's does)
        grow = 0
    else:
        if not (lo + op.shift > _I64_MIN and hi + op.shift < INF):
            raise _Fallback
        new_le = le + op.shift
        grow = max(op.shift, 0)
    if op.duration == "inf":
        return new_le, np.full(len(le), INF, dtype=np.int64)
    if op.duration == "keep":
        if finite.any() and int(re[finite].max()) + grow >= INF:
            raise _Fallback
        return new_le, np.where(finite, new_le + np.where(finite, re - le, 0), INF)
    dur = int(op.duration)
    if int(new_le.max()) + dur >= INF:
        raise _Fallback
    return new_le, new_le + dur


def _commit(runner: Any, batch: Any, plan: list[Any], *, defer: bool = False) -> EncodedLines | DeferredLines:
    """Apply the batch's effects on the steps and the context, as the row path leaves them."""
    ins_rows, cti_rows, le, re, ids, payload, steps, out_rows = plan
    ctx = runner.ctx
    n = len(batch)
    stats = ctx.stats
    stats.elements_in += n
    lines = batch.lines
    ctx.line = int(lines[-1]) if n and lines[-1] >= 0 else None
    if len(ins_rows):
        ends = np.where(re < INF, re, le)
        top = int(ends.max())
        if ctx.reached < top < INF:
            ctx.reached = top
    prev_ids: Any = ids  # the ids the current step's input carries (the batch's id column, or the previous
    # step's oids, one per insert reaching it)
    last_oids = np.zeros(0, dtype=np.int64)
    for st in steps:
        op = st.op
        got = st.cti_in[st.received]
        if len(got):
            # one `pass_cti` with the batch's last CTI leaves the state its CTIs one by one leave: the CTI in
            # force and T are maximums, and forgetting the events a CTI closes is monotone in the CTI
            op.pass_cti(int(got.max()))
        k = len(st.reach)
        al = isinstance(op, AlterLifetimeStep)
        base = op.next_id if al else op.oid
        if al:
            op.next_id += k
        else:
            op.oid += k
        oids = np.arange(base + 1, base + 1 + k, dtype=np.int64)
        if k:
            live = np.flatnonzero(st.re >= st.c_final)  # open after the step's last CTI: registered
            if len(live):
                id_list = (prev_ids.take(pa.array(ins_rows[live])).to_pylist() if isinstance(prev_ids, pa.Array)
                           else [f"o{v}" for v in prev_ids[live].tolist()])
                r_le, r_re = st.le[live].tolist(), st.re[live].tolist()
                o_ids: list[str | None] = [f"o{v}" for v in oids[live].tolist()]
                reg = op.register
                if al:
                    o_le = st.out_le[st.reach[live]].tolist()
                    o_re = st.out_re[st.reach[live]].tolist()
                    for args in zip(id_list, r_le, r_re, o_ids, o_le, o_re, strict=True):
                        reg(*args)
                else:
                    if st.keep is not None:  # a filtered-out insert is registered without an output id
                        o_ids = [o if kept else None for o, kept in zip(o_ids, st.keep[live].tolist(), strict=True)]
                    for args in zip(id_list, r_le, r_re, o_ids, strict=True):
                        reg(*args)
        prev_ids = oids if st.keep is None else oids[st.keep]
        last_oids = prev_ids
    # the output: the inserts that passed every step, and the CTIs the last step passed, in input order
    last = steps[-1]
    pos = ins_rows[out_rows]
    empty = np.zeros(0, np.int64)
    out_le = last.out_le[out_rows] if len(out_rows) else empty
    out_re = last.out_re[out_rows] if len(out_rows) else empty
    fields = list(payload.items())
    cti_pos = cti_rows[last.advancing].tolist()
    cti_texts = [cti_line(t) for t in last.out_cti[last.advancing].tolist()]

    def make() -> EncodedLines:  # (every value it reads is fixed by now: arrays no step changes)
        return merge_lines(pos, insert_lines(last_oids, out_le, out_re, fields), cti_pos, cti_texts)

    count = len(pos) + len(cti_pos)
    stats.elements_out += count
    return DeferredLines(count, make) if defer else make()
