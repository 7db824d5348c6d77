"""Semantics-notes 2 on Spark: infinite lifetimes are cut at T, the largest finite time of the *valid*
elements. An invalid element reaching further (here a CTI violation ending at 90, a retraction of an
unknown id at 95) must not move the cut — on every split of the batch path and on the streaming path."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import collect_elements, elements_df
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = pytest.mark.spark

INF = 2**63 - 1
STREAM = [
    Insert("edge", 3, INF, {"g": "x", "v": 1.0}),       # alive at the end: cut at T
    Insert("p", 21, 22, {"g": "y", "v": 2.0}),
    Cti(20),
    Insert("late", 5, 90, {"g": "y", "v": 9.0}),        # CTI violation: dead-lettered, its 90 is not T
    Retract("ghost", 30, 40, 95),                        # unknown id: dead-lettered, its 95 is not T
    Insert("q", 28, 33, {"g": "y", "v": 3.0}),
]
KEYED = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
KEYLESS = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count"}]}


@pytest.mark.parametrize("name,query,buckets", [("keys", KEYED, 2), ("time", KEYLESS, 3), ("single", KEYLESS, 1)])
def test_batch_cuts_infinite_lifetimes_at_the_valid_T(spark: Any, name: str, query: dict[str, Any],
                                                      buckets: int) -> None:
    expected = oracle_run(bind(parse_query(query)), STREAM)
    assert expected.truncated_at == 33  # the oracle's own T: q's end, not 90 or 95
    run = run_batch(query, elements_df(spark, STREAM), buckets=buckets, algebraic=False)
    try:
        assert run.split == name
        out = collect_elements(run.output)
        verdict = verify(out, expected.cht)
        assert verdict, str(verdict)
        assert sorted(r["line"] for r in run.dead_letters.collect()) == [4, 5]
    finally:
        run.unpersist()


def test_streaming_cuts_infinite_lifetimes_at_the_valid_T(spark: Any) -> None:
    from udm.host.testing.engine_conformance import registered_engine

    expected = oracle_run(bind(parse_query(KEYED)), STREAM)
    out = registered_engine("spark-streaming", batch_size=2, buckets=2)(parse_query(KEYED), STREAM)
    assert verify(out, expected.cht), str(verify(out, expected.cht))


SHIFTED = [{"id": "al", "op": "alter_lifetime", "le": {"shift": 5}, "duration": "keep"},
           {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 3}, "group_by": ["g"], "udm": "count",
            "as": "n"}]
#: T = 10 (z's end); after the shift x's image [6, INF) reaches windows past T, which must not come out
SHIFTED_STREAM = [Insert("x", 1, INF, {"g": 1}), Insert("y", 4, 6, {"g": 2}), Cti(9), Insert("z", 9, 10, {"g": 2})]


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("query", [{"steps": SHIFTED}, {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "u", "op": "union", "from": ["a", "b"]}, {**SHIFTED[0], "from": "u"}, SHIFTED[1]]}],
    ids=["linear", "graph"])
def test_a_shift_before_a_window_does_not_move_the_cut(spark: Any, engine: str, query: dict[str, Any]) -> None:
    """T is the inputs' on every path: neither a shifted CTI nor a shifted watermark lets windows past T
    out (a cti(T) injected on a Spark path and carried past T by the shift used to)."""
    from udm.host.testing import oracle
    from udm.host.testing.engine_conformance import registered_engine

    spec = parse_query(query)
    streams: Any = {"main": SHIFTED_STREAM} if "inputs" not in query else {"a": SHIFTED_STREAM[:2],
                                                                            "b": SHIFTED_STREAM[2:]}
    expected = oracle(spec, streams)
    out = registered_engine(engine, buckets=2)(spec, streams if "inputs" in query else SHIFTED_STREAM)
    assert verify(out, expected), str(verify(out, expected))
