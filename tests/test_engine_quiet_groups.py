"""Row and session windows visit only the groups a CTI can change (issue 13: per-CTI work no longer grows
with the number of keys). The output — elements, order and output CTIs — must be the one the full scan
over every group gives (rows: the step with the bookkeeping switched off), and the kit's oracle's CHT
(both families), over many-key disordered streams with retractions."""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.engine.window.rows import RowsFamily
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import oracle
from udm.host.testing.cht import cht
from udm.sdk import INF


def _stream(seed: int, n: int = 1500, keys: int = 40) -> list[Any]:
    """Hot and cold keys, LEs up to 8 ticks out of order, some ends shortened, a CTI every 25 elements
    lagging far enough that nothing is late."""
    rng = random.Random(seed)
    out: list[Any] = []
    live: dict[str, tuple[int, int]] = {}
    for i in range(n):
        key = rng.randrange(3) if rng.random() < 0.5 else rng.randrange(keys)
        le = max(0, i - rng.randrange(9))
        re = le + 1 + rng.randrange(4)
        out.append(Insert(f"e{i}", le, re, {"k": key, "v": rng.randrange(100)}))
        live[f"e{i}"] = (le, re)
        if rng.random() < 0.08 and i > 5:
            old = f"e{i - 1 - rng.randrange(4)}"
            if old in live:
                a, b = live.pop(old)
                if a >= i - 12:
                    out.append(Retract(old, a, b, a + rng.randrange(b - a)))
        if i % 25 == 24:
            out.append(Cti(i - 12))
    return out


def _run(query: dict, stream: list[Any]) -> list[Any]:
    """Fed in batches that each end at a CTI (a batch is flushed once, at its end)."""
    r = QueryRunner(bind(parse_query(query)))
    out: list[Any] = []
    chunk: list[Any] = []
    for el in stream:
        chunk.append(el)
        if isinstance(el, Cti):
            out += r.process_many(chunk)
            chunk = []
    out += r.process_many(chunk)
    return out + r.finish()


def _cht(out: list[Any]) -> list[tuple]:
    return sorted(cht(out).elements())


def _query(window: dict) -> dict:
    return {"steps": [{"op": "window", "window": window, "group_by": ["k"], "udm": "sum", "input": "v", "as": "s"}]}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("window", [{"type": "rows", "n": 5}, {"type": "rows", "n": 4, "slide": 2, "partial": True}])
def test_rows_output_equals_the_full_scan_and_the_oracle(seed: int, window: dict, monkeypatch: Any) -> None:
    q = _query(window)
    stream = _stream(seed)
    fast = _run(q, stream)
    monkeypatch.setattr(RowsFamily, "tracks_settled", False)
    full = _run(q, stream)
    assert fast == full  # same elements, same order, same output CTIs
    assert sum(isinstance(e, Cti) for e in fast) > 5  # the output CTI does advance
    assert _cht(fast) == sorted(oracle(bind(parse_query(q)), stream).elements())


@pytest.mark.parametrize("seed", range(4))
def test_session_output_equals_the_oracle_and_its_ctis_advance(seed: int) -> None:
    q = _query({"type": "session", "gap": 3})
    stream = _stream(seed)
    out = _run(q, stream)
    assert _cht(out) == sorted(oracle(bind(parse_query(q)), stream).elements())
    ctis = [e.t for e in out if isinstance(e, Cti)]
    assert ctis == sorted(ctis) and len(ctis) > 20


@pytest.mark.parametrize("window", [{"type": "rows", "n": 3}, {"type": "session", "gap": 2}])
def test_bookkeeping_stays_bounded_while_one_group_holds_the_output_cti(window: dict) -> None:
    """Group 0's one event holds the output CTI (rows: the window of its third row will hold it; session:
    it never ends), while the other keys' groups open and settle at every CTI. The per-CTI bookkeeping
    must not pile up their old entries: the engine's snapshot stays the same size."""
    r = QueryRunner(bind(parse_query(_query(window))))
    r.process(Insert("held", 0, 1 if window["type"] == "rows" else INF, {"k": 0, "v": 1}))
    sizes = []
    for i in range(1, 1201):
        t = 10 * i
        r.process_many([Insert(f"e{i}-{j}", t + j, t + j + 1, {"k": 1 + (i * 7 + j) % 50, "v": j}) for j in range(3)]
                       + [Cti(t + 5)])
        if i % 400 == 0:
            sizes.append(len(r.snapshot()))
    assert sizes[-1] < 1.2 * sizes[0], sizes


def _each(query: dict, stream: list[Any]) -> list[Any]:
    """Fed one element per call (a flush per element)."""
    r = QueryRunner(bind(parse_query(query)))
    out: list[Any] = []
    for el in stream:
        out += r.process(el)
    return out + r.finish()


@pytest.mark.parametrize("seed", range(3))
def test_rows_one_element_per_call_equals_the_full_scan(seed: int, monkeypatch: Any) -> None:
    """A flush per element: the output CTI from the groups touched since the last one (the others' bounds
    kept from it) is the one the full scan over every group gives."""
    q = _query({"type": "rows", "n": 4, "slide": 2})
    stream = _stream(seed, n=600)
    fast = _each(q, stream)
    monkeypatch.setattr(RowsFamily, "tracks_settled", False)
    full = _each(q, stream)
    assert fast == full
    assert _cht(fast) == sorted(oracle(bind(parse_query(q)), stream).elements())


def test_a_flush_between_ctis_bounds_only_the_groups_it_touched(monkeypatch: Any) -> None:
    """One element per call over 200 keys whose rows can all still move (ends past the CTI): each flush
    works out the output CTI from the one group it touched, not from every group (q6 one element per call
    was 27x below batched, in `bound`)."""
    calls = [0]
    real = RowsFamily._contribution

    def counted(self: RowsFamily, d: Any, c: int) -> int:
        calls[0] += 1
        return real(self, d, c)

    monkeypatch.setattr(RowsFamily, "_contribution", counted)
    r = QueryRunner(bind(parse_query(_query({"type": "rows", "n": 3}))))
    r.process_many([Insert(f"a{k}", 0, 1000, {"k": k, "v": 1}) for k in range(200)] + [Cti(1)])
    calls[0] = 0
    for i in range(400):
        r.process(Insert(f"e{i}", 2 + i, 1000, {"k": i % 200, "v": i}))
    assert calls[0] <= 3 * 400, calls[0]
