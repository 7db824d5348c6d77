"""Cumulate windows valued a run at a time from the period's running state (`grid_prefix`, the UDA's
``compute_prefixes``), and the min/max state that only sorts its values when one leaves.

- the vector path against the kit's brute-force oracle and against the window-by-window sweep (the path
  turned off), over disordered streams with retraction chains and late events, in batches and element by
  element, for the UDAs with the running form (sum, count, min, max; int and float input) and without it
  (avg, median: the sweep as before), with and without groups;
- a snapshot taken between flushes resumes with the running state the vector path left;
- ``compute_prefixes`` of udm-stats against ``compute(add(state, prefix))`` from fresh and from non-empty
  states (the kit's ``batch_forms`` check runs it too);
- the min/max state against Python's ``min``/``max`` of the multiset it holds, over random add / remove /
  merge sequences.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from test_grid_columns import _run

from udm.host.engine import QueryRunner
from udm.host.engine.window import grid_prefix
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle, verify
from udm.host.testing.cht import cht


def _stream(seed: int, n: int = 800, floats: bool = False) -> list[Element]:
    """Point events about one a tick with 7 % up to 40 ticks late, retractions (full and shortening) of
    events, CTIs every ~60 events well behind the newest event (windows come out at the watermark first)."""
    rng = random.Random(seed)
    out: list[Element] = []
    for i in range(n):
        le = i - (rng.randrange(40) if rng.random() < 0.07 else 0)
        v: Any = rng.uniform(-50, 50) if floats else rng.randrange(-100, 100)
        re = le + (1 if rng.random() < 0.9 else rng.randint(2, 30))  # (some span panes: the sweep takes them)
        out.append(Insert(f"e{i}", le, re, {"g": f"k{rng.randrange(3)}", "v": v}))
        if rng.random() < 0.05:
            out.append(Retract(f"e{i}", le, re, le if rng.random() < 0.7 else le + 1))
        if i % 61 == 60:
            out.append(Cti(i - 45))
    return [*out, Cti(10**18)]


def _query(window: dict[str, Any], udm: str, grouped: bool) -> Any:
    step: dict[str, Any] = {"op": "window", "window": window, "udm": udm, "input": "v"}
    if grouped:
        step["group_by"] = ["g"]
    return bind(parse_query({"steps": [step]}))


def _same(got: Any, want: Any, floats: bool) -> None:
    """Equal CHTs; float sums up to rounding (the values enter in another order and grouping)."""
    if floats:
        v = verify(got, want, rel_tol=1e-9, abs_tol=1e-9)
        assert v.ok, v
    else:
        assert got == want


WINDOWS = [{"type": "cumulate", "size": 120, "step": 3}, {"type": "cumulate", "size": 60, "step": 6, "offset": 4},
           {"type": "cumulate", "size": 400, "step": 1, "offset": -7}]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("udm", ["sum", "count", "max", "min", "avg", "median"])
@pytest.mark.parametrize("chunk", [1, 400])
def test_runs_valued_at_once_equal_the_oracle_and_the_sweep(window: dict[str, Any], udm: str, chunk: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    taken = [0]
    real = grid_prefix.PrefixWindows.take

    def counted(self: Any, *a: Any) -> bool:
        got = real(self, *a)
        taken[0] += got
        return got

    monkeypatch.setattr(grid_prefix.PrefixWindows, "take", counted)
    for seed, floats, grouped in [(1, False, True), (2, True, False), (3, udm in ("sum", "max"), True)]:
        stream = _stream(seed, floats=floats)
        q = _query(window, udm, grouped)
        on = _run(q, stream, chunk)
        _same(on[0], oracle(q.spec, stream), floats)
        with monkeypatch.context() as m:
            m.setattr(grid_prefix.PrefixWindows, "take", lambda self, *a: False)  # window by window
            off = _run(q, stream, chunk)
        _same(on[0], off[0], floats)
        assert on[1:] == off[1:], (seed, floats, grouped)
    if udm in ("sum", "count", "max", "min"):
        assert taken[0] > 10  # the running form valued many runs
    else:
        assert taken[0] == 0  # (no running form: the sweep, as before)


@pytest.mark.parametrize("udm", ["sum", "max", "min"])
def test_a_snapshot_between_flushes_resumes_the_running_state(udm: str) -> None:
    q = _query({"type": "cumulate", "size": 200, "step": 2}, udm, True)
    stream = _stream(9, 1200)
    whole = _run(q, stream, 300)[0]
    assert _resumed(q, stream, 600, 300) == whole == oracle(q.spec, stream)


def _resumed(q: Any, stream: list[Element], cut: int, chunk: int, at_snapshot: Any = None) -> Any:
    """The CHT of ``stream`` in batches of ``chunk``, snapshotted after the first ``cut`` elements and
    resumed from the snapshot (``at_snapshot(runner)`` first looks at the runner snapshotted)."""
    first = QueryRunner(q)
    out: list[Any] = []
    for a in range(0, cut, chunk):
        out += first.process_batch(ElementBatch.from_elements(stream[a:a + chunk], list(range(a, a + chunk))))
    if at_snapshot is not None:
        at_snapshot(first)
    resumed = QueryRunner.restore(first.snapshot(), q)
    for a in range(cut, len(stream), chunk):
        part = stream[a:a + chunk]
        out += resumed.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
    out += resumed.finish()
    return cht(out)


def _stats(name: str) -> Any:
    import udm_stats

    return {c.__name__.lower(): c for c in udm_stats.ALL}[name]()


@pytest.mark.parametrize("name", ["sum", "count", "min", "max"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_compute_prefixes_is_compute_of_add_over_each_prefix(name: str, kind: str) -> None:
    u = _stats(name)
    rng = np.random.default_rng(4)
    for trial in range(30):
        n = int(rng.integers(0, 40))
        vals = rng.integers(-1000, 1000, n) if kind == "int" else rng.normal(0, 100, n)
        ends = np.sort(rng.integers(1 if trial % 2 else 0, n + 1, int(rng.integers(1, 8)))) if n else np.zeros(0, int)
        before = rng.integers(-50, 50, int(rng.integers(0, 5))).tolist()
        if trial % 3 == 0:
            before = [float(x) for x in before]
        state = u.add(u.initial_state(), before)
        if not before and (not len(ends) or ends[0] == 0):
            continue  # (a window without members has no value)
        snapshot = repr(u.compute(state)) if before else None
        got = u.compute_prefixes(state, vals, np.asarray(ends, dtype=np.int64))
        got = got.tolist() if isinstance(got, np.ndarray) else list(got)
        want = [u.compute(u.add(u.add(u.initial_state(), before), vals[:e].tolist())) for e in ends.tolist()]
        assert [type(x) for x in got] == [type(x) for x in want]
        assert np.allclose(got, want, rtol=1e-12, atol=1e-9), (trial, got, want)
        if before:
            assert repr(u.compute(state)) == snapshot  # (the state is left as it was)


@pytest.mark.parametrize("name", ["min", "max"])
def test_the_extreme_state_is_the_extreme_of_its_values(name: str) -> None:
    """A min/max state holds its extreme alone, whatever entered by ``add``, ``add_array`` or ``merge`` (no
    ``remove``: the engine folds again from the members it keeps what a retraction changes)."""
    u = _stats(name)
    pick = min if name == "min" else max
    rng = random.Random(11)
    for _ in range(200):
        state = u.initial_state()
        held: list[Any] = []
        for _ in range(rng.randint(1, 30)):
            if rng.random() < 0.75 or not held:
                delta = [rng.choice([rng.randint(-9, 9), float(rng.randint(-9, 9))]) for _ in range(rng.randint(1, 5))]
                if rng.random() < 0.3:
                    state = u.add_array(state, np.array([int(x) for x in delta], dtype=np.int64))
                    delta = [int(x) for x in delta]
                else:
                    state = u.add(state, delta)
                held += delta
            else:
                other = u.add(u.initial_state(), [3, -4.0])
                merged = u.merge(state, other)
                assert u.compute(merged) == pick([*held, 3, -4.0])
                assert u.compute(state) == pick(held)  # (merge left its arguments as they were)
            assert u.compute(state) == pick(held) and len(state) == 1
    assert not hasattr(u, "remove")


@pytest.mark.parametrize("udm", ["sum", "max", "min"])
def test_ints_among_floats_keep_their_kind(udm: str) -> None:
    """A run mixing ints and integral floats (``3`` and ``3.0`` are different output text) is not handed to
    the running form as a float column: ``sum`` gives the oracle's output exactly. (``min``/``max`` agree in
    value; which of two equal extremes ``3``/``3.0`` a window shows depends on how its members were batched,
    on main as here: a known gap between the engine and the oracle, not this path's.)"""
    rng = random.Random(21)
    stream: list[Element] = []
    for i in range(600):
        v: Any = rng.randrange(-20, 20)
        stream.append(Insert(f"e{i}", i, i + 1, {"g": "k", "v": float(v) if rng.random() < 0.5 else v}))
        if i % 50 == 49:
            stream.append(Cti(i - 10))
    stream.append(Cti(10**18))
    q = _query({"type": "cumulate", "size": 100, "step": 2}, udm, False)
    got, want = _run(q, stream, 200)[0], oracle(q.spec, stream)
    if udm == "sum":
        assert got == want
    else:
        v = verify(got, want, rel_tol=0.0, abs_tol=0.0)
        assert v.ok, v
