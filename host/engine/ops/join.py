"""``join`` (SEMANTICS §10): the temporal equijoin of two inputs, ``inner`` or ``left_anti``.

The algorithm is CEDR's symmetric hash join (seeds/003 §4.2–4.3): each side keeps its live events in a hash
table by join key, and per key an index ordered by LE (a `sortedcontainers.SortedKeyList`), so an arriving
event finds the other side's events that overlap it by scanning only those that start before it ends.

*Inner*: one output event per matching, overlapping pair, lifetime ``[max LE, min RE)``, payload
``{**right', **left'}`` (prefixed field names; ``where`` filters pairs). Each pair's output is kept, so a
retraction on either side moves or deletes exactly the pair outputs whose lifetime changed, and an
extension adds the pairs it creates (minimal diffs).

*Left anti*: per left event, one output event per maximal part of its lifetime that no matching right event
covers. A change at sync time ``s`` (an insert at its LE, a retraction at ``min(RE, RE_new)``) can only
change coverage at or after ``s``, so the left event's outputs are recomputed from ``s`` on and kept below
it; outputs are matched by LE, so a part whose end moved is retracted to its new end, not re-inserted.

State is bounded under advancing CTIs on both inputs: an event is dropped once it is final (``RE <`` its own
side's CTI) and no future event of the other side can overlap it (``RE <=`` the other side's CTI); neither
the pairs it formed nor the coverage it gave can change after that (a later change of the other event has
sync time ``>=`` that CTI, beyond this event's end).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import Any

from sortedcontainers import SortedKeyList

from udm.host.errors import ContractViolation
from udm.host.model.plan import BoundStep
from udm.host.temporal.strict import canonical_json

from ..batch import CTI, INSERT, Batch, RowsOut
from ..context import Context
from ..invoke import contract
from ..operator import Operator
from ..rules import INF, MISSING_FIELD
from .ports import PortClock

__all__ = ["JoinOp", "join_key"]

LEFT, RIGHT = 0, 1


def _key_part(v: Any) -> Any:
    """A join-key value compared as JSON values: numbers by value (``1 == 1.0``), never ``true == 1``."""
    if v is None or isinstance(v, bool):
        return (0, v)
    if isinstance(v, (int, float)):
        return (1, v)
    if isinstance(v, str):
        return (2, v)
    return (3, canonical_json(v))


def join_key(payload: dict[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...]:
    """The hashable join key of ``payload`` over ``fields`` (KeyError names a missing field)."""
    return tuple(_key_part(payload[f]) for f in fields)


class _JoinEvent:
    """A live event of one join side: lifetime, payload, key, and what it produces.

    ``outputs`` is, for *inner*, ``{other side's id: [out_id, out_le, out_re, payload]}`` (one pair output per
    partner); for the *left* side of *left anti*, the list of ``[out_id, out_le, out_re]`` uncovered parts.
    """

    __slots__ = ("id", "key", "le", "outputs", "payload", "re")

    def __init__(self, id: int, le: int, re: int, payload: dict[str, Any], key: tuple[Any, ...]) -> None:
        self.id = id
        self.le = le
        self.re = re
        self.payload = payload
        self.key = key
        self.outputs: Any = None

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.id, self.le, self.re, self.payload, self.key, self.outputs)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.id, self.le, self.re, self.payload, self.key, self.outputs = s


def _by_le(ev: _JoinEvent) -> int:
    return ev.le


#: a key's finite events are a plain list (sorted by LE) up to this many, a `SortedKeyList` past it (most keys
#: hold one or two events: a sorted container per key cost more than the join's other work per event)
_SMALL = 32


class _Key:
    """One key's events on one side: the finite ones ordered by LE, the longest finite lifetime among them
    (it bounds how far before a lifetime an overlapping event can start), and those that never end."""

    __slots__ = ("endless", "finite", "span")

    def __init__(self) -> None:
        self.finite: Any = []  # (a list, or a SortedKeyList past _SMALL)
        #: the longest ``RE - LE`` a finite event of this key had (never lowered: a bound, not the maximum)
        self.span = 0
        self.endless: dict[int, _JoinEvent] = {}

    def add(self, ev: _JoinEvent) -> None:
        if ev.re >= INF:
            self.endless[ev.id] = ev
            return
        f = self.finite
        if type(f) is list:
            if len(f) < _SMALL:
                insort(f, ev, key=_by_le)
            else:
                self.finite = SortedKeyList([*f, ev], key=_by_le)
        else:
            f.add(ev)
        if ev.re - ev.le > self.span:
            self.span = ev.re - ev.le

    def discard(self, ev: _JoinEvent, re: int) -> None:
        """``ev`` leaves (``re``: the end it was filed under)."""
        if re >= INF:
            del self.endless[ev.id]
        else:
            self.finite.remove(ev)

    def __len__(self) -> int:
        return len(self.finite) + len(self.endless)

    def overlapping(self, le: int, re: int) -> Iterator[_JoinEvent]:
        """Events whose lifetime overlaps ``[le, re)``: a finite one starts after ``le - span`` (it ends by
        ``LE + span``), so only those starting in ``(le - span, re)`` are looked at, not the key's history."""
        lo = le - self.span + 1
        f = self.finite
        if type(f) is list:
            i = bisect_left(f, lo, key=_by_le)
            j = bisect_left(f, re, key=_by_le) if re < INF else len(f)
            cands: Any = f[i:j]
        else:
            cands = f.irange_key(lo, re - 1 if re < INF else None)
        for ev in cands:
            if ev.re > le:
                yield ev
        if self.endless:
            for ev in list(self.endless.values()):
                if ev.le < re:
                    yield ev


