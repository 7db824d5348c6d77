"""Aggregates that need the whole window: median (holistic) and the time-weighted average."""

from __future__ import annotations

from collections.abc import Sequence

from udm.sdk import INF, UDA, Event, TimeSensitiveUDA, WindowDescriptor, udm

__all__ = ["Median", "TimeWeightedAverage"]


@udm(name="median", version="1.0.0", input_type="float", output_type="float")
class Median(UDA):
    """Median of the input; the mean of the two middle values for an even count."""

    def compute(self, payloads: Sequence[float]) -> float:
        values = sorted(payloads)
        n = len(values)
        mid = n // 2
        if n % 2:
            return values[mid]
        return (values[mid - 1] + values[mid]) / 2


@udm(name="twa", version="1.0.0", input_type="float", output_type="float")
class TimeWeightedAverage(TimeSensitiveUDA):
    """Time-weighted average: Σ vᵢ·len([LEᵢ,REᵢ) ∩ W) / len(W), on the lifetimes as clipped.

    For an unbounded window ``[le, INF)`` (the last snapshot window) the value is the limit as the window
    grows: the sum of the values of the events that never end.
    """

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> float:
        if window.re >= INF:
            return float(sum(e.payload for e in events if e.re >= INF))
        total = 0.0
        for e in events:
            overlap = min(e.re, window.re) - max(e.le, window.le)
            if overlap > 0:
                total += e.payload * overlap
        return total / (window.re - window.le)
