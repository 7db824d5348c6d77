"""The column-wise path of `udm.host.engine.gate.InputGate.process`: a whole batch through the rules at once.

It takes a batch whose outcome the columns decide: inserts whose ids are proved new (`span_ids.ids_new`),
CTIs, and retractions with ids different from each other. A retraction names an insert earlier in the same
batch (matched by id, column-wise) or an event live before it (looked up in the gate's `LiveEvents`); either
way its target is known before the batch runs, and no rule of one row depends on another row's outcome
except through the CTI in force (`rules.cti_before`) and the target's lifetime, which only that one
retraction changes. Anything else (ids that repeat, a retraction chain inside one batch, rows after the end
of input, ``max_memory_time``) makes `columns` return None, and the row path (`gate._Rows`) decides: the
two give the same result (tests/test_engine_gate.py holds them to it).

Why: a retraction used to send its whole batch down the row path, ~6x the cost of an insert-only batch.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.io.arrow_numpy import arrow_of
from udm.host.io.batch import KIND_BAD, KIND_CTI, KIND_INSERT, KIND_RETRACT, ElementBatch

from .batch import CTI, INSERT, RETRACT, Batch
from .context import Context
from .dead_letters import RefusedRows
from .live import LiveEvents
from .payload import Payload
from .payload_merge import patched
from .rules import (
    BAD_LIFETIME,
    CTI_VIOLATION,
    I64_MIN,
    INF,
    MALFORMED,
    MISMATCH,
    UNKNOWN_ID,
    FieldCheck,
    cti_before,
    cti_reason,
    insert_lifetime_bad,
    insert_lifetime_reason,
    mismatch_reason,
    reach_batch,
    retract_lifetime_bad,
    retract_lifetime_reason,
    sync_times,
    unknown_id_reason,
)
from .span_ids import ids_distinct, ids_new

__all__ = ["columns"]

_I64 = np.int64


class InputGate(Protocol):
    """What this path reads and moves of `udm.host.engine.gate.InputGate` (which imports this module)."""

    name: str
    ctx: Context
    live: LiveEvents
    check: FieldCheck | None
    max_memory_time: int
    moves_t: bool
    cti: int
    effective: int
    max_le: int
    ended: bool

    def set_cti(self, t: int) -> None: ...

    def reject(self, line: int, category: str, reason: str, element: dict[str, Any] | None) -> None: ...


# why a row is refused (0: accepted; `_BAD`: a row the reader could not read)
_OK, _LIFETIME, _FIELDS, _LATE, _UNKNOWN, _MISMATCH, _BAD = 0, 1, 2, 3, 4, 5, -1


def columns(gate: InputGate, raw: ElementBatch) -> Batch | None:
    """The batch validated column-wise, or None (nothing done) when only the row path can decide."""
    if gate.max_memory_time < INF:
        return None
    codes = raw.kind_codes()
    le = raw.column("le")
    re = raw.column("re")
    t = raw.column("t")
    is_cti = codes == KIND_CTI
    if is_cti.any() and bool((t[is_cti][:-1] >= INF).any() if is_cti[-1] else (t[is_cti] >= INF).any()):
        return None  # rows after the end of input: refused in place by the row path
    ins = np.flatnonzero(codes == KIND_INSERT)
    ret = np.flatnonzero(codes == KIND_RETRACT)
    bad_rows = np.flatnonzero(codes == KIND_BAD)
    payload = _payload(raw)
    if payload is None:
        return None
    cb = cti_before(is_cti, t, gate.effective)
    reason = np.zeros(len(ins), dtype=np.int8)
    ile, ire = le[ins], re[ins]
    reason[insert_lifetime_bad(ile, ire)] = _LIFETIME
    if gate.check is not None:
        fb = gate.check.bad_rows(payload, ins)
        if fb is not None:
            reason[(reason == _OK) & fb] = _FIELDS
    cand = ins[reason == _OK]
    ids = raw.table.column("id")
    ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if ids.null_count and ((len(cand) and ids.take(arrow_of(cand)).null_count)
                           or (len(ret) and ids.take(arrow_of(ret)).null_count)):
        return None
    if not ids_new(ids, cand, gate.live.held_ids()):
        return None  # an id repeats or is live: order decides (`_Rows`)
    if len(ret) and not ids_distinct(ids, ret):
        return None  # a retraction chain: each link depends on the one before
    icb = cb[ins]
    late = (reason == _OK) & (ile < icb)
    adjusted = None
    if late.any():
        if gate.ctx.on_violation == "adjust":
            adj = late & (ire > icb)
            reason[late & ~adj] = _LATE
            if adj.any():
                adjusted = adj
        else:
            reason[late] = _LATE
    ok = reason == _OK
    good = ins[ok]
    new_le = ile[ok]
    ole = None
    if adjusted is not None:
        ole = new_le.copy()
        new_le = np.where(adjusted[ok], icb[ok], new_le)
    new_re = ire[ok]
    first_eid = gate.live.next_eid
    rt = _Retractions(gate, raw, ids, ret, cb, good, new_le, new_le if ole is None else ole, new_re, first_eid) \
        if len(ret) else None
    # CTIs that advance, in row order
    cti_rows = np.flatnonzero(is_cti)
    adv = cti_rows[:0]
    if len(cti_rows):
        ct = t[cti_rows]
        prev = np.maximum.accumulate(np.concatenate(([max(gate.cti, I64_MIN)], ct[:-1])))
        adv = cti_rows[ct > prev]
        if gate.cti > I64_MIN:
            adv = adv[t[adv] > gate.cti]
    refused = rt is not None and bool(rt.reason.any())
    if len(bad_rows) or not ok.all() or refused:
        _dead_letters(gate, raw, payload, ins, reason, icb, bad_rows, rt)
    # the live registry: the batch's inserts (ends as its retractions left them), then the older events
    # its retractions changed
    live_re, gone = (new_re, None) if rt is None else rt.final_ends(new_re)
    eid = gate.live.add_chunk(ids, new_le, ole, live_re, payload, gone=gone, rows=good)
    if rt is not None:
        rt.update_older()
    if gate.moves_t:
        if len(good):
            gate.ctx.reached = reach_batch(gate.ctx.reached, new_le, new_re)
        if rt is not None:
            gate.ctx.reached = rt.reach(gate.ctx.reached)
    if len(good):
        m = int(new_le.max())
        if m > gate.max_le:
            gate.max_le = m
    if len(adv):
        last = int(t[adv[-1]])
        if gate.moves_t:
            gate.ctx.reached = reach_batch(gate.ctx.reached, t[adv])
        gate.set_cti(last)
        if last >= INF:
            gate.ended = True
    if not len(adv) and rt is None:  # (inserts only: the output is the accepted rows as they are)
        return Batch(np.zeros(len(good), dtype=np.int8), eid, new_le, new_re, new_re, raw.lines[good],
                     payload.take(good), _take(ids, good))
    return _output(raw, ids, payload, t, good, eid, new_le, new_re, adv, rt)


def _output(raw: ElementBatch, ids: pa.Array, payload: Payload, t: np.ndarray, good: np.ndarray, eid: np.ndarray,
            new_le: np.ndarray, new_re: np.ndarray, adv: np.ndarray, rt: _Retractions | None) -> Batch:
    """The output rows (accepted inserts, advancing CTIs, retractions that change something) in row order."""
    n = len(raw)
    kind = np.full(n, CTI, dtype=np.int8)
    oid = np.zeros(n, dtype=_I64)
    ole = t.copy()
    ore = ole.copy()
    orn = ole.copy()
    psrc = np.arange(n, dtype=_I64)  # the row whose payload each output row carries
    kind[good] = INSERT
    oid[good] = eid
    ole[good] = new_le
    ore[good] = new_re
    orn[good] = new_re
    # (the output rows are distinct rows of kinds apart: marked, they come out in row order with no sort)
    keep = np.zeros(n, dtype=bool)
    keep[good] = True
    keep[adv] = True
    if rt is not None:
        r = rt.out_rows
        kind[r] = RETRACT
        oid[r] = rt.out_eid
        ole[r] = rt.out_le
        ore[r] = rt.out_re
        orn[r] = rt.out_rn
        psrc[r] = rt.out_psrc
        keep[r] = True
    rows = np.flatnonzero(keep)
    out_payload = payload.take(psrc[rows])
    if rt is not None and rt.older_payloads:
        at = np.searchsorted(rows, np.array(list(rt.older_payloads), dtype=_I64))
        out_payload = patched(out_payload, at, list(rt.older_payloads.values()))
    return Batch(kind[rows], oid[rows], ole[rows], ore[rows], orn[rows], raw.lines[rows], out_payload,
                 _take(ids, rows))


def _take(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    """``arr``'s values at ``rows`` (ascending and distinct: all of them is ``arr`` itself, no copy)."""
    return arr if len(rows) == len(arr) else arr.take(arrow_of(rows, np.int64))


