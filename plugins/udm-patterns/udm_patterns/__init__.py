"""udm-patterns: the first-party operator UDMs (INTERFACES §6)."""

from __future__ import annotations

from collections.abc import Callable

from udm.sdk import UDM, hookimpl

from .operators import Follows, Members, TopK

__all__ = ["ALL", "Follows", "Members", "TopK", "register_udms"]

ALL: tuple[type[UDM], ...] = (TopK, Members, Follows)


@hookimpl
def register_udms(register: Callable[[type[UDM]], None]) -> None:
    for cls in ALL:
        register(cls)
