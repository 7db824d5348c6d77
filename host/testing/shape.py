"""Output stream shape and ordering (seeds/002 §6.3): the two checks besides CHT equality and CTIs.

- *Shape*: whether every event of the output's CHT is a point (``RE = LE + 1``), an interval (a finite
  ``RE > LE + 1``) or open (``RE = INF``; an edge before its end is known), as the tester expects of the
  query (a UDA over windows gives intervals ``W``; rows windows of one row over point events give points).
- *Ordering*: ``"ordered"`` when the physical output never goes back in time (the sync time of every
  element is ``>=`` that of the one before: fully ordered by LE, retractions only at or after it),
  ``"per_event"`` when only an insert and its own later lifetime changes are in order (always true of a
  valid stream), and *perfect* when, moreover, no output event is ever retracted (strong consistency,
  seeds/003: ``max_delay: inf`` on in-order input).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from udm.host.temporal.elements import Cti, Insert, Retract, sync_time
from udm.sdk import INF

from .cht import apply_stream

__all__ = ["Shape", "output_ordering", "output_shape", "retraction_count"]

Shape = Literal["empty", "point", "interval", "open", "mixed"]


def output_shape(output: Sequence[Any]) -> Shape:
    """The shape of every event of ``output``'s CHT (``"mixed"`` when they differ)."""
    kinds = set()
    for le, re, _ in apply_stream(output).cht().elements():
        kinds.add("open" if re >= INF else "point" if re == le + 1 else "interval")
    if not kinds:
        return "empty"
    return kinds.pop() if len(kinds) == 1 else "mixed"  # type: ignore[return-value]


def retraction_count(output: Sequence[Any]) -> int:
    """Output retractions: 0 for a perfect (strongly consistent) output."""
    return sum(1 for el in output if isinstance(el, Retract))


def output_ordering(output: Sequence[Any]) -> Literal["perfect", "ordered", "per_event"]:
    """How ordered ``output`` is (see the module doc); CTIs do not count."""
    last = None
    ordered = True
    for el in output:
        if isinstance(el, Cti) or not isinstance(el, (Insert, Retract)):
            continue
        t = sync_time(el)
        if last is not None and t < last:
            ordered = False
            break
        last = t
    if not ordered:
        return "per_event"
    return "perfect" if retraction_count(output) == 0 else "ordered"
