"""udm-sketches: first-party approximate aggregates on Apache DataSketches (INTERFACES §6).

Each is incremental and algebraic with the sketch's serialized bytes as its state (they pickle into
engine checkpoints, pane states and Spark state as they are), has no ``remove`` (a sketch cannot forget a
value: the host rebuilds a window's state from its remaining members instead) and declares its error
bound in its manifest (`udm.sdk.ErrorBound`), which the conformance kit checks against exact answers.
"""

from __future__ import annotations

from collections.abc import Callable

from udm.sdk import UDM, hookimpl

from .distinct import ApproxDistinct
from .frequent import FrequentItems
from .quantiles import ApproxQuantile

__all__ = ["ALL", "ApproxDistinct", "ApproxQuantile", "FrequentItems", "register_udms"]

ALL: tuple[type[UDM], ...] = (ApproxDistinct, ApproxQuantile, FrequentItems)


@hookimpl
def register_udms(register: Callable[[type[UDM]], None]) -> None:
    for cls in ALL:
        register(cls)
