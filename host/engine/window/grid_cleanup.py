"""What a CTI finalizes in a grid family: cleanup of the groups due, and the output CTI's bound.

Windows whose end the CTI passed are final (SEMANTICS §7), except windows holding a member whose end may
still move (time-sensitive steps without right clipping) and windows past the frontier that endless events
will reach once T moves (semantics-notes 2): those are *held*, and bound the output CTI.
"""

from __future__ import annotations

import heapq
from typing import Any

from ..rules import INF
from .grid_panes import GroupPanes
from .state import Group

__all__ = ["bound_of", "clean_up"]


def clean_up(fam: Any, c: int) -> list[Group]:
    """`GridFamily.cleanup` at CTI ``c``: the groups due prune what only final windows hold (the store its
    rows), the floor below which every window is final rises, and each group is due again at its first
    window's end; returns the groups visited and those that left the store holding nothing."""
    h = fam.clean
    visit: dict[int, Group] = {}
    while h and h[0][0] <= c:
        g = heapq.heappop(h)[2]
        visit[id(g)] = g
    geo = fam.geo
    kf = geo.last_closed(c)
    gone = fam.store.cleanup(kf + 1 if c < INF else INF) if fam.store.on else []
    if c >= INF:
        return [*visit.values(), *gone]
    soe = fam.step.sees_open_ends
    # windows past the frontier that endless events will reach once T moves are not final yet (they have
    # not come out: semantics-notes 2)
    endless = any(g.data.endless for g in fam.endless_groups.values())
    cap = fam.frontier + 1 if endless else INF
    if not soe:
        fam.floor_k = max(fam.floor_k, min(kf + 1, cap))
    for g in list(visit.values()):
        d: GroupPanes = g.data
        k_keep = _first_open(fam, g, kf, c) if soe else kf + 1
        if d.endless:
            k_keep = min(k_keep, fam.frontier + 1)
        d.prune(g, geo, fam.fill, k_keep, c)
        if k_keep <= kf:
            fam.held[id(g)] = (geo.extent(k_keep)[0], g)
        else:
            fam.held.pop(id(g), None)
        if d.holds() or g.out:
            first = d.first_pane()
            kk = max(k_keep, geo.first_window(first)) if first < INF else k_keep
            fam.seq += 1
            heapq.heappush(h, (geo.extent(kk)[1], fam.seq, g))
        if not d.endless:
            fam.endless_groups.pop(id(g), None)
    return [*visit.values(), *gone]


def _first_open(fam: Any, g: Group, kf: int, c: int) -> int:
    """Time-sensitive without right clipping: the first window at or before ``kf`` holding a member
    whose end may still change (``RE >= c``): it and every later one stay."""
    geo = fam.geo
    first = None
    for ev in g.events.values():
        if ev.re >= c:
            k = geo.first_window(geo.pane(ev.le))
            first = k if first is None else min(first, k)
    if first is None or first > kf:
        return kf + 1
    return first


def bound_of(fam: Any, c: int) -> int:
    """`GridFamily.bound`: no window starting before it can still change (held windows, windows endless
    events reach as the frontier moves)."""
    geo = fam.geo
    b = geo.extent(geo.last_closed(c) + 1)[0]  # the start of the first window with W.RE > c
    if any(g.data.endless for g in fam.endless_groups.values()):
        b = min(b, geo.extent(fam.frontier + 1)[0])
    for le, _g in fam.held.values():
        if le < b:
            b = le
    return b
