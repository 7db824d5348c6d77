"""Sessions the tail (`session_columns.Tail`) outputs before a CTI closes them: released at the speculation
point (``W.RE`` at or below it) but still open to a late element. The tail writes them as the per-group
structure would (one insert per output, the run statistics' first emission) and keeps what it wrote: per
group code, each session's (W.LE, W.RE, member count) and its output records. At each later flush the
group's sessions are matched against them: a session found again with the same start, end and members has
the same value, so nothing is written again (and when the CTI closes it, its rows go without output); a
group where one changed (a late member, a merge) leaves the tail with its records as its ``out``, so the
per-group structure diffs the change as it always does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sortedcontainers import SortedDict

from .emit import first_emission
from .state import NO_OUT, Group, OutputRecord

__all__ = ["Released"]


class Released:
    """Per group code, the sessions the tail output before their close (see the module docstring)."""

    def __init__(self) -> None:
        #: code -> W.LE -> (W.RE, member count, output records)
        self.of: dict[int, dict[int, tuple[int, int, list[OutputRecord]]]] = {}

    def windows(self) -> int:
        """How many sessions have output records (the per-group structure's ``out`` entries)."""
        return sum(1 for s in self.of.values() for w in s.values() if w[2])

    def write(self, step: Any, out: Any, em: Any, groups: list[Group], codes: list[int], wle: list[int],
              wre: list[int], count: list[int], res: list[Any]) -> None:
        """Output the sessions (``res``: their values) and keep what was written."""
        wu = step.udm
        oc = em.out_cti
        of = self.of
        for g, code, le0, re0, n, r in zip(groups, codes, wle, wre, count, res, strict=True):
            outs = wu.outputs(r, le0, re0, g.fields)
            recs = []
            if outs:
                first_emission(step, re0)
            for o in outs:
                le, re, p, pj = o
                if le < oc:
                    em.check(step, le, (le0, re0), o)
                em.oid += 1
                out.insert(em.oid, le, re, p)
                recs.append(OutputRecord(em.oid, le, re, p, pj))
            of.setdefault(code, {})[le0] = (re0, n, recs)

    def match(self, codes: np.ndarray, wle: np.ndarray, wre: np.ndarray, rows: np.ndarray, head: np.ndarray,
              heads: Any) -> tuple[np.ndarray, set[int]]:
        """Which of the tail's sessions (group code, W.LE, W.RE, ``rows`` in the tail, the first one a ``head``'s
        row of `session_heads.Heads` ``heads``) are a recorded session unchanged, and the codes where a
        recorded session is not found as it was."""
        known = np.zeros(len(codes), dtype=bool)
        found: dict[int, int] = {}
        changed: set[int] = set()
        of = self.of
        if not of:
            return known, changed
        sub = np.flatnonzero(np.isin(codes, np.fromiter(of, dtype=np.int64, count=len(of))))
        extra = heads.extra
        for j, code, le0, re0, n, h in zip(sub.tolist(), codes[sub].tolist(), wle[sub].tolist(), wre[sub].tolist(),
                                           rows[sub].tolist(), head[sub].tolist(), strict=True):
            w = of[code].get(le0)
            if w is None:
                continue
            if w[0] == re0 and w[1] == n + (extra(code) if h else 0):
                known[j] = True
                found[code] = found.get(code, 0) + 1
            else:
                changed.add(code)
        for code, s in of.items():  # (every code with records has its sessions here: their rows stay)
            if found.get(code, 0) != len(s):
                changed.add(code)
        return known, changed

    def forget(self, code: int, wle: int) -> None:
        """A recorded session closed: its outputs are final."""
        s = self.of[code]
        del s[wle]
        if not s:
            del self.of[code]

    def restore(self, g: Group, code: int) -> int | None:
        """The group leaves the tail: its records become its ``out``; returns the last recorded session's start
        (None: none)."""
        s = self.of.pop(code, None)
        if not s:
            return None
        for key, (_, _, recs) in s.items():
            if recs:
                if g.out is NO_OUT:
                    g.out = SortedDict()
                g.out[key] = recs
        return max(s)
