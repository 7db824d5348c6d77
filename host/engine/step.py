"""The step base (per-step validation of SEMANTICS §1) and the span-based steps (filter / map).

Every step validates its own input: for the first step that is the query input; for later steps the
upstream output is valid by construction, so only payload fields (semantics-notes 3) and a window step's
``max_memory_time`` (note 8) can refuse something there.

Ids of events closed by a CTI (``RE < CTI``) are forgotten: such an event is final and can never be
retracted again (its retraction would violate the CTI), so keeping its id would only let state grow.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from udm.host.errors import ContractViolation, ViolationError
from udm.host.query.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json

from .common import INF, NEG, DeadLetter, Ev
from .invoke import contract

if TYPE_CHECKING:  # pragma: no cover
    from .runner import Context

__all__ = ["FilterStep", "InputGate", "MapStep", "ProjectStep", "Step"]

# dead-letter categories (RunStats.reasons)
CTI_VIOLATION = "cti_violation"
DUPLICATE_ID = "duplicate_id"
UNKNOWN_ID = "unknown_id"
MISMATCH = "lifetime_mismatch"
BAD_LIFETIME = "invalid_lifetime"
MALFORMED = "malformed"
MISSING_FIELD = "missing_field"


def _t(t: int) -> str:
    return "inf" if t >= INF else str(t)


class Step:
    """Validation + id registry shared by every step kind."""

    #: payload fields an insert must carry for this step
    fields: tuple[str, ...] = ()

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
        self.live: dict[str, Any] = {}
        self.c = NEG  # latest input CTI
        self.ceff = NEG  # effective CTI for validity (max_memory_time)
        self._re_heap: list[tuple[int, str]] = []
        #: ids of inserts moved by ``adjust``: their original LE, which later retractions quote
        self.adj: dict[str, int] = {}

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
            self.reject(el, BAD_LIFETIME, f"insert needs a finite le < re, got [{_t(le)}, {_t(re)})")
            return None
        for f in self.fields:
            if f not in el.payload:
                self.reject(el, MISSING_FIELD, f"missing field {f!r}")
                return None
        if el.id in self.live:
            self.reject(el, DUPLICATE_ID, f"duplicate live id {el.id!r}")
            return None
        c = self.ceff
        if le < c:
            if self.ctx.on_violation == "adjust" and re > c:
                self.adj[el.id] = le
                return c
            self.reject(el, CTI_VIOLATION, f"CTI violation: sync time {le} < CTI {_t(c)}")
            return None
        return le

    def check_retract(self, el: Retract) -> Any:
        """The live record a valid retraction refers to, or None after dead-lettering it."""
        le, re, rn = el.le, el.re, el.re_new
        if re <= le or rn < le or le >= INF:
            self.reject(el, BAD_LIFETIME, f"retract needs le < re and re_new >= le, got le={_t(le)}, re={_t(re)}, "
                                          f"re_new={_t(rn)}")
            return None
        sync = re if re < rn else rn
        if sync < self.ceff:
            self.reject(el, CTI_VIOLATION, f"CTI violation: sync time {sync} < CTI {_t(self.ceff)}")
            return None
        rec = self.live.get(el.id)
        if rec is None:
            self.reject(el, UNKNOWN_ID, f"retraction of unknown id {el.id!r}")
            return None
        ole = self.adj.get(el.id, rec.le) if self.adj else rec.le
        if ole != le or rec.re != re:
            self.reject(el, MISMATCH, f"retraction of {el.id!r} says [{_t(le)}, {_t(re)}) but the live event is "
                                      f"[{_t(ole)}, {_t(rec.re)})")
            return None
        return rec

    def note_re(self, re: int, id: str) -> None:
        if re < INF:
            heapq.heappush(self._re_heap, (re, id))

    def forget_closed(self, c: int) -> list[Any]:
        """Drop ids of events with ``RE < c`` (final). Returns the dropped records."""
        h = self._re_heap
        live = self.live
        gone = []
        while h and h[0][0] < c:
            re, id = heapq.heappop(h)
            rec = live.get(id)
            if rec is not None and rec.re == re:
                del live[id]
                gone.append(rec)
                if self.adj:
                    self.adj.pop(id, None)
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


class _SpanStep(Step):
    """filter / map / project / input gate: span-based, lifetimes and retractions pass through unchanged
    (semantics-notes 7); `apply` rewrites (or drops) each insert."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep | None, reads_input: bool = True) -> None:
        super().__init__(name, ctx, reads_input)
        self.args = dict(getattr(bs.step, "args", {})) if bs is not None else {}
        self.fields = tuple(self.args.values())
        self.oid = 0
        self.attach(ctx, bs)

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "udm")

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        self.udm = bs.udm if bs is not None else None

    def call(self, payload: dict[str, Any]) -> Any:
        kwargs = {a: payload[f] for a, f in self.args.items()}
        try:
            return self.udm.compute(**kwargs)  # type: ignore[union-attr]
        except ContractViolation:
            raise
        except Exception as exc:
            raise contract(self.bs.label, None, f"compute raised {type(exc).__name__} on {kwargs!r}",  # type: ignore[union-attr]
                           exc) from exc

    def feed(self, el: Element) -> list[Element]:
        if isinstance(el, Insert):
            le = self.check_insert(el)
            if le is None:
                return []
            if self.reads_input:
                self.ctx.seen(le, el.re)
            self.oid += 1
            oid = f"o{self.oid}"  # own ids: an input id may be reused once its event is closed
            out = self.apply(el, le, oid)
            rec = _Rec(le, el.re, oid if out is not None else None)
            self.live[el.id] = rec
            self.note_re(el.re, el.id)
            return [out] if out is not None else []
        if isinstance(el, Retract):
            rec = self.check_retract(el)
            if rec is None:
                return []
            rn = el.re_new
            if self.reads_input:
                self.ctx.seen(el.re, rn)
            if rn == el.re:
                return []
            old = rec.re
            if rn <= rec.le:
                rn = rec.le
                del self.live[el.id]
                if self.adj:
                    self.adj.pop(el.id, None)
            else:
                rec.re = rn
                self.note_re(rn, el.id)
            if rec.oid is None:
                return []
            return [Retract(rec.oid, rec.le, old, rn)]
        # CTI
        t = el.t
        if t <= self.c:
            return []
        if self.reads_input:
            self.ctx.seen(t)
        self.c = self.ceff = t
        self.forget_closed(t)
        if t >= INF:
            self.live = {}
            self._re_heap = []
            self.adj = {}
        return [Cti(t)]

    def apply(self, el: Insert, le: int, oid: str) -> Insert | None:
        raise NotImplementedError


