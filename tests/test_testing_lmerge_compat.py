"""The kit's LMerge compatibility checker (seeds/001 §III.D, C1–C3): the paper's own example tables decide
it (O1 and O2 compatible with I1 and I2, O3 not, for the two reasons the paper gives), and every prefix of
the engine's lmerge output on random physical variants is compatible with the input prefixes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing import generate, lmerge_inputs
from udm.host.testing.generator import interleave
from udm.host.testing.lmerge_compat import compatibility_problems, trace_problems
from udm.sdk import INF


def tdb(rows: list[tuple[str, int, int]], last: int) -> list[Element]:
    return [*(Insert(f"{p}{vs}", vs, ve, {"p": p}) for p, vs, ve in rows), Cti(last)]


# seeds/001 §III.D: the TDBs of the example (payload, Vs, Ve), last = latest stable()
I1 = tdb([("A", 2, 16), ("B", 3, 10), ("C", 4, 18), ("D", 15, 20)], 14)
I2 = tdb([("A", 2, 12), ("B", 3, 10), ("C", 4, 18), ("E", 17, 21)], 11)
O1 = tdb([("A", 2, INF), ("B", 3, 10), ("C", 4, INF)], 11)
O2 = tdb([("A", 2, 16), ("B", 3, 10), ("C", 4, 18), ("D", 15, 20), ("E", 17, 21)], 14)
O3 = tdb([("A", 2, 12), ("C", 4, 18), ("D", 15, 20)], 13)


def test_the_papers_example() -> None:
    inputs = {"I1": I1, "I2": I2}
    assert compatibility_problems(inputs, O1) == []
    assert compatibility_problems(inputs, O2) == []
    problems = compatibility_problems(inputs, O3)
    # <A, 2, 12> is fully frozen in O3 but I1 says its end is at least 14; <B, 3, 10> is missing for good
    assert any("C2" in p and "[2, 12)" in p for p in problems), problems
    assert any("C3" in p and '"B"' in p for p in problems), problems


def test_c1_output_cti_beyond_every_input() -> None:
    assert any(p.startswith("C1") for p in compatibility_problems({"I1": I1, "I2": I2}, [*O2[:-1], Cti(15)]))


def test_duplicates_need_equal_counts() -> None:
    twice = [Insert("a", 1, 5, {"p": 1}), Insert("b", 1, 5, {"p": 1}), Cti(6)]
    once = [Insert("o", 1, 5, {"p": 1}), Cti(6)]
    assert compatibility_problems({"x": twice}, [*twice], duplicates=True) == []
    assert compatibility_problems({"x": twice}, once, duplicates=True)


@pytest.mark.parametrize("algorithm", ["R3", "R4"])
def test_every_output_prefix_of_the_engine_is_compatible(algorithm: str) -> None:
    for seed in range(150):
        rng = random.Random(seed)
        base = generate(seed=seed, events=rng.randint(0, 10), disorder="slightly", speculation=0.4, chain=2,
                        duplicates=0.2)
        inputs = lmerge_inputs(base, rng.randint(2, 5), seed=seed, case=algorithm)  # type: ignore[arg-type]
        bq = bind(parse_query({"inputs": {k: {} for k in inputs}, "steps": [
            {"id": "m", "op": "lmerge", "from": list(inputs), "algorithm": algorithm}]}))
        runner = QueryRunner(bq)
        feed: list[tuple[str, Any]] = list(interleave(inputs, list(inputs), how="random", seed=seed))
        trace = [runner.process(el, input=name) for name, el in feed]
        assert trace_problems(feed, trace, names=list(inputs), duplicates=algorithm == "R4") == []
