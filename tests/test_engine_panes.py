"""Engine: windows over panes shared by overlapping windows (SEMANTICS §9, seeds/004 §5.1) — each event is kept
in its pane once, a window's value is carried from the window before it (the sweep), and the results are the
ones evaluating every window from its members gives."""

from __future__ import annotations

import random

import pytest
from test_engine_support import check_physical, cht, gen_stream, rows, run, runner, table, window_query

from udm.host.engine.window import step as window_step
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

HOP = {"type": "hopping", "size": 6, "hop": 4}  # panes of gcd(6, 4) = 2 ticks, 3 per window


def test_how_windows_are_evaluated_follows_the_uda() -> None:
    for name in ("count", "sum", "avg", "variance"):  # incremental with remove: subtract
        assert runner(window_query(HOP, name, input="v")).ops[0].sweep_kind == "running", name
    for name in ("min", "max"):  # one value per state, no remove: merge partials
        assert runner(window_query(HOP, name, input="v")).ops[0].sweep_kind == "merge", name
    assert runner(window_query(HOP, "median", input="v")).ops[0].sweep_kind == "members"  # holistic
    assert runner(window_query(HOP, "twa", input="v")).ops[0].sweep_kind == "members"  # time-sensitive


def test_hand_computed_panes() -> None:
    # windows [-4,2), [0,6), [4,10), [8,14); panes [0,2) [2,4) [4,6) [6,8) [8,10) ...
    stream = [Insert("a", 1, 2, {"v": 1}), Insert("b", 4, 6, {"v": 2}), Insert("c", 7, 8, {"v": 4}),
              Insert("long", 3, 9, {"v": 100}),  # spans panes [2,4) .. [8,10): it enters and leaves the sweep
              Insert("d", 9, 10, {"v": 8}), Retract("b", 4, 6, 4)]
    out, _ = run(window_query(HOP, "sum", input="v"), stream)
    assert table(out) == rows((-4, 2, {"sum": 1}), (0, 6, {"sum": 101}), (4, 10, {"sum": 112}),
                              (8, 14, {"sum": 108}))


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
        assert r.ops[0].sweep_kind != "members"
        check_physical(out)
        cases.append((q, stream, cht(out)))
    monkeypatch.setattr(window_step, "sweep_kind", lambda wu: "members")  # every window from its members
    for q, stream, got in cases:
        out, r = run(q, stream)
        assert r.ops[0].sweep_kind == "members"
        assert cht(out) == got  # integer data: bit-identical


def test_pane_memory_is_bounded_by_panes_not_events() -> None:
    r = runner(window_query({"type": "hopping", "size": 100, "hop": 10}, "sum", input="v"))
    st = r.ops[0]
    for i in range(5000):
        r.process(Insert(f"e{i}", i, i + 1, {"v": 1}))
        if i % 100 == 99:
            r.process(Cti(i - 5))
            g = next(iter(st.groups.values()))
            assert len(g.data.panes) <= 100 // 10 + 12  # panes of 10 ticks for the open windows
            assert st.state_size()["windows"] <= 100 // 10 + 12
    out = r.finish()
    assert out[-1] == Cti(INF)
