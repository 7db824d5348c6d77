"""``left_anti`` (SEMANTICS §10): per left event, one output per maximal part of its lifetime that no matching
right event covers.

A change at sync time ``s`` (an insert at its LE, a retraction at ``min(RE, RE_new)``) can only change
coverage at or after ``s``, so a left event's outputs are recomputed from ``s`` on and kept below it; outputs
are matched by LE, so a part whose end moved is retracted to its new end, not re-inserted. A batch's changes
are recomputed together (`_recover_many`): the right events covering every touched left event are found in
one `SideStore.find`, and a new left event that none covers (the common case) gets its one output, its whole
lifetime, in one column block; only the others are walked one by one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import INSERT, Batch, RowsOut
from ..rules import INF
from .join_store import SideStore

__all__ = ["LeftAnti"]

LEFT, RIGHT = 0, 1


class LeftAnti:
    """The left-anti half of `JoinOp` (a mixin: it uses the join's sides, ids and ``where``)."""

    sides: tuple[SideStore, SideStore]
    #: left event id -> its output parts ``[out_id, le, re]``, in LE order
    parts: dict[int, list[list[int]]]
    next_id: int
    where: Any

    def matches(self, left: dict[str, Any], right: dict[str, Any]) -> bool:
        raise NotImplementedError

    def _anti_inserts(self, port: int, slots: np.ndarray, out: RowsOut) -> None:
        st = self.sides[port]
        if port == LEFT:
            self._recover_many(slots, st.le[slots], out, fresh=True)
            return
        left = self.sides[LEFT]
        probe, ls = left.find(st.code[slots], st.le[slots], st.re[slots])
        if len(ls):  # (each left event touched, from the earliest LE of the right events touching it)
            u, inv = np.unique(ls, return_inverse=True)
            since = np.full(len(u), INF, dtype=np.int64)
            np.minimum.at(since, inv.reshape(-1), st.le[slots][probe])
            self._recover_many(u, since, out)

    def _anti_retract(self, port: int, s: int, code: int, le: int, re: int, sync: int, reach: int,
                      out: RowsOut) -> None:
        """Event ``s`` of ``port`` (its lifetime now ``[le, re)``, ``re == le``: deleted) changed at ``sync``;
        ``reach``: the later of its old and new ends."""
        if port == LEFT:
            if re == le:
                lid = int(self.sides[LEFT].id[s])
                payload = self.sides[LEFT].payload(s)
                for record in self.parts.pop(lid, []):
                    out.retract(record[0], record[1], record[2], record[1], payload)
            else:
                self._recover_many(np.array([s], dtype=np.int64), np.array([sync], dtype=np.int64), out)
            return
        _, ls = self.sides[LEFT].find(np.array([code], dtype=np.int64), np.array([le], dtype=np.int64),
                                      np.array([reach], dtype=np.int64))
        if len(ls):
            self._recover_many(np.unique(ls), np.full(len(np.unique(ls)), sync, dtype=np.int64), out)

    def _recover_many(self, ls: np.ndarray, since: np.ndarray, out: RowsOut, fresh: bool = False) -> None:
        """Recompute left events ``ls`` from ``since`` on (``fresh``: just inserted, no outputs yet)."""
        left, right = self.sides
        since = np.maximum(since, left.le[ls])
        lre = left.re[ls]
        probe, rs = right.find(left.code[ls], since, lre)
        covered = np.zeros(len(ls), dtype=bool)
        covered[probe] = True
        if fresh and self.where is None and not covered.all():
            self._whole(ls[~covered], out)
            todo = np.flatnonzero(covered)
        else:
            todo = np.arange(len(ls))
        if not len(todo):
            return
        starts = np.searchsorted(probe, todo)
        ends = np.searchsorted(probe, todo, side="right")
        ids = left.id[ls].tolist()
        for j, a, b in zip(todo.tolist(), starts.tolist(), ends.tolist(), strict=True):
            self._recover(int(ls[j]), ids[j], int(since[j]), rs[a:b], fresh, out)

    def _whole(self, ls: np.ndarray, out: RowsOut) -> None:
        """New left events that nothing covers: each one output, its whole lifetime, as one column block."""
        left = self.sides[LEFT]
        n = len(ls)
        oids = np.arange(self.next_id + 1, self.next_id + 1 + n, dtype=np.int64)
        self.next_id += n
        le, re = left.le[ls], left.re[ls]
        self.parts.update((i, [[o, a, b]]) for i, o, a, b in zip(left.id[ls].tolist(), oids.tolist(), le.tolist(),
                                                                  re.tolist(), strict=True))
        out.block(Batch(np.full(n, INSERT, dtype=np.int8), oids, le, re, re.copy(), np.full(n, -1, dtype=np.int64),
                        left.payloads_block(ls)))

    def _uncovered(self, ls: int, start: int, rs: np.ndarray) -> list[tuple[int, int]]:
        """Maximal parts of ``[start, RE)`` of left slot ``ls`` that no right event of ``rs`` (those of its key
        overlapping that span) covers, where ``where`` holds."""
        left, right = self.sides
        lre = int(left.re[ls])
        if self.where is not None and len(rs):
            lp = left.payload(ls)
            rs = rs[[self.matches(lp, rp) for rp in right.payloads(rs)]]
        spans = sorted(zip(np.maximum(right.le[rs], start).tolist(), right.re[rs].tolist(), strict=True))
        parts: list[tuple[int, int]] = []
        at = start
        for le, re in spans:
            if le > at:
                parts.append((at, le))
            if re > at:
                at = re
            if at >= lre:
                break
        if at < lre:
            parts.append((at, lre))
        return parts

    def _recover(self, ls: int, lid: int, since: int, rs: np.ndarray, fresh: bool, out: RowsOut) -> None:
        """Recompute left slot ``ls``'s uncovered parts from ``since`` on (before it nothing can have changed)."""
        left = self.sides[LEFT]
        outputs = [] if fresh else self.parts.get(lid, [])
        kept: list[list[int]] = []
        tail_from: list[int] | None = None  # an output part running across ``since``: may be extended
        changed: list[list[int]] = []
        for record in outputs:
            if record[2] < since:
                kept.append(record)
            elif record[1] < since:
                tail_from = record
            else:
                changed.append(record)
        parts = self._uncovered(ls, since, rs) if int(left.re[ls]) > since else []
        old_by_le = {r[1]: r for r in changed}
        if tail_from is not None:
            old_by_le[tail_from[1]] = tail_from
        if tail_from is not None and parts and parts[0][0] == since:
            parts[0] = (tail_from[1], parts[0][1])
        elif tail_from is not None:
            parts.insert(0, (tail_from[1], since))
        result = list(kept)
        payload = None
        for le, re in parts:
            if payload is None:
                payload = left.payload(ls)
            if le not in old_by_le:
                self.next_id += 1
                record = [self.next_id, le, re]
                out.insert(record[0], le, re, payload)
                result.append(record)
                continue
            record = old_by_le.pop(le)
            if record[2] != re:
                out.retract(record[0], le, record[2], re, payload)
                record[2] = re
            result.append(record)
        for record in old_by_le.values():
            if payload is None:
                payload = left.payload(ls)
            out.retract(record[0], record[1], record[2], record[1], payload)
        self.parts[lid] = result
