"""Pane evaluation of algebraic UDAs on ``rows`` windows (SEMANTICS §9, seeds/004 §5.1/§6.2): chosen only
where it applies, the same CHT as the brute-force oracle on random streams (late and retracted rows
renumber panes), and memory of ``n/p`` pane states instead of ``n`` rows."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_engine_support import runner, window_query
from window_cases import run_random_cases

from udm.host.engine.window import RowPaneStep, RowsStep
from udm.host.temporal.elements import Cti, Insert

ALGEBRAIC: list[dict[str, Any]] = [
    {"udm": "count"}, {"udm": "sum", "input": "v"}, {"udm": "avg", "input": "v"},
    {"udm": "max", "input": "v", "max_delay": 2},
    {"aggregates": [{"udm": "count", "as": "n"}, {"udm": "min", "input": "v", "as": "lo"}]},
]


@pytest.mark.parametrize(("window", "udm", "family"), [
    ({"n": 6, "slide": 2}, {"udm": "sum", "input": "v"}, RowPaneStep),
    ({"n": 6, "slide": 4}, {"aggregates": ALGEBRAIC[4]["aggregates"]}, RowPaneStep),
    ({"n": 6, "slide": 1}, {"udm": "sum", "input": "v"}, RowsStep),  # one-row panes: no gain
    ({"n": 4, "slide": 4}, {"udm": "sum", "input": "v"}, RowsStep),  # one pane a window
    ({"n": 6, "slide": 2}, {"udm": "median", "input": "v"}, RowsStep),  # holistic
    ({"n": 6, "slide": 2}, {"udm": "twa", "input": "v"}, RowsStep),  # time-sensitive
])
def test_panes_only_where_they_apply(window: dict, udm: dict, family: type) -> None:
    r = runner({"steps": [{"op": "window", "window": {"type": "rows", **window}, **udm}]})
    assert type(r.ops[0]) is family


def test_memory_is_pane_states_not_rows() -> None:
    """40-row windows sliding by 10 (seeds/004 §6.2 at 1/1000 scale): in order, with CTIs behind the data,
    the step holds a handful of pane states and almost no rows; without panes it holds a window of rows."""
    sizes = {}
    for slide in (10, 40):
        r = runner(window_query({"type": "rows", "n": 40, "slide": slide}, "sum", input="v"))
        for i in range(2000):
            r.process(Insert(f"e{i}", i, i + 1, {"v": i % 13}))
            if i % 5 == 4:
                r.process(Cti(i + 1))
        sizes[slide] = r.ops[0].state_size()
    assert sizes[10]["rows"] <= 5 and sizes[10]["panes"] <= 2 * (40 // 10)
    assert sizes[40]["rows"] >= 30  # RowsStep: the rows of the open window


@pytest.mark.parametrize("part", range(3))
def test_random_streams_agree_with_the_oracle(part: int) -> None:
    def window(rng: random.Random) -> dict[str, Any]:
        p = rng.randint(2, 3)
        return {"type": "rows", "n": p * rng.randint(2, 4), "slide": p * rng.randint(1, 3),
                "partial": rng.random() < 0.3}

    def step(seed: int, rng: random.Random) -> dict[str, Any]:
        return dict(ALGEBRAIC[seed % len(ALGEBRAIC)])

    assert run_random_cases(window, range(part * 250, part * 250 + 250), step=step) == 500
