"""The grid family's closed windows (`udm.host.engine.window.grid_closed`): a window that a flush both
releases and closes, never emitted before, is valued at the flush's end from its panes' values instead of
by the sweep. It must be the sweep's vector form: the same output CHT, dead letters and run statistics as
window-by-window evaluation and the kit's oracle, on generated streams (many groups, CTIs inside batches,
late elements that reopen emitted windows, retractions, batches of one element and of a thousand), with the
closed form really taking part."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_grid_columns import _run, _stream

from udm.host.engine.rules import NEG
from udm.host.engine.window import grid_closed
from udm.host.engine.window.geometry import CumulateGeometry, HopGeometry
from udm.host.engine.window.grid_panes import GroupPanes, Pane
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle


@pytest.mark.parametrize("window", [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 30, "hop": 10},
                                    {"type": "hopping", "size": 50, "hop": 10, "offset": 3}])
@pytest.mark.parametrize("udm", ["count", "sum", "avg"])
@pytest.mark.parametrize("chunk", [1, 1000])
def test_closed_windows_equal_window_by_window(window: dict, udm: str, chunk: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}]}
    q = bind(parse_query(spec))
    written = _count_written(monkeypatch)
    for seed in range(2):
        stream = _stream(seed, 1500)
        on = _run(q, stream, chunk)
        assert on[0] == oracle(q.spec, stream)
        with monkeypatch.context() as m:
            _closed_off(m)
            off = _run(q, stream, chunk)
        assert on == off, seed
    if chunk > 1:  # (one element per batch: a window comes out at the watermark, before a CTI closes it)
        assert written[0] > 200  # the closed form valued many windows


def _count_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the windows the closed form writes."""
    written = [0]
    real = grid_closed.ClosedWindows._write

    def counted(self: Any, out: Any, em: Any, groups: list[Any], *a: Any) -> None:
        written[0] += len(groups)
        real(self, out, em, groups, *a)

    monkeypatch.setattr(grid_closed.ClosedWindows, "_write", counted)
    return written


def _closed_off(m: pytest.MonkeyPatch) -> None:
    """Every window by the sweep."""
    m.setattr(grid_closed.ClosedWindows, "take", lambda self, *a: False)
    m.setattr(grid_closed.ClosedWindows, "take_range", lambda self, *a: False)


def test_a_count_without_input_reads_whole_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``count`` with no input receives payloads (not numbers): valued by ``add`` per window, same output."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "hopping", "size": 20, "hop": 5},
                                     "group_by": ["g"], "udm": "count"}]}))
    stream = _stream(3, 1500)
    on = _run(q, stream, 500)
    assert on[0] == oracle(q.spec, stream)
    _closed_off(monkeypatch)
    assert _run(q, stream, 500) == on


def _disordered(seed: int, n: int, kind: str) -> list[Element]:
    """Several groups, events up to 40 ticks late (some behind a CTI: refused), a few spanning panes, deletions
    and shortened lifetimes, CTIs inside windows; values int, float or both."""
    rng = random.Random(seed)
    out: list[Element] = []
    cti = -1
    for i in range(n):
        le = i - (rng.randrange(40) if rng.random() < 0.2 else 0)
        re = le + (rng.randrange(2, 30) if rng.random() < 0.03 else 1)
        v: Any = rng.randrange(-50, 100)
        if kind == "float" or (kind == "mixed" and rng.random() < 0.5):
            v = v / 4
        out.append(Insert(f"e{i}", le, re, {"g": rng.randrange(6), "v": v}))
        if rng.random() < 0.02:
            out.append(Retract(f"e{i}", le, re, le if re == le + 1 or rng.random() < 0.5 else le + 1))
        if rng.random() < 0.03:
            cti = max(cti, i - rng.randrange(35))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


@pytest.mark.parametrize("window", [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 40, "hop": 10},
                                    {"type": "hopping", "size": 25, "hop": 5, "offset": 2},
                                    {"type": "cumulate", "size": 30, "step": 10, "offset": 5}])
@pytest.mark.parametrize(("udm", "kind"), [("count", "int"), ("sum", "int"), ("sum", "float"), ("avg", "mixed"),
                                           ("max", "float")])
def test_closed_runs_on_disordered_streams(window: dict, udm: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The windows a CTI closes, valued as runs over every group at once: the oracle's output and the sweep's
    (output CHT, dead letters, run statistics), whatever the batch cut."""
    spec = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}]}
    q = bind(parse_query(spec))
    written = _count_written(monkeypatch)
    for seed in range(2):
        stream = _disordered(seed, 1200, kind)
        want = oracle(q.spec, stream)
        with monkeypatch.context() as m:
            _closed_off(m)
            off = _run(q, stream, 137)
        for chunk in (137, 1000):
            on = _run(q, stream, chunk)
            assert on[0] == want, (seed, chunk)
            assert on == off, (seed, chunk)
    if udm != "max":  # (max has no running sweep: its windows are merged from pane partials)
        assert written[0] > 100


@pytest.mark.parametrize("geo", [HopGeometry(10, 10, 0), HopGeometry(50, 10, 3), HopGeometry(10, 30, 0),
                                 CumulateGeometry(40, 10, 5)])
def test_pane_window_count_is_the_windows_holding_a_pane(geo: Any) -> None:
    """`GroupPanes.count_windows` of a group with panes alone (what ``state_size`` reports per batch): the
    windows at or after ``floor`` holding one of its panes, counted one by one."""
    rng = random.Random(7)
    for _ in range(300):
        d = GroupPanes()
        panes = sorted(rng.sample(range(-20, 60), rng.randrange(0, 12)))
        for s in panes:
            d.panes[s] = Pane()
        d.floor = rng.choice([NEG, rng.randrange(-10, 40)])
        lo = max(d.floor, -100)
        want = sum(1 for k in range(lo, 200) if any(geo.span(k)[0] <= s < geo.span(k)[1] for s in panes))
        assert d.count_windows(geo, NEG) == want, (panes, d.floor)
