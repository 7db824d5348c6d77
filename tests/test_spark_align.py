"""``align`` and ``finalize`` on the Spark engines (batch and Structured Streaming), after a join, a union and
a window step: the output CHT is the graph oracle's (where it can tell) and the local engine's, and so are
the dead letters. Align keeps the graph's partitioning (it only holds output back); a finalize with a finite
horizon measures it on everything it reads, so the query runs in one bucket (`partition.whole_input`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.spark.partition import graph_routing, whole_input
from udm.host.temporal.elements import parse_element
from udm.host.testing import oracle
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate_related

pytestmark = pytest.mark.spark

TWO = {"a": {}, "b": {}}
JOIN = [{"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "r_"}]
QUERIES: dict[str, dict[str, Any]] = {
    "align_after_join": {"inputs": TWO, "steps": [*JOIN, {"id": "al", "op": "align", "max_delay": 4}]},
    "align_inf_after_window": {"inputs": TWO, "steps": [
        {"id": "u", "op": "union", "from": ["a", "b"]},
        {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 5}, "group_by": ["k"], "udm": "count",
         "as": "n"},
        {"id": "al", "op": "align", "max_delay": "inf"}]},
    "finalize_after_union": {"inputs": TWO, "steps": [
        {"id": "u", "op": "union", "from": ["a", "b"]}, {"id": "f", "op": "finalize", "max_memory_time": 6}]},
    "finalize_after_join": {"inputs": TWO, "steps": [*JOIN, {"id": "f", "op": "finalize", "max_memory_time": 0}]},
}


@pytest.fixture(scope="module")
def streams() -> dict[str, list[Any]]:
    return generate_related(["a", "b"], seed=3, keys=3, events=30, disorder="out_of_order", speculation=0.4,
                            chain=2, cti="regular", bad=0.05)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, streams: dict[str, list[Any]]) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("align_in")
    out = {}
    for name, els in streams.items():
        out[name] = d / f"{name}.jsonl"
        write_stream(out[name], els)
    return out


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _run(engine: str, query: dict[str, Any], files: dict[str, Path], out: Path) -> Any:
    bound = bind(parse_query(query))
    req = RunRequest(bound, {n: files[n] for n in bound.graph.inputs}, out, out.with_suffix(".dl.jsonl"),
                     options={"buckets": 2})
    return (run_local if engine == "local" else get_engine(engine))(req)


def test_routing() -> None:
    assert graph_routing(parse_query(QUERIES["align_after_join"])) == {"a": ["k"], "b": ["k"]}
    assert not whole_input(parse_query(QUERIES["align_after_join"]))
    assert whole_input(parse_query(QUERIES["finalize_after_join"]))
    assert graph_routing(parse_query(QUERIES["finalize_after_join"])) is None
    inf = {"inputs": TWO, "steps": [*JOIN, {"id": "f", "op": "finalize"}]}
    assert graph_routing(parse_query(inf)) == {"a": ["k"], "b": ["k"]}


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_equals_the_local_engine_and_the_oracle(spark: Any, tmp_path: Path, files: dict[str, Path],
                                                streams: dict[str, list[Any]], engine: str, name: str) -> None:
    query = QUERIES[name]
    local = _run("local", query, files, tmp_path / "local.jsonl")
    res = _run(engine, query, files, tmp_path / "spark.jsonl")
    got = cht(_read(tmp_path / "spark.jsonl"))
    assert got == cht(_read(tmp_path / "local.jsonl"))
    assert got.rows(), "the query should produce something"
    if name.startswith("align"):  # (after a union or a join the oracle cannot tell which corrections come
        assert got == oracle(parse_query(query), streams)  # too late for a finalize: the local engine can)
    dead = sorted((tmp_path / "spark.dl.jsonl").read_text().splitlines())
    assert dead == sorted((tmp_path / "local.dl.jsonl").read_text().splitlines())
    assert res.dead_lettered == local.dead_lettered
    if name.startswith("finalize"):
        assert any("finalize horizon" in x for x in dead)  # the horizon bites in these streams
