"""Query-graph operators (SEMANTICS §10) through `QueryRunner`, against the brute-force graph oracle.

Each op (union, union distinct, project, alter_lifetime, join inner / left_anti) and a few composed graphs
run over hundreds of random related streams (shared and one-sided join keys, disorder, retraction chains,
CTIs, bad lines, inserts lacking the join key), each fed in several interleavings of the inputs and as
physical variants: output CHT == oracle, plus the physical properties of SEMANTICS §7. Small hand-written
cases give expected outputs worked out by hand from §10, and long streams with regular CTIs show the state
stays bounded.
"""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import CHT, cht, oracle, oracle_run, to_elements
from udm.host.testing.engine_conformance import check_engine, runner_engine
from udm.host.testing.generator import generate_related, interleave, physical_variants
from udm.host.testing.properties import check_properties
from udm.sdk import INF

AB = {"a": {}, "b": {}}
ENGINE = runner_engine(QueryRunner)
CASES = 200


def q(steps: list[dict[str, Any]], inputs: dict[str, Any] | None = None, **extra: Any) -> BoundQuery:
    return bind(parse_query({"inputs": inputs if inputs is not None else AB, "steps": steps, **extra}))


KNOBS: list[dict[str, Any]] = [
    {"events": 7, "disorder": "slightly", "speculation": 0.3, "bad": 0.15},
    {"events": 9, "disorder": "out_of_order", "speculation": 0.5, "chain": 2, "cti": "eager"},
    {"events": 6, "disorder": "highly", "duration": "mixed", "bad": 0.2, "missing_key": 0.15},
    {"events": 8, "overlap": "high", "duplicates": 0.3, "speculation": 0.2, "cti": "lazy"},
    {"events": 7, "pattern": "back_to_back", "disorder": "slightly", "key_type": "mixed"},
    {"events": 6, "pattern": "highly_overlapping", "duration": "long", "speculation": 0.4, "key_type": "num"},
]


def streams_for(bq: BoundQuery, seed: int, **over: Any) -> dict[str, list[Element]]:
    knobs = {**KNOBS[seed % len(KNOBS)], **over}
    return generate_related(bq.graph.inputs, seed=seed, keys=3, only=1, **knobs)


def run_cases(bq: BoundQuery, n: int = CASES, *, base: int = 0, same: bool = False, **over: Any) -> None:
    """``n`` random cases; ``same``: on every other case input ``b`` is a physical variant of ``a`` (so
    equal rows meet, for distinct unions)."""
    for seed in range(base, base + n):
        st = streams_for(bq, seed, **over)
        if same and seed % 2 and "b" in st:
            both = [*to_elements(cht(st["a"]), prefix="a"), *to_elements(cht(st["b"]), prefix="b"), Cti(INF)]
            st["b"] = physical_variants(both, 1, seed=seed)[0]
        hows = ("sync", "random") if seed % 3 else ("sync", "sequential", "round_robin")
        rep = check_engine(ENGINE, bq, st, seed=seed, variants=1 if seed % 4 == 0 else 0, interleavings=hows)
        assert rep.ok, rep.text()


# ---------------------------------------------------------------------------------------------------
# random cases, per op


def test_union_random() -> None:
    run_cases(q([{"op": "union", "from": ["a", "b"]}]))


