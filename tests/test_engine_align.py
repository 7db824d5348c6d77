"""``align {max_delay, max_wait?}`` (SEMANTICS §7, §10; seeds/003 §4.5) through `QueryRunner`.

Hand cases worked out from the definition pin what is held and when it goes out (``max_delay`` 0, a finite
one, ``"inf"``), that a held insert revised or deleted while held goes out once or never (minimal diffs),
and the output CTI ``min(CTI, LE of every held event)``. Random cases put align after a join, a union and an
lmerge and check the output CHT against the graph oracle (align is CHT-transparent there) and the physical
properties of §7 on every interleaving. ``max_delay: "inf"`` after a speculating window step gives no
retraction for in-order input, and retractions never grow with ``max_delay`` on a disordered stream.
``max_wait`` is tested with an injected clock.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import cht, generate, lmerge_inputs, oracle
from udm.host.testing.engine_conformance import check_engine, runner_engine
from udm.host.testing.generator import generate_related
from udm.host.testing.properties import check_properties
from udm.sdk import INF

ENGINE = runner_engine(QueryRunner)
CASES = 120
DELAYS: list[Any] = [0, 3, "inf"]


def q(steps: list[dict[str, Any]], inputs: dict[str, Any] | None = None) -> BoundQuery:
    data: dict[str, Any] = {"steps": steps}
    if inputs is not None:
        data["inputs"] = inputs
    return bind(parse_query(data))


def trace(bq: BoundQuery, els: list[Element], clock: Any = None) -> list[list[Element]]:
    r = QueryRunner(bq, clock=clock)
    return [r.process(e) for e in els] + [r.finish()]


STREAM = [Insert("a", 1, 20, {"x": 1}), Insert("b", 3, 4, {}), Cti(2), Retract("a", 1, 20, 15),
          Insert("c", 9, 10, {}), Cti(5), Insert("d", 12, 13, {}), Retract("a", 1, 15, 12), Cti(16)]


def test_hand_max_delay_zero_passes_everything_at_once() -> None:
    got = trace(q([{"op": "align", "max_delay": 0}]), STREAM)
    assert got[0] == [Insert("o1", 1, 20, {"x": 1})]
    assert got[2] == [Cti(2)]
    assert got[3] == [Retract("o1", 1, 20, 15)]
    assert got[7] == [Retract("o1", 1, 15, 12)]


def test_hand_finite_max_delay_holds_until_the_watermark_passes_by_that_much() -> None:
    got = trace(q([{"op": "align", "max_delay": 5}]), STREAM)
    # a [1,20) and b [3,4) wait for a watermark of 6 resp. 8; cti(2) goes out held at a's LE 1
    assert got[0] == [] and got[1] == [] and got[2] == [Cti(1)]
    assert got[3] == []  # a is still held: its revision is folded into it
    # c raises the watermark to 9: a (as revised) and b go out, in start order, then the CTI 2
    assert got[4] == [Insert("o1", 1, 15, {"x": 1}), Insert("o2", 3, 4, {}), Cti(2)]
    assert got[5] == [Cti(5)]  # c [9,10) is held (LE 9 > 9 - 5) but starts after the CTI
    assert got[6] == []  # d raises the watermark to 12: c (9 > 12 - 5) and d wait
    assert got[7] == [Retract("o1", 1, 15, 12)]  # a is out: its revisions pass at once
    assert got[8] == [Insert("o3", 9, 10, {}), Insert("o4", 12, 13, {}), Cti(16)]  # cti(16): c, d final


def test_hand_inf_releases_only_final_events() -> None:
    got = trace(q([{"op": "align", "max_delay": "inf"}]), STREAM)
    assert got[2] == [Cti(1)]
    assert got[5] == [Insert("o2", 3, 4, {})]  # b ends before 5: final; a still holds the CTI at 1
    assert got[7] == []
    assert got[8] == [Insert("o1", 1, 12, {"x": 1}), Insert("o3", 9, 10, {}), Insert("o4", 12, 13, {}), Cti(16)]
    assert not any(isinstance(e, Retract) for out in got for e in out)


def test_hand_held_insert_deleted_never_appears() -> None:
    got = trace(q([{"op": "align", "max_delay": "inf"}]),
                [Insert("a", 1, 9, {}), Retract("a", 1, 9, 5), Retract("a", 1, 5, 1), Insert("b", 2, 3, {}), Cti(4)])
    assert [e for out in got for e in out] == [Insert("o2", 2, 3, {}), Cti(4), Cti(INF)]


def test_hand_an_event_ending_at_the_cti_is_not_final_yet() -> None:
    # SEMANTICS §7 prefix finality is RE < t: at cti(10) an event ending at 10 may still be extended
    got = trace(q([{"op": "align", "max_delay": "inf"}]),
                [Insert("a", 2, 10, {}), Cti(10), Retract("a", 2, 10, 14), Cti(15)])
    assert got[1] == [Cti(2)]
    assert got[3] == [Insert("o1", 2, 14, {}), Cti(15)]


def test_hand_max_wait_releases_by_the_wall_clock() -> None:
    now = [1_000_000]
    bq = q([{"op": "align", "max_delay": "inf", "max_wait": "2s"}])
    r = QueryRunner(bq, clock=lambda: now[0])
    assert r.process(Insert("a", 1, 50, {})) == []
    now[0] += 1_000_000
    assert r.process(Insert("b", 7, 60, {})) == []
    assert r.tick() == []
    now[0] += 1_000_000  # a has waited 2 s: it goes out without any CTI
    assert r.tick() == [Insert("o1", 1, 50, {})]
    now[0] += 999_999
    assert r.tick() == []
    now[0] += 1
    assert r.tick() == [Insert("o2", 7, 60, {})]
    assert r.process(Cti(30)) == [Cti(30)]


def test_max_wait_survives_a_snapshot() -> None:
    now = [0]
    bq = q([{"op": "align", "max_delay": "inf", "max_wait": 10}])
    r = QueryRunner(bq, clock=lambda: now[0])
    r.process(Insert("a", 1, 50, {}))
    back = QueryRunner.restore(r.snapshot(), bq, clock=lambda: now[0])
    now[0] = 10
    assert back.tick() == [Insert("o1", 1, 50, {})]


def test_spec_round_trip_and_errors() -> None:
    spec = parse_query({"steps": [{"op": "align", "max_delay": "inf", "max_wait": "250ms"}]})
    assert spec.steps[0].max_wait == 250_000
    assert parse_query(spec.to_json_dict()) == spec
    with pytest.raises(Exception, match="max_wait"):
        parse_query({"steps": [{"op": "align", "max_wait": "soon"}]})
    with pytest.raises(Exception, match="reads exactly one input"):
        parse_query_bind({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "align", "from": ["a", "b"]}]})


def parse_query_bind(data: dict[str, Any]) -> BoundQuery:
    return bind(parse_query(data))


# ---------------------------------------------------------------------------------------------------
# random cases: after a join, a union, an lmerge (output CHT == oracle, §7 properties)

AB = {"a": {}, "b": {}}
KNOBS: list[dict[str, Any]] = [
    {"events": 7, "disorder": "slightly", "speculation": 0.3, "bad": 0.1},
    {"events": 9, "disorder": "out_of_order", "speculation": 0.5, "chain": 2, "cti": "eager"},
    {"events": 6, "disorder": "highly", "duration": "mixed", "speculation": 0.3},
    {"events": 8, "overlap": "high", "duplicates": 0.3, "speculation": 0.2, "cti": "lazy"},
]


def run_related(bq: BoundQuery, n: int, base: int) -> None:
    for seed in range(base, base + n):
        st = generate_related(bq.graph.inputs, seed=seed, keys=3, only=1, **KNOBS[seed % len(KNOBS)])
        rep = check_engine(ENGINE, bq, st, seed=seed, variants=1 if seed % 4 == 0 else 0,
                           interleavings=("sync", "random"))
        assert rep.ok, rep.text()


@pytest.mark.parametrize("delay", DELAYS)
def test_align_after_join_random(delay: Any) -> None:
    bq = q([{"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "r_"},
            {"op": "align", "max_delay": delay}], AB)
    run_related(bq, CASES, 100)


@pytest.mark.parametrize("delay", DELAYS)
def test_align_after_union_random(delay: Any) -> None:
    bq = q([{"id": "u", "op": "union", "from": ["a", "b"]}, {"op": "align", "max_delay": delay}], AB)
    run_related(bq, CASES, 300)


@pytest.mark.parametrize("delay", DELAYS)
def test_align_after_lmerge_random(delay: Any) -> None:
    for seed in range(CASES):
        rng = random.Random(f"align-lmerge:{seed}")
        base = generate(seed=seed, **{**KNOBS[seed % len(KNOBS)], "events": rng.randint(0, 12)})
        inputs = lmerge_inputs(base, rng.randint(2, 4), seed=seed, case="R4")
        bq = q([{"id": "m", "op": "lmerge", "from": list(inputs)}, {"op": "align", "max_delay": delay}],
               {n: {} for n in inputs})
        rep = check_engine(ENGINE, bq, inputs, seed=seed, variants=0, interleavings=("sync", "random"))
        assert rep.ok, rep.text()


@pytest.mark.parametrize("delay", DELAYS)
def test_align_on_one_input_random_with_liveliness(delay: Any) -> None:
    # single input: check_engine also checks liveliness after every CTI against the kit's align bound
    bq = q([{"op": "align", "max_delay": delay}])
    for seed in range(CASES):
        els = generate(seed=seed, **{**KNOBS[seed % len(KNOBS)], "events": 10})
        rep = check_engine(ENGINE, bq, els, seed=seed, variants=1)
        assert rep.ok, rep.text()


# ---------------------------------------------------------------------------------------------------
# the consistency spectrum

MEMBERS = [{"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "members", "clip": "left",
            "output": "unaltered"}]


def retractions(out: list[Element]) -> int:
    return sum(isinstance(e, Retract) for e in out)


def feed(bq: BoundQuery, els: list[Element]) -> list[Element]:
    """One element at a time (each a batch: the window step speculates between them)."""
    return [e for out in trace(bq, els) for e in out]


def test_inf_after_a_speculating_window_step_gives_no_retraction_in_order() -> None:
    # issue 27's case: a speculating members step revises its output at the retraction; align "inf" after
    # it shows only final output
    els = [Insert("a", 1, 20, {}), Cti(10), Retract("a", 1, 20, 15), Cti(INF)]
    plain = feed(q(MEMBERS), els)
    held = feed(q([*MEMBERS, {"op": "align", "max_delay": "inf"}]), els)
    assert retractions(plain) > 0
    assert retractions(held) == 0
    assert cht(held) == cht(plain) == oracle(q(MEMBERS), els)
    assert check_properties(els, held, finished=True) == []


def test_inf_gives_no_retraction_for_random_in_order_input() -> None:
    bq = q([*MEMBERS, {"op": "align", "max_delay": "inf"}])
    for seed in range(CASES):
        els = generate(seed=seed, events=10, disorder="in_order", speculation=0.4, cti="eager")
        out = feed(bq, els)
        assert retractions(out) == 0, seed
        assert cht(out) == oracle(bq, els)


def test_retractions_never_grow_with_max_delay() -> None:
    for seed in range(40):
        els = generate(seed=seed, events=30, disorder="highly", speculation=0.3, cti="lazy")
        counts = []
        for d in (0, 1, 2, 4, 8, 16, 32, "inf"):
            bq = q([*MEMBERS, {"op": "align", "max_delay": d}])
            out = feed(bq, els)
            assert cht(out) == oracle(bq, els)
            counts.append(retractions(out))
        assert counts == sorted(counts, reverse=True), (seed, counts)


def test_state_stays_bounded_under_advancing_ctis() -> None:
    r = QueryRunner(q([{"op": "align", "max_delay": "inf"}]))
    peak = 0
    for t in range(0, 20_000, 10):
        r.process_many([Insert(f"e{t}", t, t + 15, {}), Insert(f"f{t}", t + 3, t + 5, {}), Cti(t + 1)])
        peak = max(peak, r.state_size()["held"])
    assert peak <= 6
