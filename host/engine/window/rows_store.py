"""A rows-family group's rows as columns (`RowColumns`): engine ids, LEs, REs and values, one list each, in
canonical row order (SEMANTICS §9, semantics-notes 5 and 26: LE, RE, the canonical JSON of the value, the id
only for exact ties).

Why columns and not one object per row in a sorted list: a row window is valued from a range of values and
spans the LEs at its ends, so the flush reads column slices (`rows_closed` joins them for every group at once,
the sweep takes a slice of values); an in-order batch appends a group's run to four lists (no object, key or
search per row); a release or a CTI finds its row by one C bisection over the LEs; cleanup drops a prefix.
The group keeps no event objects (the family's ``tracks_events`` is off): a retraction finds its row by its
LE block, its end and its id (`find`). Ties of LE and RE — rare — compare the canonical JSON of the values,
made only for the rows of the tie.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

import numpy as np

from udm.host.temporal.strict import canonical_json

from ..common import Ev
from .grid_closed import spans

__all__ = ["RowColumns", "canonical_ties"]


def canonical_ties(tie: np.ndarray, order: np.ndarray, vals: Any, ids: Any) -> np.ndarray:
    """``order`` (positions into ``vals`` and ``ids``, sorted by group, LE and RE) in canonical order: each run
    of equal (group, LE, RE) — ``tie[i]``: ``order[i + 1]`` ties ``order[i]`` — sorted by the canonical JSON of
    its values, then ids (SEMANTICS §9). The JSON is made for the tied rows only; the one rule of the bulk
    paths (the shared store's merge, `rows_bulk`)."""
    t = np.flatnonzero(tie)
    if not len(t):
        return order
    heads = t[np.concatenate(([True], t[1:] != t[:-1] + 1))]
    tails = t[np.concatenate((t[1:] != t[:-1] + 1, [True]))] + 2
    lens = tails - heads
    at = spans(heads, lens)[1]
    tied = order[at]  # the tied rows, run after run
    if isinstance(vals, np.ndarray) and vals.dtype == np.int64:
        text = vals[tied].astype(str)  # (an int's canonical JSON is its decimal text)
    else:
        tv = vals[tied].tolist() if isinstance(vals, np.ndarray) else [vals[i] for i in tied.tolist()]
        text = np.array([canonical_json(v) for v in tv], dtype=str)
    out = order.copy()
    out[at] = tied[np.lexsort((ids[tied], text, np.repeat(np.arange(len(heads)), lens)))]
    return out


class RowColumns:
    """A group's rows in canonical order, as four parallel lists (list position ``i`` is one row)."""

    __slots__ = ("ids", "le", "re", "vals")

    def __init__(self, ids: list[int] | None = None, le: list[int] | None = None, re: list[int] | None = None,
                 vals: list[Any] | None = None) -> None:
        self.ids: list[int] = ids if ids is not None else []
        self.le: list[int] = le if le is not None else []
        self.re: list[int] = re if re is not None else []
        self.vals: list[Any] = vals if vals is not None else []

    def __getstate__(self) -> tuple:
        return (self.ids, self.le, self.re, self.vals)

    def __setstate__(self, s: tuple) -> None:
        self.ids, self.le, self.re, self.vals = s

    def __len__(self) -> int:
        return len(self.le)

    def lower(self, le: int) -> int:
        """The first position whose LE is at least ``le`` (a key ``(le,)`` sorts before every row key
        starting with ``le``)."""
        return bisect_left(self.le, le)

    def _block(self, le: int, re: int) -> tuple[int, int]:
        """The positions ``[a, b)`` of the rows whose lifetime is ``[le, re)`` (rows sort by LE, then RE)."""
        les, res = self.le, self.re
        a = bisect_left(les, le)
        b = bisect_right(les, le, a)
        a = bisect_left(res, re, a, b)
        return a, bisect_right(res, re, a, b)

    def pos(self, le: int, re: int, val: Any, eid: int) -> int:
        """Where row ``(le, re, val, eid)`` goes in canonical order (before every row whose key is not below
        its own)."""
        a, b = self._block(le, re)
        if a == b:
            return a
        vals, ids = self.vals, self.ids
        return bisect_left(range(b), (canonical_json(val), eid), a, b,
                           key=lambda i: (canonical_json(vals[i]), ids[i]))

    def insert(self, p: int, eid: int, le: int, re: int, val: Any) -> None:
        self.ids.insert(p, eid)
        self.le.insert(p, le)
        self.re.insert(p, re)
        self.vals.insert(p, val)

    def add(self, eid: int, le: int, re: int, val: Any) -> int:
        """Insert the row in canonical order; returns its position."""
        p = self.pos(le, re, val, eid)
        self.insert(p, eid, le, re, val)
        return p

    def find(self, eid: int, le: int, re: int) -> int | None:
        """The position of the row of id ``eid`` with lifetime ``[le, re)`` (None: not held — cleanup dropped
        it as final). A live id is unique among rows of one LE block: an id reused after its event closed is
        inserted at or after the CTI, past the closed event's LE."""
        a, b = self._block(le, re)
        try:
            return self.ids.index(eid, a, b)
        except ValueError:
            return None

    def pop(self, p: int) -> None:
        del self.ids[p], self.le[p], self.re[p], self.vals[p]

    def extend(self, ids: list[int], le: list[int], re: list[int], vals: list[Any]) -> None:
        """Append rows already in canonical order, each after the last row."""
        self.ids += ids
        self.le += le
        self.re += re
        self.vals += vals

    def drop_front(self, k: int) -> None:
        del self.ids[:k], self.le[:k], self.re[:k], self.vals[:k]

    def events(self, a: int, b: int) -> list[Ev]:
        """Rows ``a .. b - 1`` as event objects (a UDM that reads its members whole)."""
        return list(map(Ev, self.ids[a:b], self.le[a:b], self.re[a:b], self.vals[a:b]))
