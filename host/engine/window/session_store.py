"""The tail's values (`session_columns.Tail`): kept batch by batch as the UDM receives them (a numeric column,
else objects), never moved with the rows, which hold an index into them; `gather` reads them back.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gather"]


def gather(store: list[np.ndarray], vix: np.ndarray) -> np.ndarray:
    """The values at ``vix`` in ``store`` (batches of values, one after another): one column of their batches'
    kind, objects (each value as the UDM would get it) where the batches differ."""
    st = store
    if len(st) == 1:
        return st[0][vix]
    if not len(vix):
        return np.zeros(0, dtype=np.int64)
    bases = np.cumsum([0, *(len(c) for c in st)])
    ci = np.searchsorted(bases, vix, "right") - 1
    used = np.flatnonzero(np.bincount(ci, minlength=len(st))).tolist()
    if len(used) == 1:
        return st[used[0]][vix - bases[used[0]]]
    kinds = {st[i].dtype for i in used}
    dt = kinds.pop() if len(kinds) == 1 else np.dtype(object)
    out = np.empty(len(vix), dtype=dt)
    for i in used:
        m = ci == i
        part = st[i][vix[m] - bases[i]]
        out[m] = part if part.dtype == dt else part.astype(object)
    return out
