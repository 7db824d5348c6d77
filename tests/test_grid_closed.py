"""The grid family's closed windows (`udm.host.engine.window.grid_closed`): a window that a flush both
releases and closes, never emitted before, is valued at the flush's end from its panes' values instead of
by the sweep. It must be the sweep's vector form: the same output CHT, dead letters and run statistics as
window-by-window evaluation and the kit's oracle, on generated streams (many groups, CTIs inside batches,
late elements that reopen emitted windows, retractions, batches of one element and of a thousand), with the
closed form really taking part."""

from __future__ import annotations

from typing import Any

import pytest
from test_grid_columns import _run, _stream

from udm.host.engine.window import grid_closed
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.testing import oracle


@pytest.mark.parametrize("window", [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 30, "hop": 10},
                                    {"type": "hopping", "size": 50, "hop": 10, "offset": 3}])
@pytest.mark.parametrize("udm", ["count", "sum", "avg"])
@pytest.mark.parametrize("chunk", [1, 1000])
def test_closed_windows_equal_window_by_window(window: dict, udm: str, chunk: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}]}
    q = bind(parse_query(spec))
    taken = [0]
    real = grid_closed.ClosedWindows.take

    def counted(self: Any, *a: Any) -> bool:
        got = real(self, *a)
        taken[0] += got
        return got

    monkeypatch.setattr(grid_closed.ClosedWindows, "take", counted)
    for seed in range(2):
        stream = _stream(seed, 1500)
        on = _run(q, stream, chunk)
        assert on[0] == oracle(q.spec, stream)
        with monkeypatch.context() as m:
            m.setattr(grid_closed.ClosedWindows, "take", lambda self, *a: False)  # every window by the sweep
            off = _run(q, stream, chunk)
        assert on == off, seed
    if chunk > 1:  # (one element per batch: a window comes out at the watermark, before a CTI closes it)
        assert taken[0] > 200  # the closed form valued many windows


def test_a_count_without_input_reads_whole_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``count`` with no input receives payloads (not numbers): valued by ``add`` per window, same output."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "hopping", "size": 20, "hop": 5},
                                     "group_by": ["g"], "udm": "count"}]}))
    stream = _stream(3, 1500)
    on = _run(q, stream, 500)
    assert on[0] == oracle(q.spec, stream)
    monkeypatch.setattr(grid_closed.ClosedWindows, "take", lambda self, *a: False)
    assert _run(q, stream, 500) == on
