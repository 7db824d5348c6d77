"""The rows family's final windows (`udm.host.engine.window.rows_closed`): a row window that a flush releases
when every row it holds can no longer move (SEMANTICS §9), never emitted before, is valued at the flush's end
with the other groups' ones in one ``compute_slices`` call instead of by the sweep. It must be the sweep's
vector form: the same output CHT, dead letters and run statistics as window-by-window evaluation and the kit's
oracle, on generated streams (many groups, blocks of equal LEs whose ends still move at the CTI, late rows that
renumber emitted windows, full and partial retractions, CTIs inside batches, batches of one element and of a
thousand, ``slide`` and ``partial``), with the closed form really taking part."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_grid_columns import _run

from udm.host.engine import QueryRunner
from udm.host.engine.window import rows, rows_closed
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle


def _disordered(seed: int, n: int, kind: str, groups: int) -> list[Element]:
    """``groups`` groups; rows up to 30 ticks late (some behind a CTI: refused), runs of equal LEs, a few long
    events, full retractions and end changes (which reorder a block of equal LEs), CTIs that fall inside
    blocks; values int, float or both."""
    rng = random.Random(seed)
    out: list[Element] = []
    live: list[tuple[str, int, int]] = []
    cti = -1
    for i in range(n):
        t = i // 2  # (two rows per tick on average: blocks of equal LEs)
        le = t - (rng.randrange(30) if rng.random() < 0.15 else 0)
        re = le + (rng.randrange(2, 40) if rng.random() < 0.1 else 1)
        v: Any = rng.randrange(-50, 100)
        if kind == "float" or (kind == "mixed" and rng.random() < 0.5):
            v = v / 4
        eid = f"e{i}"
        out.append(Insert(eid, le, re, {"g": rng.randrange(groups), "v": v}))
        live.append((eid, le, re))
        if rng.random() < 0.04 and live:
            j = rng.randrange(max(0, len(live) - 20), len(live))
            eid, le0, re0 = live[j]
            rn = le0 if rng.random() < 0.5 else le0 + rng.randrange(1, 50)
            if rn != re0:
                out.append(Retract(eid, le0, re0, rn))
                if rn == le0:
                    live.pop(j)
                else:
                    live[j] = (eid, le0, rn)
        if rng.random() < 0.03:
            cti = max(cti, t - rng.randrange(25))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


def _count_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the windows the closed form writes."""
    written = [0]
    real = rows_closed.ClosedRows._write

    def counted(self: Any, out: Any, em: Any, groups: list[Any], *a: Any) -> None:
        written[0] += len(groups)
        real(self, out, em, groups, *a)

    monkeypatch.setattr(rows_closed.ClosedRows, "_write", counted)
    return written


def _closed_off(m: pytest.MonkeyPatch) -> None:
    """Every window by the sweep."""
    m.setattr(rows.RowsFamily, "_take_final", lambda self, g, d: None)


WINDOWS = [{"type": "rows", "n": 10}, {"type": "rows", "n": 6, "slide": 3},
           {"type": "rows", "n": 5, "slide": 2, "partial": True}, {"type": "rows", "n": 1},
           {"type": "rows", "n": 4, "slide": 7}, {"type": "rows", "n": 45, "slide": 1}]  # (the last: swept)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize(("udm", "kind"), [("count", "int"), ("sum", "int"), ("sum", "float"), ("avg", "mixed"),
                                           ("avg", "int"), ("max", "float")])  # (max: no batch form, swept)
def test_closed_rows_equal_the_sweep_and_the_oracle(window: dict, udm: str, kind: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Output CHT, dead letters and run statistics: the oracle's and the sweep's, whatever the batch cut."""
    spec = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v"}]}
    q = bind(parse_query(spec))
    written = _count_written(monkeypatch)
    for seed in range(2):
        stream = _disordered(seed, 900, kind, 4 if seed else 30)
        want = oracle(q.spec, stream)
        for chunk in (1, 137) if seed else (137, 1000):
            with monkeypatch.context() as m:
                _closed_off(m)
                off = _run(q, stream, chunk)
            on = _run(q, stream, chunk)
            assert on[0] == want, (seed, chunk)
            assert on == off, (seed, chunk)
    assert written[0] > 100  # the closed form valued many windows


@pytest.mark.parametrize("spec", [
    {"window": {"type": "rows", "n": 8, "slide": 2}, "udm": "count"},  # payloads, not numbers: ``add`` per window
    {"window": {"type": "rows", "n": 5}, "udm": "sum", "input": "v", "max_delay": 20},  # released before final
    {"window": {"type": "rows", "n": 5}, "udm": "avg", "input": "v", "max_memory_time": 15},  # refusals
    {"window": {"type": "rows", "n": 3}, "aggregates": [{"udm": "sum", "input": "v", "as": "s"},
                                                        {"udm": "count", "as": "c"}]},  # no batch form: swept
])
def test_closed_rows_other_shapes(spec: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    q = bind(parse_query({"steps": [{"op": "window", "group_by": ["g"], **spec}]}))
    stream = _disordered(5, 1500, "int", 7)
    on = _run(q, stream, 250)
    assert on[0] == oracle(q.spec, stream)
    _closed_off(monkeypatch)
    assert _run(q, stream, 250) == on


def test_window_lengths_and_routes() -> None:
    """A UDA with the sliding form ``compute_ranges`` has its windows valued as arrays whatever ``n`` (each row
    read once); one without (``max``) by the sweep (and still written as one block)."""
    def vector(window: dict, udm: str = "sum") -> tuple[bool, bool]:
        q = bind(parse_query({"steps": [{"op": "window", "window": window, "udm": udm, "input": "v"}]}))
        closed = next(op for op in QueryRunner(q).ops if hasattr(op, "family")).family.closed
        return closed.on, closed.vector

    span = rows_closed.ROW_SPAN
    assert vector({"type": "rows", "n": span}) == (True, True)
    assert vector({"type": "rows", "n": span + 1}, "avg") == (True, True)
    assert vector({"type": "rows", "n": 10_000}, "count") == (True, True)
    assert vector({"type": "rows", "n": 5}, "max") == (True, False)
