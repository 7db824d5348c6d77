"""Engine: the grid window's bulk in-order path — windows made in one loop per batch (`grid._bulk_add`)
and first emissions of a plain UDA's windows (`WindowStep._emit_first`) — gives the bytes the general
path gives (switches ``grid.BULK`` / ``base.FIRST_FAST`` off), and the oracle's CHT."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from test_engine_support import catalog_with, check_physical, gen_stream, runner, window_query

import udm.host.engine.batch as batch_driver
import udm.host.engine.window.base as base
import udm.host.engine.window.grid as grid
from udm.host.errors import ContractViolation
from udm.host.io.batch import ElementBatch
from udm.host.query.plan import bind
from udm.host.query.spec import parse_query
from udm.host.temporal.elements import Element, Insert, element_to_json
from udm.host.testing import cht, oracle
from udm.sdk import IncrementalUDA, udm

QUERIES = [
    window_query({"type": "tumbling", "size": 5}, "sum", input="v", group_by=["g"]),
    window_query({"type": "tumbling", "size": 3, "offset": 1}, "count", input="v", group_by=["g"]),
    # (an algebraic UDA over hopping windows runs on panes: only its emission takes the bulk path)
    window_query({"type": "hopping", "size": 10, "hop": 3}, "avg", input="v"),
    window_query({"type": "hopping", "size": 4, "hop": 6, "offset": 1}, "max", input="v", group_by=["g"]),
]


def _batched(q: dict, stream: list[Element], seed: int, on: bool, mp: pytest.MonkeyPatch, catalog: Any = None,
             ) -> tuple[list[str], list[Element]]:
    """The output as JSON lines, fed in random batch sizes (CTIs fall mid-batch), switches ``on``/off."""
    mp.setattr(grid, "BULK", on)
    mp.setattr(base, "FIRST_FAST", on)
    rng = random.Random(seed)
    r = runner(q, catalog)
    out: list[Element] = []
    k = 0
    while k < len(stream):
        m = rng.randrange(1, 120)
        part = stream[k:k + m]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(k + 1, k + 1 + len(part)))))
        k += m
    out += r.finish()
    return [json.dumps(element_to_json(e)) for e in out], out


@pytest.mark.parametrize("q", QUERIES, ids=["tumbling-sum", "offset-count", "hopping-avg", "gaps-max"])
def test_bulk_path_gives_the_general_paths_bytes_and_the_oracles_cht(q: dict, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    monkeypatch.setattr(batch_driver, "MIN_RUN", 2)  # vectorize even short stretches
    calls = {"bulk": 0, "first": 0}
    real_bulk, real_first = grid._bulk_add, base.WindowStep._emit_first

    def bulk(*a: Any) -> None:
        calls["bulk"] += 1
        real_bulk(*a)

    def first(self: Any, *a: Any) -> None:
        calls["first"] += 1
        real_first(self, *a)

    monkeypatch.setattr(grid, "_bulk_add", bulk)
    monkeypatch.setattr(base.WindowStep, "_emit_first", first)
    bq = bind(parse_query(q))
    for seed in range(25):
        rng = random.Random(seed)
        # mostly in order (the bulk path's case), sometimes retractions and disorder (batches that fall back)
        stream = gen_stream(rng, n=rng.randrange(20, 160), span=rng.choice([60, 200]), maxlen=4, p_inf=0.02,
                            p_retract=rng.choice([0, 0, 0.2]), p_cti=rng.choice([0.05, 0.2]),
                            disorder=rng.choice([0, 0, 4]), groups=3)
        on, out = _batched(q, stream, seed, True, monkeypatch)
        off, _ = _batched(q, stream, seed, False, monkeypatch)
        assert on == off, seed
        check_physical(out)
        assert cht(out) == oracle(bq, stream), seed
    # the paths under test were taken
    assert calls["first"] and (calls["bulk"] or q["steps"][0]["window"]["type"] == "hopping"), calls


@udm(name="bad_init_sum", version="1.0.0", algebraic=True)
class BadInit(IncrementalUDA):
    """A sum whose ``initial_state`` raises after the first window (a contract violation)."""

    made = 0

    def initial_state(self) -> int:
        BadInit.made += 1
        if BadInit.made > 2:
            raise RuntimeError("no more")
        return 0

    def add(self, state: int, delta: Sequence[int]) -> int:
        return state + sum(delta)

    def add_array(self, state: int, values: Any) -> int:
        return state + int(values.sum())

    def add_batch(self, states: list[int], values: Any, offsets: Any) -> list[int]:
        return [s + int(values[a:b].sum()) for s, a, b in zip(states, offsets[:-1], offsets[1:], strict=True)]

    def remove(self, state: int, delta: Sequence[int]) -> int:
        return state - sum(delta)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def compute(self, state: int) -> int:
        if state > 10_000:
            raise ValueError("too big")
        return state


@pytest.mark.parametrize("on", [True, False])
def test_a_raising_initial_state_or_compute_is_the_same_contract_violation(on: bool,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grid, "BULK", on)
    monkeypatch.setattr(base, "FIRST_FAST", on)
    cat = catalog_with(BadInit)
    q = window_query({"type": "tumbling", "size": 10}, "bad_init_sum", input="v", group_by=["g"])
    BadInit.made = 0
    stream = [Insert(f"e{i}", i, i + 1, {"v": 1, "g": i % 4}) for i in range(200)]
    with pytest.raises(ContractViolation, match="initial_state raised RuntimeError"):
        runner(q, cat).process_batch(ElementBatch.from_elements(stream, list(range(1, 201))))
    BadInit.made = -(10**6)
    big = [Insert(f"e{i}", i, i + 1, {"v": 5000, "g": 0}) for i in range(200)]
    r = runner(q, cat)
    with pytest.raises(ContractViolation, match=r"compute raised ValueError"):
        r.process_batch(ElementBatch.from_elements(big, list(range(1, 201))))
        r.finish()
