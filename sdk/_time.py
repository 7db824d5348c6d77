"""Application time and the two value types every UDM sees.

Time is an integer tick. `INF` is the largest int64 so that it orders correctly against every finite
tick, survives pickling and Arrow/Spark LongType unchanged, and needs no special case in comparisons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["INF", "Event", "WindowDescriptor", "is_inf", "time_json"]

INF: int = 2**63 - 1


def is_inf(t: int) -> bool:
    return t >= INF


def time_json(t: int) -> int | str:
    """A tick as JSON writes it (SEMANTICS §1): an integer, or ``"inf"`` — also when a UDM writes a time
    into a payload (``INF`` itself is an internal representation and must never reach a file)."""
    return "inf" if t >= INF else t


def _check_lifetime(kind: str, le: int, re: int) -> None:
    if isinstance(le, bool) or isinstance(re, bool) or not isinstance(le, int) or not isinstance(re, int):
        raise TypeError(f"{kind} needs integer ticks, got le={le!r}, re={re!r}")
    if le >= INF:
        raise ValueError(f"{kind} needs a finite le, got le=inf")
    if re <= le:
        raise ValueError(f"{kind} needs le < re, got [{le}, {re})")


@dataclass(frozen=True, slots=True)
class WindowDescriptor:
    """The window a UDM is invoked for: the half-open interval ``[le, re)``."""

    le: int
    re: int

    def __post_init__(self) -> None:
        _check_lifetime("WindowDescriptor", self.le, self.re)

    @property
    def duration(self) -> int:
        """Window length in ticks (``INF`` for an unbounded snapshot window)."""
        return INF if self.re >= INF else self.re - self.le


@dataclass(frozen=True, slots=True)
class Event:
    """An event as a time-sensitive UDM sees it: lifetime ``[le, re)`` (clipped per the query) + payload.

    The payload is a plain dict so events pickle cheaply into engine state; treat it as read-only.
    """

    le: int
    re: int
    payload: Mapping[str, Any] | Any = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_lifetime("Event", self.le, self.re)

    def overlaps(self, window: WindowDescriptor) -> bool:
        return self.le < window.re and self.re > window.le
