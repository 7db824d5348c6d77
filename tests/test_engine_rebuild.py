"""Engine: an algebraic UDA without ``remove`` (a state that cannot forget, like a sketch) in every window
family. The engine never calls ``remove``; when members leave a window it rebuilds the window's state
from the members that remain (the window step keeps the members' values beside the state). Checked against hand-computed
values and the kit's oracle, with retractions, pane evaluation, the vectorized insert, ``aggregates`` and
snapshot/restore."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from test_engine_support import catalog_with, check_physical, gen_stream, rows, run, runner, table, window_query

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import oracle, verify
from udm.sdk import INF, IncrementalUDA, udm

CALLS: list[tuple[str, Any]] = []


@udm(name="set_distinct", version="1.0.0", algebraic=True, input_type="int | str", output_type="int")
class SetDistinct(IncrementalUDA):
    """Exact distinct count over a frozenset state, with no remove; records what the engine calls."""

    def initial_state(self) -> frozenset[Any]:
        return frozenset()

    def add(self, state: frozenset[Any], delta: Sequence[Any]) -> frozenset[Any]:
        CALLS.append(("add", sorted(delta, key=repr)))
        return state | frozenset(delta)

    def add_array(self, state: frozenset[Any], values: np.ndarray) -> frozenset[Any]:
        CALLS.append(("add_array", sorted(values.tolist())))
        return state | frozenset(values.tolist())

    def merge(self, a: frozenset[Any], b: frozenset[Any]) -> frozenset[Any]:
        CALLS.append(("merge", None))
        return a | b

    def compute(self, state: frozenset[Any]) -> int:
        return len(state)


CAT = catalog_with(SetDistinct)
TUMBLE = {"type": "tumbling", "size": 10}


def test_a_retraction_rebuilds_the_window_from_the_remaining_members() -> None:
    assert not hasattr(SetDistinct, "remove")
    stream = [Insert("a", 1, 2, {"v": "x"}), Insert("b", 2, 3, {"v": "y"}), Insert("c", 3, 4, {"v": "x"}),
              Insert("d", 12, 13, {"v": "z"}), Cti(2), Retract("b", 2, 3, 2), Retract("c", 3, 4, 3)]
    CALLS.clear()
    out, _ = run(window_query(TUMBLE, "set_distinct", input="v"), stream, CAT, mode="each")
    check_physical(out)
    # [0,10): {x, y} then y leaves -> {x} (c's "x" leaving still leaves a's "x"); [10,20): {z}
    assert table(out) == rows((0, 10, {"set_distinct": 1}), (10, 20, {"set_distinct": 1}))
    assert not any(k == "remove" for k, _ in CALLS)
    assert ("add", ["x"]) in CALLS[-3:]  # the rebuild after the retractions: the one remaining member


def test_hand_computed_panes_merge_rebuilt_pane_states() -> None:
    hop = {"type": "hopping", "size": 6, "hop": 2}  # panes of 2 ticks, 3 per window
    stream = [Insert("a", 0, 1, {"v": 1}), Insert("b", 2, 3, {"v": 2}), Insert("c", 3, 4, {"v": 1}),
              Insert("d", 4, 5, {"v": 3}), Retract("b", 2, 3, 2)]
    out, r = run(window_query(hop, "set_distinct", input="v"), stream, CAT)
    assert r.ops[0].sweep_kind == "merge"  # pane states merged, never asked to forget
    # members after the retraction: a@0 (1), c@3 (1), d@4 (3)
    assert table(out) == rows((-4, 2, {"set_distinct": 1}), (-2, 4, {"set_distinct": 1}),
                              (0, 6, {"set_distinct": 2}), (2, 8, {"set_distinct": 2}), (4, 10, {"set_distinct": 1}))


WINDOWS = [TUMBLE, {"type": "hopping", "size": 6, "hop": 4}, {"type": "hopping", "size": 10, "hop": 3},
           {"type": "snapshot"}, {"type": "session", "gap": 3}, {"type": "rows", "n": 3, "slide": 2},
           {"type": "rows", "n": 6, "slide": 3}, {"type": "count_by_start", "n": 2},
           {"type": "count_by_end", "n": 3, "hop": 2}]


@pytest.mark.parametrize("win", WINDOWS, ids=lambda w: "-".join(str(v) for v in w.values()))
def test_every_window_family_equals_the_oracle_with_retractions(win: dict[str, Any]) -> None:
    CALLS.clear()
    for seed in range(12):
        rng = random.Random(seed)
        q = window_query(win, "set_distinct", input="v", **({"group_by": ["g"]} if seed % 2 else {}))
        stream = gen_stream(rng, n=40, maxlen=rng.choice([1, 3, 15]), p_inf=0.05, p_retract=0.4, values=6)
        out, _ = run(q, stream, CAT, mode="each" if seed % 3 else "many")
        check_physical(out)
        verdict = verify(out, oracle(bind(parse_query(q), CAT), stream), rel_tol=0.0, abs_tol=0.0)
        assert verdict.ok, f"seed {seed}: {verdict.diff}"
    assert not any(k == "remove" for k, _ in CALLS)


def test_aggregates_mix_a_rebuilt_uda_with_one_that_removes() -> None:
    q = {"steps": [{"op": "window", "window": {"type": "hopping", "size": 8, "hop": 4}, "group_by": ["g"],
                    "aggregates": [{"udm": "set_distinct", "input": "v", "as": "d"},
                                   {"udm": "count", "as": "n"}, {"udm": "sum", "input": "v", "as": "s"}]}]}
    for seed in range(8):
        stream = gen_stream(random.Random(seed), n=40, p_retract=0.4)
        out, _ = run(q, stream, CAT, mode="each" if seed % 2 else "many")
        check_physical(out)
        verdict = verify(out, oracle(bind(parse_query(q), CAT), stream), rel_tol=0.0, abs_tol=0.0)
        assert verdict.ok, f"seed {seed}: {verdict.diff}"


@pytest.mark.parametrize("win", [{"type": "tumbling", "size": 100}, {"type": "hopping", "size": 100, "hop": 50}],
                         ids=["tumbling", "panes"])
def test_the_vectorized_insert_keeps_what_a_later_retraction_needs(win: dict[str, Any]) -> None:
    """A batch of in-order numeric inserts goes through ``add_array``; a retraction afterwards still
    rebuilds the windows it touches."""
    n = 600
    inserts: list[Any] = [Insert(f"e{i}", i, i + 1, {"v": i % 7}) for i in range(n)]
    retracts: list[Any] = [Retract(f"e{i}", i, i + 1, i) for i in range(0, n, 7)]  # every member with v 0
    q = window_query(win, "set_distinct", input="v")
    CALLS.clear()
    r = runner(q, CAT)
    out = r.process_batch(ElementBatch.from_elements(inserts, list(range(1, n + 1))))
    out += r.process_batch(ElementBatch.from_elements(retracts, list(range(n + 1, n + 1 + len(retracts)))))
    out += r.finish()
    assert any(k == "add_array" for k, _ in CALLS)
    check_physical(out)
    verdict = verify(out, oracle(bind(parse_query(q), CAT), inserts + retracts), rel_tol=0.0, abs_tol=0.0)
    assert verdict.ok, verdict.diff
    assert {p["set_distinct"] for _, _, p in table(out)} == {6}


def test_snapshot_and_restore_carry_what_a_later_retraction_needs() -> None:
    q = window_query({"type": "hopping", "size": 12, "hop": 4}, "set_distinct", input="v", group_by=["g"])
    stream = gen_stream(random.Random(3), n=60, p_retract=0.4, p_cti=0.05)
    whole, _ = run(q, stream, CAT)
    r = runner(q, CAT)
    out = r.process_many(stream[:30], range(1, 31))
    snap = r.snapshot()
    again = QueryRunner.restore(snap, bind(parse_query(q), CAT))
    out += again.process_many(stream[30:], range(31, len(stream) + 1)) + again.finish()
    assert table(out) == table(whole)
    assert out[-1] == Cti(INF)
