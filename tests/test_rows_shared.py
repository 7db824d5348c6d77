"""The rows step's shared store (`udm.host.engine.window.rows_shared`): the groups that need no per-group state
keep their rows in one set of arrays and a flush values, writes and cleans up all of them at once. It must be
the group-by-group form's vector form: the same output CHT, dead letters and run statistics as with every
group on its own and as the kit's oracle, on streams in order (many groups, blocks of equal LEs whose values
decide the order, rows whose ends still move at the CTI) and disordered (late rows are sorted into the store,
retractions send a group out of it, a later batch takes it back), in batches of one element and of many, with
a snapshot taken half-way, with the store really taking part."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from batch_runs import BatchRun, run_in_batches
from test_grid_columns import _run
from test_rows_closed import _disordered

from udm.host.engine.window import rows_shared
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle


def _in_order(seed: int, n: int, kind: str, groups: int) -> list[Element]:
    """Mostly in order: several rows of a group at one tick (ties broken by the values), a few rows ending
    after the next CTI, rare late rows and retractions, a CTI every few ticks (at a tick still being filled
    now and then)."""
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    cti = -1
    for i in range(n):
        if rng.random() < 0.3:
            t += 1
        le = t - (rng.randrange(1, 6) if rng.random() < 0.01 else 0)
        re = le + (rng.randrange(2, 9) if rng.random() < 0.05 else 1)
        v: Any = rng.randrange(-5, 9)
        if kind == "float" or (kind == "mixed" and rng.random() < 0.3):
            v = v / 2
        out.append(Insert(f"e{i}", le, re, {"g": rng.randrange(groups), "v": v}))
        if rng.random() < 0.005:
            out.append(Retract(f"e{i}", le, re, le if rng.random() < 0.5 else le + 1 + rng.randrange(3)))
        if rng.random() < 0.05:
            cti = max(cti, t - rng.randrange(2))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


def _store_off(m: pytest.MonkeyPatch) -> None:
    """No group enters the store: every group on its own."""
    m.setattr(rows_shared.RowStore, "enter", lambda self, gs: None)


def _count_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    written = [0]
    real = rows_shared.RowStore._write

    def counted(self: Any, fam: Any, out: Any, em: Any, heads: Any, *a: Any) -> None:
        written[0] += 1
        real(self, fam, out, em, heads, *a)

    monkeypatch.setattr(rows_shared.RowStore, "_write", counted)
    return written


WINDOWS = [{"type": "rows", "n": 10}, {"type": "rows", "n": 6, "slide": 3},
           {"type": "rows", "n": 5, "slide": 2, "partial": True}, {"type": "rows", "n": 1},
           {"type": "rows", "n": 4, "slide": 7}, {"type": "rows", "n": 45}]  # (45: past `ROW_SPAN`)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize(("udm", "kind"), [("sum", "int"), ("avg", "mixed"), ("count", "float"), ("sum", "float")])
def test_store_equals_group_by_group_and_the_oracle(window: dict, udm: str, kind: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}]}
    q = bind(parse_query(spec))
    written = _count_written(monkeypatch)
    for seed, stream in enumerate((_in_order(1, 1500, kind, 40), _disordered(2, 900, kind, 6))):
        want = oracle(q.spec, stream)
        for chunk in (1, 211) if seed else (97, 1000):
            on = _run(q, stream, chunk)
            assert on[0] == want, (seed, chunk)
            with monkeypatch.context() as m:
                _store_off(m)
                assert _run(q, stream, chunk) == on, (seed, chunk)
    assert written[0] >= 3  # the store valued windows (n = 45 over ~37 rows a group: a few flushes)


@pytest.mark.parametrize("step", [
    {"udm": "sum", "input": "v", "max_delay": 3},  # released before final: output records, diffed in the store
    {"udm": "avg", "input": "v", "max_memory_time": 4},  # refusals
    {"udm": "count"},  # payloads, not numbers
])
def test_store_other_shapes(step: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "rows", "n": 4}, "group_by": ["g"],
                                     **step}]}))
    stream = _in_order(7, 2000, "int", 25)
    on = _run(q, stream, 300)
    assert on[0] == oracle(q.spec, stream)
    _store_off(monkeypatch)
    assert _run(q, stream, 300) == on


def test_store_snapshot_restore_continue(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot taken mid-stream (groups in the store and out of it) restores to a run whose output equals
    the uninterrupted one's; ``state_size`` counts the store's rows as the groups' own."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "rows", "n": 6, "slide": 2},
                                     "group_by": ["g"], "udm": "avg", "input": "v"}]}))
    stream = _in_order(9, 2400, "mixed", 30)

    def run(*cuts: int) -> BatchRun[int]:
        return run_in_batches(q, stream, 200, cuts=cuts, probe=lambda r: r.state_size()["events"])

    whole = run()
    assert whole.table == oracle(q.spec, stream)
    for cut in (600, 1400):
        assert run(cut).table == whole.table
    with monkeypatch.context() as m:
        _store_off(m)
        assert run().probes == whole.probes


def _late_inserts(seed: int, n: int, groups: int, ties: bool) -> list[Element]:
    """Inserts only: a third of them up to 12 ticks behind the newest (never behind the CTI, which trails
    by 15), so they land among rows of windows already released at the watermark; with ``ties`` most rows
    share their group's LE and end with other rows, the values deciding their order."""
    rng = random.Random(seed)
    out: list[Element] = []
    for i in range(n):
        t = i // 3
        le = t - (rng.randrange(13) if rng.random() < 0.33 else 0)
        if ties:
            le -= le % 4
        out.append(Insert(f"e{i}", le, le + 1, {"g": rng.randrange(groups), "v": rng.randrange(-9, 20)}))
        if i % 17 == 16:
            out.append(Cti(max(-1, t - 15)))
    return [*out, Cti(10**18)]


