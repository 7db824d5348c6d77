"""Filter/map steps use a UDF's batch form (``compute_batch``) over columnar batches: the same output as
the scalar form (checked against the kit's oracle, which calls ``compute`` row by row), bad rows still
dead-lettered on their own line, and the batch form really called (not silently bypassed)."""

from __future__ import annotations

import json
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


def _lines(tmp_path: Any, query: dict, texts: list[str], per_element: bool) -> bytes:
    """The query's output bytes for an input file: read by the fast reader and run batch by batch (the
    columnar path `udm run` takes), or every element fed on its own and written by `JsonlWriter`."""
    from udm.host.io.jsonl import JsonlReader, JsonlWriter

    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(t + "\n" for t in texts))
    out = tmp_path / ("el.jsonl" if per_element else "batch.jsonl")
    r = QueryRunner(bind(parse_query(query), _catalog()))
    with JsonlWriter(out) as w:
        for batch in JsonlReader(inp):
            if per_element:
                for line, el in batch.to_elements():
                    w.write(r.process(el, line))
            else:
                w.write_encoded(r.process_batch_encoded(batch))
        w.write(r.finish())
    return out.read_bytes()


def test_a_map_that_replaces_a_field_keeps_its_place_with_and_without_ctis(tmp_path: Any) -> None:
    """``as`` naming an existing field replaces it where it stands (a dict's ``{**p, as: v}``), whether the
    batch holds CTIs or not: the bytes equal the one-element-per-call path's."""
    query = {"steps": [{"op": "map", "udf": "t_halve", "args": {"x": "price"}, "as": "price"}]}
    inserts = [json.dumps({"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1,
                           "payload": {"price": float(i) + 0.5, "k": "a"}}) for i in range(200)]
    for texts in (inserts, [*inserts[:100], json.dumps({"kind": "cti", "t": 100}), *inserts[100:]]):
        got = _lines(tmp_path, query, texts, per_element=False)
        assert got == _lines(tmp_path, query, texts, per_element=True)
        first = json.loads(got.splitlines()[0])
        assert list(first["payload"]) == ["price", "k"] and first["payload"]["price"] == 0.25


def test_a_map_over_a_batch_with_ctis_keeps_the_payload_columnar(tmp_path: Any) -> None:
    """CTI rows carry no payload; they must not turn a map's output into one dict per row (the encoder then
    formats every row on its own)."""
    from udm.host.io.jsonl import JsonlReader

    inp = tmp_path / "in.jsonl"
    rows = [json.dumps({"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1, "payload": {"price": i + 0.5}})
            for i in range(200)]  # (enough lines for the fast reader: its payloads are columns)
    inp.write_text("\n".join([*rows[:100], json.dumps({"kind": "cti", "t": 100}), *rows[100:]]) + "\n")
    query = {"steps": [{"op": "map", "udf": "t_halve", "args": {"x": "price"}, "as": "half"}]}
    r = QueryRunner(bind(parse_query(query), _catalog()))
    (batch,) = list(JsonlReader(inp))
    assert batch.payload_is_struct
    out = r.run_batch(batch)
    assert out.payload.columnar
    halves = [e.payload["half"] for e in out.to_elements() if isinstance(e, Insert)]
    assert halves == [(i + 0.5) / 2 for i in range(200)]
