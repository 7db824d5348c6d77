"""``finalize {max_memory_time}`` (seeds/003 §4.6, SEMANTICS §7 and §10): the memory axis of consistency as a
step of its own, after any step.

With ``m = max(latest CTI, max LE seen)`` on its input, Finalize treats ``rules.effective_cti`` (``m -
max_memory_time`` once that passes the CTI) as a CTI: it sends that CTI on, so every step after it forgets
what it can no longer change, and it dead-letters a later element whose sync time is below it (a CTI
violation of this step, as the window step's ``max_memory_time`` does: semantics-notes 8), so such a
correction is not applied. The retractions of an insert it refused name an unknown id; those of an event
whose correction it refused name a lifetime the steps after it never saw (the input applied the correction):
they are lifetime mismatches here, unless they name the lifetime sent on. Everything else passes unchanged
(CHT-transparent with ``max_memory_time: "inf"``).

The effective CTI moves with every insert; it goes out where an input CTI raises it and once more at the end
of a batch, not after every insert (a CTI per insert would double the stream and change nothing: no element
of the batch is below it).

State: the refused inserts, and the events whose correction was refused, until their ends pass the
effective CTI.
"""

from __future__ import annotations

import numpy as np

from udm.host.model.plan import BoundStep

from ..batch import CTI, INSERT, Batch
from ..context import Context
from ..operator import Operator
from ..rules import (
    CTI_VIOLATION,
    INF,
    MISMATCH,
    NEG,
    UNKNOWN_ID,
    cti_reason,
    effective_cti,
    format_time,
    sync_time,
    unknown_id_reason,
)

__all__ = ["FinalizeOp"]


class FinalizeOp(Operator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        self.max_memory_time: int = bs.step.max_memory_time
        self.cti = NEG
        self.watermark = NEG
        #: the CTI validity is judged against (and the one sent on)
        self.effective = NEG
        self.out_cti = NEG
        #: engine ids of inserts refused here, with their ends (their retractions name an unknown id)
        self.refused: dict[int, int] = {}
        #: engine ids of events whose correction was refused: [end sent on, end the input has]
        self.diverged: dict[int, list[int]] = {}

    def _raise(self, t: int) -> None:
        if t > self.watermark:
            self.watermark = t
        e = max(self.cti, effective_cti(self.cti, self.watermark, self.max_memory_time))
        if e > self.effective:
            self.effective = e

    def process(self, port: int, b: Batch) -> Batch | None:
        n = len(b)
        keep = np.ones(n + 1, dtype=bool)  # (the last entry: the batch's closing CTI)
        le = b.le.copy()
        kinds = b.kind.tolist()
        for i, k in enumerate(kinds):
            if k == CTI:
                t = int(b.le[i])
                if t > self.cti:
                    self.cti = t
                self._raise(t)
                if self.effective > self.out_cti:
                    self.out_cti = le[i] = self.effective
                else:
                    keep[i] = False
                continue
            eid = int(b.id[i])
            sync = sync_time(k, int(b.le[i]), int(b.re[i]), int(b.rn[i]))
            if k != INSERT and eid in self.refused:
                keep[i] = False
                self.refuse(b, i, UNKNOWN_ID, unknown_id_reason(b.id_text(i)))
                if b.rn[i] <= b.le[i]:
                    del self.refused[eid]
                else:
                    self.refused[eid] = int(b.rn[i])
                continue
            div = self.diverged.get(eid) if k != INSERT else None
            if div is not None:
                div[1] = int(b.rn[i])
                if b.re[i] != div[0]:
                    keep[i] = False
                    self.refuse(b, i, MISMATCH, f"retraction of {b.id_text(i)!r} says [{format_time(int(b.le[i]))}, "
                                f"{format_time(int(b.re[i]))}) but the event sent on is [{format_time(int(b.le[i]))}, "
                                f"{format_time(div[0])}) (an earlier correction was past the finalize horizon)")
                    if b.rn[i] <= b.le[i]:
                        del self.diverged[eid]
                    continue
                del self.diverged[eid]  # back in step with the input
            if sync < self.effective:
                keep[i] = False
                self.refuse(b, i, CTI_VIOLATION, cti_reason(sync, self.effective) + " (finalize horizon)")
                if k == INSERT:
                    self.refused[eid] = int(b.re[i])
                elif b.rn[i] > b.le[i]:
                    self.diverged[eid] = [int(b.re[i]), int(b.rn[i])]
                continue
            if k == INSERT:
                self._raise(int(b.le[i]))
        closing = self.effective > self.out_cti
        if closing:
            self.out_cti = self.effective
            if self.refused:
                self.refused = {e: r for e, r in self.refused.items() if r >= self.effective}
            if self.diverged:
                self.diverged = {e: d for e, d in self.diverged.items() if max(d) >= self.effective}
        keep[n] = closing
        if keep[:n].all() and not closing:
            return b
        out = Batch(b.kind, b.id, le, np.where(b.kind == CTI, le, b.re), np.where(b.kind == CTI, le, b.rn),
                    b.line, b.payload, b.src).take(np.flatnonzero(keep[:n]))
        if closing:
            out = Batch.concat([out, Batch.cti(self.effective)])
        return out

    def state_size(self) -> dict[str, int]:
        return {"events": len(self.refused) + len(self.diverged)}

    def forget_at(self) -> int | None:
        """Its output CTI follows the watermark too, not only the input CTI: a CTI alone is not all it reads."""
        return None if self.max_memory_time < INF or self.refused or self.diverged else INF
