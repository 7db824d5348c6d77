"""The frozen part of the tail's open sessions (`session_columns.Tail`): one row per session instead of its
members, so a long session (a busy key that never pauses for a ``gap``) is not sorted and scanned again at
every flush.

At a flush at CTI ``c`` no later insert can start before ``c`` (SEMANTICS §1: it would violate the CTI; a
retraction takes its group out of the tail first), so an open session's members that start before ``c``
stay its members whatever comes: a later row joins the session, opens one after it or bridges it to one
after it, and the running maximum of their ends only grows. The tail *freezes* them into a *head*: one row
of its arrays (the session's first LE, the members' largest RE, no value) standing for them; here, per group
code, the head's start and member count (arrays indexed by code), and the frozen rows themselves, flush by
flush. The session scan gives the same sessions with the head as with its members (the head is first in its
session and carries the running maximum). A closed session with a head is valued from its frozen members
(`members`) and the rows after it, together with the flush's other closed sessions (`grid_closed.
window_values`: one batch call for all); a group that leaves the tail gets its frozen rows back as events
(`take`). A code has one head at most: only its first session in the tail can hold rows before ``c``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..common import Ev
from .grid_closed import spans
from .session_store import gather

__all__ = ["Heads", "joined"]

#: (group code, id, LE, RE, value) columns of frozen rows, sorted by (code, LE)
_Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """Value columns one after another: their kind, objects where they differ (each value as the UDM would
    get it: an int among floats stays an int)."""
    kinds = {p.dtype for p in parts if len(p)}
    if len(kinds) <= 1:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return np.concatenate([p.astype(object) for p in parts])


class Heads:
    """Per group code, the head of its open session (see the module docstring) and its frozen rows."""

    def __init__(self) -> None:
        #: per code: its head's first LE, and the members the head stands for (0: no head)
        self.start = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0, dtype=np.int64)
        #: frozen rows, flush by flush; a row is live while its code has a head starting at or before it (a
        #: code's later head starts after every row of its earlier sessions)
        self.chunks: list[_Chunk] = []
        self.frozen = 0

    def __setstate__(self, s: dict[str, Any]) -> None:
        of = s.pop("of", None)
        self.__dict__.update(s)
        if of is not None:  # (a snapshot from before the arrays: code -> [first LE, count, UDA state])
            self.start = np.zeros(0, dtype=np.int64)
            self.count = np.zeros(0, dtype=np.int64)
            if of:
                codes = np.fromiter(of, dtype=np.int64, count=len(of))
                self._grow(int(codes.max()) + 1)
                self.start[codes] = [h[0] for h in of.values()]
                self.count[codes] = [h[1] for h in of.values()]

    def _grow(self, n: int) -> None:
        have = len(self.count)
        if n > have:
            more = max(n, 2 * have) - have
            self.start = np.concatenate((self.start, np.zeros(more, dtype=np.int64)))
            self.count = np.concatenate((self.count, np.zeros(more, dtype=np.int64)))

    def extra(self, code: int) -> int:
        """Rows the code's head stands for beyond its own row."""
        return max(int(self.count[code]) - 1, 0) if code < len(self.count) else 0

    def total_extra(self) -> int:
        on = self.count[self.count > 0]
        return int(on.sum()) - len(on)

    def fold(self, c: int, cols: tuple[np.ndarray, ...], store: list[np.ndarray], s0: np.ndarray,
             stay: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The tail's rows ``cols`` (code, id, LE, RE, value index in ``store``), sessions from rows ``s0``: the
        members before CTI ``c`` of the sessions that ``stay`` join their heads, where that makes two rows or
        more one. Returns those sessions' first rows and how many of their rows are before ``c`` (None:
        none)."""
        gid, ids, le, re, vix = cols
        nb = np.add.reduceat((le < c).astype(np.int64), s0)  # (a session's rows are in LE order)
        fz = stay & (nb >= 2)  # (two rows, or a head and a row, become one)
        if not fz.any():
            return None
        f0, fn = s0[fz], nb[fz]
        fh = (vix[f0] < 0).astype(np.int64)  # (already a head: its own row stays)
        _, idx = spans(f0 + fh, fn - fh)
        codes = gid[f0]
        self._grow(int(codes.max()) + 1)
        self.start[codes] = le[f0]
        self.count[codes] = self.count[codes] * fh + fn - fh
        self.chunks.append((gid[idx], ids[idx], le[idx], re[idx], gather(store, vix[idx])))
        self.frozen += len(idx)
        if self.frozen > 2 * int(self.count.sum()) + 4096 or len(self.chunks) > 32:
            self._compact()
        return f0, fn

    def _live(self, codes: np.ndarray) -> list[tuple[_Chunk, np.ndarray, np.ndarray]]:
        """Per chunk holding some, the rows of the heads of ``codes`` (each with one): the chunk, which of
        ``codes`` (its position) and the row, in LE order per code."""
        starts = self.start[codes]
        got = []
        for chunk in self.chunks:
            gid, le = chunk[0], chunk[2]
            a = np.searchsorted(gid, codes, "left")
            n = np.searchsorted(gid, codes, "right") - a
            if not n.any():
                continue
            _, idx = spans(a, n)
            j = np.repeat(np.arange(len(codes), dtype=np.int64), n)
            ok = le[idx] >= starts[j]  # (rows of the code's earlier sessions are dead)
            got.append((chunk, j[ok], idx[ok]))
        return got

    def members(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The frozen values of the heads of ``codes`` (each with one; their sessions closed): one column, the
        sessions' members one session after another in LE order, and their counts; the heads go."""
        parts = self._live(codes)
        self.count[codes] = 0
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(len(codes), dtype=np.int64)
        j = np.concatenate([p[1] for p in parts])
        vals = joined([chunk[4][idx] for chunk, _, idx in parts])
        order = np.argsort(j, kind="stable")  # (chunks are in time order: LE order within a code stays)
        return vals[order], np.bincount(j, minlength=len(codes)).astype(np.int64)

    def take(self, codes: list[int]) -> list[list[Ev]]:
        """The frozen rows of the codes' heads, as events in LE order (none for a code without a head); the
        heads go."""
        out: list[list[Ev]] = [[] for _ in codes]
        arr = np.array(codes, dtype=np.int64)
        on = np.zeros(len(arr), dtype=bool)
        inside = arr < len(self.count)
        on[inside] = self.count[arr[inside]] > 0
        if not on.any():
            return out
        pos = np.flatnonzero(on)
        want = arr[pos]
        for (_, ids, le, re, vals), j, idx in self._live(want):
            for k, t in zip(pos[j].tolist(), zip(ids[idx].tolist(), le[idx].tolist(), re[idx].tolist(),
                                                 vals[idx].tolist(), strict=True), strict=True):
                out[k].append(Ev(*t))
        self.count[want] = 0
        return out

    def _compact(self) -> None:
        """Dead rows leave; the chunks become one."""
        if not self.count.any():
            self.chunks = []
            self.frozen = 0
            return
        cols = [np.concatenate([c[i] for c in self.chunks]) for i in range(4)]
        cols.append(joined([c[4] for c in self.chunks]))
        gid, le = cols[0], cols[2]
        keep = (self.count[gid] > 0) & (le >= self.start[gid])
        order = np.argsort(gid[keep], kind="stable")  # (chunks are in time order: LE order within a code stays)
        chunk = tuple(c[keep][order] for c in cols)
        self.chunks = [chunk]
        self.frozen = len(chunk[0])
