"""The grid family's growing windows (cumulate), valued a run at a time from the period's running state.

The windows a flush releases in one period form a run, each one pane longer than the one before. Instead of
stepping the sweep window by window, the values that enter after the sweep's window (short events by pane,
events spanning panes at their first pane in the period) are gathered once; the UDA's running form
``compute_prefixes(state, values, ends)`` (`udm.sdk.IncrementalUDA`) gives every window's value in one call
from the sweep's state; the values then enter that state with one ``add_array`` and the sweep is marked at
the run's last window (a late change takes it back there, or to an earlier mark, as before). Windows the
flush also closes, never emitted, go out as one column block at the end of the flush with no output record
(nothing can change them: SEMANTICS §7, as in `grid_closed`); the others (released at the watermark before
the CTI closes them, or emitted before) go through the usual diff with their records. It is the sweep's
vector form (tests/test_cumulate_prefix.py holds the two and the oracle to the same output); a run whose
values are not one numeric column, or whose UDA form fails, is stepped window by window.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import INSERT, Batch
from ..invoke import PLAIN_TYPES
from ..rules import INF, NEG
from .emit import first_emissions
from .grid_closed import FlushJobs, column_payload
from .grid_columns import ends_alone
from .state import Group

__all__ = ["PrefixWindows", "prefix_values"]


class PrefixWindows(FlushJobs):
    """Runs of cumulate windows valued at once; the closed ones wait in ``jobs`` (group, windows, values)
    for the flush's block (see the module doc)."""

    __slots__ = ()

    def __init__(self, step: Any, kind: str, grows: bool) -> None:
        self.step = step
        wu = step.udm
        #: a UDA with the running form over a running or a merge sweep (the sweep's state takes the run's values
        #: with one ``add_array``), released by its end alone, one output field
        self.on = (grows and kind in ("running", "merge") and ends_alone(step) and not hasattr(wu, "aliases")
                   and getattr(wu, "compute_prefixes", None) is not None)
        self.jobs: list[tuple[Group, np.ndarray, Any]] = []

    def split(self, fam: Any, g: Group, lo: int, hi: int) -> list[tuple[int, int, bool]]:
        """Windows ``lo..hi`` of ``g`` in runs ``(a, b, together)``: ``together`` for windows of one period
        released by their end (valued here), else one by one."""
        geo = fam.geo
        kr = min(hi, geo.last_closed(self.step.rp))
        if kr < lo:
            return [(lo, hi, False)]
        segs: list[tuple[int, int, bool]] = []
        k = lo
        while k <= kr:
            end = min(kr, geo.last_window(geo.span(k)[0]))  # (the period's last window)
            segs.append((k, end, True))
            k = end + 1
        if kr < hi:
            segs.append((kr + 1, hi, False))
        return segs

    def take(self, fam: Any, g: Group, lo: int, hi: int, out: Any, em: Any) -> bool:
        """Value the released windows ``lo..hi`` of one period of ``g`` (False: not taken, nothing changed;
        the family steps them one by one)."""
        geo = fam.geo
        sweep = g.sweep
        wu = self.step.udm
        a = geo.span(lo)[0]
        prev = g.swept
        fresh = prev is None or prev >= lo or geo.span(prev)[0] != a
        start = a if fresh else geo.span(prev)[1]
        kv = np.arange(lo, hi + 1, dtype=np.int64)
        tops = geo.span(kv)[1]  # (each window's panes end there)
        d = g.data
        top = int(tops[-1])
        got = d.short_values(start, top)  # (``at``: the pane each value enters at)
        if got is None:
            return False
        vals, at = got
        if d.longs:  # events spanning panes enter at their first pane in the period, after its short ones
            lo_key = (NEG, NEG) if fresh else (start, NEG)
            longs = [(max(s1, a), ev.val) for s1, s2, ev in d.longs.irange_key(lo_key, (top - 1, INF)) if s2 >= a]
            if longs:
                if isinstance(vals, np.ndarray):
                    vals, at = vals.tolist(), at.tolist()
                vals += [v for _s, v in longs]
                at += [s for s, _v in longs]
                order = np.argsort(np.array(at, dtype=np.int64), kind="stable").tolist()
                vals = [vals[j] for j in order]
                at = [at[j] for j in order]
        e = np.searchsorted(np.asarray(at, dtype=np.int64), tops, side="left").astype(np.int64)
        if not len(vals):
            if fresh or sweep.state() is None:
                return False
            arr = np.zeros(0, dtype=np.int64)  # (no new member: the windows hold what the sweep holds)
        elif isinstance(vals, np.ndarray):  # (the tail's column: int64 or float64, as its panes' lists would be)
            arr = vals
            vals = arr.tolist()
        elif type(vals[0]) not in (int, float):
            return False
        else:
            try:
                arr = np.asarray(vals)
            except (OverflowError, ValueError):
                return False
            if arr.dtype.kind == "f" and not all(type(v) is float for v in vals):
                return False  # (ints among floats: a float column would change what the UDA sees, 3 for 3.0)
        if arr.dtype.kind not in "if" or arr.dtype.itemsize != 8 or arr.ndim != 1:
            return False
        if fresh:
            sweep.clear()
        st = sweep.state()
        empty = st is None
        gone: list[int] = []
        if empty:  # (windows before the period's first member have none: no output)
            st = wu.initial_state()
            has = e > 0
            if not has.all():
                gone = kv[~has].tolist()
                kv, e = kv[has], e[has]
        res = prefix_values(wu, st, arr, e)
        if res is None:
            return False
        if sweep.partials:  # (a merge-only UDA: the run's values as a fresh partial merged in, marks are states)
            part = wu._call(wu.add_array, (wu.initial_state(), arr), None, "add_array")
            sweep.enter_state(start, part if empty else wu.merge(st, part), vals)
        else:
            sweep.enter_state(start, wu._call(wu.add_array, (st, arr), None, "add_array"), vals)
        sweep.mark(hi)
        g.swept = hi
        out_g = g.out
        for k in gone:  # (a window that lost its last member)
            if k in out_g:
                wle, wre = geo.extent(k)
                fam.put(g, k, wle, wre, [], out, em)
        # closed and never emitted: one block at the end of the flush; the rest (released before the CTI
        # closes them, or emitted before) one by one, with their output records
        wre_v = geo.extent(kv)[1]
        block = wre_v <= self.step.effective_cti
        if out_g and len(kv):  # (the run's windows emitted before: from the records in its range, not one by one)
            emitted = list(out_g.irange(int(kv[0]), int(kv[-1])))
            if emitted:
                block &= ~np.isin(kv, emitted)
        if not block.all():
            rest = _where(res, ~block)
            for k, r in zip(kv[~block].tolist(), rest.tolist() if isinstance(rest, np.ndarray) else rest, strict=True):
                wle, wre = geo.extent(k)
                fam.put(g, k, wle, wre, wu.outputs(r, wle, wre, g.fields), out, em)
            kv = kv[block]
            res = _where(res, block)
        if len(kv):
            self.jobs.append((g, kv, res))
        return True

    def flush(self, fam: Any, out: Any, em: Any) -> None:
        """Write every window taken since the last call as one block of output inserts."""
        jobs = self.jobs
        if not jobs:
            return
        self.jobs = []
        step = self.step
        kv = np.concatenate([j[1] for j in jobs])
        res = [j[2] for j in jobs]
        if all(isinstance(r, np.ndarray) for r in res) and len({r.dtype for r in res}) == 1:
            results: Any = np.concatenate(res)
        else:
            results = [x for r in res for x in (r.tolist() if isinstance(r, np.ndarray) else r)]
        n = len(kv)
        le, re = fam.geo.extent(kv)
        if int(le.min()) < em.out_cti:  # (never: a closed window starts after the output CTI; the guard says so)
            em.check(step, int(le.min()), None, "a closed cumulate window")
        first = em.oid + 1
        em.oid += n
        ids = np.arange(first, first + n, dtype=np.int64)
        first_emissions(step, re)
        fields: dict[str, Any] = {}
        if step.group_by:
            rows_g = [g for g, k, _r in jobs for _ in range(len(k))]
            for f in step.group_by:
                fields[f] = [g.fields[f] for g in rows_g]  # type: ignore[index]
        fields[step.udm.alias] = results
        out.block(Batch(np.full(n, INSERT, dtype=np.int8), ids, le, re, re, np.full(n, -1, dtype=np.int64),
                        column_payload(fields, n)))


def _where(res: Any, mask: np.ndarray) -> Any:
    """The entries of a column or list ``res`` where ``mask`` holds."""
    if isinstance(res, np.ndarray):
        return res[mask]
    return [r for r, m in zip(res, mask.tolist(), strict=True) if m]


def prefix_values(wu: Any, state: Any, values: np.ndarray, ends: np.ndarray) -> Any:
    """Each window's value from the UDA's ``compute_prefixes`` when it gives one plain JSON kind of the right
    length (an int64/float64 column or a list), else None (the family steps the windows one by one, so an
    error is reported for its window, as always)."""
    try:
        got = wu.compute_prefixes(state, values, ends)
    except Exception:
        return None
    if got is None or len(got) != len(ends):
        return None
    if isinstance(got, np.ndarray):
        return got if got.dtype.kind in "if" and got.dtype.itemsize == 8 and got.ndim == 1 else None
    got = list(got)
    kinds = set(map(type, got))
    if len(kinds) == 1 and next(iter(kinds)) in PLAIN_TYPES and kinds != {type(None)}:
        return got
    return None
