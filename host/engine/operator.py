"""The operator interface every step of a query graph implements, with the validation and id registry
they share (SEMANTICS §1).

An operator takes elements on its input ports (`feed` for port 0, `feed_port` for any) and returns the
elements and CTIs they cause; `flush` releases what it buffered; it pickles its state (`snapshot` in the
runner), dropping what `attach` re-binds on restore (the context, the bound UDM).

An operator reading a query input validates it (`check_insert`, `check_retract`, with the input's
``on_violation``) and reports the times it reaches (T, semantics-notes 2). Operators after it get valid
input by construction: only payload fields (semantics-notes 3) and a window's ``max_memory_time`` (note 8)
can still refuse something there.

Ids of events closed by a CTI (``RE < CTI``) are forgotten: such an event is final and can never be
retracted again (its retraction would violate the CTI), so keeping its id would only let state grow.
"""

from __future__ import annotations

import heapq
from typing import Any

from udm.host.errors import ViolationError
from udm.host.input_types import InputType, type_reason
from udm.host.query.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json

from .common import INF, NEG, DeadLetter
from .context import Context

__all__ = [
    "BAD_LIFETIME",
    "CTI_VIOLATION",
    "DUPLICATE_ID",
    "MALFORMED",
    "MISMATCH",
    "MISSING_FIELD",
    "UNKNOWN_ID",
    "Operator",
    "format_time",
]

# dead-letter categories (RunStats.reasons)
CTI_VIOLATION = "cti_violation"
DUPLICATE_ID = "duplicate_id"
UNKNOWN_ID = "unknown_id"
MISMATCH = "lifetime_mismatch"
BAD_LIFETIME = "invalid_lifetime"
MALFORMED = "malformed"
MISSING_FIELD = "missing_field"


def format_time(t: int) -> str:
    """A tick as messages show it (``inf`` for +infinity)."""
    return "inf" if t >= INF else str(t)