def test_union_of_three_random() -> None:
    run_cases(q([{"op": "union", "from": ["a", "b", "c"]}], {"a": {}, "b": {}, "c": {"on_violation": "adjust"}}),
              n=CASES // 2)


def test_union_distinct_random() -> None:
    run_cases(q([{"op": "union", "from": ["a", "b"], "distinct": True}]), same=True)


@pytest.mark.parametrize("proj", [
    {"keep": ["k", "v"], "rename": {"v": "value"}},
    {"drop": ["v"], "set": {"src": "x", "n": 1}},
    {"keep": ["k", "v"], "rename": {"k": "v", "v": "k"}, "set": {"k2": None}},
    {"rename": {"v": "k"}},
])
def test_project_random(proj: dict[str, Any]) -> None:
    bq = q([{"id": "p", "op": "project", "from": "a", **proj}, {"op": "union", "from": ["p", "b"]}])
    run_cases(bq, n=CASES // 2, missing_key=0.2)


ALTERS = [("keep", "keep"), ("keep", {"const": 3}), ("keep", "inf"), ({"shift": 4}, "keep"),
          ({"shift": -2}, {"const": 1}), ({"shift": 5}, "inf"), ({"snap": {"size": 5, "offset": 1}}, {"const": 7}),
          ({"snap": {"size": 4}}, "inf")]


@pytest.mark.parametrize(("le", "duration"), ALTERS, ids=[f"{a}-{b}" for a, b in ALTERS])
def test_alter_lifetime_random(le: Any, duration: Any) -> None:
    # alter_lifetime on input a, unioned with input b: a multi-input query around each le x duration
    bq = q([{"id": "al", "op": "alter_lifetime", "from": "a", "le": le, "duration": duration},
            {"op": "union", "from": ["al", "b"]}])
    run_cases(bq, n=CASES // 2, base=1000)


def test_alter_lifetime_multicast_random() -> None:
    bq = q([{"id": "p", "op": "alter_lifetime", "from": "a", "duration": {"const": 1}},
            {"id": "s", "op": "alter_lifetime", "from": "a", "le": {"snap": {"size": 3}}, "duration": "inf"},
            {"op": "union", "from": ["p", "s", "b"]}])
    run_cases(bq, n=CASES // 2, base=2000)


@pytest.mark.parametrize("extra", [
    {},
    {"right_prefix": "r_"},
    {"left_prefix": "l_", "right_prefix": "r_"},
    {"right_prefix": "r_", "where": {"udf": "in_range", "args": {"field": "r_v"}, "params": {"lo": 20, "hi": 70}}},
    {"where": {"udf": "in_range", "args": {"field": "v"}, "params": {"hi": 50}}},
])
def test_join_inner_random(extra: dict[str, Any]) -> None:
    run_cases(q([{"op": "join", "from": ["a", "b"], "on": "k", **extra}]), base=3000)


@pytest.mark.parametrize("extra", [
    {},
    {"where": {"udf": "in_range", "args": {"field": "r_x"}, "params": {"lo": 30}}, "right_prefix": "r_"},
])
def test_join_left_anti_random(extra: dict[str, Any]) -> None:
    steps: list[dict[str, Any]] = [{"id": "bx", "op": "project", "from": "b", "rename": {"v": "x"}},
                                   {"op": "join", "from": ["a", "bx"], "on": "k", "type": "left_anti", **extra}]
    run_cases(q(steps), base=4000)


def test_join_on_two_fields_random() -> None:
    bq = q([{"id": "a2", "op": "map", "from": "a", "udf": "in_range", "args": {"field": "v"},
             "params": {"hi": 50}, "as": "lo"},
            {"id": "b2", "op": "map", "from": "b", "udf": "in_range", "args": {"field": "v"},
             "params": {"hi": 50}, "as": "low"},
            {"op": "join", "from": ["a2", "b2"], "on": [["k", "k"], ["lo", "low"]], "right_prefix": "r_"}])
    run_cases(bq, n=CASES // 2, base=5000)


# ---------------------------------------------------------------------------------------------------
# composed graphs


@pytest.mark.slow
def test_join_then_window_random() -> None:
    bq = q([{"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "r_"},
            {"op": "window", "window": {"type": "tumbling", "size": 5}, "group_by": ["k"], "udm": "count"}])
    run_cases(bq, base=6000)


@pytest.mark.slow
def test_multicast_filter_and_map_into_union_random() -> None:
    bq = q([{"id": "f", "op": "filter", "from": "a", "udf": "in_range", "args": {"field": "v"},
             "params": {"lo": 30, "hi": 80}},
            {"id": "m", "op": "map", "from": "a", "udf": "in_range", "args": {"field": "v"}, "params": {"hi": 40},
             "as": "low"},
            {"op": "union", "from": ["f", "m"]}], {"a": {}})
    run_cases(bq, base=7000)


@pytest.mark.slow
def test_alter_lifetime_then_snapshot_random() -> None:
    bq = q([{"id": "u", "op": "union", "from": ["a", "b"]},
            {"op": "alter_lifetime", "duration": {"const": 4}},
            {"op": "window", "window": {"type": "snapshot"}, "group_by": ["k"], "udm": "sum", "input": "v"}])
    run_cases(bq, base=8000)


@pytest.mark.slow
def test_hopping_truncation_over_two_inputs_random() -> None:
    # endless events cut at T, which is taken over both inputs
    bq = q([{"op": "union", "from": ["a", "b"]},
            {"op": "window", "window": {"type": "hopping", "size": 6, "hop": 3}, "udm": "count"}])
    run_cases(bq, n=CASES // 2, base=9000, duration="mixed")


@pytest.mark.parametrize("window", [{"type": "tumbling", "size": 3}, {"type": "hopping", "size": 6, "hop": 2}],
                         ids=["tumbling", "hopping"])
@pytest.mark.parametrize("udm", ["count", "median"])
def test_shift_then_window_truncates_at_the_inputs_T_random(window: dict[str, Any], udm: str) -> None:
    # a shift carries the window's watermark past T (over the inputs): windows there holding only
    # never-ending events must still be cut (semantics-notes 2, 11); count takes panes, median not
    bq = q([{"op": "union", "from": ["a", "b"]},
            {"op": "alter_lifetime", "le": {"shift": 5}, "duration": "keep"},
            {"op": "window", "window": window, "group_by": ["k"], "udm": udm, "input": "v"}])
    run_cases(bq, n=CASES // 2, base=9500, duration="mixed")


def test_hand_shift_then_window_cut_at_T() -> None:
    bq = q([{"op": "alter_lifetime", "le": {"shift": 5}, "duration": "keep"},
            {"op": "window", "window": {"type": "tumbling", "size": 3}, "group_by": ["g"], "udm": "count",
             "as": "n"}], {"a": {}})
    # T = 10 (z's end): x's image [6, INF) is cut after [9, 12); z's image [14, 15) is finite, so [12, 15)
    # of group 2 stays although 12 > T
    want = rows((6, 9, {"g": 1, "n": 1}), (9, 12, {"g": 1, "n": 1}), (9, 12, {"g": 2, "n": 1}),
                (12, 15, {"g": 2, "n": 1}))
    check_hand(bq, {"a": [Insert("x", 1, INF, {"g": 1}), Insert("y", 4, 6, {"g": 2}), Cti(9),
                          Insert("z", 9, 10, {"g": 2})]}, want)


# ---------------------------------------------------------------------------------------------------
# hand-written cases (expected outputs worked out from SEMANTICS §10)


def rows(*events: tuple[int, int, dict[str, Any]]) -> CHT:
    return CHT.from_events(events)


def run_both(bq: BoundQuery, streams: dict[str, list[Element]]) -> tuple[CHT, QueryRunner, list[Element]]:
    runner = QueryRunner(bq)
    out: list[Element] = []
    for name, el in interleave(streams, bq.graph.inputs):
        out += runner.process(el, input=name)
    out += runner.finish()
    flat = [el for s in streams.values() for el in s]
    assert check_properties(flat, out, bq, finished=True) == []
    return cht(out), runner, out


def check_hand(bq: BoundQuery, streams: dict[str, list[Element]], want: CHT) -> QueryRunner:
    assert oracle(bq, streams) == want, oracle(bq, streams).to_text()
    got, runner, _ = run_both(bq, streams)
    assert got == want, got.to_text()
    return runner


def test_hand_union_and_distinct() -> None:
    a = [Insert("1", 1, 5, {"x": 1}), Insert("2", 2, 4, {"x": 2}), Retract("2", 2, 4, 3)]
    b = [Insert("1", 1, 5, {"x": 1}), Insert("9", 6, 7, {"x": 1})]
    check_hand(q([{"op": "union", "from": ["a", "b"]}]), {"a": a, "b": b},
               rows((1, 5, {"x": 1}), (1, 5, {"x": 1}), (2, 3, {"x": 2}), (6, 7, {"x": 1})))
    check_hand(q([{"op": "union", "from": ["a", "b"], "distinct": True}]), {"a": a, "b": b},
               rows((1, 5, {"x": 1}), (2, 3, {"x": 2}), (6, 7, {"x": 1})))


def test_hand_project_order_keep_drop_rename_set() -> None:
    a = [Insert("1", 1, 3, {"k": 1, "v": 2, "w": 3}), Insert("2", 2, 4, {"v": 5}), Retract("2", 2, 4, 2)]
    bq = q([{"op": "project", "keep": ["k", "v"], "drop": ["k"], "rename": {"v": "k"}, "set": {"c": 0}}], {"a": {}})
    runner = check_hand(bq, {"a": a}, rows((1, 3, {"k": 2, "c": 0})))
    # "2" lacks kept field k: dead-lettered as a missing field, its retraction ignored
    dl, *rest = runner.take_dead_letters()
    assert "missing field" in dl.reason and dl.category == "missing_field"
    assert [d.category for d in rest] == ["unknown_id"]  # its retraction names an id the step refused


def test_hand_project_rename_overwrites_and_absent_source() -> None:
    a = [Insert("1", 1, 3, {"a": 1, "b": 2}), Insert("2", 1, 3, {"b": 7})]
    # "1": a renamed to b overwrites b; "2" has no a, so nothing is renamed and b stays
    check_hand(q([{"op": "project", "rename": {"a": "b"}}], {"a": {}}), {"a": a},
               rows((1, 3, {"b": 1}), (1, 3, {"b": 7})))


@pytest.mark.parametrize(("le", "duration", "want"), [
    ("keep", "keep", [(3, 6), (7, INF)]),
    ("keep", {"const": 2}, [(3, 5), (7, 9)]),
    ("keep", "inf", [(3, INF), (7, INF)]),
    ({"shift": 10}, "keep", [(13, 16), (17, INF)]),
    ({"shift": -1}, {"const": 1}, [(2, 3), (6, 7)]),
    ({"shift": 2}, "inf", [(5, INF), (9, INF)]),
    ({"snap": {"size": 5}}, {"const": 5}, [(0, 5), (5, 10)]),
    ({"snap": {"size": 4, "offset": 1}}, "inf", [(1, INF), (5, INF)]),
])
def test_hand_alter_lifetime(le: Any, duration: Any, want: list[tuple[int, int]]) -> None:
    # e1 [3, 9) shortened to [3, 6); e2 [7, inf); e3 inserted then fully retracted
    a = [Insert("1", 3, 9, {"n": 1}), Insert("2", 7, INF, {"n": 2}), Insert("3", 4, 5, {"n": 3}),
         Retract("1", 3, 9, 6), Retract("3", 4, 5, 4), Cti(8)]
    bq = q([{"op": "alter_lifetime", "le": le, "duration": duration}], {"a": {}})
    check_hand(bq, {"a": a}, rows((want[0][0], want[0][1], {"n": 1}), (want[1][0], want[1][1], {"n": 2})))


def test_hand_alter_lifetime_cti_image() -> None:
    bq = q([{"op": "alter_lifetime", "le": {"snap": {"size": 10}}, "duration": {"const": 10}}], {"a": {}})
    _, _, out = run_both(bq, {"a": [Insert("1", 13, 14, {}), Cti(17)]})
    assert [el.t for el in out if isinstance(el, Cti)] == [10, INF]  # f(17) = 10


def test_hand_join_inner_prefixes_clash_and_json_keys() -> None:
    a = [Insert("1", 0, 10, {"k": 1, "v": "L"}), Insert("2", 5, 8, {"k": True, "v": "T"}),
         Insert("3", 0, 4, {"v": "nokey"}), Retract("3", 0, 4, 2)]
    b = [Insert("1", 2, 6, {"k": 1.0, "v": "R", "w": 0}), Insert("2", 7, 12, {"k": 1, "v": "S"}),
         Insert("3", 20, 30, {"k": 1, "v": "late"})]
    # no prefixes: on the clash of v the left value wins; 1 == 1.0; true matches neither
    check_hand(q([{"op": "join", "from": ["a", "b"], "on": "k"}]), {"a": a, "b": b},
               rows((2, 6, {"k": 1, "v": "L", "w": 0}), (7, 10, {"k": 1, "v": "L"})))
    runner = check_hand(q([{"op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"}]),
                        {"a": a, "b": b},
                        rows((2, 6, {"l_k": 1, "l_v": "L", "r_k": 1.0, "r_v": "R", "r_w": 0}),
                             (7, 10, {"l_k": 1, "l_v": "L", "r_k": 1, "r_v": "S"})))
    dls = runner.take_dead_letters()
    assert [(d.input, d.category) for d in dls] == [("a", "missing_field")]  # "3"; its retraction ignored


def test_hand_join_where_and_on_pairs() -> None:
    a = [Insert("1", 0, 10, {"id": "x", "p": 5}), Insert("2", 0, 10, {"id": "x", "p": 50})]
    b = [Insert("1", 3, 4, {"a": "x", "q": 1}), Insert("2", 4, 6, {"a": "y", "q": 2})]
    bq = q([{"op": "join", "from": ["a", "b"], "on": [["id", "a"]],
             "where": {"udf": "in_range", "args": {"field": "p"}, "params": {"hi": 10}}}])
    check_hand(bq, {"a": a, "b": b}, rows((3, 4, {"id": "x", "p": 5, "a": "x", "q": 1})))


def test_hand_join_left_anti() -> None:
    a = [Insert("1", 0, 20, {"k": "x"}), Insert("2", 0, 5, {"k": "y"}), Insert("3", 0, 5, {"k": "x", "d": 1})]
    b = [Insert("1", 2, 5, {"k": "x", "ok": 1}), Insert("2", 4, 8, {"k": "x", "ok": 1}),
         Insert("3", 12, 15, {"k": "x", "ok": 0}), Insert("4", 15, 16, {"k": "x", "ok": 1}),
         Insert("5", 30, 40, {"k": "x", "ok": 1})]
    # without where: [0,20) minus [2,8), [12,16) -> [0,2), [8,12), [16,20); "3" [0,5) minus [2,8) -> [0,2)
    check_hand(q([{"op": "join", "from": ["a", "b"], "on": "k", "type": "left_anti"}]), {"a": a, "b": b},
               rows((0, 2, {"k": "x"}), (8, 12, {"k": "x"}), (16, 20, {"k": "x"}), (0, 5, {"k": "y"}),
                    (0, 2, {"k": "x", "d": 1})))
    # where ok >= 1 on the joined payload: b "3" no longer matches, so [8,15) is one uncovered part
    bq = q([{"op": "join", "from": ["a", "b"], "on": "k", "type": "left_anti", "right_prefix": "r_",
             "where": {"udf": "in_range", "args": {"field": "r_ok"}, "params": {"lo": 1}}}])
    check_hand(bq, {"a": a, "b": b},
               rows((0, 2, {"k": "x"}), (8, 15, {"k": "x"}), (16, 20, {"k": "x"}), (0, 5, {"k": "y"}),
                    (0, 2, {"k": "x", "d": 1})))


def test_hand_left_anti_revised_by_retractions() -> None:
    a = [Insert("1", 0, 10, {"k": 1})]
    b = [Insert("1", 3, 6, {"k": 1}), Insert("2", 5, 9, {"k": 1}), Retract("1", 3, 6, 4), Retract("2", 5, 9, 5)]
    # b "2" fully deleted, b "1" now [3, 4): uncovered [0,3) and [4,10)
    check_hand(q([{"op": "join", "from": ["a", "b"], "on": "k", "type": "left_anti"}]), {"a": a, "b": b},
               rows((0, 3, {"k": 1}), (4, 10, {"k": 1})))


def test_hand_multi_input_cti_and_dead_letter_names_input() -> None:
    bq = q([{"op": "union", "from": ["a", "b"]}])
    runner = QueryRunner(bq)
    out = runner.process(Cti(5), input="a")
    assert not any(isinstance(e, Cti) for e in out)  # b has sent no CTI: it holds the output back
    out = runner.process(Cti(3), input="b")
    assert [e.t for e in out if isinstance(e, Cti)] == [3]
    runner.process(Insert("x", 4, 2, {}), input="b")  # bad lifetime
    out = runner.process(Cti(INF), input="a")
    assert not any(isinstance(e, Cti) and e.t >= INF for e in out)  # only when every input has ended
    out = runner.process(Cti(INF), input="b")
    assert [e.t for e in out if isinstance(e, Cti)] == [INF]
    [dl] = runner.take_dead_letters()
    assert dl.input == "b"
    res = oracle_run(bq, {"a": [Cti(5)], "b": [Cti(3), Insert("x", 4, 2, {})]})
    assert [len(v) for v in res.rejected_by_input.values()] == [0, 1]


# ---------------------------------------------------------------------------------------------------
# bounded state


@pytest.mark.parametrize("steps", [
    [{"op": "union", "from": ["a", "b"]}],
    [{"op": "union", "from": ["a", "b"], "distinct": True}],
    [{"op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "r_"}],
    [{"op": "join", "from": ["a", "b"], "on": "k", "type": "left_anti"}],
    [{"id": "al", "op": "alter_lifetime", "from": "a", "le": {"shift": 3}, "duration": {"const": 2}},
     {"op": "project", "from": "b", "id": "p", "drop": ["v"]}, {"op": "union", "from": ["al", "p"]}],
], ids=["union", "distinct", "join", "left_anti", "alter+project"])
def test_state_stays_bounded_with_regular_ctis(steps: list[dict[str, Any]]) -> None:
    # In-order inputs, durations <= 5 ticks, start gaps >= 1 tick, a CTI after ~30% of the elements of every
    # input. An operator keeps only events that can still change or still meet a partner: RE >= the least
    # CTI of its inputs (a distinct union also keeps one row per such event). Fed in sync-time order, the
    # two inputs' CTIs stay within ~60 ticks of each other and of the newest events, so per operator and
    # input at most ~65 events are live, and the sum over the operators (2 gates + the steps) of a query
    # stays under 200 whatever the length: we check 200 at 1500 and at 3000 events per input.
    bq = q(steps)
    for events in (1500, 3000):
        st = generate_related(bq.graph.inputs, seed=5, events=events, keys=3, only=1, disorder="in_order",
                              cti="regular", final_cti=False, short_max=5)
        runner = QueryRunner(bq)
        peak = 0
        for i, (name, el) in enumerate(interleave(st, bq.graph.inputs)):
            runner.process(el, input=name)
            if i % 25 == 0:
                peak = max(peak, runner.state_size()["events"])
        end = runner.state_size()["events"]
        assert end < 200 and peak < 200, (events, end, peak)
        runner.finish()
        assert runner.state_size()["events"] == 0


def test_udm_streams_fixture(udm_streams: Any) -> None:
    st = udm_streams(["x", "y"], events=5)
    assert set(st) == {"x", "y"} and st == udm_streams(["x", "y"], events=5)
    bq = q([{"op": "union", "from": ["x", "y"]}], {"x": {}, "y": {}})
    assert check_engine(ENGINE, bq, st).ok
