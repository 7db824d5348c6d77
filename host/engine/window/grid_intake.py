"""A batch's inserts into a grid family at once: short events by (group, pane) run, long ones one by one.

Inserts commute, so a batch's short events (inside one pane) are sorted by (group, pane) and each run joins
its pane in one call (`grid_panes.PaneFill.fold_runs`: the UDA's ``add_batch``, ``add_array`` or ``add``).
When the flush after the batch closes windows whose every pane the batch made (`plan_columns`), those panes
are never made: the windows are valued from the sorted values at the flush (`grid_columns`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..payload import value_array
from ..rules import INF, NEG
from .grid_codes import numbers
from .grid_columns import Fresh
from .grid_evaluate import touch
from .grid_panes import GroupPanes, Pane
from .state import Ev, Group

__all__ = ["TAIL_RUNS", "bulk_insert", "group_runs", "plan_columns", "to_store", "to_tails"]

#: a group without a tail starts one for a bulk insert of at least this many runs (panes) of its own
TAIL_RUNS = 2
_TAIL_KINDS = (np.dtype(np.int64), np.dtype(np.float64))


def bulk_insert(fam: Any, groups: list[Any], codes: Any, ids: Any, le: Any, re: Any, vals: Any,
                closing: int | None = None) -> None:
    """`GridFamily.bulk_insert`: row ``j`` in group ``groups[codes[j]]``. ``closing``: the last window the
    flush after this batch releases and closes, when the batch holds nothing but these inserts and CTIs
    (the panes only such windows hold need no partial: `grid_columns`)."""
    geo = fam.geo
    fin = re < INF
    s1 = geo.pane(le)
    s2 = np.where(fin, geo.pane(np.where(fin, re, 1) - 1), s1 - 1)
    short = fin & (s1 == s2)
    if fam.store.on:
        rest = to_store(fam, groups, codes, s1, short, vals)
        if rest is not None:
            if not len(rest):
                return
            closing = None
            codes, ids, le, re, s1, short = codes[rest], ids[rest], le[rest], re[rest], s1[rest], short[rest]
            vals = vals[rest] if isinstance(vals, np.ndarray) else [vals[j] for j in rest.tolist()]
    arr = vals if isinstance(vals, np.ndarray) else None
    if not short.all():
        closing = None
        vl = vals.tolist() if arr is not None else vals
        for j in np.flatnonzero(~short).tolist():
            fam.insert(groups[int(codes[j])], Ev(int(ids[j]), int(le[j]), int(re[j]), vl[j]))
        sel = np.flatnonzero(short)
        if not len(sel):
            return
        codes, ids, s1 = codes[sel], ids[sel], s1[sel]
        le, re = le[sel], re[sel]
        vals = arr[sel] if arr is not None else [vals[j] for j in sel.tolist()]
        arr = vals if arr is not None else None
    smin = int(s1.min())
    key = codes * (int(s1.max()) - smin + 1) + (s1 - smin)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    cuts = np.flatnonzero(skey[1:] != skey[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(skey)]))
    run_codes = codes[order[starts]].tolist()
    run_panes = s1[order[starts]].tolist()
    fill = fam.fill
    members = fill.kind == "members"
    svals: Any = None
    sl: Any = None
    if arr is None and len(vals) and type(vals[0]) in (int, float):
        a = value_array(vals)
        if a.dtype.kind in "if":
            arr = a
    if arr is not None:
        vals = arr
    ol = order.tolist()
    if not members:
        if arr is not None:
            svals = arr[order]
        sl = None if svals is not None else [vals[i] for i in ol]
    rec = None
    touched = None  # (every run's pane, when some join a tail rather than a pane)
    if closing is not None and svals is not None and fam.columns:
        rec = Fresh(groups, run_codes, run_panes, starts, ends, svals)
        plan_columns(fam, rec, closing)
    if rec is not None and any(rec.transient):
        # transient panes are never made: their windows are valued from the batch (`GridFamily.after`)
        live = [r for r, t in enumerate(rec.transient) if not t]
        fam.fresh.append(rec)
        if not live:
            return
        run_codes = [run_codes[r] for r in live]
        run_panes = [run_panes[r] for r in live]
        starts, ends = starts[live], ends[live]
        contiguous = False
    elif fam.tail and svals is not None and svals.ndim == 1 and svals.dtype in _TAIL_KINDS:
        touched = (run_codes, run_panes)
        live = to_tails(groups, run_codes, run_panes, starts, ends, svals)
        if len(live) < len(run_codes):
            run_codes = [run_codes[r] for r in live]
            run_panes = [run_panes[r] for r in live]
            starts, ends = starts[live], ends[live]
            contiguous = False
        else:
            contiguous = True
    else:
        contiguous = True
    panes: list[Pane] = []
    for code, s in zip(run_codes, run_panes, strict=True):
        panes.append(groups[code].data.pane(fill, s))
    if members:
        ids_l, le_l, re_l = ids.tolist(), le.tolist(), re.tolist()
        vl = vals.tolist() if isinstance(vals, np.ndarray) else vals
        for p, a, b, code in zip(panes, starts.tolist(), ends.tolist(), run_codes, strict=True):
            g = groups[code]
            for i in ol[a:b]:
                ev = Ev(ids_l[i], le_l[i], re_l[i], vl[i])
                p.members[ev.id] = ev  # type: ignore[index]
                g.events[ev.id] = ev
    elif panes:
        fill.fold_runs(panes, sl, svals, starts, ends, contiguous)
    touch_runs(fam, groups, *(touched or (run_codes, run_panes)))


def to_store(fam: Any, groups: list[Any], codes: np.ndarray, s1: np.ndarray, short: np.ndarray,
             vals: Any) -> np.ndarray | None:
    """The rows of groups in the family's pane store join it (`grid_store`; ``groups``: an object, or the
    store's code of a group without one); a group with an event spanning panes or late for a window already
    evaluated leaves the store first, with its object (all its rows are then its panes', and ``groups`` holds
    its object). Returns the rows left for panes (None: all of them)."""
    store = fam.store
    nums = numbers(groups)
    rn = nums[codes]
    col = rn >= 0
    if not col.any():
        return None
    bad = col & (~short | store.late(s1))
    if bad.any():
        out = np.unique(codes[bad]).tolist()
        for c in out:
            if type(groups[c]) is int:
                groups[c] = fam.group_of(groups[c])
        fam.materialize([groups[c] for c in out])
        nums[out] = -1
        rn = nums[codes]
        col = rn >= 0
    sel = np.flatnonzero(col)
    if len(sel):
        v = vals[sel] if isinstance(vals, np.ndarray) else [vals[j] for j in sel.tolist()]
        store.add_rows(rn[sel], s1[sel], v)
    return np.flatnonzero(~col)


def to_tails(groups: list[Group], run_codes: list[int], run_panes: list[int], starts: np.ndarray, ends: np.ndarray,
             svals: np.ndarray) -> list[int]:
    """The runs (sorted by group, pane) of each group whose first run is at or after its last pane join its
    tail as one chunk (`grid_tail`; a group without one starts it for `TAIL_RUNS` runs or more); returns the
    runs left for panes."""
    live: list[int] = []
    row_panes = None
    for code, r, q in group_runs(run_codes):
        d: GroupPanes = groups[code].data
        first = run_panes[r]
        if d.tail:
            fits = first >= d.tail.last()
        else:
            fits = q - r >= TAIL_RUNS and (not d.panes or first > d.panes.peekitem(-1)[0])
        if fits:
            if row_panes is None:
                row_panes = np.repeat(np.asarray(run_panes, dtype=np.int64), ends - starts)
            a, b = int(starts[r]), int(ends[q - 1])
            d.tail.append(row_panes[a:b], svals[a:b])
        else:
            live += range(r, q)
    return live


def group_runs(run_codes: list[int]) -> Iterator[tuple[int, int, int]]:
    """``(code, r, q)``: runs ``r..q-1`` (sorted by group code) are group ``code``'s."""
    n = len(run_codes)
    r = 0
    while r < n:
        code = run_codes[r]
        q = r + 1
        while q < n and run_codes[q] == code:
            q += 1
        yield code, r, q
        r = q


