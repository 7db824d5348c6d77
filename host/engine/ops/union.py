"""``union`` (SEMANTICS §10): the multiset sum of the inputs' CHTs, or with ``distinct`` one output row per
distinct ``(LE, RE, payload)``.

Plain union passes every row through under an id made unique across its inputs (``id * ports + port``:
the inputs number their events independently), column-wise, with no state but its port clock. Distinct
union counts, per row, how many input events hold it: a row appears when its count leaves 0 and disappears
when it returns to 0; when an event's end moves and its old row disappears while its new row appears, the
output event is retracted to the new end instead of deleted and re-inserted (minimal diffs, §7).

State (distinct): an input event is forgotten once its port's CTI passes its end (it can no longer change);
a distinct row once the output CTI passes its end (no input can add to or take from it any more).
"""

from __future__ import annotations

import heapq
import json
from typing import Any

import numpy as np

from udm.host.model.plan import BoundStep
from udm.host.temporal.strict import canonical_json

from ..batch import CTI, INSERT, RETRACT, Batch, RowsOut
from ..context import Context
from ..operator import Operator
from ..rules import INF, NEG
from .ports import PortClock

__all__ = ["UnionOp"]

#: a distinct row: (LE, RE, canonical payload JSON)
Row = tuple[int, int, str]


class _DistinctRow:
    """How many input events hold a distinct row, and the output event showing it."""

    __slots__ = ("count", "out_id")

    def __init__(self, out_id: int, count: int) -> None:
        self.out_id = out_id
        self.count = count

    def __getstate__(self) -> tuple[int, int]:
        return (self.out_id, self.count)

    def __setstate__(self, s: tuple[int, int]) -> None:
        self.out_id, self.count = s


