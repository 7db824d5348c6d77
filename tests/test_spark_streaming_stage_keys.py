"""A staged graph on Structured Streaming with its keyed stages kept per key (semantics-notes 59): the
output CHT is the graph oracle's, and every stage reports per-key state (keys loaded and live) in its stats.
The per-key/whole-bucket equivalence micro-batch by micro-batch is `test_stream_stage_keys` (Spark-free)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stage_queries import JOIN_THEN_WINDOW

from tests.stream_io import collect, json_files, out_elements, with_keys
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import assert_equivalent, oracle

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _record(line: int, el: Any) -> dict[str, Any]:
    if isinstance(el, Cti):
        return {"line": line, "kind": "cti", "t": el.t}
    r = {"line": line, "kind": "insert" if isinstance(el, Insert) else "retract", "id": el.id, "le": el.le,
         "re": el.re, "payload": json.dumps(el.payload)}
    return r if isinstance(el, Insert) else {**r, "re_new": el.re_new}


def test_staged_graph_with_per_key_stages_equals_the_oracle(spark: Any, tmp_path: Path) -> None:
    """Joined by k, then counted per v (two keyed stages, 2 buckets each), with disorder and retractions,
    over four micro-batches: the oracle's CHT; both stages' stats name their keys (state per key)."""
    from udm.host.spark.streaming import run_stream
    from udm.host.testing.generator import generate_related

    streams = {n: with_keys(s) for n, s in generate_related(
        2, seed=11, keys=5, events=30, duration="mixed", speculation=0.3, disorder="slightly",
        cti="regular").items()}
    assert any(isinstance(e, Retract) for s in streams.values() for e in s)
    schema = "line long, kind string, id string, le long, re long, re_new long, t long, payload string"
    frames = {}
    for name, els in streams.items():
        size = -(-len(els) // 4)
        files = [[_record(i * size + j + 1, el) for j, el in enumerate(els[i * size:(i + 1) * size])]
                 for i in range(4)]
        frames[name] = json_files(spark, tmp_path / name, files, schema)
    got = collect(run_stream(JOIN_THEN_WINDOW, frames, buckets=2), tmp_path / "ck")
    out = out_elements(got)
    assert_equivalent(out, oracle(parse_query(JOIN_THEN_WINDOW), streams))
    assert not [r for r in got if r["stream"] == "dead"]
    stats = [json.loads(r["payload"]) for r in got if r["stream"] == "stats"]
    assert {s["stage"] for s in stats if "keys" in s} == {0, 1}
    assert all(len(r["id"].split(".")) == 3 for r in got if r["stream"] == "out")  # bucket.serial.id
