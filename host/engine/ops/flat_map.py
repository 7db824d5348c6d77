"""``flat_map`` (SEMANTICS §10): a span UDO turns each event into zero or more events inside its lifetime.

The output CHT is the union, over the input's events, of each event's outputs, so an input retraction must
change exactly the outputs of its event. The step numbers its outputs itself and keeps, per live input
event, a record of them — only while a retraction of the event can still come (until a CTI closes it,
`rules.closed`), so its state is bounded when CTIs advance (§7):

* **time-insensitive** (`udm.sdk.SpanUDO`): every output of an event has the event's lifetime. The record
  is the event's first output id and its number of outputs; a retraction (which carries the event's
  payload) calls the UDO again for the outputs' payloads (UDMs are deterministic, §5) and retracts or
  shortens each output with the event. Output CTI = input CTI.
* **time-sensitive** (`udm.sdk.TimeSensitiveSpanUDO`): outputs ``(LE, RE, payload)`` with
  ``event.LE <= LE < RE <= event.RE``. The record holds the outputs; a retraction recomputes them for the
  new lifetime and emits the minimal diff (an unchanged output is untouched, one whose end moved is
  retracted to its new end, the rest deleted or inserted). Any output of an open event may still change,
  so the output CTI is held at the earliest LE of an open event (never above the input CTI) — unless the
  UDO declares ``time_bound``: then every change a retraction makes starts at or after its sync time
  (checked, a contract violation otherwise) and the output CTI is the input CTI.

A payload the UDO cannot read (it raises `udm.sdk.MalformedPayload`) is a dead letter of this step, and so
are the event's later retractions (an unknown id here, as for a refused field: semantics-notes 3). Anything
else a UDO gets wrong is a `ContractViolation` naming the UDM, its version, the event and the value.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from sortedcontainers import SortedList

from udm.host.errors import ContractViolation
from udm.host.model.plan import BoundStep
from udm.host.temporal.strict import canonical_json
from udm.sdk import Event, MalformedPayload

from ..batch import CTI, INSERT, Batch, RowsOut
from ..context import Context
from ..invoke import PLAIN_TYPES
from ..operator import UdmOperator
from ..rules import INF, MALFORMED, NEG, UNKNOWN_ID, closed, format_time, unknown_id_reason

__all__ = ["FlatMapOp"]

#: a time-sensitive output: [output id, LE, RE, payload, canonical JSON of the payload]
_Out = list[Any]


def _life(le: int, re: int) -> str:
    return f"[{format_time(le)}, {format_time(re)})"


class FlatMapOp(UdmOperator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        assert bs.entry is not None
        props = bs.entry.manifest.properties
        self.time_sensitive = props.time_sensitive
        self.time_bound = props.time_bound
        #: the output CTI follows the input's (time-insensitive, or time-bound); else it is held
        self.passes_ctis = not self.time_sensitive or self.time_bound
        self.next_id = 0
        #: input engine id -> time-insensitive: [first output id, count, RE]; time-sensitive: [LE, RE, outputs]
        self.records: dict[int, list[Any]] = {}
        #: (RE, input id) of the records, to forget them once closed (stale after a retraction moved RE)
        self.ends: list[tuple[int, int]] = []
        #: held output CTI (time-sensitive without time_bound): (LE, input id) of every record
        self.starts: SortedList = SortedList()
        self.input_cti = NEG
        self.emitted = NEG
        self.attach(ctx, bs)

    # -- calling the UDO ---------------------------------------------------------------------------
    def _label(self) -> str:
        return self.bs.label if self.bs is not None else self.name

    def _violation(self, le: int, re: int, payload: Any, what: str, value: Any) -> ContractViolation:
        text = repr(value)
        if len(text) > 300:
            text = text[:300] + "..."
        event = f"{_life(le, re)} {payload!r}"
        if len(event) > 300:
            event = event[:300] + "..."
        return ContractViolation(f"UDM {self._label()} on event {event}: {what}: {text}")

    def _call(self, le: int, re: int, payload: dict[str, Any]) -> list[Any] | str:
        """The UDO's outputs for one event as a list, or the reason it refuses the payload."""
        assert self.udm is not None
        arg: Any = Event(le, re, payload) if self.time_sensitive else payload
        try:
            result = self.udm.compute(arg)
            if result is None or isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
                raise self._violation(le, re, payload, "compute must return an iterable of outputs, got", result)
            return list(result)
        except MalformedPayload as bad:
            return bad.reason
        except ContractViolation:
            raise
        except Exception as exc:  # a UDM raising is a contract violation (SEMANTICS §5)
            raise self._violation(le, re, payload, f"compute raised {type(exc).__name__}", exc) from exc

    def _payload(self, le: int, re: int, event: dict[str, Any], p: Any) -> dict[str, Any]:
        if not isinstance(p, Mapping):
            raise self._violation(le, re, event, "an output payload must be a JSON object, got", p)
        d = dict(p)
        for v in d.values():
            if type(v) not in PLAIN_TYPES:
                self._canon(le, re, event, d)
                break
        return d

    def _canon(self, le: int, re: int, event: dict[str, Any], d: dict[str, Any]) -> str:
        try:
            return canonical_json(d)
        except (TypeError, ValueError) as exc:
            raise self._violation(le, re, event, f"output is not JSON-serializable ({exc})", d) from None

    def _timed(self, le: int, re: int, event: dict[str, Any], items: list[Any]) -> list[tuple[int, int, dict, str]]:
        """A time-sensitive UDO's outputs, checked: ``(LE, RE, payload, canonical JSON)``."""
        out = []
        for item in items:
            if isinstance(item, Event):
                a, b, p = item.le, item.re, item.payload
            elif isinstance(item, tuple) and len(item) == 3:
                a, b, p = item
            else:
                raise self._violation(le, re, event, "a time-sensitive span UDO yields Event or (le, re, payload), "
                                                     "got", item)
            if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int) or not isinstance(b, int):
                raise self._violation(le, re, event, "output lifetime must be integer ticks, got", item)
            if b > INF:
                b = INF
            if not le <= a < b <= re:
                raise self._violation(le, re, event, f"an output lifetime must lie inside the event's "
                                                     f"{_life(le, re)} with LE < RE, got", item)
            d = self._payload(le, re, event, p)
            out.append((a, b, d, self._canon(le, re, event, d)))
        return out

    def _new_ids(self, n: int) -> int:
        first = self.next_id + 1
        self.next_id += n
        return first

    # -- elements ----------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        out = RowsOut()
        kinds = b.kind.tolist()
        rows = b.payload.rows() if any(k != CTI for k in kinds) else None
        for i, k in enumerate(kinds):
            if k == CTI:
                self._cti(int(b.le[i]), out)
                continue
            assert rows is not None
            eid, le, re, line = int(b.id[i]), int(b.le[i]), int(b.re[i]), int(b.line[i])
            if k == INSERT:
                self._insert(b, i, eid, le, re, rows[i], line, out)
            elif self.time_sensitive:
                self._retract_timed(b, i, eid, le, re, int(b.rn[i]), rows[i], line, out)
            else:
                self._retract(b, i, eid, le, re, int(b.rn[i]), rows[i], line, out)
        return out.batch()

    def _insert(self, b: Batch, i: int, eid: int, le: int, re: int, payload: dict[str, Any], line: int,
                out: RowsOut) -> None:
        got = self._call(le, re, payload)
        if isinstance(got, str):
            self.refuse(b, i, MALFORMED, f"malformed payload for UDM {self._label()}: {got}")
            return
        if self.time_sensitive:
            outs: list[_Out] = []
            for a, z, d, cj in self._timed(le, re, payload, got):
                oid = self._new_ids(1)
                outs.append([oid, a, z, d, cj])
                out.insert(oid, a, z, d, line)
            self.records[eid] = [le, re, outs]
            if not self.passes_ctis:
                self.starts.add((le, eid))
        else:
            if not got:
                return  # no outputs, nothing to retract later (a retraction finds none again)
            ps = [self._payload(le, re, payload, p) for p in got]
            first = self._new_ids(len(ps))
            for j, d in enumerate(ps):
                out.insert(first + j, le, re, d, line)
            self.records[eid] = [first, len(ps), re]
        heapq.heappush(self.ends, (re, eid))

    def _unknown(self, b: Batch, i: int) -> None:
        self.refuse(b, i, UNKNOWN_ID, unknown_id_reason(b.id_text(i)))

    def _retract(self, b: Batch, i: int, eid: int, le: int, re: int, rn: int, payload: dict[str, Any], line: int,
                 out: RowsOut) -> None:
        rec = self.records.get(eid)
        got = self._call(le, re, payload)
        if isinstance(got, str):
            if rec is None:
                self._unknown(b, i)  # its insert was refused
                return
            raise self._violation(le, re, payload, "compute refused a payload it accepted before (a span UDO "
                                                   "must be deterministic)", got)
        count = 0 if rec is None else rec[1]
        if len(got) != count:
            raise self._violation(le, re, payload, f"compute gave {len(got)} outputs for a payload that gave "
                                                   f"{count} before (a span UDO must be deterministic)", got)
        if rec is None or rn == re:
            return
        first = rec[0]
        for j, p in enumerate(got):
            out.retract(first + j, le, re, rn, self._payload(le, re, payload, p), line)
        if rn <= le:
            del self.records[eid]
        else:
            rec[2] = rn
            heapq.heappush(self.ends, (rn, eid))

    def _retract_timed(self, b: Batch, i: int, eid: int, le: int, re: int, rn: int, payload: dict[str, Any],
                       line: int, out: RowsOut) -> None:
        rec = self.records.get(eid)
        if rec is None:
            self._unknown(b, i)  # its insert was refused
            return
        old: list[_Out] = rec[2]
        if rn <= le:
            new: list[tuple[int, int, dict, str]] = []
        else:
            got = self._call(le, rn, payload)
            if isinstance(got, str):
                raise self._violation(le, rn, payload, "compute refused a payload it accepted before (a span UDO "
                                                       "must be deterministic)", got)
            new = self._timed(le, rn, payload, got)
        sync = min(re, rn)
        kept = self._diff(old, new, sync, le, re, rn, payload, line, out)
        if rn <= le:
            del self.records[eid]
            if not self.passes_ctis:
                self.starts.discard((le, eid))
        else:
            rec[1] = rn
            rec[2] = kept
            heapq.heappush(self.ends, (rn, eid))

    def _diff(self, old: list[_Out], new: list[tuple[int, int, dict, str]], sync: int, le: int, re: int, rn: int,
              payload: dict[str, Any], line: int, out: RowsOut) -> list[_Out]:
        """Emit the minimal diff from ``old`` outputs to ``new`` ones (§7); the outputs that stand after it."""
        want = Counter((a, z, cj) for a, z, _, cj in new)
        kept: list[_Out] = []
        gone: list[_Out] = []
        for o in old:
            key = (o[1], o[2], o[4])
            if want[key] > 0:
                want[key] -= 1
                kept.append(o)
            else:
                gone.append(o)
        fresh = []
        for n in new:
            key = (n[0], n[1], n[3])
            if want[key] > 0:  # (the first ones of a key: which copies of equal outputs is immaterial)
                want[key] -= 1
                fresh.append(n)
        # an output whose (LE, payload) stays and only its end moves is retracted to its new end
        by_start: dict[tuple[int, str], list[tuple[int, int, dict, str]]] = {}
        for n in fresh:
            by_start.setdefault((n[0], n[3]), []).append(n)
        changes: list[tuple[int, int, int, int, dict[str, Any]]] = []  # (id, LE, RE, RE_new, payload)
        for o in gone:
            twins = by_start.get((o[1], o[4]))
            if twins:
                n = twins.pop()
                changes.append((o[0], o[1], o[2], n[1], o[3]))
                kept.append([o[0], o[1], n[1], o[3], o[4]])
            else:
                changes.append((o[0], o[1], o[2], o[1], o[3]))
        inserts = [n for ns in by_start.values() for n in ns]
        if self.time_bound:
            def broken(what: str, output: tuple[Any, ...]) -> ContractViolation:
                return self._violation(le, re, payload, f"declared time_bound, but the retraction to re_new "
                                                        f"{format_time(rn)} (sync time {format_time(sync)}) "
                                                        f"{what} an output starting before it", output)

            for _oid, a, z, zn, _ in changes:
                if min(z, zn) < sync:
                    raise broken("changes", (a, z, "deleted" if zn == a else zn))
            for a, z, d, _ in inserts:
                if a < sync:
                    raise broken("adds", (a, z, d))
        for oid, a, z, zn, d in changes:
            out.retract(oid, a, z, zn, d, line)
        for a, z, d, cj in inserts:
            oid = self._new_ids(1)
            out.insert(oid, a, z, d, line)
            kept.append([oid, a, z, d, cj])
        return kept

    # -- CTIs, state ---------------------------------------------------------------------------------
    def _cti(self, c: int, out: RowsOut) -> None:
        if c <= self.input_cti:
            return
        self.input_cti = c
        self._forget(c)
        t = c
        if not self.passes_ctis and self.starts:
            t = min(t, self.starts[0][0])
        if t > self.emitted:
            self.emitted = t
            out.cti(t)

    def _forget(self, c: int) -> None:
        """Drop the records of the events ``c`` closes (their stale heap entries with them)."""
        if c >= INF:
            self.records.clear()
            self.ends.clear()
            self.starts.clear()
            return
        ends = self.ends
        recs = self.records
        re_at = 1 if self.time_sensitive else 2
        while ends and closed(ends[0][0], c):
            re, eid = heapq.heappop(ends)
            rec = recs.get(eid)
            if rec is not None and rec[re_at] == re:
                del recs[eid]
                if not self.passes_ctis:
                    self.starts.discard((rec[0], eid))

    def state_size(self) -> dict[str, int]:
        return {"events": len(self.records)}

    def forget_at(self) -> int | None:
        if not self.passes_ctis:
            return None  # its output CTI follows its state (the earliest open event), not a CTI alone
        t = self.ends[0][0] if self.ends else INF
        return INF if t >= INF else t + 1
