"""The shared rows store's output-CTI bound (`udm.host.engine.window.rows_shared_cti.StoreCti.bound`) where it
leaves groups to the per-group rule: a group in the store holding a block of equal LEs with a row whose end is
still open at the CTI (``LE < c <= RE``) — an end change can reorder that block, so the output CTI must stay at
the first LE of the earliest window holding part of it (semantics-notes 26, `RowsCleanup._contribution`).

The output CTIs of a run with the store must be those of the same run with every group on its own (the
per-group route), and the output (CHT, dead letters, statistics) the oracle's and physically valid
(`check_physical`: no output before an output CTI it already passed), on streams made of such blocks, with end
changes of the open rows arriving later (they send the group out of the store and change the windows the bound
held back)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from test_engine_support import check_physical
from test_rows_shared import _store_off

from udm.host.engine import QueryRunner
from udm.host.engine.window import rows_shared, store_runs
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle
from udm.host.testing.cht import cht


def _open_ties(seed: int, ticks: int, groups: int) -> list[Element]:
    """Every tick, each group gets 0-3 rows at one LE (a block of equal LEs, ordered by ends and values);
    a row in five ends 2-8 ticks later, so it is open at the CTI that follows (the CTI is the current tick
    most of the time: the block just written is behind it, its long rows still open); now and then such a row's
    end changes afterwards (before it is passed), reordering its block."""
    rng = random.Random(seed)
    out: list[Element] = []
    open_rows: list[tuple[str, int, int, int]] = []  # (id, le, re, group)
    n = 0
    cti = -1
    for t in range(ticks):
        for g in range(groups):
            for _ in range(rng.choice((0, 1, 2, 2, 3))):
                re = t + (rng.randrange(2, 9) if rng.random() < 0.2 else 1)
                eid = f"e{n}"
                n += 1
                out.append(Insert(eid, t, re, {"g": g, "v": rng.randrange(-5, 9)}))
                if re > t + 1:
                    open_rows.append((eid, t, re, g))
        if rng.random() < 0.5:
            cti = max(cti, t - (1 if rng.random() < 0.3 else 0))
            out.append(Cti(cti))
        if open_rows and rng.random() < 0.1:  # an end change of a row still open at the CTI
            j = rng.randrange(len(open_rows))
            eid, le, re, _g = open_rows.pop(j)
            if re > cti + 1:
                new = max(cti + 1, le + 1) + rng.randrange(0, 4)
                if new != re:
                    out.append(Retract(eid, le, re, new))
        open_rows = [r for r in open_rows if r[2] > cti + 1]
    return [*out, Cti(10**18)]


def _ctis(q: Any, stream: list[Element], chunk: int) -> tuple[list[int], Any]:
    """The output CTIs in order, and (CHT, dead letters, windows emitted) of a run in batches of ``chunk``."""
    r = QueryRunner(q)
    out: list[Any] = []
    for a in range(0, len(stream), chunk):
        part = stream[a:a + chunk]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
    out += r.finish()
    check_physical(out)
    return [el.t for el in out if isinstance(el, Cti)], (cht(out), [(d.line, d.reason) for d in r.dead_letters],
                                                         r.stats.windows_emitted)


@pytest.mark.parametrize("window", [{"type": "rows", "n": 3}, {"type": "rows", "n": 5, "slide": 2},
                                    {"type": "rows", "n": 4, "slide": 3, "partial": True}])
@pytest.mark.parametrize(("seed", "few"), [(0, store_runs.FEW), (1, store_runs.FEW), (2, 0)])
def test_bound_leaves_open_ties_to_the_per_group_rule(window: dict, seed: int, few: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """(``few = 0``: the runs searched and copied by the vectorised route, as with many groups.)"""
    monkeypatch.setattr(store_runs, "FEW", few)
    q = bind(parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "sum",
                                     "input": "v"}]}))
    stream = _open_ties(seed, 400, 5)
    rest = [0]
    real = rows_shared.RowStore.bound

    def counted(self: Any, fam: Any, c: int) -> Any:
        b, left = real(self, fam, c)
        rest[0] += len(left)
        return b, left

    want = oracle(q.spec, stream)
    for chunk in (60, 250):
        with monkeypatch.context() as m:
            m.setattr(rows_shared.RowStore, "bound", counted)
            ctis, on = _ctis(q, stream, chunk)
        assert on[0] == want, chunk
        with monkeypatch.context() as m:
            _store_off(m)
            assert _ctis(q, stream, chunk) == (ctis, on), chunk
    assert rest[0] > 20  # (the store really left groups to the per-group rule)


def test_snapshot_without_dur_restores_it() -> None:
    """A store pickled before ``dur`` existed gets the longest lifetime of its rows back on restore (the rules
    at a CTI look for open rows only that far back)."""
    s = rows_shared.RowStore(True)
    s.L = np.array([0, 3, 4, 9], dtype=np.int64)
    s.R = np.array([1, 10, 5, 10], dtype=np.int64)
    state = s.__getstate__()
    del state["dur"]
    t = rows_shared.RowStore.__new__(rows_shared.RowStore)
    t.__setstate__(state)
    assert t.dur == max(r - le for le, r in zip(s.L.tolist(), s.R.tolist(), strict=True))