class UnionOp(Operator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        self.ports = len(bs.step.sources)
        self.distinct = bool(bs.step.distinct)
        self.clock = PortClock(self.ports)
        #: distinct union: per port, input id -> [le, re, payload text] of its live events
        self.held: list[dict[int, list[Any]]] = [{} for _ in range(self.ports)]
        self.ends: list[list[tuple[int, int]]] = [[] for _ in range(self.ports)]
        #: distinct union: row -> its count and output id; (RE, row) for forgetting final rows
        self.rows: dict[Row, _DistinctRow] = {}
        self.row_ends: list[tuple[int, Row]] = []
        #: distinct union: the latest output CTI (held below the clock's while rows can split or merge)
        self.emitted = NEG
        self.next_id = 0

    def process(self, port: int, b: Batch) -> Batch | None:
        if not self.distinct:
            return self._plain(port, b)
        out = RowsOut()
        kinds = b.kind.tolist()
        for i, k in enumerate(kinds):
            if k == INSERT:
                self._insert(port, int(b.id[i]), int(b.le[i]), int(b.re[i]), b.payload.row(i), out)
            elif k == RETRACT:
                self._retract(port, int(b.id[i]), int(b.rn[i]), out)
            else:
                self._cti(port, int(b.le[i]), out)
        return out.batch()

    # -- plain union: column-wise ------------------------------------------------------------------
    def _plain(self, port: int, b: Batch) -> Batch | None:
        ctis = np.flatnonzero(b.kind == CTI)
        keep = None
        if len(ctis):
            keep = np.ones(len(b), dtype=bool)
            le = b.le.copy()
            for j in ctis.tolist():
                t = self.clock.advance(port, int(b.le[j]))
                if t is None:
                    keep[j] = False
                else:
                    le[j] = t
            b = Batch(b.kind, b.id, le, np.where(b.kind == CTI, le, b.re), np.where(b.kind == CTI, le, b.rn),
                      b.line, b.payload, b.src)
        ids = np.where(b.kind == CTI, 0, b.id * self.ports + port)
        out = Batch(b.kind, ids, b.le, b.re, b.rn, b.line, b.payload, None)
        if keep is not None and not keep.all():
            out = out.take(np.flatnonzero(keep))
        return out

    # -- distinct union: row by row ------------------------------------------------------------------
    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _insert(self, port: int, eid: int, le: int, re: int, payload: Any, out: RowsOut) -> None:
        text = canonical_json(payload)
        self.held[port][eid] = [le, re, text]
        if re < INF:
            heapq.heappush(self.ends[port], (re, eid))
        self._add_row((le, re, text), payload, out)

    def _retract(self, port: int, eid: int, new_re: int, out: RowsOut) -> None:
        held = self.held[port].get(eid)
        if held is None or new_re == held[1]:
            return
        le, old_re, text = held
        if new_re <= le:
            del self.held[port][eid]
        else:
            held[1] = new_re
            if new_re < INF:
                heapq.heappush(self.ends[port], (new_re, eid))
        old_row = (le, old_re, text)
        old = self.rows[old_row]
        old.count -= 1
        if new_re <= le:
            if old.count == 0:
                del self.rows[old_row]
                out.retract(old.out_id, le, old_re, le, json.loads(text))
            return
        new_row = (le, new_re, text)
        if old.count == 0 and new_row not in self.rows:
            # the same output event now shows the new row: move its end (minimal diff)
            del self.rows[old_row]
            self.rows[new_row] = _DistinctRow(old.out_id, 1)
            if new_re < INF:
                heapq.heappush(self.row_ends, (new_re, new_row))
            out.retract(old.out_id, le, old_re, new_re, json.loads(text))
            return
        if old.count == 0:
            del self.rows[old_row]
            out.retract(old.out_id, le, old_re, le, json.loads(text))
        self._add_row(new_row, None, out)

    def _add_row(self, row: Row, payload: Any, out: RowsOut) -> None:
        have = self.rows.get(row)
        if have is not None:
            have.count += 1
            return
        out_id = self._new_id()
        self.rows[row] = _DistinctRow(out_id, 1)
        if row[1] < INF:
            heapq.heappush(self.row_ends, (row[1], row))
        out.insert(out_id, row[0], row[1], payload if payload is not None else json.loads(row[2]))

    def _distinct_hold(self, low: int) -> int:
        """The output CTI a distinct union may emit (semantics-notes 14): at most ``low``, and at most the LE
        of every ``(LE, payload)`` class holding two or more input events of which one can still change its
        end (one output row may then split in two or two merge into one, at sync time LE)."""
        if not self.rows:
            return low
        per_class: dict[tuple[int, str], int] = {}
        for (le, _re, text), r in self.rows.items():
            if le < low:
                per_class[(le, text)] = per_class.get((le, text), 0) + r.count
        hold = low
        for held in self.held:
            for le, _re, text in held.values():  # held events are not final
                if le < hold and per_class.get((le, text), 0) >= 2:
                    hold = le
        return hold

    def _cti(self, port: int, t: int, out: RowsOut) -> None:
        self.clock.advance(port, t)
        self._forget(port, t)
        low = self.clock.out
        if low < INF:
            low = self._distinct_hold(low)
        if low > self.emitted:
            self.emitted = low
            out.cti(low)
        ends = self.row_ends
        while ends and ends[0][0] < self.emitted:  # rows that can no longer change
            _, row = heapq.heappop(ends)
            self.rows.pop(row, None)
        if self.clock.out >= INF:
            self.held = [{} for _ in range(self.ports)]
            self.ends = [[] for _ in range(self.ports)]
            self.rows = {}
            self.row_ends = []

    def _forget(self, port: int, t: int) -> None:
        """Input events of ``port`` that ended before its CTI are final: forget them."""
        ends, held = self.ends[port], self.held[port]
        while ends and ends[0][0] < t:
            re, eid = heapq.heappop(ends)
            h = held.get(eid)
            if h is not None and h[1] == re:
                del held[eid]

    def state_size(self) -> dict[str, int]:
        return {"events": sum(len(h) for h in self.held) + len(self.rows)}
