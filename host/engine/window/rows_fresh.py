"""Released windows never emitted that can still change (speculative output past the CTI), written together.

A rows step releases such windows at most flushes (q6: a bidder's last 10 bids, ~15 k of them a run), and each
must keep an output record, for a later row that renumbers it to be diffed against what it emitted. Emitted
one `Family.put` at a time, each cost an output tuple, a diff call and a row of dicts in the step's output —
and one row of dicts turned the flush's whole output (its column blocks too) into dicts. So `put_fresh`
writes them as the closed windows are written, one column block of inserts (`grid_closed.write_closed`),
when each is one plain value at or after the output CTI, and keeps their records by `Emitter.records` (the
column form of the one-window rule); else window by window (`Family.put`). Both callers hand windows in the
order they are emitted: the shared store (`rows_shared_flush`) and the groups outside it (`rows_closed`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .grid_closed import one_block, write_closed
from .key_columns import KeyColumns
from .state import Group

__all__ = ["put_fresh"]


def put_fresh(fam: Any, out: Any, em: Any, gs: list[Group], keys: KeyColumns, K: np.ndarray, wle: np.ndarray,
              wre: np.ndarray, res: Any) -> None:
    """The windows ``K`` (yield rows) of groups ``gs`` (key fields ``keys``), never emitted, valued ``res``:
    written in order, each with its output record under its key in its group's ``out``."""
    step = fam.step
    vals = res.tolist() if isinstance(res, np.ndarray) else res
    if one_block(step, em, wle, res):
        first = em.oid + 1
        write_closed(step, out, em, keys, wle, wre, res)
        alias = step.udm.alias
        payloads = [{**kf, alias: v} if kf else {alias: v} for kf, v in zip(keys.dicts(), vals, strict=True)]
        em.records(gs, K.tolist(), first, wle.tolist(), wre.tolist(), payloads)
        return
    outputs = step.udm.outputs
    for g, k, le, re, v in zip(gs, K.tolist(), wle.tolist(), wre.tolist(), vals, strict=True):
        fam.put(g, k, le, re, outputs(v, le, re, g.fields), out, em)
