"""udm-patterns: the first-party operator UDMs (INTERFACES §6)."""

from __future__ import annotations

from collections.abc import Callable

from udm.sdk import UDM, hookimpl

from .explode import Explode
from .operators import Follows, Members, TopK

__all__ = ["ALL", "Explode", "Follows", "Members", "TopK", "register_udms"]

ALL: tuple[type[UDM], ...] = (TopK, Members, Follows, Explode)


@hookimpl
def register_udms(register: Callable[[type[UDM]], None]) -> None:
    for cls in ALL:
        register(cls)
