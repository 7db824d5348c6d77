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

from udm.host.io.encode import Const, EncodedLines, cti_line, insert_lines, merge_lines

from .common import INF, NEG
from .ops.span import FilterStep, MapStep, ProjectStep

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
    project steps, no repair stage?"""
    if not ENABLED or not runner.linear or runner.repair or runner.ctx.multi_input or runner.derived_inputs:
        return False
    ops = runner.ops
    if not ops or not ops[0].reads_input:
        return False
    for op in ops:
        if type(op) not in (FilterStep, MapStep, ProjectStep):
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
    """`ProjectStep.apply` on columns: the same dict operations, in the same order."""
    if op.keep is not None:
        payload = {f: payload[f] for f in op.keep}
    if op.drop:
        payload = {k: v for k, v in payload.items() if k not in op.drop}
    if op.rename:
        rename = op.rename
        moved = {rename[k]: v for k, v in payload.items() if k in rename}
        payload = {k: v for k, v in payload.items() if k not in rename and k not in moved}
        payload.update(moved)
    if op.set_fields:
        payload = {**payload, **{k: Const(v) for k, v in op.set_fields.items()}}
    return payload


def _take(payload: dict[str, pa.Array | Const], keep: np.ndarray) -> dict[str, pa.Array | Const]:
    mask = pa.array(keep)
    return {k: v if isinstance(v, Const) else v.filter(mask) for k, v in payload.items()}


def run_columnar(runner: Any, batch: Any) -> EncodedLines | None:
    """The batch through the runner's span chain (`chain_ok`), its output as encoded lines; None when
    the batch needs the row path (then nothing has changed)."""
    try:
        plan = _plan(runner, batch)
    except _Fallback:
        return None
    return _commit(runner, batch, *plan)


def _plan(runner: Any, batch: Any) -> tuple[Any, ...]:
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
        if op.skip_below != NEG or op.effective_cti != op.input_cti or op.input_cti != first.input_cti:
            raise _Fallback
    c0 = max(first.input_cti, int(_I64_MIN))  # (NEG lies below int64)
    ins_rows = np.flatnonzero(is_ins)
    cti_rows = np.flatnonzero(is_cti)
    t_all = batch.column("t")
    cti_t = t_all[cti_rows]
    if len(cti_t) and cti_t.max() >= INF:
        raise _Fallback  # the end of input
    # CTIs that advance (a CTI not above the one in force is dropped) and the CTI in force at each row
    running = np.maximum.accumulate(np.concatenate(([c0], cti_t))) if len(cti_t) else np.array([c0])
    advancing = cti_t > running[:-1]
    c_final = int(running[-1])
    m = len(ins_rows)
    payload: dict[str, pa.Array | Const] = {}
    le = re = ids = None
    if m:
        le = batch.column("le")[ins_rows]
        re = batch.column("re")[ins_rows]
        if not (np.all(le < re) and np.all(le < INF)):
            raise _Fallback
        before = np.maximum.accumulate(np.where(is_cti, t_all, _I64_MIN))[ins_rows]
        if np.any(le < np.maximum(before, c0)):
            raise _Fallback  # a CTI violation: a dead letter (or an adjusted insert)
        tab = batch.table
        sel = None if m == n else pa.array(ins_rows)
        ids = tab.column("id").combine_chunks()
        pcol = tab.column("payload").combine_chunks()
        if sel is not None:
            ids = ids.take(sel)
            pcol = pcol.take(sel)
        if not pa.types.is_string(ids.type) or ids.null_count:
            raise _Fallback
        if not pa.types.is_struct(pcol.type) or pcol.null_count:
            raise _Fallback  # an insert without a payload object
        if pc.count_distinct(ids).as_py() != m:
            raise _Fallback  # an id used twice in the batch
        if first.live and pc.any(pc.is_in(ids, value_set=pa.array(list(first.live), pa.string()))).as_py():
            raise _Fallback  # a duplicate live id
        typ = pcol.type
        payload = {typ.field(k).name: pcol.field(k) for k in range(typ.num_fields)}
        if not all(_plain(col.type) and not col.null_count for col in payload.values()):
            raise _Fallback  # (a table's timestamps, decimals, nulls, ...: the row path's JSON)
    # the steps, one after the other, over the inserts that reach each
    reach = np.arange(m)  # insert index (into ins_rows) of the rows reaching the current step
    steps = []
    for op in ops:
        k = len(reach)
        keep: np.ndarray | None = None
        if k:
            _check_types(op, payload)
            if isinstance(op, FilterStep):
                res = _call_batch(op, payload, k)
                keep = res.astype(bool) if res.dtype.kind != "b" else res
                if not keep.all():
                    payload = _take(payload, keep)
            elif isinstance(op, MapStep):
                res = _call_batch(op, payload, k)
                payload = {**payload, op.as_: pa.array(res)}
            else:
                payload = _project(op, payload)
        steps.append((op, reach, keep))
        if keep is not None:
            reach = reach[keep]
    return (ins_rows, cti_rows, cti_t, advancing, c_final, le, re, ids, payload, steps, reach)


def _commit(runner: Any, batch: Any, ins_rows: np.ndarray, cti_rows: np.ndarray, cti_t: np.ndarray,
            advancing: np.ndarray, c_final: int, le: Any, re: Any, ids: Any, payload: Any,
            steps: list[Any], out_rows: np.ndarray) -> EncodedLines:
    """Apply the batch's effects on the steps and the context, as the row path leaves them."""
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
    ts = cti_t[advancing].tolist()
    prev_ids: Any = ids  # the ids the current step's input carries (strings, or the previous step's oids)
    last_oids = np.zeros(0, dtype=np.int64)
    for op, reach, keep in steps:
        for t in ts:
            op.pass_cti(t)
        k = len(reach)
        base = op.oid
        op.oid += k
        oids = np.arange(base + 1, base + 1 + k, dtype=np.int64)
        if k:
            r_re = re[reach]
            live = np.flatnonzero(r_re >= c_final)  # open after the batch's last CTI: registered
            if len(live):
                r_le = le[reach]
                id_list = (prev_ids.take(pa.array(live)).to_pylist() if isinstance(prev_ids, pa.Array)
                           else [f"o{v}" for v in prev_ids[live].tolist()])
                kept = keep[live].tolist() if keep is not None else None
                register = op.register
                for j, (i, id_) in enumerate(zip(live.tolist(), id_list, strict=True)):
                    register(id_, int(r_le[i]), int(r_re[i]), f"o{oids[i]}" if kept is None or kept[j] else None)
        prev_ids = oids if keep is None else oids[keep]
        last_oids = prev_ids
    # the output: the inserts that passed every step, and the advancing CTIs, in input order
    pos = ins_rows[out_rows]
    lines_arr = insert_lines(last_oids, le[out_rows] if len(out_rows) else np.zeros(0, np.int64),
                             re[out_rows] if len(out_rows) else np.zeros(0, np.int64), list(payload.items()))
    enc = merge_lines(pos, lines_arr, cti_rows[advancing].tolist(), [cti_line(t) for t in ts])
    stats.elements_out += enc.count
    return enc
