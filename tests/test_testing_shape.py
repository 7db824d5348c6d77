"""Output shape and ordering checks of the kit (seeds/002 §6.3) on the SEMANTICS §9 windows: the shape a
query must give (points, intervals, open events), and perfect output (ordered, never retracted) under
strong consistency (``max_delay: inf``) on in-order input, against the engine and the oracle alike."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_engine_support import run, window_query

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import generate, oracle, to_elements
from udm.host.testing.shape import output_ordering, output_shape, retraction_count
from udm.sdk import INF


def _points(n: int, seed: int, groups: int = 1) -> list[Element]:
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    for i in range(n):
        t += rng.randint(0, 3)
        out.append(Insert(f"e{i}", t, t + 1, {"v": rng.randint(0, 9), "g": f"k{rng.randrange(groups)}"}))
        if i % 5 == 4:
            out.append(Cti(t))
    return out


def test_shape_of_the_output() -> None:
    stream = _points(40, 1)
    one_row = window_query({"type": "rows", "n": 1}, "sum", input="v")
    out, _ = run(one_row, stream)
    assert output_shape(out) == "point"
    assert output_shape([*to_elements(oracle(bind(parse_query(one_row)), stream)), Cti(INF)]) == "point"
    out, _ = run(window_query({"type": "session", "gap": 2}, "count"), stream)
    assert output_shape(out) in ("interval", "mixed")
    out, _ = run(window_query({"type": "session", "gap": 2}, "count"),
                 [Insert("a", 1, INF, {"v": 1}), Insert("b", 5, 6, {"v": 1})])
    assert output_shape(out) == "open"
    assert output_shape([Cti(INF)]) == "empty"


@pytest.mark.parametrize("window", [{"type": "rows", "n": 3, "slide": 2}, {"type": "rows", "n": 4},
                                    {"type": "session", "gap": 2}, {"type": "tumbling", "size": 5}])
@pytest.mark.parametrize("seed", range(20))
def test_strong_consistency_is_perfect_on_in_order_input(window: dict[str, Any], seed: int) -> None:
    stream = _points(60, seed)
    q = window_query(window, "sum", input="v", max_delay="inf")
    out, _ = run(q, stream, mode="each")
    assert output_ordering(out) == "perfect", out
    speculative, _ = run(window_query(window, "sum", input="v", early=0), stream, mode="each")
    assert retraction_count(speculative) >= retraction_count(out) == 0


def test_ordering_levels() -> None:
    a, b = Insert("a", 1, 5, {}), Insert("b", 3, 4, {})
    assert output_ordering([a, b, Cti(4)]) == "perfect"
    assert output_ordering([a, Retract("a", 1, 5, 3), b]) == "ordered"
    assert output_ordering([b, a]) == "per_event"
    assert output_ordering(generate(seed=3, events=5, disorder="highly")) in ("per_event", "ordered", "perfect")
