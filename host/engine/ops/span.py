"""The span-based operators (semantics-notes 7, SEMANTICS §10): filter, map, project, and the gate that
validates a multicast query input. Each maps an insert to at most one output under its own id; lifetimes
and retractions pass through unchanged.
"""

from __future__ import annotations

import heapq
from typing import Any, TypeVar

import numpy as np

from udm.host.errors import ContractViolation
from udm.host.input_types import step_checks
from udm.host.query.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from ..common import INF, NEG
from ..context import Context
from ..invoke import contract
from ..operator import Operator

#: a payload field's value: a plain value on the row path, a column on the columnar span path
V = TypeVar("V")

__all__ = ["NO_RESULT", "FilterStep", "InputGate", "MapStep", "ProjectStep", "precompute"]

NO_RESULT: Any = object()  #: `_SpanStep.pre` when no result was computed ahead


class _SpanStep(Operator):
    """filter / map / project / input gate: span-based, lifetimes and retractions pass through unchanged
    (semantics-notes 7); `apply` rewrites (or drops) each insert."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep | None, reads_input: bool = True) -> None:
        super().__init__(name, ctx, reads_input)
        self.args = dict(getattr(bs.step, "args", {})) if bs is not None else {}
        self.fields = tuple(self.args.values())
        if bs is not None:
            self.typed = step_checks(bs)
            self.typed_label = bs.label
        self.oid = 0
        #: the UDF's result for the element being fed, computed ahead by its batch form (`precompute`)
        self.pre: Any = NO_RESULT
        #: fast-forward (seeds/001 §V.D): inserts ending before this are registered but not computed
        self.skip_below = NEG
        #: payloads of the inserts skipped so, in case a retraction extends one past ``skip_below``
        self.skipped: dict[str, Any] = {}
        self.attach(ctx, bs)

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "udm", "pre")

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        self.udm = bs.udm if bs is not None else None
        self.pre = NO_RESULT

    def call(self, payload: dict[str, Any]) -> Any:
        pre = self.pre
        if pre is not NO_RESULT:
            self.pre = NO_RESULT
            return pre
        kwargs = {a: payload[f] for a, f in self.args.items()}
        try:
            return self.udm.compute(**kwargs)  # type: ignore[union-attr]
        except ContractViolation:
            raise
        except Exception as exc:
            raise contract(self.bs.label, None, f"compute raised {type(exc).__name__} on {kwargs!r}",  # type: ignore[union-attr]
                           exc) from exc

    def ins(self, id: str, le: int, re: int, payload: Any, el: Insert | None = None) -> list[Element] | None:
        """An insert from raw fields: the common valid case inline (what `feed` does for it, without its
        dispatch and `check_insert`'s calls); anything else goes through `feed`, which dead-letters it."""
        if (type(payload) is not dict or not le < re or le >= INF or le < self.effective_cti or id in self.live
                or re < self.skip_below):
            return self.feed(el if el is not None else Insert(id, le, re, payload))
        for f in self.fields:
            if f not in payload:
                return self.feed(el if el is not None else Insert(id, le, re, payload))
        for tf, tp in self.typed:
            if not tp.accepts(payload if tf is None else payload[tf]):
                return self.feed(el if el is not None else Insert(id, le, re, payload))
        if self.reads_input:
            ctx = self.ctx
            t = re if re < INF else le
            if t > ctx.reached:
                ctx.reached = t
        self.oid += 1
        oid = f"o{self.oid}"
        out = self.apply(el if el is not None else Insert(id, le, re, payload), le, oid)
        self.live[id] = _Rec(le, re, oid if out is not None else None)
        if re < INF:
            heapq.heappush(self.end_heap, (re, id))
        return [out] if out is not None else []

    def feed(self, el: Element) -> list[Element]:
        if isinstance(el, Insert):
            le = self.check_insert(el)
            if le is None:
                return []
            if self.reads_input:
                self.ctx.seen(le, el.re)
            if el.re < self.skip_below:  # fast-forwarded: nothing before skip_below is wanted downstream
                self.live[el.id] = _Rec(le, el.re, None)
                self.skipped[el.id] = el.payload
                self.note_re(el.re, el.id)
                return []
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
            if self.skipped and el.id in self.skipped:
                return self._unskip(el.id, rec, rn)
            old = rec.re
            if rn <= rec.le:
                rn = rec.le
                del self.live[el.id]
                if self.adjusted:
                    self.adjusted.pop(el.id, None)
            else:
                rec.re = rn
                self.note_re(rn, el.id)
            if rec.oid is None:
                return []
            return [Retract(rec.oid, rec.le, old, rn)]
        # CTI
        t = el.t
        if not self.pass_cti(t):
            return []
        return [Cti(t)]

    def apply(self, el: Insert, le: int, oid: str) -> Insert | None:
        raise NotImplementedError

    def register(self, id: str, le: int, re: int, oid: str | None) -> None:
        """Record a valid insert as live (what `ins` does after `apply`): for the columnar span path
        (`udm.host.engine.span_columnar`), which computes the output itself."""
        self.live[id] = _Rec(le, re, oid)
        if re < INF:
            heapq.heappush(self.end_heap, (re, id))

    def fast_forward(self, t: int) -> None:
        """The lmerge this step feeds no longer needs anything before ``t`` (seeds/001 §V.D): inserts that
        end before ``t`` are validated and registered (their retractions stay valid) but not computed."""
        if t > self.skip_below:
            self.skip_below = t

    def _unskip(self, id: str, rec: _Rec, rn: int) -> list[Element]:
        """A skipped insert whose end a retraction moves: computed now, as ``[LE, rn)``, if that reaches
        ``skip_below`` (the lmerge may need it), else it stays skipped (and is forgotten once deleted)."""
        if rn <= rec.le:
            del self.live[id]
            del self.skipped[id]
            return []
        rec.re = rn
        self.note_re(rn, id)
        if rn < self.skip_below:
            return []
        payload = self.skipped.pop(id)
        self.oid += 1
        oid = f"o{self.oid}"
        out = self.apply(Insert(id, rec.le, rn, payload), rec.le, oid)
        rec.oid = oid if out is not None else None
        return [out] if out is not None else []

    def forget_closed(self, c: int) -> list[Any]:
        gone = super().forget_closed(c)
        if self.skipped:
            for id in [i for i in self.skipped if i not in self.live]:
                del self.skipped[id]
        return gone


def precompute(op: Any, cols: Any, n: int) -> tuple[list[Any], np.ndarray | None] | None:
    """The UDF results of a filter/map step for every row of a columnar batch, from the UDF's batch form
    (`udm.sdk.UDF` ``compute_batch``), when it has one and every argument column is numeric: (results,
    rows to leave to ``compute``: those lacking an argument). None when the batch form does not apply."""
    if not isinstance(op, (FilterStep, MapStep)):
        return None
    fn = getattr(op.udm, "compute_batch", None)
    if fn is None or not op.args:
        return None
    columns = {}
    skip = None
    for arg, field in op.args.items():
        vals, miss = cols.field(field, 0, n)
        if not isinstance(vals, np.ndarray):
            vals = _numeric(vals, miss)
            if vals is None:
                return None
        columns[arg] = vals
        if miss is not None:
            skip = miss if skip is None else (skip | miss)
    try:
        res = fn(**columns)
    except Exception:
        return None  # the row-by-row path reports what is wrong, on the row where it is
    # plain Python values, as ``compute`` would return them (numpy scalars do not serialize to JSON)
    out = res.tolist() if isinstance(res, np.ndarray) else [v.item() if isinstance(v, np.generic) else v
                                                            for v in res]
    if len(out) != n:
        where = op.bs.label if op.bs is not None else op.name
        raise contract(where, None, f"compute_batch returned {len(out)} values for {n} rows", out)
    return out, skip


def _numeric(vals: list[Any], miss: np.ndarray | None) -> np.ndarray | None:
    """A list column (rows lacking the field masked by ``miss``) as int64 / float64, if uniformly so."""
    present = vals if miss is None else [v for v, m in zip(vals, miss.tolist(), strict=True) if not m]
    kinds = set(map(type, present))
    if kinds not in ({int}, {float}):
        return None
    dtype = np.int64 if kinds == {int} else np.float64
    try:
        if miss is None:
            return np.array(vals, dtype=dtype)
        return np.array([0 if m else v for v, m in zip(vals, miss.tolist(), strict=True)], dtype=dtype)
    except OverflowError:
        return None


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

    def __init__(self, name: str, ctx: Context, reads_input: bool = True) -> None:
        super().__init__(name, ctx, None, reads_input)

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
        return Insert(oid, le, el.re, self.reshape(el.payload, self.set_fields))

    def reshape(self, payload: dict[str, V], set_values: dict[str, V]) -> dict[str, V]:
        """The projected payload: keep, drop, rename, then ``set_values`` (the step's ``set`` as values of
        the payload's kind: plain values here, constant columns on the columnar span path)."""
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
        if set_values:
            payload = {**payload, **set_values}
        return payload


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
