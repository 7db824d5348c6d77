"""The frozen part of the tail's open sessions (`session_columns.Tail`): one row per session instead of its
members, so a long session (a busy key that never pauses for a ``gap``) is not sorted and scanned again at
every flush.

At a flush at CTI ``c`` no later insert can start before ``c`` (SEMANTICS §1: it would violate the CTI; a
retraction takes its group out of the tail first), so an open session's members that start before ``c``
stay its members whatever comes: a later row joins the session, opens one after it or bridges it to one
after it, and the running maximum of their ends only grows. The tail *freezes* them into a *head*: one row
of its arrays (the session's first LE, the members' largest RE, no value) standing for them, and here the
UDA's state of their values (``add``, time-insensitive: the order of members does not change it) and their
count. The session scan gives the same sessions with the head as with its members (the head is first in its
session and carries the running maximum); a closed session with a head is valued from its state plus the
rows after it (`value`). The frozen members themselves are kept as rows (`take`) for a group that leaves
the tail, whose per-group structure needs them as events.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..common import Ev
from .grid_closed import spans
from .session_store import gather

__all__ = ["Heads"]

#: (group code, id, LE, RE, value) columns of frozen rows, sorted by (code, LE)
_Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class Heads:
    """Per group code, the head of its open session (see the module docstring) and its frozen rows."""

    def __init__(self) -> None:
        #: code -> [first LE, member count, UDA state]
        self.of: dict[int, list[Any]] = {}
        #: frozen rows, flush by flush; a row is live while its code's head starts at or before it (a code's
        #: later head starts after every row of its earlier sessions)
        self.chunks: list[_Chunk] = []
        self.frozen = 0

    def extra(self, code: int) -> int:
        """Rows the code's head stands for beyond its own row."""
        h = self.of.get(code)
        return 0 if h is None else h[1] - 1

    def total_extra(self) -> int:
        return sum(h[1] for h in self.of.values()) - len(self.of)

    def freeze(self, wu: Any, codes: list[int], starts: list[int], offsets: list[int], rows: _Chunk) -> None:
        """Rows ``rows`` (sorted by code, LE) join heads: ``rows[k]`` for ``offsets[j] <= k < offsets[j+1]`` are
        code ``codes[j]``'s, whose session starts at ``starts[j]`` (a new head, or the code's head already)."""
        vals = rows[4].tolist()
        of = self.of
        for code, start, a, b in zip(codes, starts, offsets[:-1], offsets[1:], strict=True):
            h = of.get(code)
            if h is None:
                of[code] = [start, b - a, wu.add(wu.initial_state(), vals[a:b], None)]
            else:
                h[1] += b - a
                h[2] = wu.add(h[2], vals[a:b], None)
        self.chunks.append(rows)
        self.frozen += len(rows[0])
        live = sum(h[1] for h in of.values())
        if self.frozen > 2 * live + 4096 or len(self.chunks) > 32:
            self._compact()

    def fold(self, wu: Any, c: int, cols: tuple[np.ndarray, ...], store: list[np.ndarray], s0: np.ndarray,
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
        f0, fn, fh = s0[fz], nb[fz], (vix[s0[fz]] < 0).astype(np.int64)
        offsets, idx = spans(f0 + fh, fn - fh)
        self.freeze(wu, gid[f0].tolist(), le[f0].tolist(), offsets.tolist(),
                    (gid[idx], ids[idx], le[idx], re[idx], gather(store, vix[idx])))
        return f0, fn

    def values(self, wu: Any, res: Any, head: np.ndarray, codes: np.ndarray, le: np.ndarray, re: np.ndarray,
               vals: list[Any], st: np.ndarray) -> list[Any]:
        """The values of closed sessions, in order: ``res`` those of the sessions without a head (``~head``),
        then the others' from their heads (they go) and the rows after them (``vals[st[j]:st[j+1]]`` for the
        ``j``-th session with a head, code ``codes[j]``, window ``[le[j], re[j])``)."""
        got: list[Any] = [None] * len(head)
        rl = res.tolist() if isinstance(res, np.ndarray) else list(res)
        for j, v in zip(np.flatnonzero(~head).tolist(), rl, strict=True):
            got[j] = v
        of = self.of
        for j, code, w0, w1, a, b in zip(np.flatnonzero(head).tolist(), codes.tolist(), le.tolist(), re.tolist(),
                                         st[:-1].tolist(), st[1:].tolist(), strict=True):
            state = of.pop(code)[2]
            if b > a:
                state = wu.add(state, vals[a:b], None)
            got[j] = wu.compute_state(state, w0, w1)
        return got

    def take(self, codes: list[int]) -> list[list[Ev]]:
        """The frozen rows of the codes' heads, as events in LE order (none for a code without a head); the
        heads go."""
        out: list[list[Ev]] = [[] for _ in codes]
        with_head = [j for j, code in enumerate(codes) if code in self.of]
        if not with_head:
            return out
        want = np.array([codes[j] for j in with_head], dtype=np.int64)
        starts = np.array([self.of[codes[j]][0] for j in with_head], dtype=np.int64)
        for gid, ids, le, re, vals in self.chunks:
            a = np.searchsorted(gid, want, "left")
            b = np.searchsorted(gid, want, "right")
            for j, x, y, s in zip(with_head, a.tolist(), b.tolist(), starts.tolist(), strict=True):
                if x < y:
                    k = x + int(np.searchsorted(le[x:y], s, "left"))
                    out[j] += [Ev(*t) for t in zip(ids[k:y].tolist(), le[k:y].tolist(), re[k:y].tolist(),
                                                    vals[k:y].tolist(), strict=True)]
        for j in with_head:
            del self.of[codes[j]]
        return out

    def drop(self, code: int) -> None:
        self.of.pop(code, None)

    def _compact(self) -> None:
        """Dead rows leave; the chunks become one."""
        if not self.of:
            self.chunks = []
            self.frozen = 0
            return
        cols = [np.concatenate([c[i] for c in self.chunks]) for i in range(4)]
        kinds = {c[4].dtype for c in self.chunks}  # (an int column beside a float one stays ints: objects)
        cols.append(np.concatenate([c[4] if len(kinds) == 1 else c[4].astype(object) for c in self.chunks]))
        gid, le = cols[0], cols[2]
        first = np.full(int(gid.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        codes = np.fromiter(self.of, dtype=np.int64, count=len(self.of))
        ok = codes < len(first)
        first[codes[ok]] = [self.of[k][0] for k in codes[ok].tolist()]
        keep = le >= first[gid]
        order = np.argsort(gid[keep], kind="stable")  # (chunks are in time order: LE order within a code stays)
        chunk = tuple(c[keep][order] for c in cols)
        self.chunks = [chunk]
        self.frozen = len(chunk[0])