class _Side:
    """One input of the join: live events by id, per key its events (`_Key`), ends for cleanup."""

    def __init__(self) -> None:
        self.live: dict[int, _JoinEvent] = {}
        self.index: dict[tuple[Any, ...], _Key] = {}
        self.ends: list[tuple[int, int]] = []

    def add(self, ev: _JoinEvent) -> None:
        self.live[ev.id] = ev
        idx = self.index.get(ev.key)
        if idx is None:
            idx = self.index[ev.key] = _Key()
        idx.add(ev)
        if ev.re < INF:
            heapq.heappush(self.ends, (ev.re, ev.id))

    def remove(self, ev: _JoinEvent) -> None:
        del self.live[ev.id]
        idx = self.index[ev.key]
        idx.discard(ev, ev.re)
        if not idx:
            del self.index[ev.key]

    def moved_end(self, ev: _JoinEvent, old: int) -> None:
        """``ev``'s end moved from ``old`` (to a later or earlier one, after its LE)."""
        idx = self.index[ev.key]
        idx.discard(ev, old)
        idx.add(ev)
        if ev.re < INF:
            heapq.heappush(self.ends, (ev.re, ev.id))

    def overlapping(self, key: tuple[Any, ...], le: int, re: int) -> Iterator[_JoinEvent]:
        """Events with this key whose lifetime overlaps ``[le, re)``."""
        idx = self.index.get(key)
        if idx is None:
            return iter(())
        return idx.overlapping(le, re)

    def __getstate__(self) -> dict[str, Any]:
        # the index holds the same objects as ``live``: rebuilt on restore instead of pickled twice
        return {"live": self.live, "ends": self.ends}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.live, self.ends = s["live"], s["ends"]
        self.index = {}
        for ev in self.live.values():
            idx = self.index.get(ev.key)
            if idx is None:
                idx = self.index[ev.key] = _Key()
            idx.add(ev)


