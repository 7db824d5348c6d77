"""A batch's inserts into a rows family's groups at once (`RowsFamily.bulk_insert`), and the row list it fills.

The inserts of a batch commute, so they are taken a group at a time in canonical order (SEMANTICS §9: LE,
RE, then the full row key for ties). The rows after the group's last one — on an in-order stream, all of
them — are appended as whole sublists of the group's `RowList` (no row renumbered, no search per row); the
others go through `RowsFamily.insert` one by one, which marks the windows they renumber dirty. The tests of
tests/test_rows_closed.py and tests/test_engine_rows.py feed the same streams in batches of one element (no
bulk insert) and of many, against the oracle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sortedcontainers import SortedKeyList

from ..common import Ev
from .state import Group

__all__ = ["RowList", "bulk_rows"]


class RowList(SortedKeyList):
    """A group's rows in canonical order (its key: `rows.row_key`), extended at the end in one step and
    dropped from the front without sorting again."""

    def extend_after(self, evs: list[Ev]) -> None:
        """Append ``evs``, in canonical order and each after the last row: whole sublists of at most the load
        factor (what `add` makes of them one by one, without a search per row)."""
        key = self._key
        keys = [key(ev) for ev in evs]
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

    def drop_front(self, k: int) -> None:
        """Drop the first ``k`` rows (``del rows[:k]`` would sort the rest again when few remain)."""
        lists, kl, maxes = self._lists, self._keys, self._maxes
        self._len -= k
        while k:
            n0 = len(lists[0])
            if k < n0:
                del lists[0][:k]
                del kl[0][:k]
                break
            del lists[0], kl[0], maxes[0]
            k -= n0
        del self._index[:]


def bulk_rows(fam: Any, groups: list[Group], codes: np.ndarray, ids: np.ndarray, le: np.ndarray, re: np.ndarray,
              vals: Any) -> None:
    """A batch's inserts (row ``j`` in group ``groups[codes[j]]``) into the rows family ``fam``, a group at a
    time in canonical order: those after the group's last row are appended at once; the others go one by one
    (``fam.insert``)."""
    order = np.lexsort((re, le, codes))
    cs = codes[order]
    les = le[order]
    res = re[order]
    il = ids[order].tolist()
    ll = les.tolist()
    rl = res.tolist()
    vl = vals[order].tolist() if isinstance(vals, np.ndarray) else [vals[i] for i in order.tolist()]
    m = len(cs)
    cut = (np.flatnonzero(cs[1:] != cs[:-1]) + 1).tolist()
    # a row of its group's run with the (LE, RE) of the one before: only its full key orders them
    ties = set((np.flatnonzero((cs[1:] == cs[:-1]) & (les[1:] == les[:-1]) & (res[1:] == res[:-1])) + 1).tolist())
    for a, b in zip([0, *cut], [*cut, m], strict=True):
        g = groups[int(cs[a])]
        d = g.data
        evs = [Ev(il[i], ll[i], rl[i], vl[i]) for i in range(a, b)]
        held = g.events
        for ev in evs:
            held[ev.id] = ev
        rows: RowList = d.rows
        j = a
        if rows:
            last = rows[-1]
            key = (last.le, last.re)
            while j < b and (ll[j], rl[j]) <= key:
                j += 1
        for ev in evs[:j - a]:
            fam.insert(g, ev)
        if j < b:
            fam._touch(g, d)
            tail = evs[j - a:]
            if ties and any(i in ties for i in range(j + 1, b)):
                tail.sort(key=rows.key)
            rows.extend_after(tail)
