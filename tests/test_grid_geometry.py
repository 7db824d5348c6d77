"""Window assignment in panes (`udm.host.engine.window.geometry`) against SEMANTICS §3 word by word: the
windows are enumerated from the definition (tumbling, hopping, cumulate), and every answer the geometry gives
(a window's extent, the windows holding a pane, the windows an event overlaps, the last window closed, started
or starting before a time) is compared with a brute-force search over them; the column forms equal the scalar
forms row by row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host.engine.rules import INF
from udm.host.engine.window.geometry import CumulateGeometry, Geometry, HopGeometry, geometry_of
from udm.host.model.spec import Cumulate, Hopping, Tumbling

K = range(-40, 40)  # the window indexes searched


def _hop_windows(size: int, hop: int, off: int) -> dict[int, tuple[int, int]]:
    """SEMANTICS §3: hopping window k is [off + k*hop, off + k*hop + size)."""
    return {k: (off + k * hop, off + k * hop + size) for k in K}


def _cumulate_windows(size: int, step: int, off: int) -> dict[int, tuple[int, int]]:
    """SEMANTICS §3: [off + P*size, off + P*size + i*step) for every period P and i = 1..size/step, numbered
    period by period (P*n + i - 1), so W.RE rises with the index."""
    n = size // step
    return {P * n + i - 1: (off + P * size, off + P * size + i * step) for P in range(-40 // n, 40 // n)
            for i in range(1, n + 1)}


def _check(geo: Geometry, wins: dict[int, tuple[int, int]], events: list[tuple[int, int]]) -> None:
    ks = sorted(wins)
    inner = ks[len(ks) // 4: 3 * len(ks) // 4]  # (away from the searched range's edges)
    for k in inner:
        assert geo.extent(k) == wins[k]
    col = np.array(inner, dtype=np.int64)
    a, b = geo.span(col)
    le, re = geo.extent(col)
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == [geo.span(k) for k in inner]
    assert list(zip(le.tolist(), re.tolist(), strict=True)) == [wins[k] for k in inner]
    lo_t, hi_t = wins[inner[0]][1], wins[inner[-1]][0]
    for t in range(lo_t, hi_t):
        assert geo.last_closed(t) == max(k for k in ks if wins[k][1] <= t)
        assert geo.last_started(t) == max(k for k in ks if wins[k][0] <= t)
        assert geo.last_starting_before(t) == max(k for k in ks if wins[k][0] < t)
        s = geo.pane(t)
        pane_le = geo.off + s * geo.p
        assert pane_le <= t < pane_le + geo.p
        holding = [k for k in ks if wins[k][0] <= pane_le and pane_le + geo.p <= wins[k][1]]
        assert holding == list(range(geo.first_window(s), geo.last_window(s) + 1))
    assert geo.last_closed(INF) == INF and geo.last_starting_before(INF) == INF and geo.last_window(INF) == INF
    ts = np.arange(lo_t, hi_t, dtype=np.int64)
    assert geo.pane(ts).tolist() == [geo.pane(int(t)) for t in ts]
    assert geo.first_window(geo.pane(ts)).tolist() == [geo.first_window(geo.pane(int(t))) for t in ts]
    for ev_le, dur in events:
        ev_re = ev_le + dur
        if not (lo_t <= ev_le and ev_re <= hi_t):
            continue
        # overlap membership (SEMANTICS §3) == the windows holding one of the event's panes
        overlapped = [k for k in ks if wins[k][0] < ev_re and wins[k][1] > ev_le]
        s1, s2 = geo.pane(ev_le), geo.pane(ev_re - 1)
        by_panes = sorted({k for s in range(s1, s2 + 1) for k in range(geo.first_window(s), geo.last_window(s) + 1)})
        assert overlapped == by_panes


EVENTS = st.lists(st.tuples(st.integers(-60, 60), st.integers(1, 30)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(-5, 5), EVENTS)
def test_hopping_geometry_is_the_definition(size: int, hop: int, off: int, events: list[tuple[int, int]]) -> None:
    geo = HopGeometry(size, hop, off)
    _check(geo, _hop_windows(size, hop, off), events)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(-7, 7), EVENTS)
def test_cumulate_geometry_is_the_definition(step: int, n: int, off: int, events: list[tuple[int, int]]) -> None:
    geo = CumulateGeometry(step * n, step, off)
    _check(geo, _cumulate_windows(step * n, step, off), events)


def test_geometry_of_each_spec() -> None:
    t = geometry_of(Tumbling(size=6, offset=1))
    assert isinstance(t, HopGeometry) and (t.p, t.width, t.extent(0)) == (6, 1, (1, 7))
    h = geometry_of(Hopping(size=6, hop=4, offset=0))
    assert isinstance(h, HopGeometry) and (h.p, h.width, h.extent(1)) == (2, 3, (4, 10))  # gcd(6, 4) = 2
    c = geometry_of(Cumulate(size=6, step=2, offset=1))
    # period 0 is [1, 7): windows [1, 3), [1, 5), [1, 7); period 1 starts again at 7
    assert isinstance(c, CumulateGeometry) and (c.p, c.width) == (2, 3)
    assert [c.extent(k) for k in range(4)] == [(1, 3), (1, 5), (1, 7), (7, 9)]
