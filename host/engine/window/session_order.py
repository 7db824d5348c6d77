"""The canonical order of a session group's rows (`session_groups`: its events kept as objects in a sorted list),
and taking a row out of it when its end changes.
"""

from __future__ import annotations

from typing import Any

from ..common import Ev

__all__ = ["row_key", "take_out"]


class _Tie:
    """The part of a row's key after (LE, RE): the canonical JSON of its value, then its id. Made only when
    two rows share (LE, RE), so in-order rows never serialize their values."""

    __slots__ = ("ev",)

    def __init__(self, ev: Ev) -> None:
        self.ev = ev

    def _key(self) -> tuple[str, int]:
        return (self.ev.canon(), self.ev.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tie) and (self.ev is other.ev or self._key() == other._key())

    def __lt__(self, other: _Tie) -> bool:
        return self._key() < other._key()

    __hash__ = None  # type: ignore[assignment]


def row_key(ev: Ev, re: int | None = None) -> tuple[int, int, _Tie]:
    """Canonical row order (SEMANTICS §5/§9, semantics-notes 5 and 26): (LE, RE), the canonical JSON of the
    value; the id only breaks exact ties. ``re``: the key the row had with that end."""
    return (ev.le, ev.re if re is None else re, _Tie(ev))


def take_out(rows: Any, ev: Ev, old: int, new: int) -> int | None:
    """Take ``ev`` (its end was ``old``) out of ``rows`` (a sorted list by `row_key`) and give it end ``new``;
    returns its list position (None: cleanup dropped it, as final — RE < CTI — so no valid element reaches
    it)."""
    p: int = rows.bisect_key_left(row_key(ev, old))
    ev.re = new
    if p >= len(rows) or rows[p] is not ev:
        return None
    del rows[p]
    return p
