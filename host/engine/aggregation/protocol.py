"""What every ordered aggregator promises, and the pieces its implementations share.

An ordered aggregator keeps opaque partial aggregates ("partials") under int keys (slice indices, event
end times) and answers the combine of a key range in key order. ``combine(a, b)`` is the UDA's ``merge``:
associative, not necessarily commutative, possibly expensive (a Python call into user code), and assumed
to return a fresh value, so an aggregator may keep both its arguments and its result.

The combine function is a bound method of a UDM: it is not pickled. An unpickled aggregator raises
`CombineNotAttached` on its first combine until the host calls ``attach(combine)`` again; an aggregator
pickles its partials and the aggregates it holds of them, so a restore costs no combine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NoReturn, Protocol, TypeVar

__all__ = ["Combine", "CombineNotAttached", "OrderedAggregator", "unattached"]

S = TypeVar("S")

Combine = Callable[[Any, Any], Any]
"""``combine(older, younger) -> partial``: associative; entries are combined in key order."""


class CombineNotAttached(RuntimeError):
    """An unpickled aggregator was used before ``attach(combine)`` gave it its combine function again."""


def unattached(a: object, b: object) -> NoReturn:
    """The combine of an aggregator restored from a pickle until ``attach``: a clear error, no per-call check."""
    raise CombineNotAttached("this aggregator was restored from a pickle: call attach(combine) before using it")


class OrderedAggregator(Protocol[S]):
    """Partials in key order; every query is their combine in that order (``None`` over no entries)."""

    def attach(self, combine: Combine) -> None:
        """Set (or re-set after unpickling) the combine function."""

    def insert(self, key: int, value: S) -> None:
        """A new entry at ``key``, or ``entry := combine(entry, value)`` when one is there."""

    def replace(self, key: int, value: S) -> None:
        """The entry at ``key`` becomes ``value`` (created when absent)."""

    def remove(self, key: int) -> None:
        """Delete the entry at ``key``; `KeyError` when there is none."""

    def evict_before(self, key: int) -> int:
        """Drop every entry whose key is smaller than ``key``; returns how many were dropped."""

    def query(self) -> S | None:
        """The combine of all entries in key order; ``None`` when empty."""

    def query_range(self, lo: int, hi: int) -> S | None:
        """The combine of the entries with ``lo <= key < hi``; ``None`` when there are none."""

    def get(self, key: int) -> S | None:
        """The entry at ``key``, or ``None`` (partials are never ``None``: ``None`` means absent)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[tuple[int, S]]:
        """(key, partial) in key order (the aggregator must not change while it is iterated)."""

    def min_key(self) -> int:
        """The smallest key; `IndexError` when empty."""

    def max_key(self) -> int:
        """The largest key; `IndexError` when empty."""
