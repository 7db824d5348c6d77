"""Query graphs (SEMANTICS §10) on the Spark engines: several named inputs, union / project /
alter_lifetime / join / multicast, on generated streams with disorder, retractions, CTIs and bad lines.

The reference is the conformance kit's brute-force oracle (independent of the engine); dead letters (with
their input) and per-input counts must be the local engine's too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.spark.partition import BY_ID, graph_routing
from udm.host.temporal.elements import parse_element
from udm.host.testing import assert_equivalent, oracle
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate

pytestmark = pytest.mark.spark

TWO = {"a": {}, "b": {}}
UNION = {"inputs": TWO, "steps": [{"id": "u", "op": "union", "from": ["a", "b"]}]}
JOIN_AFTER_WINDOW = {"inputs": TWO, "steps": [
    {"id": "w", "from": "a", "op": "window", "window": {"type": "hopping", "size": 10, "hop": 5},
     "group_by": ["g"], "udm": "sum", "input": "v", "as": "total"},
    {"id": "j", "op": "join", "from": ["w", "b"], "on": [["g", "g"]], "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "out", "op": "project", "keep": ["l_g", "l_total", "r_v"]}]}
LEFT_ANTI = {"inputs": TWO, "steps": [{"id": "j", "op": "join", "type": "left_anti", "from": ["a", "b"], "on": "g"}]}
ALTER_THEN_WINDOW = {"inputs": TWO, "steps": [
    {"id": "u", "op": "union", "from": ["a", "b"]},
    {"id": "al", "op": "alter_lifetime", "le": {"shift": 3}, "duration": {"const": 7}},
    {"id": "w", "op": "window", "window": {"type": "snapshot"}, "group_by": ["g"], "udm": "count"}]}
MULTICAST = {"steps": [
    {"id": "x", "from": "main", "op": "project", "set": {"branch": "x"}},
    {"id": "y", "from": "main", "op": "alter_lifetime", "le": {"snap": {"size": 4}}, "duration": {"const": 2}},
    {"id": "u", "op": "union", "from": ["x", "y"]}]}

QUERIES = {"union": UNION, "join_after_window": JOIN_AFTER_WINDOW, "left_anti": LEFT_ANTI,
           "alter_then_window": ALTER_THEN_WINDOW, "multicast": MULTICAST}


SEEDS = {"a": 11, "b": 12}


def _stream(seed: int) -> list[Any]:
    return generate(seed=seed, events=25, groups=3, duration="mixed", speculation=0.4, disorder="slightly",
                    cti="regular", bad=0.05)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("graph_in")
    paths = {}
    for name, seed in SEEDS.items():
        paths[name] = d / f"{name}.jsonl"
        write_stream(paths[name], _stream(seed))
    return paths


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _dead(path: Path) -> list[str]:
    return sorted(path.read_text(encoding="utf-8").splitlines())


def _run(engine: str, query: dict[str, Any], files: dict[str, Path], out: Path) -> Any:
    bound = bind(parse_query(query))
    names = bound.graph.inputs
    source: Any = files["a"] if names == ("main",) else {n: files[n] for n in names}
    req = RunRequest(bound, source, out, out.with_suffix(".dl.jsonl"), options={"buckets": 2})
    return (run_local if engine == "local" else get_engine(engine))(req)


def test_routing_is_graph_aware() -> None:
    """A join's inputs route by their own side of ``on``; a window before it by its key; a union of
    inputs keeps the key; a graph with no stateful step goes by id; a key dropped before a join: one bucket."""
    assert graph_routing(parse_query(JOIN_AFTER_WINDOW)) == {"a": ["g"], "b": ["g"]}
    assert graph_routing(parse_query({"inputs": {"bids": {}, "auctions": {}}, "steps": [
        {"id": "j", "op": "join", "from": ["bids", "auctions"], "on": [["auction", "id"]]}]})) == \
        {"bids": ["auction"], "auctions": ["id"]}
    assert graph_routing(parse_query(ALTER_THEN_WINDOW)) == {"a": ["g"], "b": ["g"]}
    assert graph_routing(parse_query(UNION)) == BY_ID
    assert graph_routing(parse_query({"inputs": TWO, "steps": [
        {"id": "p", "from": "b", "op": "project", "drop": ["g"]},
        {"id": "j", "op": "join", "from": ["a", "p"], "on": "g"}]})) is None


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_graph_equals_the_oracle_and_the_local_engine(spark: Any, tmp_path: Path, files: dict[str, Path],
                                                      engine: str, name: str) -> None:
    query = QUERIES[name]
    spec = parse_query(query)
    inputs = spec.input_names
    elements: Any = _stream(SEEDS["a"]) if inputs == ["main"] else {n: _stream(SEEDS[n]) for n in inputs}
    reference = oracle(spec, elements)
    assert reference.rows(), "the query should produce something"
    local = _run("local", query, files, tmp_path / "local.jsonl")
    res = _run(engine, query, files, tmp_path / "spark.jsonl")
    assert_equivalent(_read(tmp_path / "spark.jsonl"), reference)
    assert cht(_read(tmp_path / "spark.jsonl")) == cht(_read(tmp_path / "local.jsonl"))
    assert _dead(tmp_path / "spark.dl.jsonl") == _dead(tmp_path / "local.dl.jsonl")
    assert res.inputs == local.inputs
    assert res.dead_lettered == local.dead_lettered


def test_dataframe_api_takes_a_dict(spark: Any, files: dict[str, Path]) -> None:
    """`run_batch` with ``{input: DataFrame}``: key buckets, dead letters with their input."""
    from udm.host.io.jsonl import JsonlReader
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements, elements_df

    frames = {}
    for name in ("a", "b"):
        reader = JsonlReader(files[name])
        try:
            frames[name] = elements_df(spark, list(reader))
        finally:
            reader.close()
    bound = bind(parse_query(JOIN_AFTER_WINDOW))
    run = run_batch(bound, frames, buckets=2)
    try:
        assert (run.split, run.buckets) == ("keys", 2)
        out = collect_elements(run.output)
        dead = {(r["input"], r["line"]) for r in run.dead_letters.collect()}
    finally:
        run.unpersist()
    reqs = {n: files[n] for n in ("a", "b")}
    local_out = files["a"].parent / "api-local.jsonl"
    local_dl = local_out.with_suffix(".dl.jsonl")
    run_local(RunRequest(bound, reqs, local_out, local_dl))
    assert cht(out) == cht(_read(local_out))
    assert dead == {(d["input"], d["line"]) for d in map(json.loads, local_dl.read_text().splitlines())}


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_check_engine_holds_spark_to_the_oracle_on_related_streams(spark: Any, engine: str) -> None:
    """The kit's `check_engine` over a registered Spark engine: generated related streams (shared keys,
    disorder, retractions, CTIs, bad lines), the output CHT against the oracle and the output properties."""
    from udm.host.testing import check_engine, registered_engine
    from udm.host.testing.generator import generate_related

    streams = generate_related(2, seed=5, keys=3, events=20, bad=0.05)  # inputs a and b, key field k
    query = parse_query({"inputs": TWO, "steps": [
        {"id": "w", "from": "a", "op": "window", "window": {"type": "tumbling", "size": 10},
         "group_by": ["k"], "udm": "count", "as": "n"},
        {"id": "j", "op": "join", "from": ["w", "b"], "on": "k", "right_prefix": "b_"}]})
    report = check_engine(registered_engine(engine, buckets=2), query, streams, variants=0,
                          interleavings=("sync",))
    assert report.ok, report.text()


def test_streaming_graph_restart_from_checkpoint_is_exactly_once(spark: Any, tmp_path: Path,
                                                                  files: dict[str, Path]) -> None:
    """A two-input graph on spark-streaming stopped after micro-batch 3 wrote its output but before Spark
    committed it, then run again with the same checkpoint: output and dead letters are byte for byte those
    of an uninterrupted run, and the CHT is the oracle's. The stopped run's output file holds the
    micro-batches committed before the stop, which the resumed run continues."""
    from udm.host.spark.stream_files import StreamStopped

    bound = bind(parse_query(JOIN_AFTER_WINDOW))
    inputs = {n: files[n] for n in bound.graph.inputs}

    def run(out: Path, **kw: Any) -> Any:
        req = RunRequest(bound, inputs, out, out.with_suffix(".dl.jsonl"), batch_size=10,
                         checkpoint=kw.pop("checkpoint", None), options={"buckets": 2, **kw})
        return get_engine("spark-streaming")(req)

    ck = tmp_path / "ck"
    with pytest.raises(StreamStopped, match="run the same command again"):
        run(tmp_path / "a.jsonl", checkpoint=ck, stop_after_batches=3)
    before = (tmp_path / "a.jsonl").read_bytes()
    resumed = run(tmp_path / "a.jsonl", checkpoint=ck)
    assert (tmp_path / "a.jsonl").read_bytes().startswith(before)
    whole = run(tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.dl.jsonl").read_bytes() == (tmp_path / "b.dl.jsonl").read_bytes()
    assert (resumed.elements_out, resumed.dead_lettered, resumed.inputs) == \
        (whole.elements_out, whole.dead_lettered, whole.inputs)
    assert_equivalent(_read(tmp_path / "a.jsonl"), oracle(bound.spec, {n: _stream(SEEDS[n]) for n in inputs}))


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_object_join_keys_meet_with_numbers_by_value(spark: Any, tmp_path: Path, engine: str) -> None:
    """``{"x": 1}`` on one side meets ``{"x": 1.0}`` on the other, as the oracle and the local engine join
    them, however the buckets split the keys."""
    from udm.host.temporal.elements import Cti, Insert

    a = [Insert(f"a{i}", i, i + 20, {"g": {"x": [i, 1]}, "v": i}) for i in range(8)] + [Cti(30)]
    b = [Insert(f"b{i}", i + 1, i + 5, {"g": {"x": [float(i), 1.0]}, "w": i}) for i in range(8)] + [Cti(30)]
    files = {"a": tmp_path / "a.jsonl", "b": tmp_path / "b.jsonl"}
    write_stream(files["a"], a)
    write_stream(files["b"], b)
    query = {"inputs": TWO, "steps": [{"id": "j", "op": "join", "from": ["a", "b"], "on": "g"}]}
    reference = oracle(parse_query(query), {"a": a, "b": b})
    assert len(reference.rows()) == 8
    _run(engine, query, files, tmp_path / "out.jsonl")
    assert_equivalent(_read(tmp_path / "out.jsonl"), reference)
