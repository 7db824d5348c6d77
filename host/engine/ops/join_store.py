"""One join input's live events as columns (`SideStore`), and the sorted index that finds overlapping events.

Each side keeps its events as arrays (id, LE, RE, key code, payload chunk and row, alive), appended a batch
at a time and dropped by CTI in bulk (a mask, not a heap per event); dead rows are compacted away once they
outnumber the live ones. `find` answers, for a column of probes ``(code, le, re)``, every live event of the
same code whose lifetime overlaps the probe's, as two aligned arrays (probe, slot): through `_Sorted`, the
events ordered by (code, LE) — a finite event overlapping ``[le, re)`` starts in ``(le - span, re)``, with
``span`` the longest finite lifetime the side held, so a key's long history is not looked at — and, for the
events appended since that order was built (every event, when none is built), a direct comparison while
probes × events are few: a handful of probes (a window's results joined back to its input, after each CTI's
compaction dropped the order) costs a scan, not a sort.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..payload import Payload
from ..rules import INF

__all__ = ["SideStore"]

_I64 = np.int64
#: appended events are compared with the probes directly up to this many pairs (or 16 per live event, a
#: sort's cost, at most `_TAIL_MOST`) before the order is rebuilt
_TAIL_PAIRS = 1 << 14
_TAIL_MOST = 1 << 22
_MIN = int(np.iinfo(_I64).min)
#: dead rows are compacted away once there are more of them than this and than live ones
_COMPACT_MIN = 1024


class _Sorted:
    """Slots ordered by (code, LE), searchable by one composite int: ``code * M + r(LE)``, ``r`` the offset
    from the smallest LE when the codes and LEs are few enough to fit an int64 so, else the rank."""

    __slots__ = ("base", "cmax", "m", "scomp", "sslots", "u")

    def __init__(self, code: np.ndarray, le: np.ndarray, slots: np.ndarray) -> None:
        lv = le[slots]
        cv = code[slots]
        self.u: np.ndarray | None = None
        self.base = int(lv.min()) if len(lv) else 0
        width = (int(lv.max()) - self.base + 2) if len(lv) else 2
        self.cmax = int(cv.max()) if len(cv) else 0
        if width * (self.cmax + 1) < 2**62:
            self.m = width
            r = lv - self.base
        else:
            self.u = np.unique(lv)
            self.m = len(self.u) + 1
            r = np.searchsorted(self.u, lv)
        comp = cv * self.m + r
        order = np.argsort(comp, kind="stable")
        self.scomp = comp[order]
        self.sslots = slots[order]

    def _r(self, t: np.ndarray) -> np.ndarray:
        """``r`` of times ``t``: where an LE of ``t`` falls (clipped to the held ones' range)."""
        if self.u is not None:
            return np.searchsorted(self.u, t)
        return np.clip(t, self.base, self.base + self.m - 1) - self.base

    def find(self, code: np.ndarray, lo: np.ndarray | None, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe, slot) for the slots of the probe's code with ``lo <= LE < hi`` (``lo`` None: any)."""
        base = np.minimum(code, self.cmax + 1) * self.m  # (a code above the held ones: past them all)
        a = np.searchsorted(self.scomp, base if lo is None else base + self._r(lo))
        b = np.searchsorted(self.scomp, base + self._r(hi))
        cnt = np.maximum(b - a, 0)
        total = int(cnt.sum())
        if not total:
            z = np.zeros(0, dtype=_I64)
            return z, z
        probe = np.repeat(np.arange(len(code), dtype=_I64), cnt)
        starts = np.cumsum(cnt) - cnt
        pos = np.arange(total, dtype=_I64) - np.repeat(starts - a, cnt)
        return probe, self.sslots[pos]


class SideStore:
    """One join input's live events as columns (see the module docstring)."""

    def __init__(self) -> None:
        self.n = 0
        self.id = np.zeros(16, dtype=_I64)
        self.le = np.zeros(16, dtype=_I64)
        self.re = np.zeros(16, dtype=_I64)
        self.code = np.zeros(16, dtype=_I64)
        self.chunk = np.zeros(16, dtype=_I64)
        self.row = np.zeros(16, dtype=_I64)
        self.alive = np.zeros(16, dtype=bool)
        self.chunks: dict[int, Payload] = {}
        self.next_chunk = 0
        #: event id -> slot, only once ids stop ascending (while they ascend, a binary search over ``id``
        #: finds an event); dead slots stay until a compaction (``alive`` tells)
        self.slot: dict[int, int] | None = None
        self.live = 0
        #: the longest finite ``RE - LE`` held (a bound: lowered only by a compaction)
        self.span = 0
        #: no live finite event ends before this (a bound: cleanup looks at the arrays only past it)
        self.min_re = INF
        self._ix: tuple[int, _Sorted, _Sorted | None] | None = None

    # -- changes ------------------------------------------------------------------------------------
    def append(self, ids: np.ndarray, le: np.ndarray, re: np.ndarray, code: np.ndarray, payload: Payload,
               rows: np.ndarray) -> np.ndarray:
        """Events in, their payloads rows ``rows`` of ``payload``; returns their slots."""
        k = len(ids)
        n0, n1 = self.n, self.n + k
        if n1 > len(self.id):
            self._grow(max(n1, 2 * len(self.id)))
        self.id[n0:n1] = ids
        self.le[n0:n1] = le
        self.re[n0:n1] = re
        self.code[n0:n1] = code
        c = self.next_chunk
        self.next_chunk += 1
        self.chunks[c] = payload
        self.chunk[n0:n1] = c
        self.row[n0:n1] = rows
        self.alive[n0:n1] = True
        self.n = n1
        self.live += k
        if self.slot is None and k and ((n0 and ids[0] <= self.id[n0 - 1]) or bool((ids[1:] <= ids[:-1]).any())):
            self.slot = dict(zip(self.id[:n0].tolist(), range(n0), strict=True))
        if self.slot is not None:
            self.slot.update(zip(ids.tolist(), range(n0, n1), strict=True))
        fin = re < INF
        if fin.any():
            d = re[fin] - le[fin]
            self.span = max(self.span, int(d.max()))
            self.min_re = min(self.min_re, int(re[fin].min()))
        return np.arange(n0, n1, dtype=_I64)

    def _grow(self, cap: int) -> None:
        for name in ("id", "le", "re", "code", "chunk", "row", "alive"):
            a = getattr(self, name)
            b = np.zeros(cap, dtype=a.dtype)
            b[:self.n] = a[:self.n]
            setattr(self, name, b)

    def set_re(self, s: int, re: int) -> None:
        """Slot ``s``'s end moves to ``re`` (after its LE)."""
        old = int(self.re[s])
        self.re[s] = re
        if (old >= INF) != (re >= INF):
            self._ix = None
        if re < INF:
            self.span = max(self.span, re - int(self.le[s]))
            self.min_re = min(self.min_re, re)

    def kill(self, slots: np.ndarray | int) -> None:
        self.alive[slots] = False
        self.live -= 1 if isinstance(slots, int) else len(slots)

    def ending_before(self, bound: int) -> np.ndarray:
        """The live slots whose RE is below ``bound`` (none when no live event can end that early)."""
        if bound <= self.min_re:
            return np.zeros(0, dtype=_I64)
        n = self.n
        re = self.re[:n]
        al = self.alive[:n]
        dead = np.flatnonzero(al & (re < bound))
        rest = re[al & (re >= bound) & (re < INF)]
        self.min_re = int(rest.min()) if len(rest) else INF
        return dead

    def first_end(self) -> int:
        """The smallest RE of a live finite event (INF: none)."""
        n = self.n
        re = self.re[:n][self.alive[:n] & (self.re[:n] < INF)]
        return int(re.min()) if len(re) else INF

    def compact(self) -> bool:
        """Drops the dead rows when they outnumber the live ones; True when it did (slots changed)."""
        dead = self.n - self.live
        if dead <= max(_COMPACT_MIN, self.live):
            return False
        keep = np.flatnonzero(self.alive[:self.n])
        for name in ("id", "le", "re", "code", "chunk", "row"):
            setattr(self, name, getattr(self, name)[keep])
        self.alive = np.ones(len(keep), dtype=bool)
        self.n = len(keep)
        if self.slot is not None:
            self.slot = dict(zip(self.id.tolist(), range(self.n), strict=True))
        held = set(np.unique(self.chunk).tolist())
        self.chunks = {c: p for c, p in self.chunks.items() if c in held}
        fin = self.re < INF
        self.span = int((self.re[fin] - self.le[fin]).max()) if fin.any() else 0
        self._ix = None
        return True

    def recode(self, remap: np.ndarray) -> None:
        """Key codes renumbered (`KeyCodes.compact`'s table)."""
        self.code[:self.n] = remap[self.code[:self.n]]
        self._ix = None

    # -- reads --------------------------------------------------------------------------------------
    def payload(self, s: int) -> dict[str, Any]:
        return self.chunks[int(self.chunk[s])].row(int(self.row[s]))

    def payloads(self, slots: np.ndarray) -> list[dict[str, Any]]:
        """The payloads of ``slots`` as dicts (a chunk asked for many of its rows becomes dicts at once)."""
        if len(slots) <= 16:
            chunks = self.chunks
            return [chunks[c].row(r) for c, r in zip(self.chunk[slots].tolist(), self.row[slots].tolist(),
                                                      strict=True)]
        ch = self.chunk[slots]
        rw = self.row[slots]
        got: list[Any] = [None] * len(slots)
        for c in np.unique(ch).tolist():
            at = np.flatnonzero(ch == c)
            p = self.chunks[c]
            rows = rw[at].tolist()
            if 8 * len(rows) >= len(p):
                allrows = p.rows()
                vals = [allrows[r] for r in rows]
            else:
                vals = [p.row(r) for r in rows]
            for i, v in zip(at.tolist(), vals, strict=True):
                got[i] = v
        return got

    def payloads_block(self, slots: np.ndarray) -> Payload:
        """The payloads of ``slots`` as one `Payload` (columns stay columns when they come from one chunk)."""
        ch = self.chunk[slots]
        c = int(ch[0])
        if bool((ch == c).all()):
            return self.chunks[c].take(self.row[slots])
        return Payload.from_rows(self.payloads(slots))

    def live_slot(self, eid: int) -> int | None:
        if self.slot is None:
            i = int(np.searchsorted(self.id[:self.n], eid))
            return i if i < self.n and self.id[i] == eid and self.alive[i] else None
        s = self.slot.get(eid)
        return s if s is not None and self.alive[s] else None

    def find(self, code: np.ndarray, le: np.ndarray, re: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe, slot): every live event with the probe's code whose lifetime overlaps ``[le, re)``, probe by
        probe (within one, in LE order where the order is built)."""
        z = np.zeros(0, dtype=_I64)
        if not self.live or not len(code):
            return z, z
        ix = self._ix
        built = ix[0] if ix is not None else 0
        tail = self.n - built
        if tail * len(code) > max(_TAIL_PAIRS, min(16 * self.live, _TAIL_MOST)):
            ix = self._build()
            built, tail = self.n, 0
        ps: list[np.ndarray] = []
        ss: list[np.ndarray] = []
        if ix is not None:
            _, fin, endless = ix
            sp = self.span  # (a finite event overlapping ``[le, re)`` starts after ``le - span``; no overflow)
            p, s = fin.find(code, np.maximum(le, _MIN + sp) - sp + 1, re)
            ps.append(p)
            ss.append(s)
            if endless is not None:
                p, s = endless.find(code, None, re)
                ps.append(p)
                ss.append(s)
        if tail:
            t = np.arange(built, self.n, dtype=_I64)
            hit = (self.code[t][None, :] == code[:, None]) & (self.le[t][None, :] < re[:, None])
            p, j = np.nonzero(hit)
            ps.append(p.astype(_I64))
            ss.append(t[j])
        if not ps:
            return z, z
        probe = np.concatenate(ps) if len(ps) > 1 else ps[0]
        slot = np.concatenate(ss) if len(ss) > 1 else ss[0]
        ok = self.alive[slot] & (self.re[slot] > le[probe])
        probe, slot = probe[ok], slot[ok]
        if len(ps) > 1:
            order = np.argsort(probe, kind="stable")
            probe, slot = probe[order], slot[order]
        return probe, slot

    def _build(self) -> tuple[int, _Sorted, _Sorted | None]:
        n = self.n
        al = self.alive[:n]
        endless = al & (self.re[:n] >= INF)
        fin = _Sorted(self.code, self.le, np.flatnonzero(al & ~endless))
        end = _Sorted(self.code, self.le, np.flatnonzero(endless)) if endless.any() else None
        self._ix = (n, fin, end)
        return self._ix

    # -- snapshots ----------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        s = dict(self.__dict__)
        s["_ix"] = None
        return s

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__dict__.update(s)