class _Rec:
    """A live input event of a span step: its lifetime and the id of its output (None: filtered out)."""

    __slots__ = ("le", "oid", "re")

    def __init__(self, le: int, re: int, oid: str | None) -> None:
        self.le = le
        self.re = re
        self.oid = oid

    def __getstate__(self) -> tuple:
        return (self.le, self.re, self.oid)

    def __setstate__(self, s: tuple) -> None:
        self.le, self.re, self.oid = s


class InputGate(_SpanStep):
    """Validates one query input (SEMANTICS §1, with that input's policy) when it is multicast or read by a
    multi-input operator, and passes its valid elements on under ids of its own."""

    def __init__(self, name: str, ctx: Context) -> None:
        super().__init__(name, ctx, None, True)

    def apply(self, el: Insert, le: int, oid: str) -> Insert | None:
        return Insert(oid, le, el.re, el.payload)


class ProjectStep(_SpanStep):
    """``project`` (SEMANTICS §10): ``keep`` (a missing kept field is a malformed payload), ``drop``,
    ``rename``, ``set``, in that order."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        step = bs.step
        self.keep: tuple[str, ...] | None = tuple(step.keep) if step.keep is not None else None
        self.drop = frozenset(step.drop)
        self.rename = dict(step.rename)
        self.set_fields = dict(step.set)
        self.fields = self.keep or ()

    def apply(self, el: Insert, le: int, oid: str) -> Insert | None:
        payload = el.payload
        if self.keep is not None:
            payload = {f: payload[f] for f in self.keep}
        if self.drop:
            payload = {k: v for k, v in payload.items() if k not in self.drop}
        if self.rename:
            rename = self.rename
            # a renamed field overwrites a field of the target name; a target whose source is absent stays
            moved = {rename[k]: v for k, v in payload.items() if k in rename}
            payload = {k: v for k, v in payload.items() if k not in rename and k not in moved}
            payload.update(moved)
        if self.set_fields:
            payload = {**payload, **self.set_fields}
        return Insert(oid, le, el.re, payload)


class FilterStep(_SpanStep):
    def apply(self, el: Insert, le: int, oid: str) -> Insert | None:
        if self.call(el.payload):
            return Insert(oid, le, el.re, el.payload)
        return None


class MapStep(_SpanStep):
    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, bs, reads_input)
        self.as_ = bs.step.as_

    def apply(self, el: Insert, le: int, oid: str) -> Insert | None:
        v = self.call(el.payload)
        return Insert(oid, le, el.re, {**el.payload, self.as_: v})


# keep Ev importable from here for window steps
__all__ += ["Ev"]
