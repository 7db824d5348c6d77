"""The fixed order in which several input streams of one query are read (INTERFACES §1).

Inputs are merged by the sync time of each one's *next* element (insert → LE, retract → min(RE, RE_new),
cti → t; a bad line has none and goes first), ties broken by the order the query declares its inputs in.
Within one input the file order is kept, always. This imitates arrival in application-time order, which
keeps speculation (and so retractions) low, and it is deterministic: the same files give the same physical
output. The result does not depend on it: every operator's CHT is defined on its inputs' CHTs.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from udm.host.temporal.elements import Cti, Insert, Retract

__all__ = ["interleave", "sync_time"]

_FIRST = -(2**64)


def sync_time(el: Any) -> int:
    """The sync time that orders an element among several inputs (a bad element: before everything)."""
    if isinstance(el, Insert):
        return el.le
    if isinstance(el, Retract):
        return el.re if el.re < el.re_new else el.re_new
    if isinstance(el, Cti):
        return el.t
    return _FIRST


def interleave(sources: Sequence[tuple[str, Iterable[tuple[int | None, Any]]]]
               ) -> Iterator[tuple[str, int | None, Any]]:
    """Merge ``(name, [(line, element), ...])`` streams into ``(name, line, element)`` in the documented order."""
    heads: list[tuple[int, int, int | None, Any, Iterator[tuple[int | None, Any]]]] = []
    for order, (_, stream) in enumerate(sources):
        it = iter(stream)
        for line, el in it:
            heads.append((sync_time(el), order, line, el, it))
            break
    heapq.heapify(heads)
    while heads:
        _, order, line, el, it = heads[0]
        yield sources[order][0], line, el
        for line, el in it:
            heapq.heapreplace(heads, (sync_time(el), order, line, el, it))
            break
        else:
            heapq.heappop(heads)
