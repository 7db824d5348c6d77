"""lmerge feedback at the step that feeds one lmerge port (seeds/001 §V.D, semantics-notes 25).

Once the lmerge's output CTI passed ``t``, nothing before ``t`` is wanted from that port: an insert ending
before ``t`` is not passed on (its id is remembered, so its retractions stay valid here), and a retraction
that moves such an event's end to ``t`` or beyond passes on as the insert of its new lifetime, so the port
still carries every event with ``RE >= t`` (what a port joining at ``t`` promises).
"""

from __future__ import annotations

import numpy as np

from .batch import CTI, INSERT, RETRACT, Batch
from .rules import NEG

__all__ = ["FastForward"]


class FastForward:
    """The feedback state of one feeding step: the time before which nothing is wanted, and what it skipped."""

    __slots__ = ("skip_below", "skipped")

    def __init__(self) -> None:
        self.skip_below = NEG
        #: engine ids of skipped inserts, with their current end
        self.skipped: dict[int, int] = {}

    def __getstate__(self) -> tuple:
        return (self.skip_below, self.skipped)

    def __setstate__(self, s: tuple) -> None:
        self.skip_below, self.skipped = s

    def signal(self, t: int) -> None:
        if t > self.skip_below:
            self.skip_below = t

    @property
    def active(self) -> bool:
        return self.skip_below > NEG or bool(self.skipped)

    def apply(self, b: Batch) -> Batch:
        keep = np.ones(len(b), dtype=bool)
        kind = b.kind.copy()
        re = b.re.copy()
        skipped = self.skipped
        sb = self.skip_below
        for i in range(len(b)):
            k = int(kind[i])
            eid = int(b.id[i])
            if k == INSERT:
                if b.re[i] < sb:
                    skipped[eid] = int(b.re[i])
                    keep[i] = False
            elif k == RETRACT and eid in skipped:
                rn = int(b.rn[i])
                if rn <= b.le[i] or rn < sb:
                    keep[i] = False
                    if rn <= b.le[i]:
                        del skipped[eid]
                    else:
                        skipped[eid] = rn
                else:
                    del skipped[eid]
                    kind[i] = INSERT
                    re[i] = rn
            elif k == CTI and skipped:
                t = int(b.le[i])
                for e in [e for e, r in skipped.items() if r < t]:
                    del skipped[e]
        out = Batch(kind, b.id, b.le, re, np.where(kind == INSERT, re, b.rn), b.line, b.payload, b.src)
        return out if keep.all() else out.take(np.flatnonzero(keep))
