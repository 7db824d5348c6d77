"""``union`` (SEMANTICS §10): the multiset sum of the inputs' CHTs, or with ``distinct`` one output row per
distinct ``(LE, RE, payload)``.

Plain union renames ids (inputs may reuse each other's) and passes every change through. Distinct union
counts, per row, how many input events hold it: a row appears when its count leaves 0 and disappears when
it returns to 0; when an event's end moves and its old row disappears while its new row appears, the output
event is retracted to the new end instead of deleted and re-inserted (minimal diffs, §7).

State: an input event is forgotten once its port's CTI passes its end (it can no longer change); a distinct
row once the output CTI passes its end (no input can add to or take from it any more).
"""

from __future__ import annotations

import heapq
import json
from typing import Any

from udm.host.query.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from ..common import INF, NEG, cjson
from ..context import Context
from ..operator import Operator
from ._ports import PortClock

__all__ = ["UnionStep"]

#: a distinct row: (LE, RE, canonical payload JSON)
Row = tuple[int, int, str]


class _Held:
    """An input event as union holds it: its lifetime, payload text and (plain union) its output id."""

    __slots__ = ("le", "out_id", "payload_text", "re")

    def __init__(self, le: int, re: int, payload_text: str, out_id: str) -> None:
        self.le = le
        self.re = re
        self.payload_text = payload_text
        self.out_id = out_id

    def __getstate__(self) -> tuple[int, int, str, str]:
        return (self.le, self.re, self.payload_text, self.out_id)

    def __setstate__(self, s: tuple[int, int, str, str]) -> None:
        self.le, self.re, self.payload_text, self.out_id = s


class _DistinctRow:
    """How many input events hold a distinct row, and the output event showing it."""

    __slots__ = ("count", "out_id")

    def __init__(self, out_id: str, count: int) -> None:
        self.out_id = out_id
        self.count = count

    def __getstate__(self) -> tuple[str, int]:
        return (self.out_id, self.count)

    def __setstate__(self, s: tuple[str, int]) -> None:
        self.out_id, self.count = s


