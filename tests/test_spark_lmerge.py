"""``lmerge`` (SEMANTICS §8) on the Spark engines: physical variants of one stream (disorder, retraction
chains, phantoms, lags) merged in batch and streaming, against the oracle's common CHT and the local engine.

An lmerge needs the rows of every input together, so its graph runs in one bucket (`graph_routing`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.spark.partition import graph_routing
from udm.host.temporal.elements import Cti, Insert, Retract, parse_element
from udm.host.testing import assert_equivalent, check_engine, lmerge_inputs, oracle, registered_engine
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate

pytestmark = pytest.mark.spark


def _inputs(seed: int, n: int, case: str) -> dict[str, list[Any]]:
    base = generate(seed=seed, events=30, groups=3, duration="mixed", speculation=0.4, disorder="slightly",
                    cti="regular")
    return lmerge_inputs(base, n, seed=seed, case=case)  # type: ignore[arg-type]


def _query(names: list[str], algorithm: str) -> dict[str, Any]:
    return {"inputs": {n: {} for n in names},
            "steps": [{"id": "m", "op": "lmerge", "from": names, "algorithm": algorithm},
                      {"id": "out", "op": "project", "drop": ["_row"]}]}


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_lmerge_graph_runs_in_one_bucket() -> None:
    assert graph_routing(parse_query(_query(["a", "b"], "R3"))) is None


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize(("algorithm", "n"), [("R3", 3), ("R4", 2)])
def test_lmerge_equals_the_oracle_and_the_local_engine(spark: Any, tmp_path: Path, engine: str, algorithm: str,
                                                       n: int) -> None:
    inputs = _inputs(7, n, algorithm)
    files = {}
    for name, stream in inputs.items():
        files[name] = tmp_path / f"{name}.jsonl"
        write_stream(files[name], stream)
    query = _query(list(inputs), algorithm)
    bound = bind(parse_query(query))
    reference = oracle(bound, inputs)
    assert reference.rows()
    local = run_local(RunRequest(bound, files, tmp_path / "local.jsonl", tmp_path / "local.dl.jsonl"))
    res = get_engine(engine)(RunRequest(bound, files, tmp_path / "spark.jsonl", tmp_path / "spark.dl.jsonl",
                                        options={"buckets": 2}))
    assert_equivalent(_read(tmp_path / "spark.jsonl"), reference)
    assert cht(_read(tmp_path / "spark.jsonl")) == cht(_read(tmp_path / "local.jsonl"))
    assert res.dead_lettered == local.dead_lettered == 0
    # both Spark paths report the counters too (one bucket: what the local engine received)
    assert res.lmerge["m"]["inserts_in"] == local.lmerge["m"]["inserts_in"]
    assert res.to_json_dict()["lmerge"]["m"]["ctis_out"] >= 1
    got = res.lmerge["m"]
    assert got["inserts_out"] + got["partial_retractions_out"] + got["full_retractions_out"] <= got["inserts_in"]
    counts = local.lmerge["m"]
    assert counts["inserts_out"] + counts["partial_retractions_out"] + counts["full_retractions_out"] \
        <= counts["inserts_in"]
    # Theorem 1 on the Spark output file itself, against the input files
    spark_out = _read(tmp_path / "spark.jsonl")
    ins_in = sum(isinstance(e, Insert) for s in inputs.values() for e in s)
    ctis_in = sum(isinstance(e, Cti) for s in inputs.values() for e in s)
    assert sum(isinstance(e, (Insert, Retract)) for e in spark_out) <= ins_in
    assert sum(isinstance(e, Cti) for e in spark_out) <= ctis_in


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_check_engine_holds_spark_lmerge_to_the_oracle(spark: Any, engine: str) -> None:
    inputs = _inputs(3, 3, "R4")
    report = check_engine(registered_engine(engine, buckets=2), parse_query(_query(list(inputs), "auto")), inputs,
                          variants=0, interleavings=("sync",))
    assert report.ok, report.text()
