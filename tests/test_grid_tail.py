"""A group's newest short events kept as columns (`grid_tail`) rather than panes, for cumulate runs.

- the engine with the tail against the oracle, against the engine without it (every run to panes) and
  against the window-by-window sweep (no run valued at once), over disordered streams with retractions,
  events spanning panes and late events, and over sparse in-order streams (the tail's own case), for the
  UDAs with the running form and without, int and float input, grouped and not;
- a snapshot taken while groups hold a tail resumes to the same output; a group state from before the tail
  (seven fields) restores with an empty one;
- `PaneTail`'s answers against the same questions asked of a plain list of (pane, value).
"""

from __future__ import annotations

import pickle
import random
from typing import Any

import numpy as np
import pytest
from test_cumulate_prefix import _query, _resumed, _same, _stream
from test_grid_columns import _run

from udm.host.engine import QueryRunner
from udm.host.engine.window import grid_intake, grid_panes, grid_prefix
from udm.host.engine.window.grid_panes import GroupPanes
from udm.host.engine.window.grid_tail import PaneTail
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle


def _sparse(seed: int, n: int = 1500, floats: bool = False, late: float = 0.03) -> list[Element]:
    """Point events a few ticks apart (most panes hold one or two), a ``late`` share of them late and two
    thirds as many retractions, CTIs every ~40 events at the newest event's LE (windows close as they are
    released)."""
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    for i in range(n):
        t += rng.randrange(0, 7)
        le = t - (rng.randrange(1, 20) if rng.random() < late else 0)
        v: Any = round(rng.uniform(-50, 50), 3) if floats else rng.randrange(-100, 100)
        out.append(Insert(f"e{i}", le, le + 1, {"g": f"k{rng.randrange(2)}", "v": v}))
        if rng.random() < late * 2 / 3:
            out.append(Retract(f"e{i}", le, le + 1, le))
        if i % 40 == 39:
            out.append(Cti(t))
    return [*out, Cti(10**18)]


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the chunks that join a tail and the settles that make a non-empty tail's panes."""
    seen = {"chunks": 0, "settled": 0}
    append, settle = PaneTail.append, GroupPanes.settle

    def counted_append(self: PaneTail, *a: Any) -> None:
        seen["chunks"] += 1
        append(self, *a)

    def counted_settle(self: GroupPanes, fill: Any) -> Any:
        seen["settled"] += bool(self.tail)
        return settle(self, fill)

    monkeypatch.setattr(PaneTail, "append", counted_append)
    monkeypatch.setattr(GroupPanes, "settle", counted_settle)
    return seen


WINDOWS = [{"type": "cumulate", "size": 120, "step": 3}, {"type": "cumulate", "size": 60, "step": 6, "offset": 4},
           {"type": "cumulate", "size": 400, "step": 1, "offset": -7}]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("udm", ["sum", "count", "max", "min", "avg"])
