"""Algebraic UDAs as partial + final aggregation: same CHT as the oracle, and taken only when allowed."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.query.spec import parse_query
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import collect_elements, elements_df
from udm.host.temporal.elements import Cti, Insert
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle
from udm.host.testing.verifier import verify
from udm.sdk import INF

pytestmark = pytest.mark.spark


def _points(n: int, groups: int, seed: int) -> list[Any]:
    import random

    rng = random.Random(seed)
    out: list[Any] = [Insert(f"e{i}", t, t + 1, {"g": f"k{rng.randrange(groups)}", "v": rng.uniform(-50, 50)})
                      for i, t in enumerate(sorted(rng.randrange(-30, 200) for _ in range(n)))]
    return [*out, Cti(INF)]


@pytest.mark.parametrize(("udm", "window"), [
    ("sum", {"type": "tumbling", "size": 10, "offset": 3}),
    ("avg", {"type": "hopping", "size": 12, "hop": 8}),
    ("count", {"type": "hopping", "size": 5, "hop": 10}),  # gaps between windows
    ("variance", {"type": "hopping", "size": 20, "hop": 5}),
])
def test_two_phase_matches_oracle(spark: Any, udm: str, window: dict[str, Any]) -> None:
    query = parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm,
                                    "input": "v"}]})
    stream = _points(400, 5, seed=len(udm))
    run = run_batch(query, elements_df(spark, stream))
    try:
        assert run.path == "algebraic"
        verdict = verify(collect_elements(run.output), oracle(query, stream), rel_tol=1e-9, abs_tol=1e-6)
        assert verdict, str(verdict)
        assert run.dead_letters.count() == 0
    finally:
        run.unpersist()


def test_not_taken_for_retractions_or_holistic(spark: Any) -> None:
    q_sum = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                        "udm": "sum", "input": "v"}]}
    from udm.host.spark.algebraic import eligible_step

    assert eligible_step(parse_query(q_sum)) is not None
    q_med = {"steps": [{**q_sum["steps"][0], "udm": "median"}]}
    assert eligible_step(parse_query(q_med)) is None
    spec = generate(seed=5, events=30, groups=2, speculation=0.5)  # has retractions
    assert any(type(e).__name__ == "Retract" for e in spec)
    run = run_batch(q_sum, elements_df(spark, spec))
    try:
        assert run.path == "engine"
    finally:
        run.unpersist()


def test_falls_back_when_an_event_spans_panes(spark: Any) -> None:
    stream = [Insert("a", 1, 2, {"g": "x", "v": 1}), Insert("b", 3, 25, {"g": "x", "v": 2})]
    q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
    from udm.host.spark import algebraic

    # the partial phase alone refuses it (running the engine path needs the engine)
    with pytest.raises(Exception, match="not-eligible"):
        algebraic.run_algebraic(parse_query(q), elements_df(spark, stream), 2).collect()
