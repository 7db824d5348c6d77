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
from typing import Any, Protocol

import numpy as np

from udm.host.errors import BadElement
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from .columnar import Cols
from .common import INF
from .context import Context
from .operator import Operator
from .ops.span import NO_RESULT as _NO_PRE
from .ops.span import precompute


class BatchHost(Protocol):
    """What the batch driver needs of the runner that calls it (`BatchHost` is one): the operators, the
    shared context, and the runner's own steps for one element."""

    ops: list[Operator]
    ctx: Context
    finished: bool

    def push(self, k: int, els: list[Element]) -> list[Element]: ...

    def flush(self) -> list[Element]: ...

    def reject_bad(self, err: BadElement, line: int | None) -> None: ...

    def after_end(self, el: Any) -> None: ...

    def end_input(self, input_name: str) -> None: ...

__all__ = ["MIN_RUN", "BatchHost", "plan", "run_batch"]

#: shortest stretch of insert rows worth vectorizing
MIN_RUN = 48

_INSERT, _RETRACT, _CTI = 0, 1, 2
_I64_MIN = -(2**63)


def plan(runner: BatchHost) -> Any:
    """The step that takes vectorized inserts, or None."""
    st = runner.ops[0]
    fn = getattr(st, "vector_ok", None)
    return st if fn is not None and fn() else None



def run_batch(runner: BatchHost, batch: Any) -> list[Element]:
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
    first = runner.ops[0]
    pre = precompute(first, cols, n) if not runner.finished and n >= MIN_RUN else None
    try:
        _rows(runner, cols, codes_l, lines, todo, out, pre)
    finally:
        if pre is not None:
            first.pre = _NO_PRE  # type: ignore[attr-defined]
    out.extend(runner.flush())
    return out


def _rows(runner: BatchHost, cols: Cols, codes: list[int], lines: list[int], todo: Any, out: list[Element],
          pre: tuple[list[Any], np.ndarray | None] | None) -> None:
    """The general path over rows ``todo``: inserts inline (time columns read once per batch, no element
    object unless the first step needs one), everything else through `_row`. With ``pre`` (a filter/map
    whose UDF has a batch form: its results for the whole batch), each insert's result stands in for the
    step's per-row call (rows lacking an argument still call ``compute``)."""
    ctx = runner.ctx
    stats = ctx.stats
    first = runner.ops[0]
    ins = first.ins
    push = runner.push
    le_l: list[int] = []
    re_l: list[int] = []
    started = False
    id_at = cols.id_at  # (one by one for the first few rows, then whole columns: `Cols.id_at`)
    payload_at = cols.payload_at
    vals, skip = pre if pre is not None else (None, None)
    skip_l = skip.tolist() if skip is not None else None
    for i in todo:
        if codes[i] != _INSERT or runner.finished:
            r = _row(runner, cols, codes, lines, i)
            if r:
                out.extend(r)
            continue
        if not started:
            started = True
            le_l = cols.ints("le")
            re_l = cols.ints("re")
        line = lines[i]
        ctx.line = line if line >= 0 else None
        stats.elements_in += 1
        p = payload_at(i)
        if vals is not None:
            first.pre = vals[i] if skip_l is None or not skip_l[i] else _NO_PRE  # type: ignore[attr-defined]
        got = ins(id_at(i), le_l[i], re_l[i], {} if p is None else p)
        if vals is not None:
            first.pre = _NO_PRE  # type: ignore[attr-defined]
        if got:
            res = push(0, got)
            if res:
                out.extend(res)


def _row(runner: BatchHost, cols: Cols, codes: list[int], lines: list[int], i: int,
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
    first = runner.ops[0]
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
