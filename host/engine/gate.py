"""`InputGate`: where one query input enters the engine. It validates the input (SEMANTICS §1, with that
input's ``on_violation``) and hands the operators after it a `Batch` of valid elements only.

Every input has one. It numbers the events it accepts (engine ids), keeps the live ones (`LiveEvents`:
what retractions may name, and the payload a retraction carries on), tracks the input's CTI and T
(semantics-notes 2), and dead-letters everything else with the reason `rules` gives. When one step reads
the input and nothing else does, the gate also checks the payload fields that step reads (semantics-notes
3, 17) and applies its ``max_memory_time`` (note 8): such an element is refused as an input element is,
so its dead letter reads as it always did, and its later retractions name an unknown id.

External CTIs (SEMANTICS §11) come first: the input's `EctiLedger` takes its ``ecti`` elements, counts its
data elements and puts each effective CTI right after the element that completes it; a batch that holds no
ECTI and touches no open range only has its sync times noted (`_ecti_free`).

A batch is validated column-wise (`gate_columns.columns`) when its outcome cannot depend on row order
beyond what the columns show: inserts whose ids are proved new (`span_ids.ids_new`), CTIs, retractions of
distinct ids (each names an insert above it in the batch or an older live event), no ``max_memory_time``.
Any other batch (ids that repeat, a retraction chain, rows after the end of input, Finalize) goes row by
row through the same rules (`_Rows`); the two give the same result (tests/test_engine_gate.py holds them
to it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from udm.host.errors import BadElement, ViolationError
from udm.host.io.batch import KIND_CTI, KIND_ECTI, KIND_INSERT, KIND_RETRACT, ElementBatch
from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json

from .batch import CTI, INSERT, RETRACT, Batch
from .common import DeadLetter
from .context import Context
from .ecti import EctiLedger
from .feedback import FastForward
from .gate_columns import columns
from .live import LiveEvents
from .repair import ChainRepair
from .rules import (
    BAD_LIFETIME,
    CTI_VIOLATION,
    DUPLICATE_ID,
    ECTI,
    INF,
    MALFORMED,
    MISMATCH,
    NEG,
    UNKNOWN_ID,
    FieldCheck,
    cti_reason,
    effective_cti,
    insert_lifetime_bad,
    insert_lifetime_reason,
    mismatch_reason,
    not_object_reason,
    reach,
    retract_lifetime_bad,
    retract_lifetime_reason,
    unknown_id_reason,
)

__all__ = ["InputGate"]

_I64 = np.int64
_ENDED = "CTI violation: input already ended (cti inf)"


class InputGate:
    """Validates one query input; see the module docstring."""

    def __init__(self, name: str, ctx: Context, *, moves_t: bool = True, check: FieldCheck | None = None,
                 max_memory_time: int = INF, repair: int | None = None,
                 policy: Callable[[], str] | None = None) -> None:
        self.name = name
        self.ctx = ctx
        #: a derived input (a Spark stage's exchange stream) is validated but does not move T
        self.moves_t = moves_t
        #: the field checks of the one step that reads this input, if it is the only reader
        self.check = check if check is not None and not check.empty else None
        self.max_memory_time = max_memory_time
        self.live = LiveEvents()
        #: the latest CTI of the input, and the CTI validity is judged against (Finalize may raise it)
        self.cti = NEG
        self.effective = NEG
        #: the largest LE of an accepted insert (the Finalize watermark's other half)
        self.max_le = NEG
        #: the input sent cti(INF): every later element is refused
        self.ended = False
        self.repair = ChainRepair(repair) if repair is not None else None
        #: lmerge feedback when the input feeds one lmerge port directly (semantics-notes 25)
        self.feedback = FastForward()
        #: external CTIs (SEMANTICS §11), in front of everything else
        self.ledger = EctiLedger()

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("ctx", None)
        return d

    def attach(self, ctx: Context) -> None:
        self.ctx = ctx

    def fast_forward(self, t: int) -> None:
        self.feedback.signal(t)

    def forget_at(self) -> int:
        """The earliest CTI at which this gate forgets a live event (INF: none ends)."""
        e = self.live.min_end()
        return e + 1 if e < INF else INF

    # -- dead letters ---------------------------------------------------------------------------------
    def reject(self, line: int, category: str, reason: str, element: dict[str, Any] | None) -> None:
        ctx = self.ctx
        ln = line if line >= 0 else None
        if ctx.on_violation == "error":
            where = f" (line {ln})" if ln is not None else ""
            src = f" of input {self.name!r}" if ctx.multi_input else ""
            if element is None:
                raise ViolationError(f"invalid element{where}{src}: {reason}")
            raise ViolationError(f"invalid element{where}: {reason}: {element}")
        ctx.dead(DeadLetter(ln, reason, element, input=self.name), category)

    # -- T ----------------------------------------------------------------------------------------------
    def _reach(self, *times: int) -> None:
        if self.moves_t:
            self.ctx.reached = reach(self.ctx.reached, *times)

    def set_cti(self, t: int) -> None:
        self.cti = t
        if t > self.effective:
            self.effective = t
        if self.max_memory_time < INF:
            wm = max(self.cti, self.max_le)
            self.effective = max(self.effective, effective_cti(t, wm, self.max_memory_time))
        self.live.close(self.effective)

    def _saw_le(self, le: int) -> None:
        if le > self.max_le:
            self.max_le = le
            if self.max_memory_time < INF:
                e = effective_cti(self.cti, max(self.cti, le), self.max_memory_time)
                if e > self.effective:
                    self.effective = e
                    self.live.close(e)

    # -- entry ------------------------------------------------------------------------------------------
    def process(self, raw: ElementBatch) -> Batch:
        """The valid elements of ``raw`` (one batch of this input), in order; the rest dead-lettered."""
        n = len(raw)
        if n == 0:
            return Batch.empty()
        if not self._ecti_free(raw):
            return self.process_elements(raw.to_elements())
        out = None
        if self.repair is not None:
            out = self._repaired(raw)
        elif not self.ended:
            out = columns(self, raw)
        if out is None:
            out = _Rows(self, raw, None).run()
        if self.feedback.active:
            out = self.feedback.apply(out)
        return out

    def _ecti_free(self, raw: ElementBatch) -> bool:
        """No ECTI in ``raw`` and none of its elements counts toward an open ECTI range: the ledger only notes
        its data elements' sync times (`EctiLedger.note`), and the batch takes the columnar path."""
        led = self.ledger
        if led.cti >= INF:
            return True
        codes = raw.kind_codes()
        if (codes == KIND_ECTI).any():
            return False
        le, re = raw.column("le"), raw.column("re")
        ins = codes == KIND_INSERT
        is_cti = codes == KIND_CTI
        has_cti = bool(is_cti.any())
        if (codes == KIND_RETRACT).any():
            rn = raw.column("re_new")
            data = (ins & ~insert_lifetime_bad(le, re)) | ((codes == KIND_RETRACT) & ~retract_lifetime_bad(le, re, rn))
            sync = raw.sync_times()[data]
        else:
            bad = insert_lifetime_bad(le, re)
            sync = le if not bad.any() and ins.all() else le[ins & ~bad]
        if not led.unaffected(sync, has_cti):
            return False
        led.note(sync, int(raw.column("t")[is_cti].max()) if has_cti else NEG)
        return True

    def process_elements(self, items: list[tuple[int | None, Any]]) -> Batch:
        """`process` for ``(line, element)`` pairs already decoded (a few elements of one input, read side
        by side with other inputs, or one at a time): the row path, with no columnar batch built."""
        items = self.ledger.items(items, self.reject)
        if self.repair is not None:
            return self._repaired_items(items)
        out = _Rows(self, None, items).run()
        if self.feedback.active:
            out = self.feedback.apply(out)
        return out

    def _repaired(self, raw: ElementBatch) -> Batch:
        return self._repaired_items(raw.to_elements())  # (the ledger has noted ``raw``: `_ecti_free`)

    def _repaired_items(self, items: list[tuple[int | None, Any]]) -> Batch:
        """Retraction-chain repair (semantics-notes 20) in front of validation: element by element."""
        rep = self.repair
        assert rep is not None
        parts: list[Batch] = []
        for line, el in items:
            got = rep.push(el, line)
            if got:
                parts.append(_Rows(self, None, got).run())
            for dl, category in rep.take_dead():
                if self.ctx.on_violation == "error":
                    raise ViolationError(f"invalid element (line {dl.line}): {dl.reason}: {dl.element}")
                dl.input = self.name
                self.ctx.dead(dl, category)
        return Batch.concat(parts)


