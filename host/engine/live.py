"""`LiveEvents`: the live events of one query input, as its gate holds them (SEMANTICS §1).

For each live event: its engine id, its lifetime (LE as accepted, and the LE the input gave when ``adjust``
moved it: later retractions quote that one), and its payload, which a retraction carries downstream.

Events a batch inserts in bulk stay columnar (`_Chunk`: the batch's id column, numpy lifetimes, the
payload rows): on an in-order stream nothing ever looks them up one by one, and a CTI closes them with one
comparison. An event a retraction names is looked up (a chunk builds its id map the first time) and moved
to a plain dict, where it changes. Ids of events closed by the CTI in force (``RE < c``) are forgotten
(semantics-notes 63): nothing can name them any more, and keeping them would let state grow without bound.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.io.arrow_numpy import arrow_of
from udm.sdk import INF

from .payload import Payload

__all__ = ["LiveEvents", "Record"]

#: a chunk with fewer live rows than this fraction of its length is compacted at a CTI
_COMPACT = 0.25


class Record:
    """One live event looked up by id."""

    __slots__ = ("eid", "le", "ole", "payload", "re")

    def __init__(self, eid: int, le: int, ole: int, re: int, payload: dict[str, Any]) -> None:
        self.eid = eid
        self.le = le
        self.ole = ole
        self.re = re
        self.payload = payload

    def __getstate__(self) -> tuple:
        return (self.eid, self.le, self.ole, self.re, self.payload)

    def __setstate__(self, s: tuple) -> None:
        self.eid, self.le, self.ole, self.re, self.payload = s


class _Chunk:
    """Events one batch inserted: ids (a string array), engine ids, lifetimes and payloads, row-aligned.
    With ``rows``, the ids and payloads are the whole batch's and event ``k`` is their row ``rows[k]``: the
    gate hands them over without a copy, and nothing reads them unless a retraction looks an event up."""

    __slots__ = ("alive", "eid", "ids", "le", "maxre", "nalive", "ole", "payload", "pos", "re", "rows")

    def __init__(self, ids: pa.Array, eid: np.ndarray, le: np.ndarray, ole: np.ndarray | None, re: np.ndarray,
                 payload: Payload, rows: np.ndarray | None = None) -> None:
        self.ids = ids
        self.eid = eid
        self.le = le
        self.ole = ole
        self.re = re
        self.payload = payload
        self.rows = rows
        self.alive = np.ones(len(eid), dtype=bool)
        self.nalive = len(eid)
        self.maxre = int(re.max()) if len(re) else -INF
        self.pos: dict[str, int] | None = None

    def src(self, i: int) -> int:
        """The row of ``ids`` / ``payload`` of event ``i``."""
        return i if self.rows is None else int(self.rows[i])

    def find(self, id: str) -> int:
        pos = self.pos
        if pos is None:
            names = self.ids.to_pylist()
            rows = self.rows
            pos = self.pos = ({k: i for i, k in enumerate(names)} if rows is None else
                              {names[r]: i for i, r in enumerate(rows.tolist())})
        i = pos.get(id, -1)
        return i if i >= 0 and self.alive[i] else -1

    def live_ids(self) -> pa.Array | None:
        if not self.nalive:
            return None
        if self.rows is None:
            return self.ids if self.nalive == len(self.eid) else self.ids.filter(arrow_of(self.alive))
        return self.ids.take(arrow_of(self.rows[self.alive] if self.nalive < len(self.eid) else self.rows))

    def close(self, c: int) -> None:
        """Forget rows with ``RE < c``."""
        gone = self.alive & (self.re < c)
        if gone.any():
            self.alive &= ~gone
            self.nalive -= int(gone.sum())

    def compacted(self) -> _Chunk:
        keep = np.flatnonzero(self.alive)
        src = keep if self.rows is None else self.rows[keep]
        ole = None if self.ole is None else self.ole[keep]
        return _Chunk(self.ids.take(arrow_of(src)), self.eid[keep], self.le[keep], ole, self.re[keep],
                      self.payload.take(src))

    def __getstate__(self) -> tuple:
        c = self.compacted() if self.nalive < len(self.eid) or self.rows is not None else self
        return (c.ids.to_pylist(), c.eid, c.le, c.ole, c.re, c.payload)

    def __setstate__(self, s: tuple) -> None:
        ids, eid, le, ole, re, payload = s
        self.__init__(pa.array(ids, pa.string()), eid, le, ole, re, payload)  # type: ignore[misc]


class LiveEvents:
    """The live events of one input (see the module docstring)."""

    def __init__(self) -> None:
        self.chunks: list[_Chunk] = []
        self.single: dict[str, Record] = {}
        #: (RE, id) of `single` records, to forget them once closed
        self.ends: list[tuple[int, str]] = []
        #: the next engine id
        self.next_eid = 1

    def __len__(self) -> int:
        return len(self.single) + sum(ch.nalive for ch in self.chunks)

    def new_ids(self, n: int) -> np.ndarray:
        first = self.next_eid
        self.next_eid += n
        return np.arange(first, first + n, dtype=np.int64)

    def add_chunk(self, ids: pa.Array, le: np.ndarray, ole: np.ndarray | None, re: np.ndarray,
                  payload: Payload, gone: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """Register a batch's valid inserts (row-aligned columns; ``gone``: those the batch's own retractions
        deleted, which take an engine id but are not live; ``rows``: the rows of ``ids`` and ``payload``
        that hold them, when those are the whole batch's); returns their engine ids."""
        eid = self.new_ids(len(le))
        if len(le):
            ch = _Chunk(ids, eid, le, ole, re, payload, rows)
            if gone is not None and gone.any():
                ch.alive &= ~gone
                ch.nalive -= int(gone.sum())
            if ch.nalive:
                self.chunks.append(ch)
        return eid

    def add(self, id: str, le: int, ole: int, re: int, payload: dict[str, Any]) -> int:
        eid = self.next_eid
        self.next_eid += 1
        self.single[id] = Record(eid, le, ole, re, payload)
        if re < INF:
            heapq.heappush(self.ends, (re, id))
        return eid

    def get(self, id: str) -> Record | None:
        """The live event ``id`` (moved out of its chunk, so it can change), or None."""
        rec = self.single.get(id)
        if rec is not None:
            return rec
        found = self._in_chunk(id)
        if found is None:
            return None
        ch, i = found
        ch.alive[i] = False
        ch.nalive -= 1
        rec = _record(ch, i, ch.payload.row(ch.src(i)))
        self.single[id] = rec
        if rec.re < INF:
            heapq.heappush(self.ends, (rec.re, id))
        return rec

    def contains(self, id: str) -> bool:
        return self.get(id) is not None

    def peek(self, id: str) -> Record | None:
        """The live event ``id`` without moving it out of its chunk (a read)."""
        rec = self.single.get(id)
        if rec is not None:
            return rec
        found = self._in_chunk(id)
        return None if found is None else _record(*found, {})

    def _in_chunk(self, id: str) -> tuple[_Chunk, int] | None:
        """The chunk and row holding the live event ``id``, or None."""
        for ch in self.chunks:
            i = ch.find(id)
            if i >= 0:
                return ch, i
        return None

    def moved(self, id: str, rec: Record) -> None:
        """``rec``'s end changed (still live)."""
        if rec.re < INF:
            heapq.heappush(self.ends, (rec.re, id))

    def remove(self, id: str) -> None:
        self.single.pop(id, None)

    def held_ids(self) -> pa.Array | None:
        """Every live id (for the batch id checks), or None when there is none."""
        parts: list[pa.Array] = []
        for ch in self.chunks:
            got = ch.live_ids()
            if got is not None:
                parts.append(got)
        if self.single:
            parts.append(pa.array(list(self.single), pa.string()))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

    def min_end(self) -> int:
        """The smallest RE of a live event (INF: none ends)."""
        best = INF
        for ch in self.chunks:
            if ch.nalive:
                best = min(best, int(ch.re[ch.alive].min()))
        h = self.ends
        while h and (h[0][1] not in self.single or self.single[h[0][1]].re != h[0][0]):
            heapq.heappop(h)
        if h:
            best = min(best, h[0][0])
        return best

    def close(self, c: int) -> None:
        """Forget events with ``RE < c`` (everything at ``c = INF``)."""
        if c >= INF:
            self.chunks = []
            self.single = {}
            self.ends = []
            return
        keep = []
        for ch in self.chunks:
            if ch.maxre < c:
                continue
            ch.close(c)
            if ch.nalive == 0:
                continue
            if ch.nalive < _COMPACT * len(ch.eid) and len(ch.eid) > 64:
                ch = ch.compacted()
            keep.append(ch)
        self.chunks = keep
        h = self.ends
        single = self.single
        while h and h[0][0] < c:
            re, id = heapq.heappop(h)
            rec = single.get(id)
            if rec is not None and rec.re == re:
                del single[id]


def _record(ch: _Chunk, i: int, payload: dict[str, Any]) -> Record:
    """Row ``i`` of ``ch`` as a live event's record."""
    le = int(ch.le[i])
    return Record(int(ch.eid[i]), le, le if ch.ole is None else int(ch.ole[i]), int(ch.re[i]), payload)
