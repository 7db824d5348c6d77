"""Engine: the vectorized fast path of `QueryRunner.process_batch` — picked automatically, falls back row by
row, and leaves exactly the state and output the general path gives."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from test_engine_support import catalog_with, check_physical, cht, gen_stream, run, runner, window_query

import udm.host.engine.batch as batch_driver
import udm.host.engine.window.grid as grid
from udm.host.io.batch import ElementBatch
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.sdk import IncrementalUDA, udm


def struct_batch(elements: list[Element], lines: Sequence[int] | None = None) -> ElementBatch:
    """A batch whose payload column is a struct (what the fast JSON reader produces)."""
    n = len(elements)
    kind, ids, le, re, rn, t, pl = [], [], [], [], [], [], []
    for e in elements:
        if isinstance(e, Insert):
            kind.append("insert"), ids.append(e.id), le.append(e.le), re.append(e.re), rn.append(None)
            t.append(None), pl.append(e.payload)
        elif isinstance(e, Retract):
            kind.append("retract"), ids.append(e.id), le.append(e.le), re.append(e.re), rn.append(e.re_new)
            t.append(None), pl.append(None)
        else:
            assert isinstance(e, Cti)
            kind.append("cti"), ids.append(None), le.append(None), re.append(None), rn.append(None)
            t.append(e.t), pl.append(None)
    table = pa.table({
        "kind": pa.array(kind, pa.string()), "id": pa.array(ids, pa.string()), "le": pa.array(le, pa.int64()),
        "re": pa.array(re, pa.int64()), "re_new": pa.array(rn, pa.int64()), "t": pa.array(t, pa.int64()),
        "payload": pa.array(pl), "line": pa.array(list(lines) if lines is not None else range(1, n + 1), pa.int64()),
        "error": pa.nulls(n, pa.string()), "raw": pa.nulls(n, pa.string()),
    })
    batch = ElementBatch.from_table(table)
    assert batch.payload_is_struct or not any(isinstance(e, Insert) for e in elements)
    return batch


def by_batches(q: dict, stream: list[Element], rng: random.Random, make: Any = ElementBatch.from_elements,
               **kw: Any) -> tuple[list[Element], Any]:
    r = runner(q, **kw)
    out: list[Element] = []
    k = 0
    while k < len(stream):
        m = rng.randrange(1, 80)
        part = stream[k:k + m]
        out += r.process_batch(make(part, list(range(k + 1, k + 1 + len(part)))))
        k += m
    return out + r.finish(), r


@pytest.fixture()
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_driver, "MIN_RUN", 2)  # vectorize even short stretches in these small tests


QUERIES = [
    window_query({"type": "tumbling", "size": 5}, "sum", input="v", group_by=["g"]),
    window_query({"type": "hopping", "size": 10, "hop": 3}, "avg", input="v"),
    window_query({"type": "hopping", "size": 4, "hop": 6, "offset": 1}, "max", input="v", group_by=["g"]),
    window_query({"type": "tumbling", "size": 7, "offset": 2}, "median", input="v", group_by=["g"]),
    window_query({"type": "snapshot"}, "count"),  # not eligible: general path from columns
]


@pytest.mark.usefixtures("small_runs")
@pytest.mark.parametrize("q", QUERIES, ids=["tumbling", "hopping", "gaps", "median", "snapshot"])
@pytest.mark.parametrize("make", [ElementBatch.from_elements, struct_batch], ids=["text", "struct"])
def test_batches_equal_the_general_path(q: dict, make: Any) -> None:
    for seed in range(30):
        rng = random.Random(seed)
        stream = gen_stream(rng, n=rng.randrange(1, 70), p_inf=0.04, p_retract=rng.choice([0, 0.2, 0.5]),
                            p_cti=rng.choice([0.05, 0.3]))
        policy = rng.choice(["dead_letter", "adjust"])
        if make is ElementBatch.from_elements and seed % 2:  # text batches can carry anything, even bad rows
            bad = [Insert("nog", 3, 4, {"v": 1}), Retract("zz", 1, 2, 1), Insert("e0", 9, 8, {})]
            stream = [*stream[:5], *bad, *stream[5:]]
        general, r1 = run(q, stream, on_violation=policy)
        batched, r2 = by_batches(q, stream, rng, make, on_violation=policy)
        assert cht(batched) == cht(general), seed
        check_physical(batched)
        assert [(d.line, d.reason) for d in r2.dead_letters] == [(d.line, d.reason) for d in r1.dead_letters]
        assert (r2.stats.elements_in, r2.stats.dead_lettered, r2.stats.truncated_at) == \
            (r1.stats.elements_in, r1.stats.dead_lettered, r1.stats.truncated_at)


def test_the_fast_path_is_taken_for_in_order_inserts(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    real = grid.grid_vinsert
    monkeypatch.setattr(grid, "grid_vinsert", lambda *a: taken.append(len(r := real(*a))) or r)
    stream: list[Element] = []
    for i in range(2000):
        stream.append(Insert(f"e{i}", i, i + 2, {"g": f"s{i % 4}", "v": i % 100}))
        if i % 100 == 99:
            stream.append(Cti(i))
    q = window_query({"type": "tumbling", "size": 50}, "avg", input="v", group_by=["g"])
    r = runner(q)
    out = r.process_batch(struct_batch(stream[:1000])) + r.process_batch(struct_batch(stream[1000:])) + r.finish()
    # every insert vectorized (CTIs replayed in order) but the last of a batch whose lifetime reaches past
    # the frontier window (it must wait in the spill: general path)
    assert sum(taken) >= 1998
    general, _ = run(q, stream)
    assert cht(out) == cht(general)
    assert r.state_size() == {"events": 0, "windows": 0, "groups": 0}


def test_fallback_when_input_stops_qualifying() -> None:
    q = window_query({"type": "tumbling", "size": 10}, "sum", input="v")
    first = [Insert(f"e{i}", i, i + 3, {"v": 1}) for i in range(100)]
    second = [Retract("e97", 97, 100, 98),  # names an event of the previous (vectorized) batch
              Insert("late", 50, 60, {"v": 5}),  # disorder, still valid (no CTI)
              Insert("e5", 1, 2, {"v": 7}),  # duplicate live id: dead-lettered
              Insert("x", 200, 201, {"v": 1}), Retract("x", 200, 201, 200),  # chain inside the batch
              *[Insert(f"f{i}", 100 + i, 101 + i, {"v": 2}) for i in range(100)]]
    r = runner(q)
    out = r.process_batch(struct_batch(first)) + r.process_batch(struct_batch(second, range(101, 101 + len(second))))
    out += r.finish()
    general, g = run(q, first + second)
    assert cht(out) == cht(general)
    assert [d.line for d in r.dead_letters] == [d.line for d in g.dead_letters] == [103]


HOOK: list[Any] = []


@udm(name="vsum", version="1.0.0", algebraic=True)
class VSum(IncrementalUDA):
    """Sum with the optional vectorized hook."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[int]) -> int:
        return state + sum(delta)

    def add_array(self, state: int, values: np.ndarray) -> int:
        HOOK.append(values)
        return state + int(values.sum())

    def remove(self, state: int, delta: Sequence[int]) -> int:
        return state - sum(delta)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def compute(self, state: int) -> int:
        return state


