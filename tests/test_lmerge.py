"""``lmerge`` (SEMANTICS §8, seeds/001) through `QueryRunner`, against the graph oracle (the inputs' common CHT).

Random cases: 2–10 physical variants of one random stream (the kit's `lmerge_inputs`: disorder, retraction
chains, phantoms, lags, CTIs of every eagerness), shaped to each algorithm's assumptions, fed in several
interleavings — output CHT == oracle, the physical properties of SEMANTICS §7, and Theorem 1 (inserts +
retractions out <= inserts in, CTIs out <= CTIs in) on every run. Hand cases, worked out from §8 and
seeds/001 §IV/§V, pin the output CTI (the maximum, not the minimum), dropped lagging elements, the end at
the first input's ``cti(INF)``, attach/detach and ``join_at``, and ``algorithm: auto``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import StreamProperties, parse_query
from udm.host.model.stream_properties import choose_algorithm
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import cht, generate, lmerge_inputs
from udm.host.testing.engine_conformance import check_engine, runner_engine
from udm.host.testing.generator import interleave
from udm.sdk import INF

ENGINE = runner_engine(QueryRunner)
CASES = 400


def merge_query(names: list[str], algorithm: str = "auto", **extra: Any) -> BoundQuery:
    return bind(parse_query({"inputs": {n: {} for n in names},
                             "steps": [{"id": "m", "op": "lmerge", "from": names, "algorithm": algorithm,
                                        **extra}]}))


def theorem_1(c: dict[str, int]) -> bool:
    out = c["inserts_out"] + c["partial_retractions_out"] + c["full_retractions_out"]
    return out <= c["inserts_in"] and c["ctis_out"] <= c["ctis_in"]


KNOBS: list[dict[str, Any]] = [
    {"disorder": "slightly", "speculation": 0.3},
    {"disorder": "out_of_order", "speculation": 0.5, "chain": 2, "duration": "mixed"},
    {"disorder": "highly", "pattern": "highly_overlapping", "duplicates": 0.3},
    {"disorder": "in_order", "pattern": "back_to_back", "cti": "eager"},
    {"pattern": "duplicates", "duration": "long", "cti": "lazy"},
]


@pytest.mark.parametrize("algorithm", ["R0", "R1", "R2", "R3", "R4"])
def test_random_variants_merge_to_the_common_cht(algorithm: str) -> None:
    for seed in range(CASES):
        rng = random.Random(f"lmerge:{algorithm}:{seed}")
        n = rng.randint(2, 10)
        base = generate(seed=seed, events=rng.randint(0, 14), **KNOBS[seed % len(KNOBS)])
        inputs = lmerge_inputs(base, n, seed=seed, case=algorithm)  # type: ignore[arg-type]
        bq = merge_query(list(inputs), algorithm)
        hows = ("sync", "random") if seed % 3 else ("sync", "sequential", "round_robin")
        rep = check_engine(ENGINE, bq, inputs, seed=seed, variants=0, interleavings=hows)
        assert rep.ok, rep.text()
        runner = QueryRunner(bq)
        out = runner.run_all(inputs)
        assert cht(out) == cht(inputs["i0"])
        counts = runner.chattiness()["m"]
        assert theorem_1(counts), (seed, counts)
        assert "inconsistent" not in counts


def test_auto_on_undeclared_variants_is_r4_and_correct() -> None:
    for seed in range(CASES // 4):
        base = generate(seed=seed, events=10, **KNOBS[seed % len(KNOBS)])
        inputs = lmerge_inputs(base, 2 + seed % 5, seed=seed)
        bq = merge_query(list(inputs))
        assert bq.step("m").step.algorithm == "R4"
        rep = check_engine(ENGINE, bq, inputs, seed=seed, variants=0, interleavings=("random",))
        assert rep.ok, rep.text()


# ---------------------------------------------------------------------------------------------------
# hand cases


def kinds(out: list[Element]) -> list[str]:
    return [type(e).__name__ for e in out]


@pytest.mark.parametrize("algorithm", ["R3", "R4"])
def test_hand_leading_input_drives_the_output_and_lagging_rows_are_dropped(algorithm: str) -> None:
    # seeds/001 §IV.D with the policy of semantics-notes 22: at a's cti(6), (1, v1) is half frozen on a
    # (end 10 >= 6): out [1, INF); (3, v2) is fully frozen (end 5 < 6): out [3, 5), final. b lags: its
    # (3, v2) is below the output CTI and dropped (not dead-lettered). a's cti(INF) freezes v1's end: 10.
    r = QueryRunner(merge_query(["a", "b"], algorithm))
    out = r.process(Insert("x1", 1, 10, {"v": 1}), input="a")
    out += r.process(Insert("x2", 3, 5, {"v": 2}), input="a")
    out += r.process(Insert("y1", 1, 10, {"v": 1}), input="b")
    assert out == []  # nothing is output before an input freezes it
    out = r.process(Cti(6), input="a")
    assert sorted((e.le, e.re) for e in out if isinstance(e, Insert)) == [(1, INF), (3, 5)]
    assert out[-1] == Cti(6)
    assert r.process(Insert("y2", 3, 5, {"v": 2}), input="b") == []
    assert r.process(Cti(4), input="b") == []  # below the output CTI: no output, the maximum leads
    out = r.process(Cti(INF), input="a")  # the first input to end ends the output
    assert kinds(out) == ["Retract", "Cti"] and out[0].re_new == 10 and out[1] == Cti(INF)
    assert r.process(Insert("y3", 20, 30, {"v": 3}), input="b") == []
    out += r.finish()
    assert not r.dead_letters
    counts = r.chattiness()["m"]
    assert counts["inserts_out"] == 2 and counts["partial_retractions_out"] == 1 and theorem_1(counts)


def test_hand_output_cti_is_the_maximum_not_the_minimum() -> None:
    r = QueryRunner(merge_query(["a", "b", "c"], "R3"))
    got = [e.t for name, t in (("a", 5), ("b", 3), ("c", 9), ("a", 7), ("b", 12))
           for e in r.process(Cti(t), input=name) if isinstance(e, Cti)]
    assert got == [5, 9, 12]


def test_hand_detach_and_attach_at_run_time() -> None:
    r = QueryRunner(merge_query(["a", "b"], "R3"))
    r.process(Insert("x", 0, 4, {"p": 1}), input="a")
    r.detach("m", "a")
    assert r.process(Cti(3), input="a") == []  # a detached: its CTI no longer counts
    r.process(Insert("y", 0, 4, {"p": 1}), input="b")
    out = r.process(Cti(2), input="b")
    assert out == [Insert("o1", 0, INF, {"p": 1}), Cti(2)]
    # a comes back, carrying every event that ends at 8 or later; it counts once the output CTI reaches 8
    r.attach("m", "a", at=8)
    r.process(Insert("x2", 9, 12, {"p": 2}), input="a")
    assert r.process(Cti(20), input="a") == []  # still joining: its CTIs are ignored
    r.process(Insert("y2", 9, 12, {"p": 2}), input="b")
    out = r.process(Cti(8), input="b")
    assert out == [Retract("o1", 0, INF, 4), Cti(8)]
    r.detach("m", "b")  # a has joined: it alone carries the stream now
    out = r.process(Cti(30), input="a")
    assert out == [Insert("o2", 9, 12, {"p": 2}), Cti(30)]
    with pytest.raises(ValueError, match="reads no 'zz'"):
        r.detach("m", "zz")
    with pytest.raises(ValueError, match="no lmerge step 'q'"):
        r.attach("q", "a")


def test_hand_join_at_in_the_spec() -> None:
    # b is a replay that only carries events ending at 10 or later; it joins once the output CTI reaches 10
    bq = merge_query(["a", "b"], "R3", join_at={"b": 10})
    r = QueryRunner(bq)
    r.process(Insert("a1", 0, 5, {"p": 1}), input="a")
    r.process(Insert("a2", 12, 20, {"p": 2}), input="a")
    r.process(Insert("b2", 12, 20, {"p": 2}), input="b")
    assert r.process(Cti(15), input="b") == []  # b not joined yet
    out = r.process(Cti(11), input="a")
    assert out == [Insert("o1", 0, 5, {"p": 1}), Cti(11)]
    r.detach("m", "a")
    out = r.process(Cti(25), input="b")
    assert out == [Insert("o2", 12, 20, {"p": 2}), Cti(25)]


@pytest.mark.parametrize("algorithm", ["R0", "R1", "R2"])
def test_hand_insert_only_algorithms_dead_letter_a_retraction(algorithm: str) -> None:
    r = QueryRunner(merge_query(["a", "b"], algorithm))
    assert r.process(Insert("x", 1, 5, {"p": 1}), input="a") == [Insert("o1", 1, 5, {"p": 1})]
    assert r.process(Insert("y", 1, 5, {"p": 1}), input="b") == []  # the same row from b: already out
    assert r.process(Retract("x", 1, 5, 3), input="a") == []
    (dl,) = r.take_dead_letters()
    assert dl.category == "lmerge_not_insert_only" and f"algorithm {algorithm}" in dl.reason


def test_hand_r1_counts_rows_per_input_at_the_largest_le() -> None:
    # seeds/001 Algorithm R1: ties arrive in one order on every input; the k-th row at an LE is output by
    # whichever input delivers a k-th row first
    r = QueryRunner(merge_query(["a", "b"], "R1"))
    rows = [("a", 1, "x"), ("b", 1, "x"), ("b", 1, "y"), ("a", 1, "y"), ("a", 2, "z"), ("b", 2, "z")]
    out = [e for name, le, p in rows for e in r.process(Insert(f"{name}{le}{p}", le, le + 3, {"p": p}), input=name)]
    assert [(e.le, e.payload["p"]) for e in out if isinstance(e, Insert)] == [(1, "x"), (1, "y"), (2, "z")]


# ---------------------------------------------------------------------------------------------------
# algorithm: auto


@pytest.mark.parametrize(("props", "want"), [
    ({}, "R4"),
    ({"duplicates": False}, "R3"),
    ({"ordered": True, "insert_only": True, "duplicates": False}, "R2"),
    ({"ordered": True, "insert_only": True, "deterministic_ties": True}, "R1"),
    ({"ordered": "strict", "insert_only": True}, "R0"),
    ({"ordered": True, "duplicates": False}, "R3"),  # ordered but with retractions: R3
])
def test_auto_picks_the_cheapest_valid_algorithm(props: dict[str, Any], want: str) -> None:
    assert choose_algorithm([StreamProperties(**props)] * 2) == want
    bq = bind(parse_query({"inputs": {"a": {"properties": props}, "b": {"properties": props}},
                           "steps": [{"id": "m", "op": "lmerge", "from": ["a", "b"]}]}))
    assert bq.step("m").step.algorithm == want
    # the weakest input decides
    assert choose_algorithm([StreamProperties(**props), StreamProperties()]) == "R4"


def test_auto_derives_properties_through_a_grouped_aggregate() -> None:
    # seeds/001 §IV.G 6: a grouped count is keyed by (LE, group) whatever its input: R3. (Not R2 even on
    # ordered input: at the end the last windows of several groups leave in no LE order.)
    for group_by, want in ((["g"], "R3"), ([], "R3")):
        steps = [{"id": f"c{x}", "from": x, "op": "window", "window": {"type": "tumbling", "size": 5},
                  "group_by": group_by, "udm": "count", "as": "n"} for x in ("a", "b")]
        bq = bind(parse_query({"inputs": {"a": {}, "b": {}},
                               "steps": [*steps, {"id": "m", "op": "lmerge", "from": ["ca", "cb"]}]}))
        assert bq.step("m").step.algorithm == want
        for seed in range(60):
            base = generate(seed=seed, events=12, **KNOBS[seed % len(KNOBS)])
            inputs = lmerge_inputs(base, 2, seed=seed)
            rep = check_engine(ENGINE, bq, {"a": inputs["i0"], "b": inputs["i1"]}, seed=seed, variants=0,
                               interleavings=("sync", "random"))
            assert rep.ok, rep.text()


def test_snapshot_and_restore_mid_stream() -> None:
    for seed in range(40):
        inputs = lmerge_inputs(generate(seed=seed, events=12, **KNOBS[seed % len(KNOBS)]), 3, seed=seed)
        bq = merge_query(list(inputs), "R4" if seed % 2 else "R3")
        if seed % 2 == 0:
            inputs = lmerge_inputs(generate(seed=seed, events=12, **KNOBS[seed % len(KNOBS)]), 3, seed=seed,
                                   case="R3")
        feed = list(interleave(inputs, list(inputs), how="random", seed=seed))
        cut = len(feed) // 2
        r = QueryRunner(bq)
        r.detach("m", "i2")
        out = [e for name, el in feed[:cut] for e in r.process(el, input=name)]
        r2 = QueryRunner.restore(r.snapshot(), bq)
        out += [e for name, el in feed[cut:] for e in r2.process(el, input=name)] + r2.finish()
        assert cht(out) == cht(inputs["i0"]), seed
        assert r2.merge_step("m").status[2] == "detached"


@pytest.mark.parametrize("algorithm", ["R3", "R4"])
def test_hand_gap_follows_the_input_that_freezes_it(algorithm: str) -> None:
    # seeds/001 §V.C: R3/R4 output an element e as long as the input that raises the output CTI past e's LE
    # has e. x is missing from b.
    r = QueryRunner(merge_query(["a", "b"], algorithm))
    r.process(Insert("x", 5, 8, {"p": "x"}), input="a")
    assert r.process(Cti(10), input="a") == [Insert("o1", 5, 8, {"p": "x"}), Cti(10)]  # a has x: out, final
    assert r.process(Cti(12), input="b") == [Cti(12)]  # b lacks it, but x is final already
    r2 = QueryRunner(merge_query(["a", "b"], algorithm))
    r2.process(Insert("x", 5, 8, {"p": "x"}), input="a")
    assert r2.process(Cti(10), input="b") == [Cti(10)]  # b froze 5 without x: x is not in the stream
    assert r2.process(Cti(12), input="a") == [Cti(12)] and not r2.dead_letters


@pytest.mark.parametrize("algorithm", ["R0", "R1", "R2"])
def test_hand_gap_in_insert_only_algorithms(algorithm: str) -> None:
    # seeds/001 §V.C: R0–R2 output an element missing from some input S as long as another input delivers
    # it before S delivers an element with a higher LE
    r = QueryRunner(merge_query(["a", "b"], algorithm))
    assert r.process(Insert("x", 5, 8, {"p": "x"}), input="a") == [Insert("o1", 5, 8, {"p": "x"})]
    assert r.process(Insert("w", 6, 9, {"p": "w"}), input="b") == [Insert("o2", 6, 9, {"p": "w"})]
    r2 = QueryRunner(merge_query(["a", "b"], algorithm))
    assert r2.process(Insert("w", 6, 9, {"p": "w"}), input="b") == [Insert("o1", 6, 9, {"p": "w"})]
    assert r2.process(Insert("x", 5, 8, {"p": "x"}), input="a") == []  # too late: b is past LE 5