@pytest.mark.parametrize("window", [{"type": "rows", "n": 5}, {"type": "rows", "n": 6, "slide": 4},
                                    {"type": "rows", "n": 3, "slide": 5, "partial": True}])
@pytest.mark.parametrize("ties", [False, True])
def test_late_and_tied_inserts_stay_in_the_store(window: dict, ties: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A late or tied insert is sorted into the store (no group leaves it); the released windows it renumbers
    are valued again and diffed (``redo``). Equal to the oracle and to every group on its own, in batches of
    many, with a snapshot taken half-way."""
    q = bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "avg",
                                     "input": "v"}]}))
    stream = _late_inserts(5, 2500, 12, ties)
    left = [0]
    again = [0]
    real_m, real_a = rows_shared.RowStore.materialize, rows_shared.RowStore._again

    def materialize(self: Any, gs: Any) -> None:
        left[0] += len(gs)
        real_m(self, gs)

    def counted(self: Any, *a: Any) -> None:
        again[0] += 1
        real_a(self, *a)

    monkeypatch.setattr(rows_shared.RowStore, "materialize", materialize)
    monkeypatch.setattr(rows_shared.RowStore, "_again", counted)
    want = oracle(q.spec, stream)
    on = _run(q, stream, 150)
    assert on[0] == want
    assert left[0] == 0 and again[0] > 3
    assert run_in_batches(q, stream, 150, cuts=(1200,)).table == want
    with monkeypatch.context() as m:
        _store_off(m)
        assert _run(q, stream, 150) == on


def _memo_off(m: pytest.MonkeyPatch) -> None:
    """Every look at the rows afresh: no memo kept from one to the next."""
    real = rows_shared.RowStore._look

    def afresh(self: Any, c: int) -> Any:
        self.memo = None
        return real(self, c)

    m.setattr(rows_shared.RowStore, "_look", afresh)


@pytest.mark.parametrize("window", [{"type": "rows", "n": 4}, {"type": "rows", "n": 6, "slide": 3},
                                    {"type": "rows", "n": 3, "slide": 5, "partial": True}])
@pytest.mark.parametrize("seed", range(3))
def test_memo_is_what_a_fresh_look_finds(window: dict, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`RowStore._look`'s memo, which `cleanup` keeps for what it drops (the runs left and their fixed rows
    less the dropped ones), is at every look the runs and fixed rows a fresh look at the rows finds; and a run
    with no memo at all gives the same output, dead letters and statistics (and the oracle's output), on
    streams in order and disordered (late rows, retractions, CTIs inside blocks of equal LEs), in batches
    of many, with a snapshot taken half-way."""
    q = bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "sum",
                                     "input": "v"}]}))
    real = rows_shared.RowStore._look
    hits = [0]

    def checked(self: Any, c: int) -> Any:
        kept = self.memo is not None and self.memo[0] == c
        got = real(self, c)
        if kept:
            self.memo = None
            fresh = real(self, c)
            assert all(np.array_equal(a, b) for a, b in zip(got, fresh, strict=True)), (got, fresh)
            hits[0] += 1
        return got

    streams = (_in_order(20 + seed, 1500, "int", 30), _disordered(30 + seed, 1200, "int", 8),
               _late_inserts(40 + seed, 1500, 10, seed == 1))
    for i, stream in enumerate(streams):
        want = oracle(q.spec, stream)
        with monkeypatch.context() as m:
            m.setattr(rows_shared.RowStore, "_look", checked)
            on = _run(q, stream, 120)
            assert on[0] == want, i
            assert run_in_batches(q, stream, 120, cuts=(len(stream) // 2,)).table == want, i
        with monkeypatch.context() as m:
            _memo_off(m)
            assert _run(q, stream, 120) == on, i
    assert hits[0] > 10  # (the memo was kept past a cleanup and looked at again)
