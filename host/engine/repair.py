"""Retraction-chain repair of one query input (seeds/003 §4.6 Finalize, semantics-notes 20).

Over a network, a retraction may overtake the insert it shortens, and the links of a retraction chain
(``[1, 10) -> 8``, then ``[1, 8) -> 5``) may arrive swapped. Without repair both are dead letters (an
unknown id, a lifetime mismatch). With ``repair: {horizon: H}`` on an input, such a retraction waits in a
buffer by id; the insert (or the chain link) that makes it applicable releases it right after itself, in
chain order, so the engine sees a valid stream.

A waiting retraction is dead-lettered with its reason once it can no longer be matched: when a CTI passes
its sync time (a matching insert or link would violate that CTI), when the input's watermark (the largest
sync time or CTI seen) passes its sync time by more than ``H`` ticks, or at the end of the input. Memory is
therefore bounded by the retractions of the last ``H`` ticks, and the id registry is trimmed by CTIs as the
engine's is.

The stage sits in front of the input's first operator and forwards everything else unchanged; the
operator still validates what it receives (duplicate ids, CTI violations, ``on_violation``).
"""

from __future__ import annotations

import heapq
from typing import Any

from udm.host.temporal.elements import Cti, Insert, Retract, element_to_json

from .common import INF, NEG, DeadLetter
from .rules import MISMATCH, UNKNOWN_ID, format_time, mismatch_reason, unknown_id_reason

__all__ = ["ChainRepair"]


def _sync(r: Retract) -> int:
    return r.re if r.re < r.re_new else r.re_new


class ChainRepair:
    """Buffers retractions that arrive before what they retract; releases them in chain order."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        #: id -> [le, re] of events this stage forwarded and believes live
        self.live: dict[str, list[int]] = {}
        #: (re, id) of live events, to forget them once a CTI closes them
        self.ends: list[tuple[int, str]] = []
        #: id -> [(line, retraction)] waiting for their insert or chain link
        self.waiting: dict[str, list[tuple[int | None, Retract]]] = {}
        #: (sync time, seq, id) of waiting retractions, earliest first
        self.expiry: list[tuple[int, int, str]] = []
        self.seq = 0
        self.cti = NEG
        self.watermark = NEG
        #: refused retractions of the last call: (dead letter, category)
        self.dead: list[tuple[DeadLetter, str]] = []

    def held(self) -> int:
        return sum(len(v) for v in self.waiting.values())

    # ---------------------------------------------------------------------------------------------
    def push(self, el: Any, line: int | None) -> list[tuple[int | None, Any]]:
        """``el`` (line ``line``) arrives; returns the (line, element) pairs to feed the operator now."""
        t = type(el)
        if t is Insert or isinstance(el, Insert):
            return self._insert(el, line)
        if t is Retract or isinstance(el, Retract):
            return self._retract(el, line)
        if isinstance(el, Cti):
            self._advance(el.t, cti=True)
            return [(line, el)]
        return [(line, el)]  # bad lines: the runner dead-letters them

    def _insert(self, el: Insert, line: int | None) -> list[tuple[int | None, Any]]:
        out: list[tuple[int | None, Any]] = [(line, el)]
        if el.id not in self.live and el.re > el.le:
            self.live[el.id] = [el.le, el.re]
            if el.re < INF:
                heapq.heappush(self.ends, (el.re, el.id))
            out.extend(self._release(el.id))
        self._advance(el.le)
        return out

    def _retract(self, el: Retract, line: int | None) -> list[tuple[int | None, Any]]:
        rec = self.live.get(el.id)
        sync = _sync(el)
        applies = rec is not None and rec[0] == el.le and rec[1] == el.re
        if applies or sync < self.cti or el.re_new < el.le or el.re <= el.le:
            # applicable now, or beyond repair (a CTI violation, a bad lifetime): the operator decides
            out = [(line, el)]
            if applies:
                self._apply(el)
                out.extend(self._release(el.id))
            self._advance(sync)
            return out
        self.waiting.setdefault(el.id, []).append((line, el))
        self.seq += 1
        heapq.heappush(self.expiry, (sync, self.seq, el.id))
        self._advance(sync)
        return []

    def _apply(self, r: Retract) -> None:
        if r.re_new <= r.le:
            self.live.pop(r.id, None)
        else:
            self.live[r.id][1] = r.re_new
            if r.re_new < INF:
                heapq.heappush(self.ends, (r.re_new, r.id))

    def _release(self, id: str) -> list[tuple[int | None, Any]]:
        """Waiting retractions of ``id`` that now apply, in chain order."""
        out: list[tuple[int | None, Any]] = []
        waiting = self.waiting.get(id)
        while waiting:
            rec = self.live.get(id)
            if rec is None:
                break
            k = next((i for i, (_, r) in enumerate(waiting) if r.le == rec[0] and r.re == rec[1]), None)
            if k is None:
                break
            line, r = waiting.pop(k)
            out.append((line, r))
            self._apply(r)
        if waiting is not None and not waiting:
            del self.waiting[id]
        return out

    # ---------------------------------------------------------------------------------------------
    def _advance(self, t: int, cti: bool = False) -> None:
        """Time moved to ``t`` (an element's sync time, or a CTI): refuse what can no longer match."""
        forget = cti and t > self.cti
        if forget:
            self.cti = t
        if t > self.watermark:
            self.watermark = t
        w = self.watermark
        limit = self.cti if self.horizon >= INF or w - self.horizon < self.cti else w - self.horizon
        if t >= INF:
            limit = INF
        h = self.expiry
        while h and (h[0][0] < limit or limit >= INF):
            sync, _, id = heapq.heappop(h)
            self._expire(id, sync, limit)
        if forget:  # after the reasons above were written against the live lifetimes
            self._forget(t)

    def _expire(self, id: str, sync: int, limit: int) -> None:
        waiting = self.waiting.get(id)
        if not waiting:
            return
        for k, (line, r) in enumerate(waiting):
            if _sync(r) == sync:
                waiting.pop(k)
                if not waiting:
                    del self.waiting[id]
                self.dead.append(self._dead_letter(line, r, limit))
                return

    def _dead_letter(self, line: int | None, r: Retract, limit: int) -> tuple[DeadLetter, str]:
        why = ("the input ended" if limit >= INF else
               f"CTI {format_time(self.cti)} passed it" if limit == self.cti else
               f"nothing matched it within the repair horizon ({self.horizon} ticks)")
        rec = self.live.get(r.id)
        if rec is None:
            reason, category = f"{unknown_id_reason(r.id)} ({why})", UNKNOWN_ID
        else:
            reason, category = f"{mismatch_reason(r.id, r.le, r.re, rec[0], rec[1])} ({why})", MISMATCH
        return DeadLetter(line, reason, element_to_json(r)), category

    def _forget(self, c: int) -> None:
        """Ids of events closed by CTI ``c`` (``RE < c``) can no longer be retracted."""
        h = self.ends
        live = self.live
        while h and h[0][0] < c:
            re, id = heapq.heappop(h)
            rec = live.get(id)
            if rec is not None and rec[1] == re:
                del live[id]
        if c >= INF:
            self.live = {}
            self.ends = []

    def take_dead(self) -> list[tuple[DeadLetter, str]]:
        d = self.dead
        self.dead = []
        return d

