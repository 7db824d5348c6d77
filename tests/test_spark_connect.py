"""Spark Connect: the batch paths, SQL registration and the streaming path through a Connect session
give the local engine's answer (INTERFACES §3: "Spark Connect remotes welcome").

The session runs in a child process (`connect_job`), started with ``remote="local[2]"``, so the check
needs no server of its own; everything it computes is compared here against the local engine and
Spark's own built-in ``median``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Insert, Retract, element_to_json, parse_element
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}


@pytest.fixture(scope="module")
def connect_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("connect")
    clean = generate(seed=7, events=40, groups=3, duration="point", disorder="in_order", speculation=0.0, bad=0.0)
    micro = [
        [{"line": 1, "kind": "insert", "id": "a", "le": 1, "re": 9, "payload": '{"g":"x","v":1.0}'},
         {"line": 2, "kind": "insert", "id": "b", "le": 2, "re": 4, "payload": '{"g":"y","v":2.0}'}],
        [{"line": 3, "kind": "retract", "id": "a", "le": 1, "re": 9, "re_new": 3, "payload": '{"g":"x"}'},
         {"line": 4, "kind": "cti", "t": 12}],
        [{"line": 5, "kind": "insert", "id": "c", "le": 15, "re": 16, "payload": '{"g":"x","v":5.0}'},
         {"line": 6, "kind": "cti", "t": 9223372036854775807}],
    ]
    ticks = [["A", 1, 1.0], ["A", 3, 5.0], ["A", 4, 2.0], ["A", 12, 7.0], ["B", 2, 4.0], ["B", 5, 6.0],
             ["A", 15, 3.0], ["A", 19, 11.0], ["B", 13, 1.5]]
    job = {"query": QUERY, "stream": [element_to_json(e) for e in clean], "micro_batches": micro, "ticks": ticks}
    (work / "job.json").write_text(json.dumps(job), encoding="utf-8")
    # SPARK_TESTING: PySpark's local Connect server then binds an ephemeral port (and its client finds it)
    # instead of 15002, which another Spark Connect server on the machine may hold
    env = {**os.environ, "SPARK_TESTING": "1"}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("connect_job.py")), str(work)],
                          capture_output=True, text=True, timeout=600, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"job": job, "clean": clean, **json.loads((work / "result.json").read_text(encoding="utf-8"))}


def test_the_session_is_a_connect_session(connect_run: dict[str, Any]) -> None:
    assert connect_run["session"].startswith("pyspark.sql.connect")


@pytest.mark.parametrize("path", ["algebraic", "engine"])
def test_batch_paths_over_connect_equal_the_oracle(connect_run: dict[str, Any], path: str) -> None:
    got = connect_run[path]
    assert got["path"] == path
    expected = oracle_run(bind(parse_query(QUERY)), connect_run["clean"])
    out = [parse_element(x) for x in got["out"]]
    assert out and verify(out, expected.cht)
    assert got["dead"] == []


def test_sql_median_over_connect_equals_spark_builtin(connect_run: dict[str, Any]) -> None:
    def rows(key: str) -> list[tuple[str, int, float]]:
        return sorted((r["k"], r["ws"], r["m"]) for r in connect_run["sql"][key])

    ours, ref = rows("ours"), rows("builtin")
    assert len(ours) == 4 and [r[:2] for r in ours] == [r[:2] for r in ref]
    assert [r[2] for r in ours] == pytest.approx([r[2] for r in ref])


def test_streaming_over_connect_equals_the_local_engine(connect_run: dict[str, Any]) -> None:
    rows = connect_run["stream"]
    out: list[Any] = []
    for r in sorted((r for r in rows if r["stream"] == "out"), key=lambda r: (r["bucket"], r["seq"])):
        out.append(Insert(r["id"], r["le"], r["re"], json.loads(r["payload"])) if r["kind"] == "insert"
                   else Retract(r["id"], r["le"], r["re"], r["re_new"]))
    logical = [parse_element({k: v for k, v in r.items() if v is not None and k != "line"}
                             | ({"payload": json.loads(r["payload"])} if r.get("payload") else {}))
               for batch in connect_run["job"]["micro_batches"] for r in batch]
    runner = QueryRunner(bind(parse_query(QUERY)))
    local = [e for el in logical for e in runner.process(el)] + list(runner.finish())
    assert verify(out, oracle_run(bind(parse_query(QUERY)), logical).cht)
    assert verify(local, oracle_run(bind(parse_query(QUERY)), logical).cht)
    assert not [r for r in rows if r["stream"] == "dead"]
