"""The sessions of rows sorted by (group, LE), found for every group at once (SEMANTICS §9): a row opens one
where its group starts or its LE is at least ``gap`` past the largest RE before it in the group. That maximum
over the group's earlier rows is the maximum over the session, as every boundary row ends past it (a row
ends after it starts, and it starts past every end before it), so one running maximum per group serves.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..rules import INF

__all__ = ["Sessions", "scan"]


class Sessions(NamedTuple):
    #: per row: the first of its group; the largest RE of its group up to it
    first: np.ndarray
    top: np.ndarray
    #: per session: its first row, the row after its last, its members' largest RE, its end (W.RE)
    s0: np.ndarray
    s1: np.ndarray
    wtop: np.ndarray
    wre: np.ndarray


def scan(gid: np.ndarray, le: np.ndarray, re: np.ndarray, gap: int) -> Sessions:
    """The sessions of the rows (at least one), sorted by (``gid``, ``le``)."""
    n = len(gid)
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(gid[1:], gid[:-1], out=first[1:])
    # the largest RE so far in each group: RE itself where the ends grow with the starts (short events),
    # else a running maximum over (group ordinal, rank of RE)
    if bool(((re[1:] >= re[:-1]) | first[1:]).all()):
        top = re
    else:
        ends, rank = np.unique(re, return_inverse=True)
        gi = np.cumsum(first) - 1
        w = len(ends)
        top = ends[np.maximum.accumulate(gi * w + rank.reshape(-1)) - gi * w]
    start = first.copy()
    prev = top[:-1]
    start[1:] |= (prev < INF) & (le[1:] - prev >= gap)
    s0 = np.flatnonzero(start)
    s1 = np.append(s0[1:], n)
    wtop = top[s1 - 1]
    wre = np.minimum(wtop, INF - gap) + gap
    wre[wtop >= INF] = INF
    return Sessions(first, top, s0, s1, wtop, wre)

