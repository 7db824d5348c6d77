"""A grid group holding panes of its own (off the columnar store) evaluated window by window.

The windows to evaluate are the dirty ones and those past ``done`` holding a member (`grid_pane_windows`);
each released window is valued from the group's sweep brought to it (forward from the window it holds, else
rebuilt), from a one-pane window's state, or from its members; a cumulate run is valued at once
(`grid_prefix`) when it can be. Windows not released yet stay dirty. A change to a pane makes the windows
already evaluated that hold it dirty (`touch`) and takes back a sweep that took the pane in (`unsweep`).
"""

from __future__ import annotations

import heapq
from typing import Any

from .family import merged
from .grid_pane_windows import feed, first_pending, has_finite, members, windows_with_members
from .grid_panes import GroupPanes
from .state import Group

__all__ = ["evaluate_own", "touch", "unsweep"]


def touch(fam: Any, g: Group, s1: int, s2: int) -> None:
    """Panes ``[s1, s2]`` changed: windows already evaluated that hold them are dirty."""
    d: GroupPanes = g.data
    geo = fam.geo
    unsweep(fam, g, s1)
    lo = max(geo.first_window(s1), d.floor)
    if lo <= d.done:
        hi = min(geo.last_window(s2), d.done)
        if hi >= lo:
            d.dirty.append((lo, hi))
    fam.seq += 1
    heapq.heappush(fam.clean, (geo.extent(lo)[1], fam.seq, g))


def unsweep(fam: Any, g: Group, s: int) -> None:
    """Pane ``s`` changed (or an event first in it): a sweep that took it in as it was goes back to
    before it, where windows only grow (`PrefixSweep.rewind`); otherwise it is rebuilt at the next
    evaluation."""
    geo = fam.geo
    swept = g.swept
    if swept is None or s >= geo.span(swept)[1]:
        return
    if geo.grows and s > geo.span(swept)[0]:
        g.swept = g.sweep.rewind(geo.first_window(s) - 1)
    else:
        g.swept = None


def evaluate_own(fam: Any, g: Group, out: Any, em: Any, limit: int | None) -> None:
    """Group ``g``'s windows up to the last released (``limit``: at most), in order; then the step learns
    when its first pending window may be released."""
    d: GroupPanes = g.data
    geo = fam.geo
    K = fam.last_releasable()
    if limit is not None:
        K = min(K, limit)
    todo = list(d.dirty)
    d.dirty = []
    if d.done < K:
        todo += windows_with_members(d, geo, d.done + 1, K, fam.frontier)
        d.done = K
    if todo:
        d.dirty = _values(fam, g, merged(todo), out, em)
    k = first_pending(d, geo, fam.frontier)
    if k is not None:
        wle, wre = geo.extent(k)
        fam.step.pending(g, wre, wle)


def _values(fam: Any, g: Group, todo: list[tuple[int, int]], out: Any, em: Any) -> list[tuple[int, int]]:
    """Value and emit the windows of ``todo`` that are released; returns those that are not."""
    d: GroupPanes = g.data
    prefix = fam.prefix if fam.prefix.on and not d.endless else None
    keep: list[tuple[int, int]] = []
    for lo0, hi0 in todo:
        for lo, hi, together in (prefix.split(fam, g, lo0, hi0) if prefix is not None else ((lo0, hi0, False),)):
            if together:
                _run(fam, g, lo, hi, out, em)
                continue
            _each(fam, g, lo, hi, keep, out, em)
    return keep


def _each(fam: Any, g: Group, lo: int, hi: int, keep: list[tuple[int, int]], out: Any, em: Any) -> None:
    """Windows ``lo..hi`` of ``g`` one by one; those not released go to ``keep``."""
    d: GroupPanes = g.data
    geo = fam.geo
    step = fam.step
    sweep = g.sweep
    one_pane = geo.width == 1
    for k in range(lo, hi + 1):
        wle, wre = geo.extent(k)
        if not step.releasable(wle, wre, k in g.out):
            keep.append((k, k))
            continue
        if k > fam.frontier and d.endless and not has_finite(d, geo, k):
            news = []  # (past T, never-ending events alone make no window: semantics-notes 2)
        elif sweep is not None:
            if one_pane and not d.longs:  # (a window of one pane: its state, no sweep needed)
                news = fam.value(g, wle, wre, None, fam.fill.state(d.settle(fam.fill).get(geo.span(k)[0])))
            else:
                _sweep_to(fam, g, k)
                news = fam.value(g, wle, wre, None)
        else:
            news = fam.value(g, wle, wre, members(d, geo, k))
        fam.put(g, k, wle, wre, news, out, em)


def _run(fam: Any, g: Group, lo: int, hi: int, out: Any, em: Any) -> None:
    """Released windows ``lo..hi`` of one period: valued at once (`grid_prefix`), else one by one."""
    if fam.prefix.take(fam, g, lo, hi, out, em):
        return
    geo = fam.geo
    for k in range(lo, hi + 1):
        wle, wre = geo.extent(k)
        _sweep_to(fam, g, k)
        fam.put(g, k, wle, wre, fam.value(g, wle, wre, None), out, em)


def _sweep_to(fam: Any, g: Group, k: int) -> None:
    """Bring the group's sweep to window ``k``: forward from the window it holds, else rebuilt."""
    prev = g.swept
    geo = fam.geo
    if prev is None or prev > k or (geo.grows and geo.span(prev)[0] != geo.span(k)[0]):
        g.sweep.clear()  # (a growing window's sweep starts again with each run: nothing ever leaves it)
        prev = None
    g.data.settle(fam.fill)
    feed(g.data, g.sweep, geo, prev, k, fam.fill)
    g.swept = k
    if geo.grows:
        g.sweep.mark(k)