class _Rows:
    """The row-by-row path of `InputGate.process`: each element through the rules in order."""

    def __init__(self, gate: InputGate, raw: ElementBatch | None, items: list[tuple[int | None, Any]] | None
                 ) -> None:
        self.gate = gate
        self.items = items if items is not None else raw.to_elements()  # type: ignore[union-attr]
        self.kind: list[int] = []
        self.id: list[int] = []
        self.le: list[int] = []
        self.re: list[int] = []
        self.rn: list[int] = []
        self.line: list[int] = []
        self.payloads: list[Any] = []
        self.src: list[str | None] = []

    def _emit(self, kind: int, eid: int, le: int, re: int, rn: int, line: int, payload: Any,
              src: str | None) -> None:
        self.kind.append(kind)
        self.id.append(eid)
        self.le.append(le)
        self.re.append(re)
        self.rn.append(rn)
        self.line.append(line)
        self.payloads.append(payload)
        self.src.append(src)

    def run(self) -> Batch:
        g = self.gate
        for line, el in self.items:
            ln = -1 if line is None else line
            if isinstance(el, BadElement):
                if g.ended:
                    g.reject(ln, CTI_VIOLATION, _ENDED, None)
                else:
                    g.reject(ln, MALFORMED, el.reason,
                              el.raw if isinstance(el.raw, dict) else
                              ({"raw": el.raw} if el.raw is not None else None))
                continue
            if g.ended:
                if not _is_cti(el):
                    g.reject(ln, CTI_VIOLATION, _ENDED, element_to_json(el))
                continue
            if isinstance(el, Insert):
                self._insert(el, ln)
            elif isinstance(el, Retract):
                self._retract(el, ln)
            elif isinstance(el, Cti):
                self._cti(el.t, ln)
            else:  # (an ECTI: the ledger takes every one before the input ends)
                g.reject(ln, ECTI, "an ECTI is not expected here", element_to_json(el))
        n = len(self.kind)
        if n == 0:
            return Batch.empty()
        b = Batch.of(self.kind, self.id, self.le, self.re, self.rn, self.payloads, self.line)
        b.src = self.src
        return b

    def _insert(self, el: Insert, line: int) -> None:
        g = self.gate
        le, re, payload = el.le, el.re, el.payload
        if type(payload) is not dict:
            g.reject(line, MALFORMED, not_object_reason(payload), element_to_json(el))
            return
        if insert_lifetime_bad(le, re):
            g.reject(line, BAD_LIFETIME, insert_lifetime_reason(le, re), element_to_json(el))
            return
        if g.check is not None:
            got = g.check.reason(payload)
            if got is not None:
                g.reject(line, got[0], got[1], element_to_json(el))
                return
        if g.live.contains(el.id):
            g.reject(line, DUPLICATE_ID, f"duplicate live id {el.id!r}", element_to_json(el))
            return
        c = g.effective
        ole = le
        if le < c:
            if g.ctx.on_violation == "adjust" and re > c:
                le = c
            else:
                g.reject(line, CTI_VIOLATION, cti_reason(le, c), element_to_json(el))
                return
        eid = g.live.add(el.id, le, ole, re, payload)
        g._reach(le, re)
        self._emit(INSERT, eid, le, re, re, line, payload, el.id)
        g._saw_le(le)

    def _retract(self, el: Retract, line: int) -> None:
        g = self.gate
        le, re, rn = el.le, el.re, el.re_new
        if retract_lifetime_bad(le, re, rn):
            g.reject(line, BAD_LIFETIME, retract_lifetime_reason(le, re, rn), element_to_json(el))
            return
        sync = re if re < rn else rn
        if sync < g.effective:
            g.reject(line, CTI_VIOLATION, cti_reason(sync, g.effective), element_to_json(el))
            return
        rec = g.live.get(el.id)
        if rec is None:
            g.reject(line, UNKNOWN_ID, unknown_id_reason(el.id), element_to_json(el))
            return
        if rec.ole != le or rec.re != re:
            g.reject(line, MISMATCH, mismatch_reason(el.id, le, re, rec.ole, rec.re), element_to_json(el))
            return
        g._reach(le, re, rn)
        if rn == re:
            return
        if rn <= rec.le:
            rn = rec.le
            g.live.remove(el.id)
        else:
            rec.re = rn
            g.live.moved(el.id, rec)
        self._emit(RETRACT, rec.eid, rec.le, re, rn, line, rec.payload, el.id)

    def _cti(self, t: int, line: int) -> None:
        g = self.gate
        if t <= g.cti:
            return
        g._reach(t)
        g.set_cti(t)
        if t >= INF:
            g.ended = True
        self._emit(CTI, 0, t, t, t, line, {}, None)


def _is_cti(el: Element) -> bool:
    return isinstance(el, Cti)
