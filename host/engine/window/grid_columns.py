"""The grid family's column-wise evaluation: windows that a batch both fills and closes, valued as arrays.

On an in-order stream most tumbling/hopping windows are born, filled, released and closed by the CTIs of one
batch. Their members are then all in that batch, contiguous in its rows sorted by (group, pane), so one
`grid_closed.window_values` call (the rule every closed window is valued by) values all of them, and they
go out as one column block, with no window, pane state or output record ever made for them. It is the
scalar evaluation's vector form (tests/test_grid_columns.py holds the two to the same output): a window comes
here only when every pane it covers was made by this batch, nothing else changed the group in the batch, and
the CTI that follows the batch closes it; everything else is evaluated window by window.

`Fresh` records one bulk insert's sorted runs; `plan` marks the panes no window will need a partial for
(*transient*: every window holding them is released and closed at this flush); `windows` values the column
windows of every group and writes them as one block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import INSERT, Batch
from .emit import first_emissions
from .grid_closed import column_payload, window_values
from .state import Group

__all__ = ["Fresh", "column_block", "ends_alone"]


def ends_alone(step: Any) -> bool:
    """A UDA step whose windows are released by their end alone: no early release, no ``time_bound`` or
    strong consistency, time-insensitive (the windows a flush values together from their panes)."""
    return bool(step.udm.is_uda and step.early is None and not step.time_bound and not step.strong
                and not step.time_sensitive)


class Fresh:
    """One bulk insert's runs: (group, pane) each, with its rows in the sorted values."""

    __slots__ = ("codes_arr", "cols", "ends", "groups", "panes_arr", "run_codes", "run_panes", "starts", "svals",
                 "transient")

    def __init__(self, groups: list[Group], run_codes: list[int], run_panes: list[int], starts: np.ndarray,
                 ends: np.ndarray, svals: np.ndarray) -> None:
        self.groups = groups
        self.run_codes = run_codes
        self.run_panes = run_panes
        self.codes_arr = np.array(run_codes, dtype=np.int64)
        self.panes_arr = np.array(run_panes, dtype=np.int64)
        self.starts = starts
        self.ends = ends
        self.svals = svals
        #: per run: its pane is transient (see the module doc)
        self.transient: list[bool] = [False] * len(run_codes)
        #: per group code: (first, last) column window
        self.cols: dict[int, tuple[int, int]] = {}


def column_block(fam: Any, jobs: list[tuple[Fresh, int]], em: Any) -> Batch | None:
    """The column windows of ``jobs`` (a record and a group code each) as one block of output inserts."""
    if not jobs:
        return None
    step = fam.step
    wu = step.udm
    kk_parts: list[np.ndarray] = []
    gg_parts: list[np.ndarray] = []
    r0_parts: list[np.ndarray] = []
    r1_parts: list[np.ndarray] = []
    for jn, (rec, code) in enumerate(jobs):
        lo, hi = rec.cols[code]
        x0 = int(np.searchsorted(rec.codes_arr, code, side="left"))  # (runs are sorted by group code)
        x1 = int(np.searchsorted(rec.codes_arr, code, side="right"))
        panes = rec.panes_arr[x0:x1]
        st = rec.starts[x0:x1]
        en = rec.ends[x0:x1]
        ks = np.arange(lo, hi + 1, dtype=np.int64)
        a, b = fam.geo.span(ks)
        i0 = np.searchsorted(panes, a, side="left")
        i1 = np.searchsorted(panes, b, side="left")
        has = i1 > i0
        if not has.any():
            continue
        ks, i0, i1 = ks[has], i0[has], i1[has]
        kk_parts.append(ks)
        gg_parts.append(np.full(len(ks), jn, dtype=np.int64))
        r0_parts.append(st[i0])
        r1_parts.append(en[i1 - 1])
    if not kk_parts:
        return None
    kv = np.concatenate(kk_parts)
    gv = np.concatenate(gg_parts)
    r0 = np.concatenate(r0_parts)
    r1 = np.concatenate(r1_parts)
    lens = r1 - r0
    # every record's values end to end (a job's rows are offsets into its own record's values)
    recs: list[Fresh] = []
    base: dict[int, int] = {}
    for rec, _ in jobs:
        if id(rec) not in base:
            base[id(rec)] = sum(len(r.svals) for r in recs)
            recs.append(rec)
    allv = recs[0].svals if len(recs) == 1 else np.concatenate([r.svals for r in recs])
    shift = np.array([base[id(jobs[j][0])] for j in range(len(jobs))], dtype=np.int64)[gv]
    le, re = fam.geo.extent(kv)
    results = window_values(wu, allv, r0 + shift, lens, le, re)
    n = len(kv)
    gg = gv.tolist()
    first = em.oid + 1
    em.oid += n
    ids = np.arange(first, first + n, dtype=np.int64)
    first_emissions(step, re)
    fields: dict[str, Any] = {}
    gb = step.group_by
    for f in gb:
        per_job = [jobs[j][0].groups[jobs[j][1]].fields[f] for j in range(len(jobs))]  # type: ignore[index]
        fields[f] = [per_job[j] for j in gg]
    fields[wu.alias] = results
    payload = column_payload(fields, n)
    return Batch(np.full(n, INSERT, dtype=np.int8), ids, le, re, re, np.full(n, -1, dtype=np.int64), payload)
