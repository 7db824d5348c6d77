"""Structured Streaming with state per key (`udm.host.spark.key_state`, semantics-notes 41-43): on Spark,
a micro-batch loads only the engines of the keys it touches and the engines due (the processor's own count,
reported in its stats rows); the output and every bucket's CTI, micro-batch by micro-batch, are those of the
whole-bucket layout and the CHT the oracle's; a query stopped and restarted from its checkpoint goes on
from the per-key state; a checkpoint of the old layout is refused in one line."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.stream_io import collect, json_files, out_elements
from udm.host.errors import UdmError
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine
from udm.host.temporal.elements import Insert, parse_element
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = pytest.mark.spark

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
SCHEMA = "line long, kind string, id string, le long, re long, re_new long, t long, payload string"
KEYS = 24
INF = 2**63 - 1


def _files() -> list[list[dict[str, Any]]]:
    """Micro-batch 0: one event per key (open windows); 1: one key only, a CTI closing nothing;
    2: a CTI closing every key's windows, no elements; 3: a retraction and the end."""
    ins = [{"line": k + 1, "kind": "insert", "id": f"e{k}", "le": k, "re": k + 150,
            "payload": json.dumps({"g": f"k{k}", "v": float(k)})} for k in range(KEYS)]
    return [[*ins, {"line": 100, "kind": "cti", "t": 10}],
            [{"line": 101, "kind": "insert", "id": "x", "le": 20, "re": 30, "payload": '{"g":"k5","v":7.0}'},
             {"line": 102, "kind": "cti", "t": 50}],
            [{"line": 103, "kind": "cti", "t": 200}],
            [{"line": 104, "kind": "insert", "id": "y", "le": 250, "re": 260, "payload": '{"g":"k1","v":1.0}'},
             {"line": 105, "kind": "retract", "id": "y", "le": 250, "re": 260, "re_new": 255,
              "payload": '{"g":"k1"}'},
             {"line": 106, "kind": "cti", "t": INF}]]





def _logical(files: list[list[dict[str, Any]]]) -> list[Any]:
    return [parse_element({k: v for k, v in r.items() if v is not None and k != "line"}
                          | ({"payload": json.loads(r["payload"])} if r.get("payload") else {}))
            for f in files for r in f]


def _keys_stats(rows: list[dict[str, Any]], batch: int, what: str = "loaded") -> tuple[int, int]:
    """(keys loaded, keys live) summed over the buckets called in micro-batch ``batch`` (``what``:
    ``engines``, engines loaded instead of keys)."""
    got = [json.loads(r["payload"])["keys"] for r in rows if r["stream"] == "stats" and r["batch"] == batch]
    return sum(k[what] for k in got), sum(k["live"] for k in got)


@pytest.mark.slow
def test_a_micro_batch_loads_only_touched_and_due_keys(spark: Any, tmp_path: Path) -> None:
    from udm.host.spark.streaming import run_stream

    files = _files()
    rows = collect(run_stream(QUERY, json_files(spark, tmp_path / "in", files, SCHEMA), buckets=2), tmp_path / "ck")
    assert _keys_stats(rows, 0) == (KEYS, KEYS)
    # one key touched; cti(50) closes nothing: its engine alone (each bucket's keys, first seen together, share
    # one, semantics-notes 78)
    assert _keys_stats(rows, 1, "engines") == (1, KEYS) and _keys_stats(rows, 1)[0] < KEYS
    assert _keys_stats(rows, 2) == (KEYS, 0)  # cti(200): every key is due, then holds nothing
    assert verify(out_elements(rows), oracle_run(bind(parse_query(QUERY)), _logical(files)).cht)
    # every bucket's CTI in every micro-batch is the whole-bucket layout's (one engine per bucket)
    old = collect(run_stream(QUERY, json_files(spark, tmp_path / "in2", files, SCHEMA), buckets=2, per_key=False),
                   tmp_path / "ck2")

    def ctis(rs: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
        return sorted((r["batch"], r["bucket"], r["t"]) for r in rs if r["stream"] == "cti")

    assert ctis(rows) == ctis(old)
    assert verify(out_elements(rows), out_elements(old))


def test_restart_from_the_checkpoint_goes_on_from_the_per_key_state(spark: Any, tmp_path: Path) -> None:
    """Stopped after two micro-batches (windows still open in every key), restarted on the same checkpoint
    with the rest of the input: the output so far and after is the oracle's."""
    from udm.host.spark.streaming import run_stream

    files = _files()
    src = tmp_path / "in"
    first = collect(run_stream(QUERY, json_files(spark, src, files[:2], SCHEMA), buckets=2), tmp_path / "ck")
    assert not [r for r in first if r["stream"] == "out"]
    base = time.time() - 500
    for i, rows in enumerate(files[2:], 2):
        p = src / f"p{i:03d}.json"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.utime(p, (base + i, base + i))
    second = collect(run_stream(QUERY, spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
                                 .json(str(src)), buckets=2), tmp_path / "ck")
    assert _keys_stats(second, 2) == (KEYS, 0)
    assert verify(out_elements(first + second), oracle_run(bind(parse_query(QUERY)), _logical(files)).cht)


def test_a_checkpoint_of_the_whole_bucket_layout_is_refused(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    write_stream(src, [Insert("a", 1, 2, {"g": "x", "v": 1.0})])
    ck = tmp_path / "ck"
    req = RunRequest(bind(parse_query(QUERY)), src, tmp_path / "o.jsonl", checkpoint=ck)
    get_engine("spark-streaming")(req)
    meta = json.loads((ck / "run.json").read_text())
    for old in (2, 9):  # (9: an engine per key, before keys first seen together shared one, semantics-notes 78)
        (ck / "run.json").write_text(json.dumps({**meta, "layout": old}))
        with pytest.raises(UdmError, match=r"different state layout \(an older udmkit's\)"):
            get_engine("spark-streaming")(req)


def test_a_dataframe_checkpoint_of_the_whole_bucket_layout_is_refused(spark: Any, tmp_path: Path) -> None:
    from udm.host.spark.streaming import run_stream

    files = _files()
    src = tmp_path / "in"
    collect(run_stream(QUERY, json_files(spark, src, files[:1], SCHEMA), buckets=2, per_key=False), tmp_path / "ck")
    (src / "p001.json").write_text("".join(json.dumps(r) + "\n" for r in files[1]), encoding="utf-8")
    again = run_stream(QUERY, spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src)),
                       buckets=2)
    with pytest.raises(Exception, match=r"UdmError: a checkpoint of the whole-bucket state layout \(udmkit before "
                       r"streaming layout 3\): state is now kept per key; start from a new checkpoint directory"):
        collect(again, tmp_path / "ck")
