"""The state a window operator keeps: windows, groups and the output records it emitted."""

from __future__ import annotations

from typing import Any

from ..common import Ev

__all__ = ["Group", "OutRec", "Win"]


class OutRec:
    """One live output event: engine id, lifetime, payload and its canonical JSON."""

    __slots__ = ("id", "le", "p", "pj", "re")

    def __init__(self, id: str, le: int, re: int, p: dict[str, Any], pj: str) -> None:
        self.id = id
        self.le = le
        self.re = re
        self.p = p
        self.pj = pj

    def __getstate__(self) -> tuple:
        return (self.id, self.le, self.re, self.p, self.pj)

    def __setstate__(self, s: tuple) -> None:
        self.id, self.le, self.re, self.p, self.pj = s


class Win:
    """One window of one group."""

    __slots__ = ("alive", "dirty", "fresh", "g", "key", "le", "members", "n", "out", "pend", "re", "rebuild",
                 "state", "sticky", "waiting")

    def __init__(self, g: Group, key: int, le: int, re: int, members: dict[str, Ev] | None) -> None:
        self.g = g
        self.key = key
        self.le = le
        self.re = re
        self.members = members
        self.n = 0
        self.state: Any = None
        self.pend: dict[str, list] | None = None
        self.out: list[OutRec] = []
        self.dirty = False
        self.fresh = False
        self.waiting = False
        self.alive = True
        self.sticky = False  # has been emitted: later changes are released at once
        self.rebuild = False

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, s) for s in Win.__slots__)

    def __setstate__(self, s: tuple) -> None:
        for k, v in zip(Win.__slots__, s, strict=True):
            setattr(self, k, v)

    def __repr__(self) -> str:  # pragma: no cover
        return f"Win([{self.le}, {self.re}), n={self.n})"


class Group:
    __slots__ = ("a", "b", "base", "fields", "grave", "key", "nev", "wins")

    def __init__(self, key: Any, fields: dict[str, Any] | None) -> None:
        self.key = key
        self.fields = fields
        self.wins: Any = None
        self.nev = 0  # events of this group in the step registry
        self.grave: list[OutRec] = []  # outputs of destroyed windows, retracted at the next flush
        self.a: Any = None  # family-specific structures
        self.b: Any = None
        self.base = 0

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, s) for s in Group.__slots__)

    def __setstate__(self, s: tuple) -> None:
        for k, v in zip(Group.__slots__, s, strict=True):
            setattr(self, k, v)
