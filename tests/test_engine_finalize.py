"""``finalize {max_memory_time}`` (SEMANTICS §7, §10; seeds/003 §4.6) through `QueryRunner`.

A hand case worked out from the definition pins the effective CTI it sends on, the correction it refuses
and the unknown id of a refused insert's retraction. Random cases: finalize right after an input (the oracle
applies the same horizon to the physical stream, `StreamState(max_memory_time)`), and after a join, a union
and an lmerge with ``max_memory_time: "inf"`` and with a horizon wider than the stream's disorder (both
CHT-transparent): output CHT == graph oracle, §7 properties on every interleaving. A finalize in front of a
join bounds the join's state on inputs that send no CTI.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import cht, generate, lmerge_inputs, oracle, oracle_run
from udm.host.testing.engine_conformance import check_engine, runner_engine
from udm.host.testing.generator import generate_related, interleave
from udm.host.testing.properties import check_properties

ENGINE = runner_engine(QueryRunner)
CASES = 120
AB = {"a": {}, "b": {}}
KNOBS: list[dict[str, Any]] = [
    {"events": 7, "disorder": "slightly", "speculation": 0.3, "bad": 0.1},
    {"events": 9, "disorder": "out_of_order", "speculation": 0.5, "chain": 2, "cti": "eager"},
    {"events": 6, "disorder": "highly", "duration": "mixed", "speculation": 0.3},
    {"events": 8, "overlap": "high", "duplicates": 0.3, "speculation": 0.2, "cti": "lazy"},
]


def q(steps: list[dict[str, Any]], inputs: dict[str, Any] | None = None) -> BoundQuery:
    data: dict[str, Any] = {"steps": steps}
    if inputs is not None:
        data["inputs"] = inputs
    return bind(parse_query(data))


def test_hand_horizon() -> None:
    r = QueryRunner(q([{"op": "finalize", "max_memory_time": 10}]))
    got = [r.process(e) for e in [Insert("a", 1, 50, {}), Cti(2), Insert("c", 20, 30, {}),
                                  Retract("a", 1, 50, 40), Insert("late", 5, 60, {}), Retract("late", 5, 60, 55),
                                  Retract("a", 1, 40, 8), Retract("a", 1, 40, 25), Insert("d", 28, 29, {})]]
    assert got[0] == [Insert("o1", 1, 50, {}), Cti(-9)]  # m = 1: the horizon is 1 - 10
    assert got[1] == [Cti(2)]
    assert got[2] == [Insert("o2", 20, 30, {}), Cti(10)]  # m = 20
    assert got[3] == [Retract("o1", 1, 50, 40)]  # sync 40 >= 10: applied
    assert got[4] == [] and got[5] == []  # below the horizon, and then an unknown id
    assert got[6] == []  # sync 8 < 10: refused here, a stays [1, 40) downstream
    # the input itself applied that correction (its own CTI is 2), so a retraction naming [1, 40) does
    # not match its live event: the input refuses it (finalize is a step, not the input's validation)
    assert got[7] == []
    assert got[8] == [Insert("o4", 28, 29, {}), Cti(18)]
    reasons = [(d.line, d.reason, d.category) for d in r.dead_letters]
    assert [c for _, _, c in reasons] == ["cti_violation", "unknown_id", "cti_violation", "lifetime_mismatch"]
    assert "sync time 5 < CTI 10 (finalize horizon)" in reasons[0][1]
    assert reasons[0][1].startswith("step s0: ")


def test_inf_changes_nothing() -> None:
    for seed in range(40):
        els = generate(seed=seed, **KNOBS[seed % len(KNOBS)])
        out = QueryRunner(q([{"op": "finalize", "max_memory_time": "inf"}])).run_all(els)
        assert cht(out) == cht(els)


@pytest.mark.parametrize("mmt", [0, 2, 5, 20])
def test_finalize_on_an_input_random(mmt: int) -> None:
    bq = q([{"op": "finalize", "max_memory_time": mmt}])
    refused = 0
    for seed in range(CASES):
        els = generate(seed=seed, **{**KNOBS[seed % len(KNOBS)], "events": 12})
        rep = check_engine(ENGINE, bq, els, seed=seed, variants=1)
        assert rep.ok, rep.text()
        refused += len(oracle_run(bq, els).rejected) - len(oracle_run(q([{"op": "finalize"}]), els).rejected)
    if mmt < 20:
        assert refused > 0  # the horizon does refuse corrections in these streams


JOIN = [{"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "r_"}]
UNION = [{"id": "u", "op": "union", "from": ["a", "b"]}]


@pytest.mark.parametrize("mmt", ["inf", 1000])
def test_finalize_after_join_random(mmt: Any) -> None:
    _related(JOIN, mmt, 100)


@pytest.mark.parametrize("mmt", ["inf", 1000])
def test_finalize_after_union_random(mmt: Any) -> None:
    _related(UNION, mmt, 300)


@pytest.mark.parametrize("mmt", ["inf", 1000])
def test_finalize_after_lmerge_random(mmt: Any) -> None:
    for seed in range(CASES):
        rng = random.Random(f"finalize-lmerge:{seed}")
        base = generate(seed=seed, **{**KNOBS[seed % len(KNOBS)], "events": rng.randint(0, 12)})
        inputs = lmerge_inputs(base, rng.randint(2, 4), seed=seed, case="R4")
        merge = [{"id": "m", "op": "lmerge", "from": list(inputs)}]
        _check(merge, mmt, {n: {} for n in inputs}, inputs, seed)


def _related(steps: list[dict[str, Any]], mmt: Any, base: int) -> None:
    for seed in range(base, base + CASES):
        st = generate_related(["a", "b"], seed=seed, keys=3, only=1, **KNOBS[seed % len(KNOBS)])
        _check(steps, mmt, AB, st, seed)


def _check(steps: list[dict[str, Any]], mmt: Any, inputs: dict[str, Any], streams: dict[str, Any], seed: int
           ) -> None:
    """``inf``: the kit's check (CHT == oracle, §7 properties, several interleavings). A finite horizon after
    a multi-input step: the oracle cannot tell which corrections come too late (it knows the step's CHT, not
    its physical output), so the run must refuse none at this horizon (wider than the streams' disorder)
    and give the CHT of the ``inf`` query, with the §7 properties."""
    bq = q([*steps, {"op": "finalize", "max_memory_time": mmt}], inputs)
    if mmt == "inf":
        rep = check_engine(ENGINE, bq, streams, seed=seed, variants=1 if seed % 4 == 0 else 0,
                           interleavings=("sync", "random"))
        assert rep.ok, rep.text()
        return
    r = QueryRunner(bq)
    feed = interleave(streams, how="random", seed=seed)
    out = r.process_interleaved((n, None, el) for n, el in feed) + r.finish()
    assert not [d for d in r.dead_letters if "finalize horizon" in d.reason], seed
    assert cht(out) == oracle(q([*steps, {"op": "finalize"}], inputs), streams), seed
    assert check_properties([el for _, el in feed], out, finished=True) == [], seed


def test_hand_finalize_after_join_refuses_a_late_correction() -> None:
    # the join's output [5, 40) is shortened at sync 12 once the join's watermark is 30: with a horizon of
    # 10 the correction is older than 30 - 10 = 20 and is refused; the join output stays [5, 40)
    bq = q([{"id": "j", "op": "join", "from": ["a", "b"], "on": "k"},
            {"op": "finalize", "max_memory_time": 10}], AB)
    r = QueryRunner(bq)
    out = r.process_interleaved([
        ("a", 1, Insert("l", 5, 40, {"k": 1})), ("b", 1, Insert("r", 2, 50, {"k": 1, "v": 7})),
        ("a", 2, Insert("l2", 30, 31, {"k": 1})), ("a", 3, Retract("l", 5, 40, 12))]) + r.finish()
    assert cht(out).rows() == [(5, 40, '{"k":1,"v":7}'), (30, 31, '{"k":1,"v":7}')]
    assert [d.category for d in r.dead_letters] == ["cti_violation"]
    # the oracle cannot tell which corrections come too late after a join: it says so
    from udm.host.testing.oracle import OracleUndecidable

    with pytest.raises(OracleUndecidable):
        oracle(bq, {"a": [], "b": []})


def test_finalize_bounds_the_state_of_a_join_on_inputs_without_ctis() -> None:
    bq = q([{"id": "fa", "op": "finalize", "from": "a", "max_memory_time": 20},
            {"id": "fb", "op": "finalize", "from": "b", "max_memory_time": 20},
            {"op": "join", "from": ["fa", "fb"], "on": "k"}], AB)
    r = QueryRunner(bq)
    peak = 0
    for t in range(0, 5000, 5):
        r.process_interleaved([("a", t, Insert(f"a{t}", t, t + 3, {"k": t % 7})),
                               ("b", t, Insert(f"b{t}", t + 1, t + 4, {"k": t % 7}))])
        peak = max(peak, r.state_size()["held"])
    assert peak < 40
    plain = QueryRunner(q([{"op": "join", "from": ["a", "b"], "on": "k"}], AB))
    for t in range(0, 5000, 5):
        plain.process_interleaved([("a", t, Insert(f"a{t}", t, t + 3, {"k": t % 7})),
                                   ("b", t, Insert(f"b{t}", t + 1, t + 4, {"k": t % 7}))])
    assert plain.state_size()["held"] > 1000
