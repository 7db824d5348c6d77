"""Two-stacks: the FIFO aggregator for partials that arrive in key order and leave from the oldest end.

Source: the two-stacks algorithm as described by K. Tangwongsan, M. Hirzel, S. Schneider, "Sliding-Window
Aggregation Algorithms" (Encyclopedia of Big Data Technologies, 2019) and implemented in
IBM/sliding-window-aggregators ``cpp/src/TwoStacks.hpp``. Entries live in a *front* (older, with suffix
aggregates: ``fa[i]`` is the combine of entries ``i..end`` of the front) and a *back* (younger, with
one running aggregate). Evicting advances the front's start, and when the front runs out the back is
flipped into it, computing its suffix aggregates once: each entry is combined O(1) times in its life.

Changes for the engine's use:
- The youngest entry is kept apart (the *tail*), so combining more into the youngest entry, the common
  update of an open slice, costs one combine instead of a fold of the back.
- `evict_before` drops any number of entries by moving the front's start: O(log n), no combine.
- Out-of-order operations are **supported at a higher cost** rather than refused: an entry changed,
  added or removed in the front costs a combine per front entry older than it (its suffix aggregates),
  in the back a fold of the back. Use `FingerBTree` where keys arrive far out of order.

Costs in combines, amortized: in-order ``insert`` (new youngest key or into the youngest entry) 1,
``evict_before`` 1 per entry (the flip), ``query`` at most 2; `query_range` folds the entries it covers
except a range that runs to the end of the front or covers the whole back (one stored aggregate each).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from functools import reduce
from typing import Any, Generic, TypeVar

from .fiba import NOTHING
from .protocol import Combine, unattached

__all__ = ["TwoStacks"]

S = TypeVar("S")


class TwoStacks(Generic[S]):
    """`OrderedAggregator` for in-order use: O(1) amortized combines per insert at the young end, per
    evicted entry and per query; out-of-order changes cost up to a combine per entry (see the module)."""

    __slots__ = ("_ba", "_bk", "_bv", "_combine", "_fa", "_fk", "_fv", "_head", "_tk", "_tv")

    def __init__(self, combine: Combine) -> None:
        self._combine = combine
        self._fk: list[int] = []  # front keys, ascending; live from _head on
        self._fv: list[Any] = []
        self._fa: list[Any] = []  # suffix aggregates of the front
        self._head = 0
        self._bk: list[int] = []  # back keys, ascending, all younger than the front
        self._bv: list[Any] = []
        self._ba: Any = NOTHING  # combine of the back
        self._tk: int | None = None  # the youngest entry (key None: none)
        self._tv: Any = None

    def attach(self, combine: Combine) -> None:
        self._combine = combine

    # ---- helpers ----------------------------------------------------------------------------------
    def _suffix(self, upto: int) -> None:
        """Recompute the front's suffix aggregates from index ``upto`` (inclusive) down to the start."""
        fa, fv, c, head = self._fa, self._fv, self._combine, self._head
        n = len(fv)
        acc = NOTHING if upto + 1 >= n else fa[upto + 1]
        for i in range(upto, head - 1, -1):
            acc = fv[i] if acc is NOTHING else c(fv[i], acc)
            fa[i] = acc

    def _flip(self) -> None:
        """The back becomes the front (the front is empty)."""
        self._fk, self._fv = self._bk, self._bv
        self._fa = [None] * len(self._fv)
        self._head = 0
        self._bk, self._bv, self._ba = [], [], NOTHING
        if self._fv:
            self._suffix(len(self._fv) - 1)

    def _push_tail(self) -> None:
        """The tail goes to the back (a younger entry is coming)."""
        if self._tk is not None:
            self._bk.append(self._tk)
            self._bv.append(self._tv)
            self._ba = self._tv if self._ba is NOTHING else self._combine(self._ba, self._tv)

    def _refold_back(self) -> None:
        self._ba = reduce(self._combine, self._bv) if self._bv else NOTHING

    # ---- operations -------------------------------------------------------------------------------
    def insert(self, key: int, value: S) -> None:
        self._put(key, value, True)

    def replace(self, key: int, value: S) -> None:
        self._put(key, value, False)

    def _put(self, key: int, value: Any, combine: bool) -> None:
        tk = self._tk
        if tk is not None and key == tk:
            self._tv = self._combine(self._tv, value) if combine else value
            return
        if tk is None or key > tk:  # the tail is None only when the aggregator is empty
            self._push_tail()
            self._tk, self._tv = key, value
            return
        self._set(key, value, combine)

    def _set(self, key: int, value: Any, combine: bool) -> None:
        """An out-of-order insert or replace (``key`` is older than the tail)."""
        c = self._combine
        bk = self._bk
        if bk and key >= bk[0]:
            j = bisect_left(bk, key)
            if j < len(bk) and bk[j] == key:
                self._bv[j] = c(self._bv[j], value) if combine else value
            else:
                bk.insert(j, key)
                self._bv.insert(j, value)
            self._refold_back()
            return
        fk = self._fk
        j = bisect_left(fk, key, self._head)
        if j < len(fk) and fk[j] == key:
            self._fv[j] = c(self._fv[j], value) if combine else value
        else:
            fk.insert(j, key)
            self._fv.insert(j, value)
            self._fa.insert(j, None)
        self._suffix(j)

    def _take_tail(self) -> None:
        """Make the youngest stored entry the tail (the tail was removed)."""
        if self._bk:
            self._tk, self._tv = self._bk.pop(), self._bv.pop()
            self._refold_back()
        elif self._head < len(self._fk):
            self._tk, self._tv = self._fk.pop(), self._fv.pop()
            self._fa.pop()
            self._suffix(len(self._fv) - 1)

    def remove(self, key: int) -> None:
        if self._tk is not None and key == self._tk:
            self._tk, self._tv = None, None
            self._take_tail()
            return
        bk = self._bk
        if bk and key >= bk[0]:
            j = bisect_left(bk, key)
            if j == len(bk) or bk[j] != key:
                raise KeyError(key)
            del bk[j], self._bv[j]
            self._refold_back()
            return
        fk = self._fk
        j = bisect_left(fk, key, self._head)
        if j == len(fk) or fk[j] != key:
            raise KeyError(key)
        del fk[j], self._fv[j], self._fa[j]
        if j > self._head:
            self._suffix(j - 1)

    def evict_before(self, key: int) -> int:
        fk, head = self._fk, self._head
        n = len(fk)
        if head < n and fk[head] >= key:
            return 0
        j = bisect_left(fk, key, head)
        dropped = j - head
        if j < n:
            self._head = j
            if j > 64 and j > n // 2:  # compact the front's dead prefix now and then
                del fk[:j], self._fv[:j], self._fa[:j]
                self._head = 0
            return dropped
        self._fk, self._fv, self._fa, self._head = [], [], [], 0
        bk = self._bk
        k = bisect_left(bk, key)
        if k:
            dropped += k
            del bk[:k], self._bv[:k]
        if bk:
            self._flip()
            return dropped
        self._ba = NOTHING
        if self._tk is not None and self._tk < key:
            self._tk, self._tv = None, None
            dropped += 1
        return dropped

    def get(self, key: int) -> S | None:
        if self._tk is not None and key == self._tk:
            return self._tv
        for keys, vals, lo in ((self._bk, self._bv, 0), (self._fk, self._fv, self._head)):
            j = bisect_left(keys, key, lo)
            if j < len(keys) and keys[j] == key:
                return vals[j]
        return None

    def query(self) -> S | None:
        c = self._combine
        acc = self._fa[self._head] if self._head < len(self._fa) else NOTHING
        if self._ba is not NOTHING:
            acc = self._ba if acc is NOTHING else c(acc, self._ba)
        if self._tk is not None:
            acc = self._tv if acc is NOTHING else c(acc, self._tv)
        return None if acc is NOTHING else acc

    def query_range(self, lo: int, hi: int) -> S | None:
        c = self._combine
        acc = NOTHING
        fk = self._fk
        a, b = bisect_left(fk, lo, self._head), bisect_left(fk, hi, self._head)
        if a < b:
            acc = self._fa[a] if b == len(fk) else reduce(c, self._fv[a:b])
        bk = self._bk
        a, b = bisect_left(bk, lo), bisect_left(bk, hi)
        if a < b:
            part = self._ba if a == 0 and b == len(bk) else reduce(c, self._bv[a:b])
            acc = part if acc is NOTHING else c(acc, part)
        if self._tk is not None and lo <= self._tk < hi:
            acc = self._tv if acc is NOTHING else c(acc, self._tv)
        return None if acc is NOTHING else acc

    def __len__(self) -> int:
        return len(self._fk) - self._head + len(self._bk) + (self._tk is not None)

    def min_key(self) -> int:
        if self._head < len(self._fk):
            return self._fk[self._head]
        if self._bk:
            return self._bk[0]
        if self._tk is None:
            raise IndexError("min_key of an empty aggregator")
        return self._tk

    def max_key(self) -> int:
        if self._tk is None:
            raise IndexError("max_key of an empty aggregator")
        return self._tk

    def __iter__(self) -> Iterator[tuple[int, S]]:
        h = self._head
        yield from zip(self._fk[h:], self._fv[h:], strict=True)
        yield from zip(self._bk, self._bv, strict=True)
        if self._tk is not None:
            yield self._tk, self._tv

    def __getstate__(self) -> dict[str, Any]:
        h = self._head
        return {"front": (self._fk[h:], self._fv[h:], self._fa[h:]), "back": (self._bk, self._bv, self._ba),
                "tail": (self._tk, self._tv)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._combine = unattached
        self._fk, self._fv, self._fa = (list(x) for x in state["front"])
        self._head = 0
        bk, bv, self._ba = state["back"]
        self._bk, self._bv = list(bk), list(bv)
        self._tk, self._tv = state["tail"]