class UnionStep(Operator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx, reads_input=False)
        self.ports = len(bs.step.sources)
        self.distinct = bool(bs.step.distinct)
        self.clock = PortClock(self.ports)
        #: per port: input id -> held event
        self.held: list[dict[str, _Held]] = [{} for _ in range(self.ports)]
        #: per port: (RE, id) of held events, for forgetting closed ones
        self.ends: list[list[tuple[int, str]]] = [[] for _ in range(self.ports)]
        #: distinct union: row -> its count and output id; (RE, row) for forgetting final rows
        self.rows: dict[Row, _DistinctRow] = {}
        self.row_ends: list[tuple[int, Row]] = []
        #: distinct union: the latest output CTI (held below the clock's while rows can split or merge)
        self.emitted = NEG
        self.next_id = 0

    def _new_id(self) -> str:
        self.next_id += 1
        return f"o{self.next_id}"

    def feed(self, el: Element) -> list[Element]:
        return self.feed_port(0, el)

    def feed_port(self, port: int, el: Element) -> list[Element]:
        if isinstance(el, Insert):
            return self._insert(port, el)
        if isinstance(el, Retract):
            return self._retract(port, el)
        return self._cti(port, el.t)

    def _insert(self, port: int, el: Insert) -> list[Element]:
        text = cjson(el.payload) if self.distinct else ""
        held = _Held(el.le, el.re, text, "")
        self.held[port][el.id] = held
        if el.re < INF:
            heapq.heappush(self.ends[port], (el.re, el.id))
        if not self.distinct:
            held.out_id = self._new_id()
            return [Insert(held.out_id, el.le, el.re, el.payload)]
        out: list[Element] = []
        self._add_row((el.le, el.re, text), el.payload, out)
        return out

    def _retract(self, port: int, el: Retract) -> list[Element]:
        held = self.held[port].get(el.id)
        if held is None or el.re_new == held.re:
            return []
        old_re, new_re = held.re, el.re_new
        if new_re <= held.le:
            del self.held[port][el.id]
        else:
            held.re = new_re
            if new_re < INF:
                heapq.heappush(self.ends[port], (new_re, el.id))
        if not self.distinct:
            return [Retract(held.out_id, held.le, old_re, max(new_re, held.le))]
        out: list[Element] = []
        old_row = (held.le, old_re, held.payload_text)
        old = self.rows[old_row]
        old.count -= 1
        if new_re <= held.le:
            if old.count == 0:
                del self.rows[old_row]
                out.append(Retract(old.out_id, held.le, old_re, held.le))
            return out
        new_row = (held.le, new_re, held.payload_text)
        if old.count == 0 and new_row not in self.rows:
            # the same output event now shows the new row: move its end (minimal diff)
            del self.rows[old_row]
            self.rows[new_row] = _DistinctRow(old.out_id, 1)
            if new_re < INF:
                heapq.heappush(self.row_ends, (new_re, new_row))
            out.append(Retract(old.out_id, held.le, old_re, new_re))
            return out
        if old.count == 0:
            del self.rows[old_row]
            out.append(Retract(old.out_id, held.le, old_re, held.le))
        self._add_row(new_row, None, out)
        return out

    def _add_row(self, row: Row, payload: Any, out: list[Element]) -> None:
        have = self.rows.get(row)
        if have is not None:
            have.count += 1
            return
        out_id = self._new_id()
        self.rows[row] = _DistinctRow(out_id, 1)
        if row[1] < INF:
            heapq.heappush(self.row_ends, (row[1], row))
        value = payload if payload is not None else json.loads(row[2])
        out.append(Insert(out_id, row[0], row[1], value))

    def _distinct_hold(self, low: int) -> int:
        """The output CTI a distinct union may emit: at most ``low``, and at most the LE of every
        ``(LE, payload)`` class that holds two or more input events of which one can still change its end.
        Such a change can split one output row in two or merge two into one, and either needs an output
        element with sync time LE (an insert or a full deletion); after ``cti(t > LE)`` it would violate the
        CTI."""
        if not self.rows:
            return low
        per_class: dict[tuple[int, str], int] = {}
        for (le, _re, text), r in self.rows.items():
            if le < low:
                per_class[(le, text)] = per_class.get((le, text), 0) + r.count
        hold = low
        for held in self.held:
            for h in held.values():  # held events are not final (forgotten once their port's CTI passes RE)
                if h.le < hold and per_class.get((h.le, h.payload_text), 0) >= 2:
                    hold = h.le
        return hold

    def _cti(self, port: int, t: int) -> list[Element]:
        if self.distinct:
            self.clock.advance(port, t)
            self._forget(port, t)
            low = self.clock.out
            if low < INF:
                low = self._distinct_hold(low)
            out: list[Element] = []
            if low > self.emitted:
                self.emitted = low
                out.append(Cti(low))
            ends = self.row_ends
            while ends and ends[0][0] < self.emitted:  # rows that can no longer change
                _, row = heapq.heappop(ends)
                self.rows.pop(row, None)
        else:
            out = self.clock.advance(port, t)
            self._forget(port, t)
        if self.clock.out >= INF:
            self.held = [{} for _ in range(self.ports)]
            self.ends = [[] for _ in range(self.ports)]
            self.rows = {}
            self.row_ends = []
        return out

    def _forget(self, port: int, t: int) -> None:
        """Input events of ``port`` that ended before its CTI are final: forget them."""
        ends, held = self.ends[port], self.held[port]
        while ends and ends[0][0] < t:
            re, id = heapq.heappop(ends)
            h = held.get(id)
            if h is not None and h.re == re:
                del held[id]

    def state_size(self) -> dict[str, int]:
        return {"events": sum(len(h) for h in self.held) + len(self.rows)}