def test_the_tail_equals_the_oracle_panes_and_the_sweep(window: dict[str, Any], udm: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting(monkeypatch)
    cases = [(_stream(1), False, True, 400), (_stream(2, floats=True), True, False, 150),
             (_sparse(3), False, True, 300), (_sparse(4, floats=True), True, False, 90), (_sparse(5), False, False, 1)]
    for stream, floats, grouped, chunk in cases:
        q = _query(window, udm, grouped)
        on = _run(q, stream, chunk)
        _same(on[0], oracle(q.spec, stream), floats)
        with monkeypatch.context() as m:  # every run to panes, as before the tail
            m.setattr(grid_intake, "to_tails", lambda groups, codes, *a: list(range(len(codes))))
            panes = _run(q, stream, chunk)
        with monkeypatch.context() as m:  # window by window (the sweep makes the tail's panes)
            m.setattr(grid_prefix.PrefixWindows, "take", lambda self, *a: False)
            swept = _run(q, stream, chunk)
        for other in (panes, swept):
            _same(on[0], other[0], floats)
            assert on[1:] == other[1:]
    if udm == "avg":  # (no running form: no run valued at once, no tail)
        assert seen["chunks"] == 0
    else:
        assert seen["chunks"] > 50 and seen["settled"] > 5  # (late events and retractions make its panes)


@pytest.mark.parametrize("udm", ["sum", "max"])
def test_a_snapshot_holding_a_tail_resumes(udm: str) -> None:
    q = _query({"type": "cumulate", "size": 300, "step": 2}, udm, True)
    stream = _sparse(6, 2000, late=0.0)  # (a late event or a retraction in the tail makes its panes)
    whole = _run(q, stream, 250)[0]
    for cut in (500, 1250):
        assert _resumed(q, stream, cut, 250, _holds_a_tail) == whole == oracle(q.spec, stream)


def _holds_a_tail(r: QueryRunner) -> None:
    steps = [op for op in r.ops if hasattr(op, "groups") and hasattr(op, "family")]
    assert any(g.data.tail.count() for step in steps for g in step.groups.values())


def test_a_group_state_from_before_the_tail_restores_without_one() -> None:
    d = GroupPanes()
    d.done = 7
    old = d.__getstate__()[:7]  # (the seven fields a snapshot held before the tail)
    e = GroupPanes.__new__(GroupPanes)
    e.__setstate__(old)
    assert not e.tail and e.done == 7 and not e.holds()
    assert pickle.loads(pickle.dumps(e)).done == 7


def test_pane_tail_answers_as_a_list_of_its_values() -> None:
    rng = np.random.default_rng(12)
    for _ in range(200):
        tail = PaneTail()
        model: list[tuple[int, float]] = []
        s = int(rng.integers(-20, 20))
        for _ in range(int(rng.integers(0, 5))):
            n = int(rng.integers(1, 9))
            panes = s + np.cumsum(rng.integers(0, 3, n))
            vals = rng.normal(0, 10, n)
            tail.append(panes.astype(np.int64), vals)
            model += zip(panes.tolist(), vals.tolist(), strict=True)
            s = int(panes[-1])
        for _ in range(5):
            a = int(rng.integers(-25, s + 5))
            b = a + int(rng.integers(0, 12))
            inside = [(p, v) for p, v in model if a <= p < b]
            assert tail.first_in(a, b) == (inside[0][0] if inside else None)
            got = [(p, v) for ps, vs in tail.between(a, b) for p, v in zip(ps.tolist(), vs.tolist(), strict=True)]
            assert got == inside
        assert tail.count() == len(model)
        assert tail.panes().tolist() == sorted({p for p, _v in model})
        cut = int(rng.integers(-25, s + 5))
        tail.drop_before(cut)
        model = [(p, v) for p, v in model if p >= cut]
        assert tail.count() == len(model) and bool(tail) == bool(model)
        if model:
            assert (tail.first(), tail.last()) == (model[0][0], model[-1][0])
        made = list(tail.pop_all())
        assert not tail
        assert [(p, v) for p, vs in made for v in vs] == model
        assert len({p for p, _vs in made}) == len(made)


def test_settle_makes_the_panes_the_bulk_insert_would_have() -> None:
    class _Step:
        sweep_kind = "running"
        udm = None

    fill = grid_panes.PaneFill(_Step())
    d = GroupPanes()
    d.tail.append(np.array([3, 3, 5], dtype=np.int64), np.array([1, 2, 3], dtype=np.int64))
    d.tail.append(np.array([5, 8], dtype=np.int64), np.array([4, 5], dtype=np.int64))
    assert d.held() == 5 and d.first_in(4, 9) == 5 and d.first_pane() == 3
    panes = d.settle(fill)
    assert not d.tail
    assert {s: (p.count, p.values, p.partial) for s, p in panes.items()} == {
        3: (2, [1, 2], None), 5: (2, [3, 4], None), 8: (1, [5], None)}
    assert all(type(v) is int for p in panes.values() for v in p.values)
