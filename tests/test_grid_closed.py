"""The grid family's closed windows (`udm.host.engine.window.grid_closed`): a window that a flush both
releases and closes, never emitted before, is valued at the flush's end from its panes' values instead of
by the sweep. It must be the sweep's vector form: the same output CHT, dead letters and run statistics as
window-by-window evaluation and the kit's oracle, on generated streams (many groups, CTIs inside batches,
late elements that reopen emitted windows, retractions, batches of one element and of a thousand), with the
closed form really taking part."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from batch_runs import BatchRun, run_in_batches
from test_engine_support import cht
from test_grid_columns import _run, _stream

from udm.host.engine import QueryRunner
from udm.host.engine.rules import NEG
from udm.host.engine.window import grid, grid_store, grid_store_flush
from udm.host.engine.window.geometry import CumulateGeometry, HopGeometry
from udm.host.engine.window.grid_pane_windows import count_windows
from udm.host.engine.window.grid_panes import GroupPanes, Pane
from udm.host.io.batch import ElementBatch
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
    """Counts the windows the pane store writes as closed."""
    written = [0]
    real = grid_store_flush.write_closed

    def counted(step: Any, out: Any, em: Any, groups: list[Any], *a: Any) -> None:
        written[0] += len(groups)
        real(step, out, em, groups, *a)

    monkeypatch.setattr(grid_store_flush, "write_closed", counted)
    return written


def _closed_off(m: pytest.MonkeyPatch) -> None:
    """Every window by the sweep: no group in the pane store."""
    m.setattr(grid.GridFamily, "new_groups", grid.GridFamily.own_groups)
    m.setattr(grid_store.PaneStore, "enrol_panes", lambda self, g: None)


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
        assert written[0] > 50  # (the store took part: a group late for an emitted window leaves it for a flush)


@pytest.mark.parametrize("geo", [HopGeometry(10, 10, 0), HopGeometry(50, 10, 3), HopGeometry(10, 30, 0),
                                 CumulateGeometry(40, 10, 5)])
def test_pane_window_count_is_the_windows_holding_a_pane(geo: Any) -> None:
    """`grid_pane_windows.count_windows` of a group with panes alone (what ``state_size`` reports per batch): the
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
        assert count_windows(d, geo, NEG) == want, (panes, d.floor)


def _many_groups(seed: int, n: int, kind: str) -> list[Element]:
    """`_disordered` over 120 groups (most of them idle for long stretches, so they leave and come back)."""
    rng = random.Random(seed)
    out: list[Element] = []
    for e in _disordered(seed, n, kind):
        if isinstance(e, Insert):
            e = Insert(e.id, e.le, e.re, {"g": rng.randrange(120) if rng.random() < 0.7 else rng.randrange(4),
                                          "v": e.payload["v"]})
            out.append(e)
            if rng.random() < 0.02:  # (a retraction of this one: its group leaves the store)
                out.append(Retract(e.id, e.le, e.re, e.le))
        elif isinstance(e, Cti):
            out.append(e)
    return out


@pytest.mark.parametrize("window", [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 40, "hop": 10},
                                    {"type": "cumulate", "size": 30, "step": 10, "offset": 5}])
@pytest.mark.parametrize(("udm", "kind"), [("count", "int"), ("sum", "int"), ("avg", "mixed"), ("sum", "float")])
def test_pane_store_many_groups_any_batch_cut(window: dict, udm: str, kind: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Many groups, late events, retractions, CTIs inside windows: the pane store's output equals the oracle's
    and window-by-window evaluation's, for batches of 1, 7 and 1000 elements."""
    spec = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}]}
    q = bind(parse_query(spec))
    written = _count_written(monkeypatch)
    stream = _many_groups(5, 1500, kind)
    want = oracle(q.spec, stream)
    for chunk in (1, 7, 1000):
        with monkeypatch.context() as m:
            _closed_off(m)
            off = _run(q, stream, chunk)
        on = _run(q, stream, chunk)
        assert on[0] == want, chunk
        assert on == off, chunk
    assert written[0] > 300


def test_pane_store_snapshot_restore_continue() -> None:
    """A snapshot taken mid-stream (groups in the store, groups out of it, output records of windows released
    before the CTI) restores to a run whose output equals the uninterrupted one's; ``state_size`` counts the
    store's events as the groups' own panes would (its windows and groups may differ: a group's own panes
    and the group itself are forgotten when its cleanup comes due, the store's at every cleanup)."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "hopping", "size": 30, "hop": 10},
                                     "group_by": ["g"], "udm": "sum", "input": "v"}]}))
    stream = _many_groups(9, 1200, "int")

    def run(*cuts: int) -> BatchRun[dict[str, int]]:
        return run_in_batches(q, stream, 100, cuts=cuts, probe=QueryRunner.state_size)

    whole = run()
    assert whole.table == oracle(q.spec, stream)
    for cut in (300, 700):
        assert run(cut).table == whole.table
    with pytest.MonkeyPatch.context() as m:
        _closed_off(m)
        off = run().probes
    assert [s["events"] for s in off] == [s["events"] for s in whole.probes]


@pytest.mark.parametrize("window", [{"type": "hopping", "size": 30, "hop": 10},
                                    {"type": "cumulate", "size": 30, "step": 10, "offset": 5}])
def test_a_group_in_the_store_has_no_sweep_until_it_leaves(window: dict) -> None:
    """A group the pane store holds needs no sweep (the store values its windows): it gets one when a
    retraction, a spanning event or a late event makes it leave, and keeps it when it joins again. With a
    snapshot restored half-way, the output is still the oracle's."""
    q = bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "count"}]}))
    stream = _many_groups(5, 1500, "int")
    lazy = left = 0
    r = QueryRunner(q)
    out: list[Any] = []
    for a in range(0, len(stream), 100):
        part = stream[a:a + 100]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
        op = next(o for o in r.ops if hasattr(o, "family"))
        assert op.family.store.on
        groups = list(op.groups.values())
        objs = [g for g in groups if type(g) is not int]  # (in the store, a group is its code: no object)
        assert all(g.sweep is not None for g in objs if g.data.num < 0)  # (out of the store: its sweep)
        lazy += sum(type(g) is int or (g.sweep is None and g.data.num >= 0) for g in groups)
        left += sum(g.data.num < 0 for g in objs)
        if a == 700:
            r = QueryRunner.restore(r.snapshot(), q)
    out += r.finish()
    assert cht(out) == oracle(q.spec, stream)
    assert lazy and left


@pytest.mark.parametrize("top", [1, 7, 2**16, 2**16 + 1, 2**33, 2**62])
def test_stable_order_is_numpys_stable_sort(top: int) -> None:
    """`grid_store.stable_order` (16 bits at a time) orders keys as numpy's stable sort does: equal keys keep
    their order (a pane's values their arrival order)."""
    rng = np.random.default_rng(top % 1000)
    for n in (0, 1, 5, 3000):
        key = rng.integers(0, top, n, dtype=np.int64)
        assert (grid_store.stable_order(key) == np.argsort(key, kind="stable")).all(), (top, n)
