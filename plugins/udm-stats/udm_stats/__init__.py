"""udm-stats: the first-party statistical UDMs (INTERFACES §6)."""

from __future__ import annotations

from collections.abc import Callable

from udm.sdk import UDM, hookimpl

from .aggregates import Avg, Count, Max, Min, Sum, Variance
from .functions import InRange
from .holistic import Median, TimeWeightedAverage

__all__ = ["ALL", "Avg", "Count", "InRange", "Max", "Median", "Min", "Sum", "TimeWeightedAverage", "Variance",
           "register_udms"]

ALL: tuple[type[UDM], ...] = (Count, Sum, Avg, Min, Max, Variance, Median, TimeWeightedAverage, InRange)


@hookimpl
def register_udms(register: Callable[[type[UDM]], None]) -> None:
    for cls in ALL:
        register(cls)
