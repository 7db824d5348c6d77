"""A batch's inserts into a rows family's groups at once (`RowsFamily.bulk_insert`), the row list it fills and
the list's key (`row_key`, canonical row order).

The inserts of a batch commute, so they are taken a group at a time in canonical order (SEMANTICS §9: LE,
RE, then the full row key for ties). The rows after the group's last one — on an in-order stream, all of
them — are appended as whole sublists of the group's `RowList` (no row renumbered, no search per row); the
others go through `RowsFamily.insert` one by one, which marks the windows they renumber dirty. The tests of
tests/test_rows_closed.py and tests/test_engine_rows.py feed the same streams in batches of one element (no
bulk insert) and of many, against the oracle. A batch's events and their keys are made in one pass over the
batch, not group by group: a group's run costs a dict update and a list append whatever its length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sortedcontainers import SortedKeyList

from ..common import Ev
from .state import Group

__all__ = ["RowList", "bulk_rows", "row_key"]


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


class RowList(SortedKeyList):
    """A group's rows in canonical order (its key: `row_key`), extended at the end in one step and dropped
    from the front without sorting again."""

    def last_key(self) -> Any:
        """The key of the last row (the list is not empty)."""
        return self._maxes[-1]

    def extend_after(self, evs: list[Ev], keys: list[Any]) -> None:
        """Append ``evs`` (their keys: ``keys``), in canonical order and each after the last row: whole
        sublists of at most the load factor (what `add` makes of them one by one, without a search per row)."""
        lists, kl, maxes = self._lists, self._keys, self._maxes
        load = self._load
        i = 0
        if lists and len(lists[-1]) < load:
            i = load - len(lists[-1])
            lists[-1].extend(evs[:i])
            kl[-1].extend(keys[:i])
            maxes[-1] = kl[-1][-1]
        for j in range(i, len(evs), load):
            lists.append(evs[j:j + load])
            kl.append(keys[j:j + load])
            maxes.append(kl[-1][-1])
        self._len += len(evs)
        del self._index[:]  # (the positional index is made again when next needed)

    def drop_front(self, k: int) -> list[Ev]:
        """Drop the first ``k`` rows and return them (``del rows[:k]`` would sort the rest again when few
        remain)."""
        lists, kl, maxes = self._lists, self._keys, self._maxes
        self._len -= k
        gone: list[Ev] = []
        while k:
            n0 = len(lists[0])
            if k < n0:
                gone += lists[0][:k]
                del lists[0][:k]
                del kl[0][:k]
                break
            gone += lists[0]
            del lists[0], kl[0], maxes[0]
            k -= n0
        del self._index[:]
        return gone


def bulk_rows(fam: Any, groups: list[Group], codes: np.ndarray, ids: np.ndarray, le: np.ndarray, re: np.ndarray,
              vals: Any) -> None:
    """A batch's inserts (row ``j`` in group ``groups[codes[j]]``) into the rows family ``fam``, a group at a
    time in canonical order: those after the group's last row are appended at once; the others go one by one
    (``fam.insert``). The events and their keys are made for the whole batch at once."""
    order = np.lexsort((re, le, codes))
    cs = codes[order]
    les = le[order]
    res = re[order]
    il = ids[order].tolist()
    ll = les.tolist()
    rl = res.tolist()
    vl = vals[order].tolist() if isinstance(vals, np.ndarray) else [vals[i] for i in order.tolist()]
    evs = list(map(Ev, il, ll, rl, vl))
    keys = list(zip(ll, rl, map(_Tie, evs), strict=True))
    m = len(cs)
    new = np.flatnonzero(cs[1:] != cs[:-1]) + 1
    starts = [0, *new.tolist()]
    ends = [*new.tolist(), m]
    # ``tied[i]``: how many of rows 1..i have their group's run's (LE, RE) of the row before (only the full
    # key orders those)
    tie = (cs[1:] == cs[:-1]) & (les[1:] == les[:-1]) & (res[1:] == res[:-1])
    tied = np.concatenate(([0], np.cumsum(tie))).tolist()
    cl = cs[starts].tolist()
    for a, b, c in zip(starts, ends, cl, strict=True):
        g = groups[c]
        d = g.data
        g.events.update(zip(il[a:b], evs[a:b], strict=True))
        rows: RowList = d.rows
        j = a
        if rows:
            last = rows.last_key()
            lk = (last[0], last[1])
            while j < b and (ll[j], rl[j]) <= lk:
                fam.insert(g, evs[j])
                j += 1
        if j < b:
            fam._touch(g, d)
            if tied[b - 1] > tied[j]:
                at = sorted(range(j, b), key=keys.__getitem__)
                rows.extend_after([evs[i] for i in at], [keys[i] for i in at])
            else:
                rows.extend_after(evs[j:b], keys[j:b])
