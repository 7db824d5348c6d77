"""Runs of a column (rows of one group, one after another, ascending inside a run): per-run searches and copies
whose cost follows the runs touched and the rows moved, not the column's length.

The shared rows store (`rows_shared.RowStore`) holds every group's rows in one set of columns and a flush asks
the same few things of each run: how many of its rows lie below a time (`run_lower`), its rows without the
dropped head (`gather_runs`), its rows with the batch's new ones after them (`interleave`). Answering those by a
pass over the whole column made a flush cost the size of the store (issue 26: ten groups of 10,000-row windows,
small batches). Here, with few runs (``FEW``, the streaming case the store is slow for: each run long), a run
is searched by one binary search of its slice and copied as whole slices (memory copies); with many short
runs, one vectorised step for all (a bisection over every run at once, one take of all the rows): either way
the same answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..rules import I64_MIN
from .grid_closed import spans

__all__ = ["FEW", "gather_runs", "interleave", "longest", "run_lower"]

_I64 = np.int64
_I64_MAX = 2**63 - 1
#: up to this many runs, runs are searched and copied one slice each (a Python step per run); beyond it, as one
#: vectorised step for all (a few numpy calls whatever their number)
FEW = 64


def run_lower(col: np.ndarray, heads: np.ndarray, cnt: np.ndarray, t: Any) -> np.ndarray:
    """Per run ``col[heads[j]:heads[j] + cnt[j]]`` (ascending): its number of values below ``t`` (one int for
    every run, or an int64 array, one per run)."""
    n = len(heads)
    if isinstance(t, (int, np.integer)):
        if t > _I64_MAX:
            return cnt.astype(_I64, copy=True)
        if t <= I64_MIN:
            return np.zeros(n, dtype=_I64)
        ts = np.full(n, t, dtype=_I64)
    else:
        ts = np.asarray(t, dtype=_I64)
    if n <= FEW:
        return np.fromiter((col[a:a + k].searchsorted(x) for a, k, x in
                            zip(heads.tolist(), cnt.tolist(), ts.tolist(), strict=True)), dtype=_I64, count=n)
    lo = heads.astype(_I64, copy=True)
    hi = lo + cnt
    last = max(len(col) - 1, 0)
    while True:
        act = lo < hi
        if not act.any():
            return lo - heads
        mid = (lo + hi) >> 1
        go = act & (col[np.minimum(mid, last)] < ts)
        lo = np.where(go, mid + 1, lo)
        hi = np.where(act & ~go, mid, hi)


def gather_runs(col: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The rows ``col[starts[j]:starts[j] + lens[j]]`` of every run, one run after another."""
    if len(starts) <= FEW:
        parts = [col[a:a + k] for a, k in zip(starts.tolist(), lens.tolist(), strict=True) if k]
        return np.concatenate(parts) if parts else col[:0].copy()
    return col[spans(starts, lens)[1]]


def interleave(old: np.ndarray, new: np.ndarray, pos: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """``old`` with the rows ``new[cuts[j]:cuts[j + 1]]`` put before ``old[pos[j]]`` (``pos`` ascending,
    ``len(old)``: at the end; ``cuts`` from 0 to ``len(new)``), the rows of each in their order."""
    m = len(old) + len(new)
    k = len(pos)
    if k <= FEW:
        parts = []
        at = 0
        for j, p in enumerate(pos.tolist()):
            parts.append(old[at:p])
            parts.append(new[int(cuts[j]):int(cuts[j + 1])])
            at = p
        parts.append(old[at:])
        return np.concatenate(parts)
    lens = np.diff(cuts)
    dnew = np.repeat(pos, lens) + np.arange(len(new), dtype=_I64)  # (before it: pos[j] old rows, i new ones)
    out = np.empty(m, dtype=old.dtype)
    keep = np.ones(m, dtype=bool)
    keep[dnew] = False
    out[dnew] = new
    out[keep] = old
    return out


def longest(le: np.ndarray, re: np.ndarray) -> int:
    """At least the longest lifetime ``re - le`` among the rows (0: none): exact unless a difference would
    overflow int64 (then the span from the first start to the last end)."""
    if not len(le):
        return 0
    hi, lo = int(re.max()), int(le.min())
    if hi - lo <= _I64_MAX:
        return int((re - le).max())
    return hi - lo
