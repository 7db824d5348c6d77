"""``align {max_delay, max_wait?}`` (seeds/003 §4.5, SEMANTICS §7 and §10): the blocking axis of consistency as
a step of its own, after any step.

Align passes its input through, holding each insert (and the retractions that revise it while it is held)
until one of:

* the CTI makes the event final (`rules.final`: it ends before the CTI, so nothing can change it any more);
* it is ``max_delay`` ticks behind the watermark ``m = max(latest CTI, max LE seen)``: its LE is at or below
  `rules.speculation_point` (the window step's ``max_delay`` rule, read on event starts);
* it has been held ``max_wait`` of wall-clock time (``max_wait`` set): it has been computable that long.

A held insert that its retractions shorten goes out once, with its last lifetime; one they delete never goes
out (minimal diffs). Once an event is out, its later retractions pass at once, as seeds/003 says ("once an
event is unblocked, all subsequent retractions for that event should also be unblocked"). Released events go
out in start order. The output CTI is ``min(latest CTI, LE of every held event)``, so a held event never
violates it when it is released. The CHT is the input's: ``max_delay: 0`` passes everything at once (every
insert's LE is at or below the watermark it raises), ``"inf"`` releases only final events, so an in-order
input gives no retraction after it.

State: the held events; bounded while CTIs advance (each is held until its end passes the CTI, or sooner).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from udm.host.io.arrival import wall_micros
from udm.host.model.plan import BoundStep

from ..batch import CTI, INSERT, RETRACT, Batch, RowsOut
from ..context import Context
from ..operator import Operator
from ..rules import I64_MIN, INF, NEG, final, speculation_point

__all__ = ["AlignOp"]


class _Held:
    """A held event: its lifetime so far, payload, line and when it arrived (wall clock)."""

    __slots__ = ("le", "line", "payload", "re", "since")

    def __init__(self, le: int, re: int, payload: Any, line: int, since: int) -> None:
        self.le = le
        self.re = re
        self.payload = payload
        self.line = line
        self.since = since

    def __getstate__(self) -> tuple[int, int, Any, int, int]:
        return (self.le, self.re, self.payload, self.line, self.since)

    def __setstate__(self, s: tuple[int, int, Any, int, int]) -> None:
        self.le, self.re, self.payload, self.line, self.since = s


class AlignOp(Operator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        self.max_delay: int = bs.step.max_delay
        self.max_wait: int | None = bs.step.max_wait
        self.cti = NEG
        self.watermark = NEG
        self.out_cti = NEG
        #: engine id -> held event
        self.held: dict[int, _Held] = {}
        #: (LE, id) of held events: the watermark releases and the output CTI read the least
        self.by_le: list[tuple[int, int]] = []
        #: (RE, id) per end a held event had: the CTI releases the final ones (stale entries skipped)
        self.by_re: list[tuple[int, int]] = []
        #: (arrival, id) under ``max_wait``
        self.by_since: list[tuple[int, int]] = []

    # -- input -----------------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        if not self.held and self._passes(b):
            return self._through(b)
        out = RowsOut()
        kinds = b.kind.tolist()
        now = self._now() if self.max_wait is not None else 0
        for i, k in enumerate(kinds):
            if k == INSERT:
                le = int(b.le[i])
                if le > self.watermark:
                    self.watermark = le
                self._hold(int(b.id[i]), le, int(b.re[i]), b.payload.row(i), int(b.line[i]), now)
            elif k == RETRACT:
                self._retract(b, i, out)
            else:
                t = int(b.le[i])
                if t > self.cti:
                    self.cti = t
                    if t > self.watermark:
                        self.watermark = t
            self._release(out, now)
        return out.batch()

    def flush(self) -> Batch | None:
        """Held output past its ``max_wait`` goes out even without input (`QueryRunner.tick` calls this)."""
        if self.max_wait is None or not self.held:
            return None
        out = RowsOut()
        self._release(out, self._now())
        return out.batch()

    def _now(self) -> int:
        clock = getattr(self.ctx, "clock", None)
        return int(clock()) if clock is not None else wall_micros()

    def _passes(self, b: Batch) -> bool:
        """Nothing held and every insert of ``b`` released on arrival: the batch goes through as it is."""
        ins = b.kind == INSERT
        if not ins.any():
            return True
        if self.max_delay >= INF:
            return False
        moves = np.where(b.kind != RETRACT, b.le, I64_MIN)
        wm = np.maximum.accumulate(np.maximum(moves, max(self.watermark, I64_MIN)))
        return bool((b.le[ins] <= wm[ins] - self.max_delay).all())

    def _through(self, b: Batch) -> Batch:
        """``b`` as it is, but for CTIs that do not raise the output CTI (nothing is held: it is the input's)."""
        if not len(b):
            return b
        ins = b.kind == INSERT
        if ins.any():
            self.watermark = max(self.watermark, int(b.le[ins].max()))
        ctis = np.flatnonzero(b.kind == CTI)
        if not len(ctis):
            return b
        keep = np.ones(len(b), dtype=bool)
        for j in ctis.tolist():
            t = int(b.le[j])
            if t > self.cti:
                self.cti = t
                self.watermark = max(self.watermark, t)
            if t > self.out_cti:
                self.out_cti = t
            else:
                keep[j] = False
        return b if keep.all() else b.take(np.flatnonzero(keep))

    # -- state -----------------------------------------------------------------------------------------
    def _hold(self, eid: int, le: int, re: int, payload: Any, line: int, now: int) -> None:
        self.held[eid] = _Held(le, re, payload, line, now)
        heapq.heappush(self.by_le, (le, eid))
        heapq.heappush(self.by_re, (re, eid))
        if self.max_wait is not None:
            heapq.heappush(self.by_since, (now, eid))

    def _retract(self, b: Batch, i: int, out: RowsOut) -> None:
        eid = int(b.id[i])
        h = self.held.get(eid)
        rn = int(b.rn[i])
        if h is None:  # out already: its revisions pass at once
            out.retract(eid, int(b.le[i]), int(b.re[i]), rn, b.payload.row(i), int(b.line[i]))
            return
        if rn <= h.le:  # deleted while held: it never goes out
            del self.held[eid]
            return
        h.re = rn
        heapq.heappush(self.by_re, (rn, eid))

    def _release(self, out: RowsOut, now: int) -> None:
        """Release what the CTI made final, what is ``max_delay`` behind the watermark and what waited
        ``max_wait``, in start order; then the output CTI."""
        held = self.held
        if held:
            due: set[int] = set()
            sp = speculation_point(self.watermark, self.max_delay)
            while self.by_le and self.by_le[0][0] <= sp:
                eid = heapq.heappop(self.by_le)[1]
                if eid in held:
                    due.add(eid)
            c = self.cti
            while self.by_re and (final(self.by_re[0][0], c) or self.by_re[0][1] not in held):
                re, eid = heapq.heappop(self.by_re)
                h = held.get(eid)
                if h is not None and h.re == re:
                    due.add(eid)
            if self.max_wait is not None:
                limit = now - self.max_wait
                while self.by_since and (self.by_since[0][0] <= limit or self.by_since[0][1] not in held):
                    eid = heapq.heappop(self.by_since)[1]
                    if eid in held:
                        due.add(eid)
            for eid in sorted(due, key=lambda e: (held[e].le, e)):
                h = held.pop(eid)
                out.insert(eid, h.le, h.re, h.payload, h.line)
        low = self.cti
        while self.by_le and self.by_le[0][1] not in held:
            heapq.heappop(self.by_le)
        if self.by_le and self.by_le[0][0] < low:
            low = self.by_le[0][0]
        if low > self.out_cti:
            self.out_cti = low
            out.cti(low)
        if not held:
            self.by_le, self.by_re, self.by_since = [], [], []

    def state_size(self) -> dict[str, int]:
        return {"events": len(self.held)}