class JoinOp(Operator):
    ports = 2

    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        step = bs.step
        self.anti = step.type == "left_anti"
        #: the join fields of the left and of the right input
        self.key_fields = (tuple(a for a, _ in step.on), tuple(b for _, b in step.on))
        self.prefixes = (step.left_prefix, step.right_prefix)
        self.where_args: dict[str, str] = dict(step.where.args) if step.where is not None else {}
        self.sources = tuple(step.sources)
        self.clock = PortClock(2)
        self.sides = (_Side(), _Side())
        self.next_id = 0
        self.attach(ctx, bs)

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "where")

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        self.where = bs.udm if bs is not None else None

    # -- payloads ---------------------------------------------------------------------------------
    def joined(self, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
        lp, rp = self.prefixes
        out = {rp + k: v for k, v in right.items()} if rp else dict(right)
        if lp:
            out.update((lp + k, v) for k, v in left.items())
        else:
            out.update(left)
        return out

    def matches(self, left: _JoinEvent, right: _JoinEvent) -> bool:
        if self.where is None:
            return True
        payload = self.joined(left.payload, right.payload)
        try:
            kwargs = {a: payload[f] for a, f in self.where_args.items()}
        except KeyError as exc:
            raise ContractViolation(f"{self.bs.label if self.bs else self.name}: join 'where' reads field "
                                    f"{exc.args[0]!r}, which the joined payload {payload!r} lacks") from None
        try:
            return bool(self.where.compute(**kwargs))
        except ContractViolation:
            raise
        except Exception as exc:
            label = self.bs.label if self.bs is not None else self.name
            raise contract(label, None, f"compute raised {type(exc).__name__} on {kwargs!r}", exc) from exc

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    # -- elements ---------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        out = RowsOut()
        kinds = b.kind.tolist()
        fields = self.key_fields[port]
        pls = None if all(k == CTI for k in kinds) else b.payload.rows()  # (built once, column by column)
        for i, k in enumerate(kinds):
            if k == CTI:
                t = self.clock.advance(port, int(b.le[i]))
                if t is not None:
                    out.cti(t)
                self._cleanup()
                continue
            payload = pls[i]  # type: ignore[index]
            try:
                key = join_key(payload, fields)
            except KeyError as exc:
                if k == INSERT:  # (a refused insert's retractions carry the same payload: ignored)
                    side = "left" if port == LEFT else "right"
                    self.refuse(b, i, MISSING_FIELD, f"missing join field {exc.args[0]!r} in the {side} input "
                                                     f"{self.sources[port]!r}", port)
                continue
            eid = int(b.id[i])
            if k == INSERT:
                self._insert(port, eid, int(b.le[i]), int(b.re[i]), payload, key, out)
            else:
                self._retract(port, eid, int(b.rn[i]), out)
        return out.batch()

    def _insert(self, port: int, eid: int, le: int, re: int, payload: dict[str, Any], key: tuple[Any, ...],
                out: RowsOut) -> None:
        ev = _JoinEvent(eid, le, re, payload, key)
        self.sides[port].add(ev)
        if self.anti:
            if port == LEFT:
                ev.outputs = []
                self._recover(ev, ev.le, out)
            else:
                self._recover_lefts(ev.key, ev.le, ev.le, ev.re, out)
            return
        ev.outputs = {}
        other = self.sides[1 - port]
        for partner in other.overlapping(key, ev.le, ev.re):
            self._pair(ev, partner, port, out)

    def _pair(self, ev: _JoinEvent, partner: _JoinEvent, port: int, out: RowsOut) -> None:
        left, right = (ev, partner) if port == LEFT else (partner, ev)
        if not self.matches(left, right):
            return
        le, re = max(ev.le, partner.le), min(ev.re, partner.re)
        payload = self.joined(left.payload, right.payload)
        oid = self._new_id()
        record = [oid, le, re, payload]
        ev.outputs[partner.id] = record
        partner.outputs[ev.id] = record
        out.insert(oid, le, re, payload)

    def _retract(self, port: int, eid: int, new_re: int, out: RowsOut) -> None:
        side = self.sides[port]
        ev = side.live.get(eid)
        if ev is None:
            return
        old_re = ev.re
        if new_re == old_re:
            return
        sync = min(old_re, new_re)
        if new_re <= ev.le:
            side.remove(ev)
            ev.re = ev.le
        else:
            ev.re = new_re
            side.moved_end(ev, old_re)
        if self.anti:
            if port == LEFT:
                if ev.re == ev.le:
                    for record in ev.outputs:
                        out.retract(record[0], record[1], record[2], record[1], ev.payload)
                    ev.outputs = []
                else:
                    self._recover(ev, sync, out)
            else:
                self._recover_lefts(ev.key, sync, ev.le, max(old_re, new_re), out)
            return
        other = self.sides[1 - port]
        for partner_id, record in list(ev.outputs.items()):
            partner = other.live.get(partner_id)
            end = min(ev.re, partner.re) if partner is not None else ev.re
            if end <= record[1]:
                out.retract(record[0], record[1], record[2], record[1], record[3])
                del ev.outputs[partner_id]
                if partner is not None:
                    del partner.outputs[ev.id]
            elif end != record[2]:
                out.retract(record[0], record[1], record[2], end, record[3])
                record[2] = end
        if new_re > old_re:
            for partner in other.overlapping(ev.key, old_re, new_re):
                if partner.id not in ev.outputs:
                    self._pair(ev, partner, port, out)

    # -- left anti --------------------------------------------------------------------------------
    def _recover_lefts(self, key: tuple[Any, ...], since: int, le: int, re: int, out: RowsOut) -> None:
        """A right event over ``[le, re)`` changed at ``since``: recompute the left events it touches."""
        for left in list(self.sides[LEFT].overlapping(key, le, re)):
            self._recover(left, since, out)

    def _uncovered(self, left: _JoinEvent, start: int) -> list[tuple[int, int]]:
        """Maximal parts of ``[start, left.re)`` that no matching right event covers."""
        spans = sorted((max(r.le, start), r.re) for r in self.sides[RIGHT].overlapping(left.key, start, left.re)
                       if self.matches(left, r))
        parts: list[tuple[int, int]] = []
        at = start
        for le, re in spans:
            if le > at:
                parts.append((at, le))
            if re > at:
                at = re
            if at >= left.re:
                break
        if at < left.re:
            parts.append((at, left.re))
        return parts

    def _recover(self, left: _JoinEvent, since: int, out: RowsOut) -> None:
        """Recompute ``left``'s uncovered parts from ``since`` on (before it nothing can have changed)."""
        since = max(since, left.le)
        kept: list[list[Any]] = []
        tail_from: list[Any] | None = None  # an output part running across ``since``: may be extended
        changed: list[list[Any]] = []
        for record in left.outputs:
            if record[2] < since:
                kept.append(record)
            elif record[1] < since:
                tail_from = record
            else:
                changed.append(record)
        parts = self._uncovered(left, since) if left.re > since else []
        old_by_le = {r[1]: r for r in changed}
        if tail_from is not None:
            old_by_le[tail_from[1]] = tail_from
        if tail_from is not None and parts and parts[0][0] == since:
            parts[0] = (tail_from[1], parts[0][1])
        elif tail_from is not None:
            parts.insert(0, (tail_from[1], since))
        result = list(kept)
        for le, re in parts:
            record = old_by_le.pop(le, None)
            if record is None:
                record = [self._new_id(), le, re]
                out.insert(record[0], le, re, left.payload)
            elif record[2] != re:
                out.retract(record[0], le, record[2], re, left.payload)
                record[2] = re
            result.append(record)
        for record in old_by_le.values():
            out.retract(record[0], record[1], record[2], record[1], left.payload)
        left.outputs = result

    # -- cleanup ----------------------------------------------------------------------------------
    def _cleanup(self) -> None:
        ctis = self.clock.ctis
        if min(ctis) >= INF:
            self.sides = (_Side(), _Side())
            return
        for port in (LEFT, RIGHT):
            side, other = self.sides[port], self.sides[1 - port]
            bound = min(ctis[port], ctis[1 - port] + 1)  # final (RE < own CTI), unreachable (RE <= other's)
            ends = side.ends
            while ends and ends[0][0] < bound:
                re, id = heapq.heappop(ends)
                ev = side.live.get(id)
                if ev is None or ev.re != re:
                    continue
                side.remove(ev)
                if not self.anti:
                    for partner_id in ev.outputs:
                        partner = other.live.get(partner_id)
                        if partner is not None:
                            partner.outputs.pop(id, None)

    def forget_at(self) -> int | None:
        """An event is gone once both ports' CTIs pass its end (`_cleanup`)."""
        ends = [side.ends[0][0] + 1 for side in self.sides if side.ends]
        return min(ends, default=INF)

    def state_size(self) -> dict[str, int]:
        return {"events": len(self.sides[LEFT].live) + len(self.sides[RIGHT].live)}
