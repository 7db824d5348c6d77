"""Result sinks (`udm.host.spark.stream_sinks`): a directory of Parquet / JSON result files, one folder per
micro-batch, read back in application order; the elements they encode have the oracle's CHT, and a query
restarted from its checkpoint leaves each batch written once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.errors import UdmError
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import parse_element
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = pytest.mark.spark

SUM_BY_G = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                       "udm": "sum", "input": "v"}]}
FILES = [
    [{"kind": "insert", "id": "a", "le": 1, "re": 9, "payload": {"g": "x", "v": 1.0}},
     {"kind": "insert", "id": "b", "le": 2, "re": 5, "payload": {"g": "y", "v": 2.0}},
     {"kind": "retract", "id": "a", "le": 1, "re": 9, "re_new": 3, "payload": {"g": "x"}},
     {"kind": "cti", "t": 10}],
    [{"kind": "insert", "id": "c", "le": 11, "re": 12, "payload": {"g": "x", "v": 4.0}},
     {"kind": "retract", "id": "c", "le": 11, "re": 12, "re_new": 11, "payload": {"g": "x"}},
     {"kind": "insert", "id": "d", "le": 14, "re": 19, "payload": {"g": "y", "v": 5.0}},
     {"kind": "cti", "t": "inf"}],
]


def test_result_files_in_application_order_equal_the_oracle(spark: Any, tmp_path: Path) -> None:
    """Both formats, as two queries running side by side over the same directory (one Spark job's fixed
    cost covers both): each writes one folder per micro-batch, a restart from its checkpoint writes batch
    0 not again, and the rows read back encode the oracle's CHT with every bucket's CTI per batch."""
    from udm.host.spark.stream_sinks import read_result_files, result_elements, write_result_files
    from udm.host.spark.stream_sources import FILE_ORDER, event_files
    from udm.host.spark.streaming import run_stream

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    formats = ("parquet", "json")

    def land(k: int) -> None:
        tmp = tmp_path / f".{k}.jsonl"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in FILES[k]), encoding="utf-8")
        tmp.rename(inbox / f"{k}.jsonl")

    def step() -> None:  # start both queries (from their checkpoints), read what is there, stop
        queries = [write_result_files(run_stream(SUM_BY_G, event_files(spark, inbox), buckets=2, order=FILE_ORDER),
                                      tmp_path / f"out-{fmt}", checkpoint=tmp_path / f"ck-{fmt}", format=fmt)
                   for fmt in formats]
        try:
            for q in queries:
                q.processAllAvailable()
        finally:
            for q in queries:
                q.stop()

    land(0)
    step()
    land(1)
    step()  # restarted from the checkpoints: batch 0 is not written again, batch 1 follows
    logical = [parse_element(r) for f in FILES for r in f]
    expected = oracle_run(bind(parse_query(SUM_BY_G)), logical).cht
    for fmt in formats:
        out = tmp_path / f"out-{fmt}"
        assert sorted(p.name for p in out.glob("batch=*")) == ["batch=00000000", "batch=00000001"], fmt
        rows = read_result_files(spark, out, format=fmt)
        verdict = verify(result_elements(rows), expected)
        assert verdict, f"{fmt}: {verdict}"
        ctis = {(r["batch"], r["bucket"]): r["t"] for r in rows.where("stream = 'cti'").collect()}
        assert ctis == {(0, 0): 10, (0, 1): 10, (1, 0): 2**63 - 1, (1, 1): 2**63 - 1}, fmt


def test_sink_errors_are_one_line(spark: Any, tmp_path: Path) -> None:
    from udm.host.spark.stream_sinks import read_result_files, write_result_files

    with pytest.raises(UdmError, match="format='csv'"):
        write_result_files(spark.readStream.format("rate").load(), tmp_path / "o", checkpoint=tmp_path / "ck",
                           format="csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UdmError, match="holds no result batches"):
        read_result_files(spark, tmp_path / "empty")
