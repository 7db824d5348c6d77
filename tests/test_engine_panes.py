"""Engine: pane evaluation of algebraic UDAs on hopping windows (SEMANTICS §9, seeds/004 §5.1)."""

from __future__ import annotations

import random

import pytest
from test_engine_support import check_physical, cht, gen_stream, rows, run, runner, table, window_query

import udm.host.engine.window as window_operator
from udm.host.engine.window import GridStep, PaneStep
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

HOP = {"type": "hopping", "size": 6, "hop": 4}  # panes of gcd(6, 4) = 2 ticks, 3 per window


def test_pane_evaluation_is_chosen_for_algebraic_udas_on_hopping_windows() -> None:
    for name in ("count", "sum", "avg", "min", "max", "variance"):
        assert isinstance(runner(window_query(HOP, name, input="v")).steps[0], PaneStep), name
    assert type(runner(window_query(HOP, "median", input="v")).steps[0]) is GridStep  # holistic
    assert type(runner(window_query({"type": "tumbling", "size": 6}, "sum", input="v")).steps[0]) is GridStep
    assert type(runner(window_query({"type": "hopping", "size": 6, "hop": 6}, "sum", input="v")).steps[0]) is GridStep


def test_hand_computed_panes() -> None:
    # windows [-4,2), [0,6), [4,10), [8,14); panes [0,2) [2,4) [4,6) [6,8) [8,10) ...
    stream = [Insert("a", 1, 2, {"v": 1}), Insert("b", 4, 6, {"v": 2}), Insert("c", 7, 8, {"v": 4}),
              Insert("long", 3, 9, {"v": 100}),  # spans panes [2,4) .. [8,10): a window member, not a pane member
              Insert("d", 9, 10, {"v": 8}), Retract("b", 4, 6, 4)]
    out, _ = run(window_query(HOP, "sum", input="v"), stream)
    assert table(out) == rows((-4, 2, {"sum": 1}), (0, 6, {"sum": 101}), (4, 10, {"sum": 112}),
                              (8, 14, {"sum": 108}))


def _without_panes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window_operator, "pane_step", lambda *a: None)


@pytest.mark.parametrize("win", [HOP, {"type": "hopping", "size": 10, "hop": 3},
                                 {"type": "hopping", "size": 4, "hop": 6, "offset": 1},
                                 {"type": "hopping", "size": 12, "hop": 8, "offset": -3}],
                         ids=lambda w: f"{w['size']}-{w['hop']}")
def test_identical_results_to_per_window_evaluation(win: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = []
    for seed in range(25):
        rng = random.Random(seed)
        udm = ["count", "sum", "avg", "min", "max"][seed % 5]
        q = window_query(win, udm, input="v", **({"group_by": ["g"]} if seed % 2 else {}))
        stream = gen_stream(rng, n=40, maxlen=rng.choice([1, 3, 15]), p_inf=0.05, p_retract=0.3)
        out, r = run(q, stream, mode="each" if seed % 3 else "many")
        assert isinstance(r.steps[0], PaneStep)
        check_physical(out)
        cases.append((q, stream, cht(out)))
    _without_panes(monkeypatch)
    for q, stream, got in cases:
        out, r = run(q, stream)
        assert type(r.steps[0]) is GridStep
        assert cht(out) == got  # integer data: bit-identical


def test_pane_memory_is_bounded_by_panes_not_events() -> None:
    r = runner(window_query({"type": "hopping", "size": 100, "hop": 10}, "sum", input="v"))
    st = r.steps[0]
    assert isinstance(st, PaneStep)
    for i in range(5000):
        r.process(Insert(f"e{i}", i, i + 1, {"v": 1}))
        if i % 100 == 99:
            r.process(Cti(i - 5))
            g = next(iter(st.groups.values()))
            assert len(g.panes) <= 100 // 10 + 2  # panes of 10 ticks kept for the open windows
            assert all(not w.members for w in g.windows.values())  # no per-window member lists
    out = r.finish()
    assert out[-1] == Cti(INF)