class Operator:
    """One step of a query graph: input ports in, elements and CTIs out; validation and the id registry."""

    #: payload fields an insert must carry for this step
    fields: tuple[str, ...] = ()
    #: declared input types of the UDM this step calls: (field, or None for the whole payload, type)
    typed: tuple[tuple[str | None, InputType], ...] = ()
    #: how type reasons name that UDM
    typed_label: str = ""

    #: ports this operator reads (multi-input operators override)
    ports: int = 1
    #: per port, the query input its stream derives from (None when several); set by the runner
    input_names: tuple[str | None, ...] = ()

    def __init__(self, name: str, ctx: Context, reads_input: bool = True) -> None:
        #: the step's name in the query graph (messages name it)
        self.name = name
        #: True when this step reads a query input directly: it then validates that input (SEMANTICS §1)
        #: and reports the times it reaches (T, semantics-notes 2)
        self.reads_input = reads_input
        self.ctx = ctx
        #: live input events by id (what retractions may name)
        self.live: dict[str, Any] = {}
        #: the latest input CTI
        self.input_cti = NEG
        #: the CTI validity is judged against: the input CTI, or later under ``max_memory_time``
        self.effective_cti = NEG
        #: (RE, id) of live events, to forget them once a CTI closes them
        self.end_heap: list[tuple[int, str]] = []
        #: ids of inserts moved by ``adjust``: their original LE, which later retractions quote
        self.adjusted: dict[str, int] = {}

    # pickling: the context and bound UDMs are re-attached by the runner on restore
    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in self._transient():
            d.pop(k, None)
        return d

    def _transient(self) -> tuple[str, ...]:
        return ("ctx",)

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx

    # -- dead letters ----------------------------------------------------------------------------
    def reject(self, el: Element, category: str, reason: str) -> None:
        ctx = self.ctx
        where = "" if self.reads_input else f"step {self.name}: "
        if ctx.on_violation == "error":
            line = f" (line {ctx.line})" if ctx.line is not None else ""
            raise ViolationError(f"invalid element{line}: {where}{reason}: {element_to_json(el)}")
        source = self.input_names[0] if self.input_names else None
        ctx.dead(DeadLetter(ctx.line, where + reason, element_to_json(el), input=source), category)

    # -- validation -------------------------------------------------------------------------------
    def check_insert(self, el: Insert) -> int | None:
        """The (possibly adjusted) LE of a valid insert, or None after dead-lettering it."""
        le, re = el.le, el.re
        if not isinstance(el.payload, dict):
            self.reject(el, MALFORMED, f"payload must be a JSON object, got {type(el.payload).__name__}")
            return None
        if re <= le or le >= INF:
            self.reject(el, BAD_LIFETIME, f"insert needs a finite le < re, got [{format_time(le)}, {format_time(re)})")
            return None
        for f in self.fields:
            if f not in el.payload:
                self.reject(el, MISSING_FIELD, f"missing field {f!r}")
                return None
        for tf, tp in self.typed:
            v = el.payload if tf is None else el.payload[tf]
            if not tp.accepts(v):
                self.reject(el, MALFORMED, type_reason(tf, self.typed_label, tp, v))
                return None
        if el.id in self.live:
            self.reject(el, DUPLICATE_ID, f"duplicate live id {el.id!r}")
            return None
        c = self.effective_cti
        if le < c:
            if self.ctx.on_violation == "adjust" and re > c:
                self.adjusted[el.id] = le
                return c
            self.reject(el, CTI_VIOLATION, f"CTI violation: sync time {le} < CTI {format_time(c)}")
            return None
        return le

    def check_retract(self, el: Retract) -> Any:
        """The live record a valid retraction refers to, or None after dead-lettering it."""
        le, re, rn = el.le, el.re, el.re_new
        if re <= le or rn < le or le >= INF:
            self.reject(el, BAD_LIFETIME, f"retract needs le < re and re_new >= le, got le={format_time(le)}, "
                                          f"re={format_time(re)}, re_new={format_time(rn)}")
            return None
        sync = re if re < rn else rn
        if sync < self.effective_cti:
            self.reject(el, CTI_VIOLATION, f"CTI violation: sync time {sync} < CTI {format_time(self.effective_cti)}")
            return None
        rec = self.live.get(el.id)
        if rec is None:
            self.reject(el, UNKNOWN_ID, f"retraction of unknown id {el.id!r}")
            return None
        ole = self.adjusted.get(el.id, rec.le) if self.adjusted else rec.le
        if ole != le or rec.re != re:
            self.reject(el, MISMATCH, f"retraction of {el.id!r} says [{format_time(le)}, {format_time(re)}) but the "
                                      f"live event is [{format_time(ole)}, {format_time(rec.re)})")
            return None
        return rec

    def note_re(self, re: int, id: str) -> None:
        if re < INF:
            heapq.heappush(self.end_heap, (re, id))

    def pass_cti(self, t: int) -> bool:
        """The CTI step of an operator that holds only its id registry: False for a CTI that does not advance;
        else record it, report it to T, forget closed events (everything at ``cti(INF)``)."""
        if t <= self.input_cti:
            return False
        if self.reads_input:
            self.ctx.seen(t)
        self.input_cti = self.effective_cti = t
        self.forget_closed(t)
        if t >= INF:
            self.live = {}
            self.end_heap = []
            self.adjusted = {}
        return True

    def forget_closed(self, c: int) -> list[Any]:
        """Drop ids of events with ``RE < c`` (final). Returns the dropped records."""
        h = self.end_heap
        live = self.live
        gone = []
        while h and h[0][0] < c:
            re, id = heapq.heappop(h)
            rec = live.get(id)
            if rec is not None and rec.re == re:
                del live[id]
                gone.append(rec)
                if self.adjusted:
                    self.adjusted.pop(id, None)
        return gone

    # -- interface ---------------------------------------------------------------------------------
    def feed(self, el: Element) -> list[Element]:
        raise NotImplementedError

    def ins(self, id: str, le: int, re: int, payload: Any, el: Insert | None = None) -> list[Element] | None:
        return self.feed(el if el is not None else Insert(id, le, re, payload))

    def ret(self, id: str, le: int, re: int, rn: int, el: Retract | None = None) -> list[Element] | None:
        return self.feed(el if el is not None else Retract(id, le, re, rn))

    def cti(self, t: int) -> list[Element]:
        return self.feed(Cti(t))

    def feed_port(self, port: int, el: Element) -> list[Element]:
        """An element arriving on input ``port`` (single-input operators have port 0 only)."""
        return self.feed(el)

    def flush(self) -> list[Element]:
        return []

    def state_size(self) -> dict[str, int]:
        """What this operator holds (tests of bounded state)."""
        return {"events": len(self.live)}

    def finish_ready(self) -> None:
        """Called before the final ``cti(INF)`` reaches this step."""

    def fast_forward(self, t: int) -> None:
        """Feedback from the lmerge this step feeds (seeds/001 §V.D): nothing before ``t`` is wanted any more.
        A step may skip work and state for it, never emit anything that contradicts its input; by default it
        ignores the signal."""
