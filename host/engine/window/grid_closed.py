"""The grid family's closed windows, valued together at the end of a flush from their panes' values.

Most windows a flush releases are also *closed* by it: the CTI has passed their end, so no valid element can
change them again (SEMANTICS §7, a time-insensitive UDA), and none was emitted before, so there is nothing to
diff. Such a window needs no sweep step, no output record and no entry in its group's ``out``: its members'
values are read from its panes (a running sweep's panes keep them), and after every group was evaluated all
of them are valued at once — the UDA's fresh-window batch form ``compute_slices(values, offsets)`` (note 62)
over one numeric column when it has one, else ``add`` and ``compute`` per window — and written in window
order. It is the sweep's vector form (tests/test_grid_closed.py holds the two to the same output).
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from ..batch import RowsOut
from ..invoke import PLAIN_TYPES
from .emit import first_emission
from .grid_columns import FlushJobs, ends_alone, slice_values
from .grid_panes import GroupPanes
from .state import Group

__all__ = ["ClosedWindows"]


class ClosedWindows(FlushJobs):
    """A flush's closed windows of one grid step: (group, window, W.LE, W.RE, members' values) each."""

    __slots__ = ()

    def __init__(self, step: Any, kind: str) -> None:
        self.step = step
        #: a UDA over a running sweep (its panes keep their values), released by its end alone
        self.on = kind == "running" and ends_alone(step)
        self.jobs: list[tuple[Group, int, int, list[Any]]] = []

    def take(self, g: Group, geo: Any, k: int, wle: int, wre: int) -> bool:
        """Window ``k`` of ``g`` (released) is valued here if it is closed and was never emitted."""
        d: GroupPanes = g.data
        if wre > self.step.effective_cti or d.longs or k in g.out:
            return False
        a, b = geo.span(k)
        get = d.panes.get
        vals: list[Any] = []
        for s in range(a, b):  # (a few panes: the family takes windows of at most COLUMN_PANES)
            p = get(s)
            if p is not None:
                vals.extend(p.values)
        if vals:  # (no member: no output)
            self.jobs.append((g, wle, wre, vals))
        return True

    def flush(self, out: RowsOut, em: Any) -> None:
        """Value every window taken since the last call and write its outputs."""
        jobs = self.jobs
        if not jobs:
            return
        self.jobs = []
        step = self.step
        wu = step.udm
        res: Any = None
        if getattr(wu, "compute_slices", None) is not None:  # (several aggregates: none)
            lens = np.fromiter((len(j[3]) for j in jobs), dtype=np.int64, count=len(jobs))
            flat = list(chain.from_iterable(j[3] for j in jobs))
            values = np.asarray(flat) if flat and type(flat[0]) in (int, float) else None
            if values is not None and values.dtype.kind in "if" and values.dtype.itemsize == 8:
                res = slice_values(wu, values, np.concatenate(([0], np.cumsum(lens))).astype(np.int64))
        if res is None:
            res = [wu.compute_state(wu.add(wu.initial_state(), vals, (wle, wre)), wle, wre)
                   for _g, wle, wre, vals in jobs]
        elif isinstance(res, np.ndarray):
            res = res.tolist()
        oc = em.out_cti
        alias = None if hasattr(wu, "aliases") else getattr(wu, "alias", None)  # (several aggregates: outputs)
        for (g, wle, wre, _vals), r in zip(jobs, res, strict=True):
            first_emission(step, wre)
            if alias is not None and type(r) in PLAIN_TYPES and wle >= oc:  # (what `outputs` makes of a plain value)
                f = g.fields
                em.oid += 1
                out.insert(em.oid, wle, wre, {**f, alias: r} if f else {alias: r})
                continue
            for o in wu.outputs(r, wle, wre, g.fields):
                le, re, p, _pj = o
                if le < oc:
                    em.check(step, le, (wle, wre), o)
                em.oid += 1
                out.insert(em.oid, le, re, p)
