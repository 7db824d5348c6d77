"""Several UDAs on one window step (SEMANTICS §9 ``aggregates``): one membership, one output per non-empty
window holding every alias (group keys once). Hand-computed tables, spec and fluent API checks, and random
streams over every window family against the kit's brute-force oracle."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from test_engine_support import check_physical, rows, run, table
from window_cases import run_random_cases

from udm.host.errors import PolicyError, QuerySpecError
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.fluent import Stream
from udm.host.temporal.elements import Insert, Retract
from udm.host.testing import cht, oracle

AGGS = [{"udm": "count", "as": "n"}, {"udm": "avg", "input": "v", "as": "mean"},
        {"udm": "max", "input": "v", "as": "hi"}]


def q(window: dict, aggregates: list[dict], **kw: Any) -> dict:
    return {"steps": [{"op": "window", "window": window, "aggregates": aggregates, **kw}]}


def ev(id: str, le: int, re: int, v: float, g: str = "a") -> Insert:
    return Insert(id, le, re, {"v": v, "g": g})


def test_one_output_per_window_with_every_alias_and_the_keys_once() -> None:
    stream = [ev("a", 1, 2, 4), ev("b", 3, 4, 8), ev("c", 12, 13, 1), ev("d", 5, 6, 30, g="b")]
    out, _ = run(q({"type": "tumbling", "size": 10}, AGGS, group_by=["g"]), stream)
    check_physical(out)
    assert table(out) == rows((0, 10, {"g": "a", "n": 2, "mean": 6.0, "hi": 8}),
                              (10, 20, {"g": "a", "n": 1, "mean": 1.0, "hi": 1}),
                              (0, 10, {"g": "b", "n": 1, "mean": 30.0, "hi": 30}))


def test_a_retraction_revises_every_alias_of_the_window_at_once() -> None:
    stream = [ev("a", 1, 2, 4), ev("b", 3, 4, 8), Retract("b", 3, 4, 3)]
    out, _ = run(q({"type": "rows", "n": 1}, AGGS), stream, mode="each")
    check_physical(out)
    assert table(out) == rows((1, 2, {"n": 1, "mean": 4.0, "hi": 4}),)


def test_time_sensitive_and_holistic_udas_share_the_membership() -> None:
    aggs = [{"udm": "twa", "input": "v", "as": "tw"}, {"udm": "median", "input": "v", "as": "med"}]
    stream = [ev("a", 0, 5, 10), ev("b", 5, 10, 20), ev("c", 2, 4, 0)]
    query = q({"type": "tumbling", "size": 10}, aggs, clip="full")
    out, _ = run(query, stream)
    # twa over [0, 10): (10*5 + 20*5 + 0*2) / 10 = 15; median of 0, 10, 20 = 10
    assert table(out) == rows((0, 10, {"tw": 15.0, "med": 10}),)


def test_same_as_separate_steps_joined_by_window() -> None:
    rng = random.Random(3)
    stream = [ev(f"e{i}", t, t + rng.randint(1, 6), rng.randint(0, 50), g=rng.choice("xy"))
              for i, t in enumerate(sorted(rng.randint(0, 60) for _ in range(40)))]
    win = {"type": "hopping", "size": 10, "hop": 5}
    got = oracle(bind(parse_query(q(win, AGGS, group_by=["g"]))), stream)
    merged: dict[tuple, dict] = {}
    for a in AGGS:
        single = {"steps": [{"op": "window", "window": win, "group_by": ["g"], **a}]}
        for (le, re, pj), n in oracle(bind(parse_query(single)), stream).items():
            assert n == 1
            p = json.loads(pj)
            merged.setdefault((le, re, p["g"]), {}).update(p)
    want = sorted((le, re, json.dumps(p, sort_keys=True, separators=(",", ":"))) for (le, re, _), p in merged.items())
    assert sorted(got.elements()) == want
    out, _ = run(q(win, AGGS, group_by=["g"]), stream)
    assert sorted(got.elements()) == sorted((le, re, json.dumps(p, sort_keys=True, separators=(",", ":")))
                                            for le, re, p in table(out))


@pytest.mark.parametrize(("step", "msg"), [
    ({"udm": "count", "aggregates": AGGS}, "either 'udm' or 'aggregates'"),
    ({"aggregates": AGGS, "input": "v"}, "belong"),
    ({"aggregates": [*AGGS, {"udm": "sum", "input": "v", "as": "n"}]}, "given twice"),
    ({"aggregates": AGGS, "group_by": ["n"]}, "group_by keys"),
    ({"aggregates": [{"udm": "count"}]}, r"aggregates\[0\]\.as"),
    ({}, "needs 'udm'"),
])
def test_spec_rejects_ambiguous_aggregates(step: dict, msg: str) -> None:
    with pytest.raises(QuerySpecError, match=msg):
        parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, **step}]})


def test_binding_rejects_a_udo_and_names_where() -> None:
    spec = parse_query(q({"type": "tumbling", "size": 5}, [*AGGS, {"udm": "topk", "as": "t"}]))
    with pytest.raises(PolicyError, match=r"steps\[0\] \(window\)\.aggregates\[3\]: .*'topk' is a UDO"):
        bind(spec)


def test_fluent_keywords() -> None:
    stream = [ev("a", 1, 2, 4), ev("b", 3, 4, 8)]
    s = Stream.from_events(stream).group_by("g").tumbling(10).aggregate(n="count", mean={"udm": "avg", "input": "v"})
    assert [a.as_ for a in s.spec.steps[0].aggregates] == ["n", "mean"]
    assert sorted(cht(s.to_elements()).elements()) == [(0, 10, '{"g":"a","mean":6.0,"n":2}')]
    with pytest.raises(QuerySpecError, match="inside its own value"):
        Stream.query().tumbling(10).aggregate("count", n="count")


WINDOWS = [
    lambda r: {"type": "tumbling", "size": r.randint(1, 8)},
    lambda r: {"type": "hopping", "size": r.randint(2, 9), "hop": r.randint(1, 4)},
    lambda r: {"type": "snapshot"},
    lambda r: {"type": "count_by_start", "n": r.randint(1, 3)},
    lambda r: {"type": "rows", "n": r.randint(1, 4), "slide": r.randint(1, 3)},
    lambda r: {"type": "session", "gap": r.randint(0, 5)},
]
POOL = [*AGGS, {"udm": "median", "input": "v", "as": "med"}, {"udm": "twa", "input": "v", "as": "tw"},
        {"udm": "min", "input": "v", "as": "lo"}, {"udm": "variance", "input": "v", "as": "var"}]


def _step(seed: int, rng: random.Random) -> dict[str, Any]:
    return {"aggregates": rng.sample(POOL, rng.randint(1, 4)), "clip": rng.choice(["none", "left", "right", "full"]),
            "max_delay": rng.choice([0, 0, 3])}


@pytest.mark.parametrize("w", range(len(WINDOWS)))
def test_random_streams_agree_with_the_oracle(w: int) -> None:
    assert run_random_cases(WINDOWS[w], range(150), step=_step) == 300


def test_random_streams_on_hopping_panes_agree_with_the_oracle() -> None:
    algebraic = [a for a in POOL if a["udm"] in ("count", "avg", "max", "min")]

    def window(rng: random.Random) -> dict[str, Any]:
        return {"type": "hopping", "size": rng.randint(4, 12), "hop": rng.randint(1, 4)}

    def step(seed: int, rng: random.Random) -> dict[str, Any]:
        return {"aggregates": rng.sample(algebraic, rng.randint(1, 3)), "max_delay": rng.choice([0, 0, 2])}

    assert run_random_cases(window, range(200), step=step) == 400
