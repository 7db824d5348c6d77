"""Which windows of a group holding its own panes (`grid_panes.GroupPanes`) hold something.

The questions the family asks of one group's panes and long events for a `geometry.Geometry`: which windows in
a range hold a member, a window's members, what enters a sweep moving to a window, the first window still to
release, how many windows hold a member. They read the panes only; what a pane holds and how it changes is
`grid_panes`.
"""

from __future__ import annotations

from typing import Any

from ..rules import INF, NEG
from .family import merged
from .geometry import Geometry
from .grid_panes import GroupPanes, PaneFill
from .state import Ev

__all__ = ["count_windows", "feed", "first_pending", "has_finite", "members", "windows_with_members"]


def windows_with_members(d: GroupPanes, geo: Geometry, lo: int, hi: int, frontier: int) -> list[tuple[int, int]]:
    """Index ranges of the windows in ``[lo, hi]`` that hold a member (endless events reach windows up to
    ``frontier`` only)."""
    ranges: list[tuple[int, int]] = []
    a = geo.span(lo)[0]
    b = geo.span(hi)[1]
    if geo.grows:
        # (windows that grow: a pane holds every window of its run from its own on, so a run's first pane
        # in range gives its range; scanning every pane would cost the whole run at every flush)
        k = lo
        while k <= hi:
            pa = geo.span(k)[0]
            end = geo.last_window(pa)  # (the run's last window)
            s0 = d.first_in(pa, geo.span(min(hi, end))[1])
            if s0 is not None:
                ranges.append((max(k, geo.first_window(s0)), min(hi, end)))
            if end >= hi:
                break
            nxt = d.first_in(geo.span(end + 1)[0], b)  # (the next run with one)
            if nxt is None:
                break
            k = max(end + 1, geo.first_window(nxt))
    else:
        _pane_ranges(d, geo, lo, hi, a, b, ranges)
    if d.longs:
        for s1, s2, _ev in d.longs.irange_key(max_key=(b, INF)):
            r1 = min(hi, geo.last_window(s2))
            if s2 >= INF:
                r1 = min(r1, frontier)
            r0 = max(lo, geo.first_window(s1))
            if r0 <= r1:
                ranges.append((r0, r1))
        ranges = merged(ranges)
    return ranges


def _pane_ranges(d: GroupPanes, geo: Geometry, lo: int, hi: int, a: int, b: int, ranges: list[tuple[int, int]]) -> None:
    """The windows in ``[lo, hi]`` holding one of the panes ``[a, b)``, as merged ranges onto ``ranges``.
    The panes of window ``lo`` all give ranges from ``lo`` on, the last of them the longest: it alone is
    looked at (scanning them all cost the whole window at every flush)."""
    panes = d.panes
    top = geo.span(lo)[1] - 1
    i = panes.bisect_right(top)
    if i > panes.bisect_left(a):
        r1 = min(hi, geo.last_window(panes.keys()[i - 1]))
        if r1 >= lo:
            ranges.append((lo, r1))
    for s in panes.irange(max(a, top + 1), b - 1):
        r0 = max(lo, geo.first_window(s))
        r1 = min(hi, geo.last_window(s))
        if r0 > r1:
            continue
        if ranges and r0 <= ranges[-1][1] + 1:
            if r1 > ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], r1)
        else:
            ranges.append((r0, r1))


def first_pending(d: GroupPanes, geo: Geometry, frontier: int) -> int | None:
    """The first window after ``done`` that holds a member or waits to be evaluated again (None: none)."""
    done = d.done
    k = None
    s = d.first_in(geo.span(done + 1)[0], INF)
    if s is not None:
        k = max(done + 1, geo.first_window(s))
    for s1, s2, _ev in d.longs:
        if geo.last_window(s2) > done:
            kk = max(done + 1, geo.first_window(s1))
            if s2 >= INF and kk > frontier:
                kk = frontier + 1
            k = kk if k is None else min(k, kk)
            break
    for lo, _hi in d.dirty:
        k = lo if k is None else min(k, lo)
    return k


def has_finite(d: GroupPanes, geo: Geometry, k: int) -> bool:
    """Does window ``k`` hold an event that ends?"""
    a, b = geo.span(k)
    if d.first_in(a, b) is not None:
        return True
    return any(s2 >= a and s2 < INF for _s1, s2, _ev in d.longs.irange_key(max_key=(b - 1, INF)))


def members(d: GroupPanes, geo: Geometry, k: int) -> list[Ev]:
    """Window ``k``'s members (the pane kind ``members``)."""
    a, b = geo.span(k)
    out: list[Ev] = []
    for s in d.panes.irange(a, b - 1):
        out.extend(d.panes[s].members.values())
    if d.longs:
        for _s1, s2, ev in d.longs.irange_key(max_key=(b - 1, INF)):
            if s2 >= a:
                out.append(ev)
    return out


def feed(d: GroupPanes, sweep: Any, geo: Geometry, prev: int | None, k: int, fill: PaneFill) -> None:
    """Bring ``sweep`` from window ``prev`` (None: an empty sweep) to window ``k > prev``: what leaves
    between them leaves, what enters (panes and long events not in ``prev``) enters (a merge sweep takes
    a pane's partial)."""
    partials = fill.kind == "merge"
    a, b = geo.span(k)
    if prev is None:
        start = a
        lstart = None
    else:
        pb = geo.span(prev)[1]
        sweep.leave_before(a)
        start = max(pb, a)
        lstart = pb
    panes = d.panes
    if start == b - 1:  # (one pane enters: a window one pane past the last, as in order)
        one = panes.get(start)
        entering: Any = () if one is None else ((start, one),)
    else:
        entering = ((s, panes[s]) for s in panes.irange(start, b - 1))
    for s, p in entering:
        if not p.count:
            continue
        if partials:
            sweep.enter_partial(s, fill.partial(p))
        else:
            sweep.enter(s, p.values)
    if d.longs:
        lo_key = (NEG, NEG) if lstart is None else (lstart, NEG)
        for _s1, s2, ev in d.longs.irange_key(lo_key, (b - 1, INF)):
            if s2 >= a:
                sweep.enter(s2 if s2 < INF else INF, [ev.val])


def count_windows(d: GroupPanes, geo: Geometry, frontier: int) -> int:
    """How many windows at or after ``floor`` hold a member."""
    if not d.longs and not d.tail:
        return _count_pane_windows(d, geo)
    spans = [(geo.first_window(s), geo.last_window(s)) for s in (*d.panes, *d.tail.panes().tolist())]
    spans += [(geo.first_window(s1), min(geo.last_window(s2), frontier)) for s1, s2, _ev in d.longs]
    n = 0
    for lo, hi in merged([(max(lo, d.floor), hi) for lo, hi in spans if hi >= max(lo, d.floor)]):
        n += hi - lo + 1
    return n


def _count_pane_windows(d: GroupPanes, geo: Geometry) -> int:
    """`count_windows` of a group holding short events in panes alone: a pane's windows (first, last) rise
    with the pane, so the sorted panes' spans merge in one pass (no list, no sort: it runs for every
    group at every batch, `WindowOp.state_size`)."""
    floor = d.floor
    fw = geo.first_window
    lw = geo.last_windows
    n = 0
    clo = chi = NEG
    for s in d.panes:
        lo = fw(s)
        if lo < floor:
            lo = floor
        hi = lw(s)
        if hi < lo:
            continue
        if chi > NEG and lo <= chi + 1:
            if hi > chi:
                chi = hi
        else:
            if chi > NEG:
                n += chi - clo + 1
            clo, chi = lo, hi
    if chi > NEG:
        n += chi - clo + 1
    return n
