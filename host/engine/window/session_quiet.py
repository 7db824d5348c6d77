"""The tail's quiet groups (`session_columns.Tail`): groups whose sessions all closed, kept until the CTI is
`KEEP_GAPS` ``gap``s past their last session's end, as one array of times indexed by group code.

A group the tail leaves with nothing is kept a while, unless a row comes for it: a key back within that time
(a busy bidder's next session) finds its group, as making one again (the step's group, its sweep and data,
and dropping it again) costs more than keeping it; what is kept is the keys of a recent stretch of time.
(Nexmark q11 made its 20 k bidders' groups 97 k times with one ``gap``, 45 k with four, 26 k with eight:
a sixth less CPU in its main thread than with four, the same peak memory.) Such a group stays in the tail
(its code's group) with no row, so a key coming back is taken in at once with the others (`Tail.admit`: no
visit of its own); its time is only reset. Going to sleep, waking and the ones due at a CTI are array
operations over a flush's codes, not a visit per group.
"""

from __future__ import annotations

import numpy as np

from ..rules import INF

__all__ = ["KEEP_GAPS", "Quiet"]

#: how long a quiet group is kept, in gaps after its last session's end
KEEP_GAPS = 8


class Quiet:
    """Per group code, the CTI at which its group is dropped (INF: not quiet, or kept to the end)."""

    def __init__(self) -> None:
        self.until = np.full(64, INF, dtype=np.int64)
        #: the smallest time in ``until`` (INF: none due before the end)
        self.soonest = INF

    def grow(self, codes: int) -> None:
        """Room for codes ``0 .. codes - 1``."""
        n = len(self.until)
        if codes > n:
            more = np.full(max(codes, 2 * n) - n, INF, dtype=np.int64)
            self.until = np.concatenate((self.until, more))

    def sleep(self, codes: np.ndarray, until: np.ndarray) -> None:
        """The groups of ``codes`` hold nothing now: dropped at CTI ``until`` unless a row comes first."""
        if len(codes):
            self.until[codes] = until
            m = int(until.min())
            if m < self.soonest:
                self.soonest = m

    def wake(self, codes: np.ndarray) -> None:
        """The groups of ``codes`` hold rows again (or left the tail)."""
        if self.soonest < INF:
            self.until[codes] = INF

    def due(self, c: int) -> list[int]:
        """The codes whose groups go at CTI ``c`` (no longer quiet; at the end of input the step drops every
        group itself)."""
        if c < self.soonest or c >= INF:
            return []
        until = self.until
        gone = np.flatnonzero(until <= c)
        until[gone] = INF
        self.soonest = int(until.min())
        return gone.tolist()
