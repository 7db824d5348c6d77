"""A flush of the grid family's pane store (`grid_store`): every group's windows in ``(done, K]`` at once.

A group's rows rise by pane, and so do their windows: each window comes once, in (group, window) order, as a
slice of the sorted rows found from its first and last rows (no search). They are valued by
one `grid_closed.window_values` call; those the CTI closes are written as one column block with no output
record (nothing valid can change them, SEMANTICS §7), the others (released at the watermark before the CTI)
in the same block with their records made when the group leaves the store, or through the usual diff.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..payload import value_array
from ..rules import NEG
from .grid_closed import one_block, window_values, write_closed
from .grid_store import HI, LO, PaneStore

__all__ = ["flush"]


def _where(res: Any, idx: np.ndarray) -> Any:
    """The entries ``idx`` of a column or list of values."""
    return res[idx] if isinstance(res, np.ndarray) else [res[i] for i in idx.tolist()]


def flush(store: PaneStore, K: int, out: Any, em: Any) -> None:
    """Value and write the windows in ``(done, K]`` of every group in the store."""
    store.settle()
    lo = store.done + 1
    if lo <= K and len(store.G):
        G = store.G
        fw, lw = store.row_windows()
        lw = np.minimum(lw, min(K, HI))
        lo_c = max(lo, LO)
        head = np.ones(len(G), dtype=bool)
        head[1:] = G[1:] != G[:-1]
        # a group's rows rise, and so do their windows. A window's first row is the first of its group whose
        # last window reaches it (a row gives the windows past its predecessor's alone); its last row is the
        # last whose first window is at or before it (a row gives the windows before its successor's first):
        # each window comes once from each, in (group, window) order, its rows the slice between the two
        fw_lo = np.maximum(fw, lo_c)
        kf = np.maximum(fw_lo, np.where(head, LO, np.concatenate(([LO], lw[:-1])) + 1))
        nf = np.maximum(lw - kf + 1, 0)
        tail = np.concatenate((head[1:], [True]))
        kl = np.minimum(lw, np.where(tail, HI, np.concatenate((fw[1:], [HI])) - 1))
        nl = np.maximum(kl - fw_lo + 1, 0)
        rows = np.flatnonzero(nf)
        if len(rows):
            last = np.flatnonzero(nl)
            _windows(store, G, rows, kf[rows], nf[rows], np.repeat(last + 1, nl[last]), out, em)
    if store.done < K:
        store.done = K
    store.set_due()


def _windows(store: PaneStore, G: np.ndarray, rows: np.ndarray, kf: np.ndarray, nwin: np.ndarray, ends: np.ndarray,
             out: Any, em: Any) -> None:
    """The windows of rows ``rows`` (first ``kf``, ``nwin`` each, none twice, in (group, window) order; their
    rows ``rows[i]`` up to ``ends``): valued, then written."""
    geo = store.geo
    step = store.step
    r = np.repeat(np.arange(len(rows), dtype=np.int64), nwin)
    firsts = np.concatenate(([0], np.cumsum(nwin)[:-1]))
    wk = kf[r] + (np.arange(len(r), dtype=np.int64) - firsts[r])
    wg = G[rows][r]
    starts = rows[r]
    wle, wre = geo.extent(wk)
    res = window_values(step.udm, store.V, starts, ends - starts, wle, wre)
    fields = store.codes.fields
    closed = wre <= step.effective_cti
    if closed.all() or one_block(step, em, wle, res):
        write_closed(step, out, em, fields.take(wg), wle, wre, res)
        if not closed.all():  # (their output records are made when something needs them: `PaneStore.materialize_all`)
            first = em.oid - len(wk) + 1
            spec = np.flatnonzero(~closed)
            store.spec.append((wg[spec], wk[spec], spec + first, value_array(_where(res, spec))))
        return
    if closed.any():
        idx = np.flatnonzero(closed)
        write_closed(step, out, em, fields.take(wg[idx]), wle[idx], wre[idx],
                     res[idx] if isinstance(res, np.ndarray) else [res[i] for i in idx.tolist()])
    wu = step.udm
    rl = res.tolist() if isinstance(res, np.ndarray) else res
    fam = step.family
    for i in np.flatnonzero(~closed).tolist():
        n = int(wg[i])
        g = fam.group_of(n)
        le, re = int(wle[i]), int(wre[i])
        fam.put(g, int(wk[i]), le, re, wu.outputs(rl[i], le, re, g.fields), out, em)
        if g.out:
            store.out[n] = g
            if not store.out_first > NEG:
                store.out_first = int(wk[i])
