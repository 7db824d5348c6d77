"""The rows family's final windows, valued and written together at the end of a flush from their rows.

Most row windows a flush releases are also *final* by then: every row they hold lies before the first row a
valid element can still move at the CTI (`RowsFamily._fix`: the rows before the first block of equal LEs
holding an end at or after the CTI, SEMANTICS §9), so no later element changes them, and none was emitted
before, so there is nothing to diff. Such a window needs no output record and no entry in its group's ``out``.
A group hands over its run of such windows (`take`, from `RowsFamily.evaluate`); after every group was
evaluated, `flush` reads the rows of all the runs once and, as arrays over every group: each window's first
and last row, its extent ``[LE(first row), LE(last row) + 1)``, its value — the UDA's sliding form
``compute_ranges(values, starts, ends)`` over the runs' rows (semantics-notes 79), else its fresh-window batch
form ``compute_slices(values, offsets)`` (note 62) over the windows' rows copied out one after the other
(``add`` and ``compute`` per window when it fails; `rows_shared_flush.range_values`) — and the outputs, one
column block in group-run order (`FlushJobs._write`). It is the sweep's vector form (tests/test_rows_closed.py
holds the two and the oracle to the same output).

Released windows never emitted that can still change (speculative output past the CTI) are valued in the same
call (`fresh`, from `RowsFamily._range`) and emitted first, each with its output record (`rows_fresh`), so a
later row that renumbers them is diffed against what they emitted; valued by the sweep instead, each group's
would start its sweep again at every flush (the final run before it cleared the sweep).

Copied out, windows of ``n`` rows every ``slide`` rows copy each row ``n / slide`` times: without the sliding
form, longer windows (``n / slide`` above `ROW_SPAN`), and those of a UDA without either batch form, are
valued by the group's sweep window by window, at a cost per row that does not grow with ``n`` (`put`), and
written with the others. (A run still reads its ``n - 1`` rows before it again at each flush: the groups
here are those outside the shared store, which hold per-group state.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import RowsOut
from ..payload import value_array
from .grid_closed import FlushJobs
from .grid_columns import ends_alone
from .key_columns import KeyColumns
from .rows_fresh import put_fresh
from .rows_shared_flush import range_values
from .state import Group

__all__ = ["ROW_SPAN", "ClosedRows"]

#: the most windows a row may be in for the closed form (its values are copied once per window)
ROW_SPAN = 32


class ClosedRows(FlushJobs):
    """A flush's windows of one rows step valued at its end: runs ``(group, first yield row, last yield row)``
    of final windows (`take`) and of released windows never emitted that can still change (`fresh`), valued
    together (`vector`); or final windows the family's sweep valued already (``swept``: group, W.LE, W.RE,
    value each)."""

    __slots__ = ("later", "swept", "vector")

    def __init__(self, step: Any, kind: str, n: int, slide: int) -> None:
        self.step = step
        #: a UDA over a running or merge sweep, released by its end alone
        self.on = kind != "members" and ends_alone(step)
        #: valued here, as arrays: the windows of a UDA with the sliding form (each row read once, whatever
        #: ``n``: semantics-notes 79), and short windows of one with the fresh-window batch form (without
        #: ``compute_slices`` a window's rows would each be added once per window: the sweep adds and removes
        #: each once)
        wu = step.udm
        self.vector = self.on and (getattr(wu, "compute_ranges", None) is not None or (
            -(-n // slide) <= ROW_SPAN and getattr(wu, "compute_slices", None) is not None))
        self.jobs: list[tuple[Group, int, int]] = []
        #: runs of windows released and never emitted, not final: emitted with output records (`rows_fresh`)
        self.later: list[tuple[Group, int, int]] = []
        self.swept: tuple[list[Group], list[int], list[int], list[Any]] = ([], [], [], [])

    def __getstate__(self) -> tuple:
        assert not self.jobs and not self.later and not self.swept[0]  # (a snapshot is taken between flushes)
        return (self.step, self.on, self.vector)

    def __setstate__(self, s: tuple) -> None:
        self.step, self.on, self.vector = s
        self.jobs = []
        self.later = []
        self.swept = ([], [], [], [])

    def take(self, g: Group, lo: int, hi: int) -> None:
        """The windows of yield rows ``lo, lo + slide, .. hi`` of ``g`` are final and were never emitted."""
        self.jobs.append((g, lo, hi))

    def fresh(self, g: Group, lo: int, hi: int) -> None:
        """The windows of yield rows ``lo, lo + slide, .. hi`` of ``g`` are released, were never emitted and
        can still change: valued with the final ones, emitted with output records."""
        self.later.append((g, lo, hi))

    def put(self, g: Group, wle: int, wre: int, value: Any) -> None:
        """A final window never emitted, valued by the sweep: written with the others."""
        gs, les, res, vals = self.swept
        gs.append(g)
        les.append(wle)
        res.append(wre)
        vals.append(value)

    def flush(self, fam: Any, out: RowsOut, em: Any) -> None:
        """Value every window taken since the last call and write its outputs (``fam``: the rows family): the
        released ones that can still change first, as they are emitted (in group order), then the final
        ones as one column block."""
        gs, sle, sre, sval = self.swept
        if gs:
            self.swept = ([], [], [], [])
            self._write(out, em, gs, np.array(sle, dtype=np.int64), np.array(sre, dtype=np.int64), sval)
        runs = self.later + self.jobs
        if not runs:
            return
        cut = len(self.later)
        self.jobs = []
        self.later = []
        J, K, wle, wre, res = self._valued(fam, runs)
        m = int(np.searchsorted(J, cut))  # the windows of the ``later`` runs come first
        if m:
            gs = [runs[j][0] for j in J[:m].tolist()]
            put_fresh(fam, out, em, gs, KeyColumns.of_groups(gs), K[:m], wle[:m], wre[:m], res[:m])
        if m < len(J):
            self._write(out, em, [runs[j][0] for j in J[m:].tolist()], wle[m:], wre[m:], res[m:])

    def _valued(self, fam: Any, runs: list[tuple[Group, int, int]]) -> tuple[np.ndarray, ...]:
        """The windows of ``runs``, as arrays over all of them: each window's run, yield row, W.LE, W.RE and
        value (`FlushJobs._values` over the runs' rows read once, end to end)."""
        n = fam.n
        slide = fam.slide
        # the rows of every run end to end: from its first window's first row to its last window's row
        vals: list[Any] = []
        les: list[int] = []
        lo_l: list[int] = []
        a_l: list[int] = []
        base_l: list[int] = []
        cnt_l: list[int] = []
        for g, lo, hi in runs:
            d = g.data
            a = fam._first(lo)
            rows = d.rows
            lo_l.append(lo)
            a_l.append(a)
            base_l.append(len(vals))
            cnt_l.append((hi - lo) // slide + 1)
            vals += rows.vals[a - 1 - d.purged:hi - d.purged]
            les += rows.le[a - 1 - d.purged:hi - d.purged]
        cnt = np.array(cnt_l, dtype=np.int64)
        J = np.repeat(np.arange(len(runs), dtype=np.int64), cnt)
        firsts = np.concatenate(([0], np.cumsum(cnt)[:-1]))
        K = np.array(lo_l, dtype=np.int64)[J] + slide * (np.arange(len(J), dtype=np.int64) - firsts[J])
        shift = np.array(base_l, dtype=np.int64)[J] - np.array(a_l, dtype=np.int64)[J]
        st = np.maximum(K - n + 1, 1) + shift  # each window's first row and past its last, in ``vals``
        en = K + 1 + shift
        L = np.array(les, dtype=np.int64)
        wle = L[st]
        wre = L[en - 1] + 1
        return J, K, wle, wre, range_values(self.step.udm, value_array(vals), st, en, wle, wre)
