"""A batch's inserts into a rows family's groups at once (`RowsFamily.bulk_insert`).

The inserts of a batch commute, so they are taken a group at a time in canonical order (SEMANTICS §9: LE,
RE, then the canonical JSON of the value and the id for ties). The rows after the group's last one — on an
in-order stream, all of them — are appended to its columns as list slices (`RowColumns.extend`: no object,
key or search per row, no row renumbered); the others go through `RowsFamily.insert` one by one, which marks
the windows they renumber dirty. The tests of tests/test_rows_closed.py and tests/test_engine_rows.py feed
the same streams in batches of one element (no bulk insert) and of many, against the oracle. The batch is
sorted and made lists in one pass, not group by group: a group's run costs four list appends whatever its
length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..common import Ev
from .rows_store import RowColumns, canonical_ties
from .state import Group

__all__ = ["bulk_rows"]


def bulk_rows(fam: Any, groups: list[Group], codes: np.ndarray, ids: np.ndarray, le: np.ndarray, re: np.ndarray,
              vals: Any) -> None:
    """A batch's inserts (row ``j`` in group ``groups[codes[j]]``) into the rows family ``fam``, a group at a
    time in canonical order: those after the group's last row are appended to its columns at once; the others
    go one by one (``fam.insert``). The batch is sorted and turned into lists once, not group by group."""
    order = np.lexsort((re, le, codes))
    cs = codes[order]
    les = le[order]
    res = re[order]
    order = canonical_ties((cs[1:] == cs[:-1]) & (les[1:] == les[:-1]) & (res[1:] == res[:-1]), order, vals, ids)
    il = ids[order].tolist()
    ll = les.tolist()
    rl = res.tolist()
    vl = vals[order].tolist() if isinstance(vals, np.ndarray) else [vals[i] for i in order.tolist()]
    m = len(cs)
    new = np.flatnonzero(cs[1:] != cs[:-1]) + 1
    starts = [0, *new.tolist()]
    ends = [*new.tolist(), m]
    cl = cs[starts].tolist()
    for a, b, c in zip(starts, ends, cl, strict=True):
        g = groups[c]
        d = g.data
        rows: RowColumns = d.rows
        j = a
        if rows:
            lk = (rows.le[-1], rows.re[-1])
            while j < b and (ll[j], rl[j]) <= lk:
                fam.insert(g, Ev(il[j], ll[j], rl[j], vl[j]))
                j += 1
        if j < b:
            fam._touch(g, d)
            rows.extend(il[j:b], ll[j:b], rl[j:b], vl[j:b])
