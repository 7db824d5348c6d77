"""One rule for a non-finite number in output on every path (SEMANTICS §1, the local writer's: `udm.host.io.encode`
with `udm.host.temporal.strict`): the run stops with the error naming the field, never a line holding ``NaN`` or
``Infinity`` text. Spark writes payload texts in its workers (`udm.host.spark.convert.compact_json`,
`object_texts`): on the linear batch path (and the two-phase algebraic plan, which hands such a run to it), the
staged path, and Structured Streaming, linear and staged.

Reference: the local engine's error and `json.dumps` (strict) for the encoder; the oracle for the same runs
over finite input, so each route is seen to run the query at all."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pyarrow as pa
import pytest

from udm.host.errors import UdmError
from udm.host.io.encode import ConstColumn
from udm.host.model.spec import parse_query
from udm.host.spark.convert import compact_json, object_texts
from udm.host.temporal import strict
from udm.host.temporal.elements import Cti, Insert, Retract

TWO = {"a": {}, "b": {}}
#: one stage (keyed by g): a window's sum
LINEAR = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"], "udm": "sum",
                     "input": "v", "as": "total"}]}
#: two stages: joined by k, then summed per g (the sum is made by the second stage, the exchange carries v)
STAGED = {"inputs": TWO, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "b_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"], "udm": "sum",
     "input": "v", "as": "total"}]}


def _stream(seed: int, big: float) -> list[Any]:
    """Point events of two groups in disorder, a retraction, a CTI; the two ``big`` values of group ``x`` in one
    window sum to an infinity when ``big`` is 1e308."""
    rng = random.Random(seed)
    els: list[Any] = [Insert(f"e{i}", t, t + 1, {"g": rng.choice("yz"), "k": i % 3, "v": rng.uniform(-5, 5)})
                      for i, t in enumerate(rng.sample(range(40), 12))]
    els += [Insert("big1", 23, 24, {"g": "x", "k": 1, "v": big}), Insert("big2", 27, 28, {"g": "x", "k": 2, "v": big})]
    rng.shuffle(els)
    gone = next(e for e in els if e.id.startswith("e"))
    els.append(Retract(gone.id, gone.le, gone.re, gone.le))  # (never a member)
    return [*els, Cti(50)]


def _inputs(seed: int, big: float) -> dict[str, list[Any]]:
    return {"a": _stream(seed, big), "b": [Insert(f"b{k}", 0, 60, {"k": k}) for k in range(3)] + [Cti(60)]}


@pytest.mark.parametrize("seed", range(20))
def test_compact_json_is_strict_json_or_the_local_writers_error(seed: int) -> None:
    """Random payloads, some holding a NaN or an infinity at a random place: the text `json.dumps` gives, or
    the error `strict.dumps` raises for the same payload (the one the local writer raises), word for word."""
    rng = random.Random(seed)
    bad = [math.nan, math.inf, -math.inf]
    for _ in range(50):
        payload = {"a": rng.randint(-9, 9), "b": rng.uniform(-1e6, 1e6), "c": {"d": [1.5, rng.random()]}}
        if rng.random() < 0.5:
            where = rng.choice(["b", "c"])
            if where == "b":
                payload["b"] = rng.choice(bad)
            else:
                payload["c"]["d"][1] = rng.choice(bad)
            with pytest.raises(UdmError) as ours:
                compact_json(payload)
            with pytest.raises(UdmError) as local:
                strict.dumps(payload)
            assert str(ours.value) == str(local.value)
        else:
            assert compact_json(payload) == json.dumps(payload, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize("kind", ["column", "const", "list", "nested"])
def test_object_texts_refuse_a_non_finite_field_as_the_local_writer_does(kind: str) -> None:
    """Each way a field reaches `object_texts` (a typed column, a constant, Python values, a nested column):
    a non-finite value is the local writer's error for a payload holding it, naming the field."""
    vals: list[Any] = [1.5, 2.0, math.inf, -0.5]
    if kind == "nested":
        vals = [[v] for v in vals]
    col: Any = {"column": pa.array(vals), "const": ConstColumn(math.nan), "list": vals,
                "nested": pa.array(vals)}[kind]
    with pytest.raises(UdmError) as ours:
        object_texts([("g", pa.array(["x"] * 4)), ("total", col)], 4)
    bad = math.nan if kind == "const" else vals[2]
    with pytest.raises(UdmError) as local:
        strict.dumps({"g": "x", "total": bad})
    assert str(ours.value) == str(local.value)
    fine: Any = {"column": pa.array([1.5, 2.0, 3.0, -0.5]), "const": ConstColumn(4), "list": [1, "a", None, 2.5],
                 "nested": pa.array([[1.0], [2.5], [], [3.0]])}[kind]
    texts = object_texts([("g", pa.array(["x"] * 4)), ("total", fine)], 4).to_pylist()
    values = [fine.value] * 4 if kind == "const" else fine if kind == "list" else fine.to_pylist()
    assert texts == [json.dumps({"g": "x", "total": v}, separators=(",", ":")) for v in values]


ROUTES = [("spark", LINEAR), ("spark", STAGED), ("spark-streaming", LINEAR), ("spark-streaming", STAGED)]


@pytest.mark.spark
@pytest.mark.parametrize("engine,query", ROUTES, ids=["batch-linear", "batch-staged", "streaming-linear",
                                                       "streaming-staged"])
def test_every_spark_route_refuses_a_non_finite_result_as_the_local_engine_does(spark: Any, engine: str,
                                                                               query: dict[str, Any]) -> None:
    from udm.host.testing import assert_equivalent, oracle, registered_engine

    spec = parse_query(query)
    feed = (lambda big: _inputs(7, big)) if "inputs" in query else (lambda big: _stream(7, big))
    run = registered_engine(engine, batch_size=5, buckets=2)
    assert_equivalent(run(spec, feed(1e307)), oracle(spec, feed(1e307)))  # finite: the route runs the query
    with pytest.raises(UdmError) as local:
        registered_engine("local")(spec, feed(1e308))
    assert "'total' is not a finite number" in str(local.value)
    with pytest.raises(UdmError) as ours:
        run(spec, feed(1e308))
    assert str(ours.value) == str(local.value)
