"""Event-id checks of the vectorized fast path, done on the id column's bytes instead of Python strings.

The fast path must know, per batch, that the ids of its insert rows are pairwise distinct and which of
them are already live (in the registry or held columnar by earlier batches). Turning 65,536 ids into
Python strings and hashing them into a set costs more than the rest of the in-order path, so
`BatchIds` hashes the ids in numpy straight from the Arrow string buffers (a polynomial hash over the
bytes, position-independent through prefix sums), finds rows whose hashes could collide with a
scatter table, and compares the actual strings only for those few rows. Equal ids always have equal
hashes, so nothing is missed; a hash collision only costs an exact comparison. Anything unusual (an
array type it does not know, very large id data) makes it fall back to a Python set, which is exact too.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["BatchIds", "id_hashes"]

_P = 0x100000001B3  # odd: invertible modulo 2**64
_P_INV = pow(_P, -1, 2**64)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
#: id bytes hashed per step: the power tables and work arrays have this size (fixed, small); a batch's ids
#: are hashed in pieces of at most this many bytes. A longer single id makes the caller fall back.
SEGMENT = 1 << 16

#: per-thread work arrays, reused across batches (fresh ones per batch cost more in page faults than the
#: arithmetic done in them); every scatter-table slot read is written first, so none needs clearing
_local = threading.local()


def _scratch(name: str, size: int, dtype: Any) -> np.ndarray:
    """A per-thread work array of at least ``size`` (contents undefined), kept for the next batch."""
    t = getattr(_local, name, None)
    if t is None or len(t) < size:
        t = np.empty(max(size, 1 << 10), dtype=dtype)
        setattr(_local, name, t)
    return t[:size]


def _scatter_table(size: int) -> np.ndarray:
    return _scratch("table", size, np.int32)


def _power_table(base: int, size: int) -> np.ndarray:
    """``base**j`` modulo 2**64 for j < size, doubling with one vector multiply per step."""
    out = np.empty(size, dtype=np.uint64)
    out[0] = 1
    k = 1
    with np.errstate(over="ignore"):
        while k < size:
            step = min(k, size - k)
            out[k:k + step] = out[:step] * np.uint64(pow(base, k, 2**64))
            k += step
    return out


_POW = _power_table(_P, SEGMENT + 1)
_IPOW = _power_table(_P_INV, SEGMENT + 1)


def id_hashes(arr: Any) -> np.ndarray | None:
    """64-bit hashes of the values of a null-free pyarrow (large_)string array, equal for equal strings;
    None when the array is of another type or holds an id longer than `SEGMENT` bytes (the caller falls
    back to Python strings)."""
    import pyarrow as pa

    t = arr.type
    if pa.types.is_string(t):
        odt: Any = np.int32
    elif pa.types.is_large_string(t):
        odt = np.int64
    else:
        return None
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=odt, count=n + 1, offset=arr.offset * np.dtype(odt).itemsize)
    o = offs.astype(np.int64)
    start, end = o[:-1], o[1:]
    lens = end - start
    if int(lens.max()) > SEGMENT:
        return None
    h = np.empty(n, dtype=np.uint64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    s = _scratch("prefix", SEGMENT + 1, np.uint64)
    prod = _scratch("prod", SEGMENT, np.uint64)
    s[0] = 0
    r0 = 0
    with np.errstate(over="ignore"):
        while r0 < n:
            # rows [r0, r1) whose bytes fit in one segment (at least one row: none is longer)
            base = int(start[r0])
            r1 = max(int(np.searchsorted(end, base + SEGMENT, side="right")), r0 + 1)
            m = int(end[r1 - 1]) - base
            if m:
                np.multiply(data[base:base + m], _POW[:m], out=prod[:m])
                np.cumsum(prod[:m], out=s[1:m + 1])
            st = start[r0:r1] - base
            h[r0:r1] = (s[end[r0:r1] - base] - s[st]) * _IPOW[st]  # sum of byte i * P**i over the string
            r0 = r1
        h ^= lens.astype(np.uint64) * _GOLD  # the length: "" and "\0" differ
        # final mix (murmur3 fmix64): the table below uses the top bits
        h ^= h >> _S33
        h *= _M1
        h ^= h >> _S33
        h *= _M2
        h ^= h >> _S33
    return h


class BatchIds:
    """The ids of one batch's insert rows (a null-free pyarrow string array): are they distinct, which
    of them appear in another collection of ids. Exact; see the module docstring for how."""

    def __init__(self, arr: pa.Array) -> None:
        self.arr = arr
        self.n = len(arr)
        self._list: list[str] | None = None
        self.h = id_hashes(arr) if self.n >= 64 else None
        if self.h is not None:
            n = self.n
            bits = max(10, (8 * n - 1).bit_length())  # table load <= 1/8
            self.shift = np.uint64(64 - bits)
            slot = (self.h >> self.shift).astype(np.int64)
            self.bits = bits
            table = _scatter_table(1 << bits)
            rows = np.arange(n, dtype=np.int32)
            table[slot] = rows  # a shared slot keeps one of its rows
            self.slot = slot
            shared = table[slot] != rows
            if shared.any():  # every row of a shared slot (the ones that kept it too)
                shared[table[slot[shared]]] = True
            cand = np.flatnonzero(shared)
            order = np.argsort(self.h[cand], kind="stable")
            self.cand = cand[order]  # rows whose slot is shared, by hash
            self.cand_h = self.h[self.cand]

    @property
    def ids(self) -> list[str]:
        """The ids as Python strings (made on first use)."""
        if self._list is None:
            self._list = self.arr.to_pylist()
        return self._list

    def distinct(self) -> bool:
        """Are the ids pairwise distinct?"""
        if self.h is None:
            return len(set(self.ids)) == self.n
        ch = self.cand_h
        eq = np.flatnonzero(ch[1:] == ch[:-1])
        if not len(eq):
            return True
        rows = np.unique(np.concatenate([self.cand[eq], self.cand[eq + 1]]))
        got = self.arr.take(rows).to_pylist()
        return len(set(got)) == len(got)

    def member_mask(self, others: Any) -> np.ndarray:
        """Rows whose id is among ``others`` (a pyarrow string array or a collection of str)."""
        import pyarrow as pa

        mask = np.zeros(self.n, dtype=bool)
        if not isinstance(others, (pa.Array, pa.ChunkedArray)):
            others = pa.array(list(others), type=pa.string())
        elif isinstance(others, pa.ChunkedArray):
            others = others.combine_chunks()
        if self.n == 0 or len(others) == 0:
            return mask
        h = self.h
        ho = id_hashes(others) if h is not None else None
        if h is None or ho is None:
            theirs = set(others.to_pylist())
            return np.fromiter((x in theirs for x in self.ids), dtype=bool, count=self.n)
        # pairs (batch row, other) with equal hashes: the row a slot kept, and rows of shared slots
        table = _scatter_table(1 << self.bits)
        table[self.slot] = np.arange(self.n, dtype=np.int32)  # as in __init__ (the table is shared)
        r1 = table[(ho >> self.shift).astype(np.int64)].astype(np.int64)
        # a slot no row of this batch has holds stale data: anything out of range, else a row whose
        # hash cannot match (equal hashes share the slot, which that row then wrote above)
        r1[(r1 < 0) | (r1 >= self.n)] = 0
        hit = h[r1] == ho
        rows = [r1[hit]]
        js = [np.flatnonzero(hit)]
        if len(self.cand):
            lo = np.searchsorted(self.cand_h, ho, side="left")
            hi = np.searchsorted(self.cand_h, ho, side="right")
            cnt = hi - lo
            if cnt.any():
                j = np.repeat(np.arange(len(ho)), cnt)
                k = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
                rows.append(self.cand[k])
                js.append(j)
        r = np.concatenate(rows)
        if not len(r):
            return mask
        j = np.concatenate(js)
        mine = self.arr.take(r).to_pylist()
        theirs_l = others.take(j).to_pylist()
        same = np.fromiter((x == y for x, y in zip(mine, theirs_l, strict=True)), dtype=bool, count=len(r))
        mask[r[same]] = True
        return mask
