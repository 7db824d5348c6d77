"""A keyed query graph on Structured Streaming keeps its state per key (`udm.host.spark.key_state`,
semantics-notes 52): `run_stream` over ``{input: streaming DataFrame}`` loads, per micro-batch, only the keys
it touches and (when a CTI moves) the keys with live state, as the processor's own stats rows count; the
output CHT is the graph oracle's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.stream_io import collect, json_files, out_elements
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import parse_element
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = pytest.mark.spark

JOIN = {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["l_k"], "udm": "count"}]}
SCHEMA = "line long, kind string, id string, le long, re long, re_new long, t long, payload string"
KEYS = 16
INF = 2**63 - 1


def _files() -> dict[str, list[list[dict[str, Any]]]]:
    """Micro-batch 0: an event of every key on ``a``, CTIs; 1: one ``b`` event (key 3), no CTI; 2: a
    retraction repeating its key, CTIs ending every event; 3: the end. Lines of ``b`` follow ``a``'s, so
    the order inside a bucket is the oracle's."""
    a = [[*({"line": k + 1, "kind": "insert", "id": f"a{k}", "le": k, "re": 120,
             "payload": json.dumps({"k": k, "v": float(k)})} for k in range(KEYS)),
          {"line": 100, "kind": "cti", "t": 1}],
         [],
         [{"line": 101, "kind": "cti", "t": 150}],
         [{"line": 102, "kind": "cti", "t": INF}]]
    b = [[{"line": 1000, "kind": "cti", "t": 1}],
         [{"line": 1001, "kind": "insert", "id": "b3", "le": 5, "re": 90, "payload": '{"k":3.0,"w":1}'}],
         [{"line": 1002, "kind": "retract", "id": "b3", "le": 5, "re": 90, "re_new": 40, "payload": '{"k":3}'},
          {"line": 1003, "kind": "cti", "t": 150}],
         [{"line": 1004, "kind": "cti", "t": INF}]]
    return {"a": a, "b": b}


def _logical(files: list[list[dict[str, Any]]]) -> list[Any]:
    return [parse_element({k: v for k, v in r.items() if v is not None and k != "line"}
                          | ({"payload": json.loads(r["payload"])} if r.get("payload") else {}))
            for f in files for r in f]


def _loaded(rows: list[dict[str, Any]], batch: int, what: str = "loaded") -> int:
    """Keys (or ``engines``) loaded in micro-batch ``batch``, summed over its buckets."""
    return sum(json.loads(r["payload"])["keys"][what] for r in rows
               if r["stream"] == "stats" and r["batch"] == batch)


@pytest.mark.slow
def test_a_keyed_graph_keeps_state_per_key(spark: Any, tmp_path: Path) -> None:
    from udm.host.spark.streaming import run_stream

    files = _files()
    frames = {n: json_files(spark, tmp_path / n, [f or [] for f in parts], SCHEMA) for n, parts in files.items()}
    rows = collect(run_stream(JOIN, frames, buckets=2), tmp_path / "ck")
    assert not [r for r in rows if r["stream"] == "dead"]
    assert _loaded(rows, 0) == KEYS
    # one key touched, no CTI moved: one engine read of two (each bucket's keys, first seen together, share one,
    # semantics-notes 78)
    assert _loaded(rows, 1, "engines") == 1 and _loaded(rows, 1) < KEYS
    assert _loaded(rows, 2) == KEYS  # the CTIs reach every key with live state
    expected = oracle_run(bind(parse_query(JOIN)), {n: _logical(p) for n, p in files.items()})
    verdict = verify(out_elements(rows), expected.cht)
    assert verdict, str(verdict)
    assert len(expected.cht) > 0