class _Retractions:
    """A batch's retractions (distinct ids) through the rules, column-wise: each one's target (an insert of
    the batch above it, or an older live event), its reason when refused, and what it outputs."""

    def __init__(self, gate: InputGate, raw: ElementBatch, ids: pa.Array, ret: np.ndarray, cb: np.ndarray,
                 good: np.ndarray, good_le: np.ndarray, good_ole: np.ndarray, good_re: np.ndarray,
                 first_eid: int) -> None:
        self.gate = gate
        self.ret = ret
        le, re, rn = raw.column("le")[ret], raw.column("re")[ret], raw.column("re_new")[ret]
        self.le, self.re, self.rn = le, re, rn
        rcb = cb[ret]
        self.cb = rcb
        m = len(ret)
        reason = np.zeros(m, dtype=np.int8)
        reason[retract_lifetime_bad(le, re, rn)] = _LIFETIME
        reason[(reason == _OK) & (sync_times(np.ones(m, dtype=np.int8), le, re, rn) < rcb)] = _LATE
        # targets: an accepted insert of this batch above the retraction, else an older live event
        rids = ids.take(pa.array(ret, pa.int64()))
        j = np.full(m, -1, dtype=_I64)
        if len(good):
            found = pc.index_in(rids, value_set=ids.take(pa.array(good, pa.int64())))
            j = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(_I64)
            j[(j >= 0) & (good[np.maximum(j, 0)] > ret)] = -1  # (inserted below the retraction: not yet live)
        inb = j >= 0
        jj = np.maximum(j, 0)
        t_le = np.where(inb, good_le[jj] if len(good) else 0, 0)
        t_ole = np.where(inb, good_ole[jj] if len(good) else 0, 0)
        t_re = np.where(inb, good_re[jj] if len(good) else 0, 0)
        t_eid = np.where(inb, first_eid + jj, 0)
        self.j = j
        #: older live events this batch retracts: retraction index -> (id, record)
        self.older: dict[int, tuple[str, Any]] = {}
        look = np.flatnonzero(~inb & (reason == _OK))
        if len(look):
            names = rids.take(pa.array(look, pa.int64())).to_pylist()
            live = gate.live
            for k, name in zip(look.tolist(), names, strict=True):
                rec = live.get(name)
                if rec is None:
                    continue
                self.older[k] = (name, rec)
                t_le[k], t_ole[k], t_re[k], t_eid[k] = rec.le, rec.ole, rec.re, rec.eid
        known = inb | np.isin(np.arange(m), np.fromiter(self.older, dtype=_I64, count=len(self.older)))
        known &= t_re >= rcb  # (a CTI in force forgot events ending before it: semantics-notes 63)
        reason[(reason == _OK) & ~known] = _UNKNOWN
        reason[(reason == _OK) & ((t_ole != le) | (t_re != re))] = _MISMATCH
        self.reason = reason
        self.t_ole, self.t_re = t_ole, t_re
        acc = reason == _OK
        self.accepted = acc
        change = acc & (rn != re)
        self.delete = change & (rn <= t_le)
        self.change = change
        out = np.flatnonzero(change)
        self.out_rows = ret[out]
        self.out_eid = t_eid[out]
        self.out_le = t_le[out]
        self.out_re = re[out]
        self.out_rn = np.where(self.delete[out], t_le[out], rn[out])
        self.out_psrc = np.where(inb[out], good[jj[out]] if len(good) else 0, ret[out])
        #: output row -> payload of an older event it retracts
        self.older_payloads: dict[int, Any] = {int(ret[k]): rec.payload for k, (_, rec) in self.older.items()
                                               if change[k]}

    def final_ends(self, good_re: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The batch's inserts' ends after its retractions, and which of them the retractions deleted."""
        sel = self.change & (self.j >= 0)
        if not sel.any():
            return good_re, None
        live_re = good_re.copy()
        live_re[self.j[sel]] = self.rn[sel]
        gone = np.zeros(len(good_re), dtype=bool)
        gone[self.j[self.delete & (self.j >= 0)]] = True
        return live_re, gone

    def update_older(self) -> None:
        live = self.gate.live
        for k, (name, rec) in self.older.items():
            if not self.change[k]:
                continue
            if self.delete[k]:
                live.remove(name)
            else:
                rec.re = int(self.rn[k])
                live.moved(name, rec)

    def reach(self, T: int) -> int:
        a = self.accepted
        return reach_batch(T, self.le[a], self.re[a], self.rn[a]) if a.any() else T


def _payload(raw: ElementBatch) -> Payload | None:
    """The batch's payloads (None when one is not a JSON object: the row path refuses it in place)."""
    col = raw.table.column("payload")
    if raw.payload_is_struct:
        return Payload.from_struct(col)
    pls = raw.payloads()
    codes = raw.kind_codes()
    for p, k in zip(pls, codes.tolist(), strict=True):
        if k == KIND_INSERT and p is not None and type(p) is not dict:
            return None
    return Payload.from_rows([{} if p is None else p for p in pls])


def _dead_letters(gate: InputGate, raw: ElementBatch, payload: Payload, ins: np.ndarray, reason: np.ndarray,
                  icb: np.ndarray, bad_rows: np.ndarray, rt: _Retractions | None) -> None:
    """The refused rows of a column-wise batch, in row order, with the row path's reasons, as one block
    (`RefusedRows`: its records are made only for a caller that iterates them, its lines from columns)."""
    sel = reason > 0
    parts = [(ins[sel], reason[sel], icb[sel], np.full(int(sel.sum()), -1, dtype=_I64)),
             (bad_rows, np.full(len(bad_rows), _BAD, dtype=np.int8), np.zeros(len(bad_rows), _I64),
              np.full(len(bad_rows), -1, dtype=_I64))]
    if rt is not None:
        rs = np.flatnonzero(rt.reason > 0)
        parts.append((rt.ret[rs], rt.reason[rs], rt.cb[rs], rs.astype(_I64)))
    rows, code, cb, x = (np.concatenate(c) for c in zip(*parts, strict=True))
    order = np.argsort(rows, kind="stable")
    rows, code, cb, x = rows[order], code[order], cb[order], x[order]
    texts = np.empty(len(rows), dtype=object)
    cats = np.empty(len(rows), dtype=object)

    def put(where: np.ndarray, cat: str, make: Any) -> None:
        at = np.flatnonzero(where)
        if len(at):
            texts[at] = list(make(at))
            cats[at] = cat

    le, re, rn = raw.column("le")[rows], raw.column("re")[rows], raw.column("re_new")[rows]
    is_ret = x >= 0
    is_ins = ~is_ret & (code != _BAD)
    errors = raw.table.column("error")
    put(code == _BAD, MALFORMED, lambda at: [errors[int(r)].as_py() or "bad element" for r in rows[at].tolist()])
    put(is_ins & (code == _LIFETIME), BAD_LIFETIME,
        lambda at: map(insert_lifetime_reason, le[at].tolist(), re[at].tolist()))
    put(is_ins & (code == _LATE), CTI_VIOLATION, lambda at: map(cti_reason, le[at].tolist(), cb[at].tolist()))
    fields = np.flatnonzero(is_ins & (code == _FIELDS))
    if len(fields):
        assert gate.check is not None
        cats[fields], texts[fields] = gate.check.reasons(payload, rows[fields])
    put(is_ret & (code == _LIFETIME), BAD_LIFETIME,
        lambda at: map(retract_lifetime_reason, le[at].tolist(), re[at].tolist(), rn[at].tolist()))
    put(is_ret & (code == _LATE), CTI_VIOLATION,
        lambda at: map(cti_reason, np.minimum(re[at], rn[at]).tolist(), cb[at].tolist()))
    ids = raw.table.column("id")
    put(is_ret & (code == _UNKNOWN), UNKNOWN_ID,
        lambda at: map(unknown_id_reason, ids.take(pa.array(rows[at])).to_pylist()))
    if rt is not None:
        put(is_ret & (code == _MISMATCH), MISMATCH, lambda at: map(
            mismatch_reason, ids.take(pa.array(rows[at])).to_pylist(), le[at].tolist(), re[at].tolist(),
            rt.t_ole[x[at]].tolist(), rt.t_re[x[at]].tolist()))
    block = RefusedRows(raw, rows, texts, cats, gate.name)
    if gate.ctx.on_violation == "error":  # (the first refused row stops the run, as on the row path)
        first = block.records()[0]
        gate.reject(-1 if first.line is None else first.line, cats[0], first.reason, first.element)
    gate.ctx.dead_rows(block)