def test_the_optional_add_array_hook_gets_numpy_slices() -> None:
    cat = catalog_with(VSum)
    HOOK.clear()
    stream = [Insert(f"e{i}", i, i + 1, {"v": i}) for i in range(300)]
    for win in ({"type": "tumbling", "size": 100}, {"type": "hopping", "size": 100, "hop": 50}):
        q = window_query(win, "vsum", input="v")
        r = runner(q, cat)
        out = r.process_batch(struct_batch(stream)) + r.finish()
        assert HOOK and all(isinstance(a, np.ndarray) and a.dtype == np.int64 for a in HOOK)
        assert cht(out) == cht(run(q, stream, cat)[0])
        HOOK.clear()


def test_first_party_add_array_equals_add() -> None:
    from udm_stats.aggregates import Avg, Count, Max, Min, Sum, Variance

    rng = np.random.default_rng(0)
    for arr in (rng.integers(-50, 50, 40), rng.integers(0, 10, 1), np.round(rng.normal(size=30), 3)):
        for cls in (Count, Sum, Avg, Min, Max, Variance):
            u = cls()
            a = u.compute(u.add_array(u.add(u.initial_state(), [1, 2]), arr))
            b = u.compute(u.add(u.add(u.initial_state(), [1, 2]), arr.tolist()))
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12), cls.__name__
            assert type(a) is type(b), cls.__name__


def test_rows_after_an_end_of_input_cti_in_the_same_batch_are_refused(small_runs: None) -> None:
    q = window_query({"type": "tumbling", "size": 10}, "sum", input="v")
    stream: list[Element] = [Insert(f"a{i}", i, i + 1, {"v": 1}) for i in range(5)]
    stream += [Cti(2**63 - 1)] + [Insert(f"b{i}", 20 + i, 21 + i, {"v": 1}) for i in range(5)]
    r = runner(q)
    out = r.process_batch(struct_batch(stream))
    assert cht(out) == cht(run(q, stream[:6])[0])
    assert [d.line for d in r.dead_letters] == [7, 8, 9, 10, 11]


@pytest.mark.parametrize("udm_name", ["median", "sum"])
def test_a_batch_all_in_gaps_between_hopping_windows(udm_name: str) -> None:
    """hop > size leaves gaps: a vectorized batch whose events all fall in them makes no (group, window)
    pair (it used to raise IndexError); a later event in a window still finds them gone from every window."""
    from udm.host.query.plan import bind
    from udm.host.query.spec import parse_query
    from udm.host.testing import assert_equivalent, oracle

    spec = parse_query({"steps": [{"op": "window", "window": {"type": "hopping", "size": 2, "hop": 10},
                                   "group_by": ["g"], "udm": udm_name, "input": "v"}]})
    gaps = [Insert(f"e{i}", 10 * i + 4, 10 * i + 6, {"g": "xy"[i % 2], "v": i}) for i in range(60)]
    stream: list[Element] = [*gaps, Insert("in", 600, 601, {"g": "x", "v": 7}), Cti(10**6)]
    from udm.host.engine import QueryRunner

    r = QueryRunner(bind(spec))
    out = r.process_batch(struct_batch(gaps)) + r.process_batch(struct_batch(stream[60:], range(61, 63)))
    out += r.finish()
    assert_equivalent(out, oracle(spec, {"main": stream}))
    assert [el.payload for el in out if isinstance(el, Insert)] == [{"g": "x", udm_name: 7}]
