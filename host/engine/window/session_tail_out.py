"""Session windows as columns (`session_columns.Tail`): valuing and writing the tail's sessions — those the CTI
closes, in one `window_values` call and one column block, and those released before their close, whose
records `session_released` keeps so that a later change is diffed.

Kept apart from the keeping of the rows: writing is where a head's frozen members (`session_heads`) and the
rows after it are joined back into each session's values, in row order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import RowsOut
from .grid_closed import spans, window_values, write_closed
from .session_heads import Heads, joined
from .session_released import Released
from .session_store import gather
from .state import Group

__all__ = ["TailOutput"]


class TailOutput:
    """Output of `session_columns.Tail`'s sessions, as columns."""

    gid: np.ndarray
    le: np.ndarray
    vix: np.ndarray
    store: list[np.ndarray]
    groups: dict[int, Group]
    heads: Heads
    released: Released

    def _release(self, step: Any, out: RowsOut, em: Any, s0: np.ndarray, s1: np.ndarray, wre: np.ndarray) -> None:
        """Output the sessions of rows ``s0[i] .. s1[i]-1`` (no head) that are released but not closed, and keep
        what was written (`session_released`)."""
        lens = s1 - s0
        st, idx = spans(s0, lens)
        wle = self.le[s0]
        res = window_values(step.udm, gather(self.store, self.vix[idx]), st[:-1], lens, wle, wre)
        codes = self.gid[s0].tolist()
        self.released.write(step, out, em, [self.groups[k] for k in codes], codes, wle.tolist(), wre.tolist(),
                            lens.tolist(), res.tolist() if isinstance(res, np.ndarray) else list(res))

    def _write(self, step: Any, out: RowsOut, em: Any, s0: np.ndarray, s1: np.ndarray, wre: np.ndarray) -> None:
        """Value and write the sessions of rows ``s0[i] .. s1[i]-1`` (ending at ``wre[i]``), in row order: all in
        one `window_values` call, a session with a head over its frozen members (`Heads.members`) and then
        its rows after the head."""
        wle = self.le[s0]
        head = self.vix[s0] < 0
        a = s0 + head  # (a head's row holds no value)
        tn = s1 - a
        st, idx = spans(a, tn)
        vals = gather(self.store, self.vix[idx])
        if head.any():
            hv, hn = self.heads.members(self.gid[s0[head]])
            fn = np.zeros(len(s0), dtype=np.int64)
            fn[head] = hn
            lens = fn + tn
            st = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
            both = joined([vals, hv])
            at = np.empty(len(both), dtype=np.int64)  # (where each value goes: frozen first, then the rows)
            at[:len(vals)] = spans(st[:-1] + fn, tn)[1]
            at[len(vals):] = spans(st[:-1][head], hn)[1]
            vals = np.empty_like(both)
            vals[at] = both
        else:
            lens = tn
        res = window_values(step.udm, vals, st[:-1], lens, wle, wre)
        write_closed(step, out, em, list(map(self.groups.__getitem__, self.gid[s0].tolist())), wle, wre, res)
