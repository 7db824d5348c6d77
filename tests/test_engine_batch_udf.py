"""Filter/map steps use a UDF's batch form (``compute_batch``) over columnar batches: the same output as
the scalar form (checked against the kit's oracle, which calls ``compute`` row by row), bad rows still
dead-lettered on their own line, and the batch form really called (not silently bypassed)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import numpy as np

from udm.host.catalog import Catalog
from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import oracle
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle_run
from udm.sdk import UDF, udm


@udm(name="t_halve", version="1.0.0", input_type="float", output_type="float")
class Halve(UDF):
    """``x / 2``; counts how often each form runs."""

    calls: ClassVar[dict[str, int]] = {"compute": 0, "compute_batch": 0}

    def compute(self, x: float) -> float:
        Halve.calls["compute"] += 1
        return x / 2

    def compute_batch(self, x: Any) -> Any:
        Halve.calls["compute_batch"] += 1
        return np.asarray(x, dtype=np.float64) / 2


def _catalog() -> Catalog:
    cat = Catalog.discover()
    cat.add(Halve)
    return cat


def _stream(n: int, seed: int) -> list[Any]:
    """In-order inserts (every 37th lacks ``price``), valid shortening retractions, a CTI every 50."""
    rng = random.Random(seed)
    out: list[Any] = []
    ends: dict[str, tuple[int, int]] = {}
    for i in range(n):
        payload: dict[str, Any] = {"price": rng.randrange(200), "k": "a"}
        if i % 37 == 5:
            payload = {"k": "a"}  # no price: dead-lettered, compute never sees it
        re = i + 2 + rng.randrange(5)
        out.append(Insert(f"e{i}", i, re, payload))
        if "price" in payload:
            ends[f"e{i}"] = (i, re)
        old = f"e{i - 2}"
        if i % 11 == 3 and old in ends:
            le, r = ends.pop(old)
            out.append(Retract(old, le, r, le + 1))
        if i % 50 == 49:
            out.append(Cti(i - 1))
    return out


def _run(query: dict, stream: list[Any]) -> tuple[list[tuple], list[Any]]:
    bound = bind(parse_query(query), _catalog())
    r = QueryRunner(bound)
    elements = r.process_batch(ElementBatch.from_elements(stream, list(range(1, len(stream) + 1))))
    elements += r.finish()
    return sorted(cht(elements).elements()), r.dead_letters


def test_map_with_a_batch_form_matches_the_oracle_and_uses_the_batch_form() -> None:
    query = {"steps": [{"op": "map", "udf": "t_halve", "args": {"x": "price"}, "as": "half"}]}
    stream = _stream(400, 1)
    Halve.calls.update(compute=0, compute_batch=0)
    got, dead = _run(query, stream)
    assert Halve.calls["compute_batch"] >= 1
    assert Halve.calls["compute"] == 0  # the rows lacking price never reach compute: check_insert refuses them
    want = oracle_run(bind(parse_query(query), _catalog()), stream, catalog=_catalog())
    assert got == sorted(want.cht.elements())
    assert want.rejected == []
    assert [d.category for d in dead] == ["missing_field"] * sum(
        1 for e in stream if isinstance(e, Insert) and "price" not in e.payload)


def test_filter_with_a_batch_form_matches_the_oracle() -> None:
    query = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "price"},
                        "params": {"lo": 20, "hi": 120}},
                       {"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["k"],
                        "udm": "sum", "input": "price", "as": "s"}]}
    stream = _stream(600, 2)
    got, _ = _run(query, stream)
    want = oracle(bind(parse_query(query), _catalog()), stream, catalog=_catalog())
    assert got == sorted(want.elements())
    assert len(got) > 10
