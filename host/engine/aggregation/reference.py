"""The obviously right ordered aggregator: a sorted dict and a fold per query.

Every query costs a combine per entry it covers; the tests use it as the oracle the fast aggregators
must equal, and the benchmark as the baseline they are measured against.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from sortedcontainers import SortedDict

from .protocol import Combine, unattached

__all__ = ["SortedFold"]

S = TypeVar("S")


class SortedFold(Generic[S]):
    """`OrderedAggregator` by brute force: O(log n) updates, O(k) combines for a query over k entries."""

    __slots__ = ("_combine", "_d")

    def __init__(self, combine: Combine) -> None:
        self._combine = combine
        self._d: SortedDict = SortedDict()

    def attach(self, combine: Combine) -> None:
        self._combine = combine

    def __getstate__(self) -> dict[str, Any]:
        return {"entries": list(self._d.items())}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._combine = unattached
        self._d = SortedDict(state["entries"])

    def insert(self, key: int, value: S) -> None:
        d = self._d
        d[key] = self._combine(d[key], value) if key in d else value

    def replace(self, key: int, value: S) -> None:
        self._d[key] = value

    def remove(self, key: int) -> None:
        del self._d[key]

    def evict_before(self, key: int) -> int:
        d = self._d
        n = d.bisect_left(key)
        for k in list(d.islice(0, n)):
            del d[k]
        return n

    def _fold(self, keys: Any) -> S | None:
        d, c = self._d, self._combine
        acc: Any = None
        first = True
        for k in keys:
            acc = d[k] if first else c(acc, d[k])
            first = False
        return acc

    def query(self) -> S | None:
        return self._fold(self._d.keys())

    def query_range(self, lo: int, hi: int) -> S | None:
        return self._fold(self._d.irange(lo, hi, inclusive=(True, False)))

    def get(self, key: int) -> S | None:
        return self._d.get(key)

    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[tuple[int, S]]:
        return iter(list(self._d.items()))

    def min_key(self) -> int:
        if not self._d:
            raise IndexError("min_key of an empty aggregator")
        return self._d.peekitem(0)[0]

    def max_key(self) -> int:
        if not self._d:
            raise IndexError("max_key of an empty aggregator")
        return self._d.peekitem(-1)[0]