def touch_runs(fam: Any, groups: list[Group], run_codes: list[int], run_panes: list[int]) -> None:
    """Each run's pane changed (`grid_evaluate.touch`). The runs are sorted by (group, pane): a group whose
    first touched pane is past every window it evaluated (in order: nothing to mark dirty) is touched once,
    over its first to its last pane."""
    geo = fam.geo
    for code, r, q in group_runs(run_codes):
        g = groups[code]
        d: GroupPanes = g.data
        if q - r > 1 and max(geo.first_window(run_panes[r]), d.floor) > d.done:
            touch(fam, g, run_panes[r], run_panes[q - 1])
        else:
            for s in run_panes[r:q]:
                touch(fam, g, s, s)


def plan_columns(fam: Any, rec: Fresh, closing: int) -> None:
    """Which runs' panes are transient (`grid_columns`), and each group's column windows: a pane made by
    this batch whose every window closes at the coming flush and covers only panes of this batch."""
    geo = fam.geo
    tops: dict[int, int] = {}
    for code, g in enumerate(rec.groups):
        d: GroupPanes = g.data
        if d.longs or d.dirty:
            tops[code] = INF  # (no column windows for it)
        else:
            tops[code] = d.panes.peekitem(-1)[0] if d.panes else NEG
    cols: dict[int, list[int]] = {}
    for r, (code, s) in enumerate(zip(rec.run_codes, rec.run_panes, strict=True)):
        top = tops[code]
        if top >= INF or s <= top:
            continue
        fw = geo.first_window(s)
        lw = geo.last_window(s)
        if fw <= rec.groups[code].data.done or lw > closing or geo.span(fw)[0] <= top:
            continue
        rec.transient[r] = True
        lo_hi = cols.get(code)
        if lo_hi is None:
            cols[code] = [fw, lw]
        else:
            lo_hi[0] = min(lo_hi[0], fw)
            lo_hi[1] = max(lo_hi[1], lw)
    rec.cols = {code: (a, b) for code, (a, b) in cols.items()}
    for code, (a, b) in rec.cols.items():
        rec.groups[code].data.col = (a, b, rec, code)
