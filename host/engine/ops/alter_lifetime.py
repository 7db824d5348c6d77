"""``alter_lifetime`` (SEMANTICS §10; CEDR's AlterLifetime, seeds/003 §4): each event's lifetime becomes
``[f(LE), f(LE) + duration)``.

``f`` is monotone, so the image of a CTI is a CTI: after ``cti(c)`` no later input can make an output with
sync time below ``f(c)``. A retraction changes the image only when the duration is kept (the image end moves
with the input's end) or when it deletes the event (the image is deleted too, semantics-notes 15). Every
image is a function of the row alone, so the step keeps no state and works column-wise.
"""

from __future__ import annotations

import numpy as np

from udm.host.model.plan import BoundStep
from udm.host.model.spec import Const, Shift, Snap

from ..batch import CTI, RETRACT, Batch
from ..context import Context
from ..operator import Operator
from ..rules import INF

__all__ = ["AlterLifetimeOp"]


class AlterLifetimeOp(Operator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        step = bs.step
        self.shift = step.le.shift if isinstance(step.le, Shift) else 0
        self.snap_size = step.le.snap.size if isinstance(step.le, Snap) else 0
        self.snap_offset = step.le.snap.offset if isinstance(step.le, Snap) else 0
        #: "keep", "inf", or the constant duration
        self.duration: str | int = step.duration.const if isinstance(step.duration, Const) else step.duration

    def start(self, t: np.ndarray) -> np.ndarray:
        """``f`` over a column: the new LE of events starting at ``t`` (and the image of CTIs at ``t``)."""
        inf = t >= INF
        if self.snap_size:
            out = t - (t - self.snap_offset) % self.snap_size
        elif self.shift:
            with np.errstate(over="ignore"):
                out = t + self.shift
            if self.shift > 0:
                out = np.where(out < t, INF, out)  # (past int64: infinity)
        else:
            out = t
        return np.where(inf, INF, out)

    def _end(self, le: np.ndarray, re: np.ndarray, new_le: np.ndarray) -> np.ndarray:
        d = self.duration
        if d == "inf":
            return np.full(len(le), INF, dtype=np.int64)
        if d == "keep":
            with np.errstate(over="ignore"):
                out = new_le + (re - le)
            return np.where((re >= INF) | (out < new_le), INF, out)
        with np.errstate(over="ignore"):
            out = new_le + int(d)
        return np.where(out < new_le, INF, out)

    def process(self, port: int, b: Batch) -> Batch | None:
        kind = b.kind
        new_le = self.start(b.le)
        end_old = self._end(b.le, b.re, new_le)
        is_ret = kind == RETRACT
        rn = np.where(kind == CTI, new_le, end_old)
        keep = None
        if is_ret.any():
            full = is_ret & (b.rn <= b.le)
            if self.duration == "keep":
                moved = self._end(b.le, b.rn, new_le)
                rn = np.where(is_ret, np.where(full, new_le, moved), rn)
            else:
                rn = np.where(full, new_le, rn)
                keep = ~is_ret | full  # a shortened event keeps its image
        ctis = kind == CTI
        re = np.where(ctis, new_le, end_old)
        out = Batch(kind, b.id, new_le, re, rn, b.line, b.payload, b.src)
        if keep is not None and not keep.all():
            out = out.take(np.flatnonzero(keep))
        if len(out) and (out.kind == RETRACT).any():
            same = (out.kind == RETRACT) & (out.rn == out.re)
            if same.any():
                out = out.take(np.flatnonzero(~same))
        return out
