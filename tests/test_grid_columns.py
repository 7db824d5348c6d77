"""The grid family's column-wise evaluation (`udm.host.engine.window.grid_columns`) is the vector form of its
window-by-window evaluation: the same output CHT, dead letters and run statistics on generated streams
(many groups, CTIs inside batches, hopping and cumulate windows, late and bad elements, retractions that
send a batch the window-by-window way), with the column form really taking part; and when the UDA's
fresh-window form declines (raises, a wrong length) its scalar forms give the same values."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from test_engine_support import check_physical, cht

from udm.host.engine import QueryRunner
from udm.host.engine.window import grid, grid_columns, grid_store_flush
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle


def _stream(seed: int, n: int = 3000) -> list[Element]:
    rng = random.Random(seed)
    out: list[Element] = []
    for i in range(n):
        le = i - (rng.randrange(20) if rng.random() < 0.05 else 0)
        out.append(Insert(f"e{i}", le, le + 1, {"g": f"k{rng.randrange(7)}", "v": rng.randrange(100)}))
        if rng.random() < 0.01 and seed % 2:
            out.append(Retract(f"e{i}", le, le + 1, le))
        if i % 97 == 96:
            out.append(Cti(i - 30))
    return [*out, Cti(10**18)]


def _run(q: Any, stream: list[Element], chunk: int) -> tuple[Any, ...]:
    r = QueryRunner(q)
    out = []
    for a in range(0, len(stream), chunk):
        part = stream[a:a + chunk]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
    out += r.finish()
    check_physical(out)
    st = r.stats
    return cht(out), [(d.line, d.reason) for d in r.dead_letters], st.windows_emitted, st.truncated_at


@pytest.mark.parametrize("window", [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 30, "hop": 10},
                                    {"type": "tumbling", "size": 7, "offset": 3},
                                    {"type": "cumulate", "size": 30, "step": 10, "offset": 5}])
@pytest.mark.parametrize("udm", ["sum", "count", "avg"])
@pytest.mark.parametrize("delay", [None, "inf"])
def test_columns_equal_window_by_window(window: dict, udm: str, delay: str | None,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # (strong consistency, ``max_delay: "inf"``: no pane store, the batch's windows valued by `column_block`)
    step = {"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}
    if delay is not None:
        step["max_delay"] = delay
    spec = {"steps": [step]}
    q = bind(parse_query(spec))
    blocks = [0]
    real = grid_columns.column_block

    cols = [0]

    def counted(*a: Any) -> Any:
        got = real(*a)
        blocks[0] += 0 if got is None else len(got)
        cols[0] += 0 if got is None else len(got)
        return got

    monkeypatch.setattr(grid, "column_block", counted)
    real_closed = grid_store_flush.write_closed

    def closed(step: Any, out: Any, em: Any, groups: list[Any], *a: Any) -> None:
        blocks[0] += len(groups)  # (a running UDA's windows: valued as columns by the pane store)
        real_closed(step, out, em, groups, *a)

    monkeypatch.setattr(grid_store_flush, "write_closed", closed)
    for seed in range(4):
        stream = _stream(seed)
        on = _run(q, stream, 1000)
        assert on[0] == oracle(q.spec, stream)
        with monkeypatch.context() as m:
            m.setattr(grid, "COLUMN_PANES", 0)  # every window one by one
            off = _run(q, stream, 1000)
        assert on == off, seed
    assert blocks[0] > 1000  # the column form valued most windows
    if delay is not None and window["type"] != "cumulate":
        assert cols[0] > 1000  # (cumulate: valued by `grid_prefix`)


@pytest.mark.parametrize("broken", ["raises", "short", "mixed"])
def test_a_declining_fresh_window_form_gives_the_scalar_values(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from udm_stats.aggregates import Sum

    def bad(self: Any, values: Any, offsets: Any) -> Any:
        if broken == "raises":
            raise RuntimeError("no")
        if broken == "short":
            return np.zeros(max(len(offsets) - 2, 0))
        return [("x" if i % 2 else i) for i in range(len(offsets) - 1)]  # not one JSON kind

    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                                     "udm": "sum", "input": "v"}]}))
    stream = _stream(0)
    want = _run(q, stream, 1000)
    monkeypatch.setattr(Sum, "compute_slices", bad)
    assert _run(q, stream, 1000) == want
