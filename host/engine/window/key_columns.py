"""Groups' key fields as columns: what a block of windows writes beside each window's value.

A block of closed windows (`grid_closed.write_closed`) writes each window's group key fields; gathered from
``Group.fields`` one window at a time, they cost a Python step per window written (a q5-like step writes about
one window per input event). `CodeFields` keeps a store's groups' key fields by group code, as columns, so a
block's key columns are one numpy take over its windows' codes.
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np

from ..payload import value_array

__all__ = ["CodeFields", "KeyColumns", "joined"]

#: a group's key fields
_FIELDS = attrgetter("fields")


class KeyColumns:
    """The key fields of ``n`` windows, in order: a column (numpy or list) per field; none without ``group_by``."""

    __slots__ = ("cols", "n")

    def __init__(self, cols: dict[str, Any], n: int) -> None:
        self.cols = cols
        self.n = n

    def __len__(self) -> int:
        return self.n

    @classmethod
    def of_groups(cls, groups: list[Any]) -> KeyColumns:
        """The key fields of one window per group of ``groups`` (at C speed: no Python loop)."""
        cols: dict[str, Any] = {}
        f0 = groups[0].fields if groups else None
        if f0:
            keys = list(map(_FIELDS, groups))
            for f in f0:
                cols[f] = list(map(itemgetter(f), keys))
        return cls(cols, len(groups))

    def dicts(self) -> list[dict[str, Any] | None]:
        """Each window's key fields as a dict (None: no ``group_by``), as `WindowUDM.outputs` takes them."""
        if not self.cols:
            return [None] * self.n
        names = list(self.cols)
        vals = [c.tolist() if isinstance(c, np.ndarray) else c for c in self.cols.values()]
        return [dict(zip(names, t, strict=True)) for t in zip(*vals, strict=True)]


class CodeFields:
    """Key fields by group code (codes given in order, from 0), as columns: appended a batch of new groups at
    a time, joined into one column when next read."""

    def __init__(self) -> None:
        #: the field names (group_by order), known with the first group that has key fields
        self.names: list[str] = []
        self.cols: dict[str, np.ndarray] = {}
        #: codes appended since the columns were last joined: per field, chunks
        self.parts: dict[str, list[np.ndarray]] = {}
        self.n = 0

    @classmethod
    def of(cls, groups: dict[int, Any], n: int) -> CodeFields:
        """The key fields of codes ``0 .. n-1``, of ``groups`` by code (a code no group has: None fields)."""
        cf = cls()
        have = next(iter(groups.values()), None)
        names = list(have.fields or ()) if have is not None else []
        none = dict.fromkeys(names) if names else None
        cf.add([groups[c].fields if c in groups else none for c in range(n)])
        return cf

    def add(self, fields: list[dict[str, Any] | None]) -> None:
        """The next ``len(fields)`` codes' key fields (None: no ``group_by``)."""
        if not fields:
            return
        self.n += len(fields)
        f0 = fields[0]
        if not f0:
            return
        if not self.names:
            self.names = list(f0)
        given = cast(list[dict[str, Any]], fields)
        for f in self.names:
            self.parts.setdefault(f, []).append(value_array([d[f] for d in given]))

    def row(self, code: int) -> dict[str, Any] | None:
        """Code ``code``'s key fields as a dict (None: no ``group_by``)."""
        if not self.names:
            return None
        self._join()
        return {f: c[code:code + 1].tolist()[0] for f, c in self.cols.items()}

    def _join(self) -> None:
        if self.parts:
            for f, chunks in self.parts.items():
                old = self.cols.get(f)
                self.cols[f] = joined([old, *chunks] if old is not None else chunks)
            self.parts = {}

    def keep(self, codes: np.ndarray) -> None:
        """Only ``codes`` stay, numbered again from 0 in their order."""
        self._join()
        self.cols = {f: c[codes] for f, c in self.cols.items()}
        self.n = len(codes)

    def take(self, codes: np.ndarray) -> KeyColumns:
        """The key fields of the groups ``codes`` (one per window)."""
        self._join()
        return KeyColumns({f: c[codes] for f, c in self.cols.items()}, len(codes))


def joined(cols: list[np.ndarray]) -> np.ndarray:
    """Columns end to end: one numeric kind stays so; mixed kinds become Python objects (an int stays an int,
    a bool a bool)."""
    if len({c.dtype for c in cols}) == 1:
        return np.concatenate(cols)
    out = np.empty(sum(len(c) for c in cols), dtype=object)
    at = 0
    for c in cols:  # (element by element: numpy would make an int64 and a float64 column one float64)
        out[at:at + len(c)] = c.tolist()
        at += len(c)
    return out
