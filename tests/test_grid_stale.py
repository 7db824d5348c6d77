"""A retraction in a pane of a merge-only UDA (no ``remove``: ``max``, sketches, ``aggregates`` of them) leaves
the pane's partial `grid_panes.STALE`; it is folded again from the pane's values once, when next read
(`grid_panes.PaneFill.partial`), not once per retraction.

- the output equals the oracle's over disordered streams with retractions (deletions and shortened
  lifetimes, several per pane between two flushes), events spanning panes, CTIs inside batches, batches of
  one element and of a thousand, a snapshot restored half-way (stale panes in it);
- with batches of many elements a pane is folded again fewer times than retractions reach it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from batch_runs import run_in_batches
from test_engine_support import check_physical, cht

from udm.host.engine import QueryRunner
from udm.host.engine.window.grid_panes import STALE, Pane, PaneFill
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle

WINDOWS = [{"type": "tumbling", "size": 20}, {"type": "hopping", "size": 30, "hop": 10}]
STEPS: list[dict[str, Any]] = [
    {"udm": "max", "input": "v"},
    {"udm": "approx_distinct", "input": "v"},
    {"aggregates": [{"udm": "max", "input": "v", "as": "m"}, {"udm": "approx_distinct", "input": "v", "as": "d"},
                    {"udm": "min", "input": "v", "as": "lo"}]},
]


def _stream(seed: int, n: int = 1200) -> list[Element]:
    """Inserts in 3 groups, a few ticks apart, some late, some spanning panes; a quarter of them retracted a
    few elements later (deleted, or shortened), many in the same pane; CTIs every 60 inserts, 25 ticks behind
    the newest event."""
    rng = random.Random(seed)
    out: list[Element] = []
    pending: list[tuple[int, Insert]] = []
    t = 0
    for i in range(n):
        t += rng.randrange(0, 3)
        le = t - (rng.randrange(1, 15) if rng.random() < 0.1 else 0)
        re = le + (rng.randrange(1, 4) if rng.random() < 0.9 else rng.randrange(10, 40))
        ins = Insert(f"e{i}", le, re, {"g": rng.randrange(3), "v": rng.randrange(-30, 30)})
        out.append(ins)
        if rng.random() < 0.25:
            pending.append((i + rng.randrange(1, 8), ins))
        for due, e in [p for p in pending if p[0] <= i]:
            pending.remove((due, e))
            rn = e.le if e.re - e.le == 1 or rng.random() < 0.6 else rng.randrange(e.le + 1, e.re)
            out.append(Retract(e.id, e.le, e.re, rn))
        if i % 60 == 59:
            out.append(Cti(t - 25))
    return [*out, Cti(10**18)]


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the retractions that reach a pane's values and the folds of a stale partial."""
    seen = {"unfolds": 0, "refolds": 0}
    unfold, partial = PaneFill.unfold, PaneFill.partial

    def counted_unfold(self: PaneFill, p: Pane, val: Any) -> None:
        seen["unfolds"] += 1
        unfold(self, p, val)

    def counted_partial(self: PaneFill, p: Pane) -> Any:
        seen["refolds"] += p.partial is STALE
        return partial(self, p)

    monkeypatch.setattr(PaneFill, "unfold", counted_unfold)
    monkeypatch.setattr(PaneFill, "partial", counted_partial)
    return seen


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("step", STEPS)
def test_stale_panes_equal_the_oracle(window: dict, step: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    q = bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], **step}]}))
    assert QueryRunner(q).ops[0].sweep_kind == "merge"
    seen = _counting(monkeypatch)
    for seed in range(2):
        stream = _stream(seed)
        want = oracle(q.spec, stream)
        for chunk in (1, 1000):
            got = run_in_batches(q, stream, chunk).out
            check_physical(got)
            assert cht(got) == want, (seed, chunk)
        assert run_in_batches(q, stream, 100, cuts={len(stream) // 2}).table == want, seed
    assert 0 < seen["refolds"] < seen["unfolds"]


def test_a_stale_pane_is_folded_once_per_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many retractions in few panes within one batch: far fewer folds than retractions."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 1000},
                                     "group_by": ["g"], "udm": "approx_distinct", "input": "v"}]}))
    seen = _counting(monkeypatch)
    rng = random.Random(3)
    ins = [Insert(f"e{i}", i // 4, i // 4 + 1, {"g": i % 2, "v": rng.randrange(500)}) for i in range(2000)]
    stream: list[Element] = [*ins, *(Retract(e.id, e.le, e.re, e.le) for e in ins[::3]), Cti(10**18)]
    got = run_in_batches(q, stream, len(stream)).out
    assert cht(got) == oracle(q.spec, stream)
    assert seen["unfolds"] == len(ins[::3]) and seen["refolds"] <= 2
