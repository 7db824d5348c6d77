"""Real streaming sources without a global sequence: a directory that event files land in (JSON Lines and
Parquet), ordered per file (`run_stream(order=FILE_ORDER)`, semantics-notes 44), against the oracle;
files are written into the directory between micro-batches, as a producer would."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from udm.host.errors import UdmError
from udm.host.io.jsonl import read_jsonl_elements
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import BadElement, Cti, Insert, Retract
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = pytest.mark.spark

SUM_BY_G = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                       "udm": "sum", "input": "v"}]}
INF = 2**63 - 1


def _land(path: Path, write: Any) -> None:
    """Write a file aside and rename it in: the file source must never see half a file."""
    tmp = path.parent.parent / f".{path.name}"
    write(tmp)
    os.replace(tmp, path)


class _Stream:
    """A running query over ``df`` whose result rows are collected per micro-batch."""

    def __init__(self, df: Any, ck: Path) -> None:
        self.rows: list[dict[str, Any]] = []
        self.batches = 0

        def keep(b: Any, batch_id: int) -> None:
            self.rows.extend({**r.asDict(), "batch": batch_id} for r in b.collect())
            self.batches += 1

        self.query = df.writeStream.foreachBatch(keep).option("checkpointLocation", str(ck)).start()

    def step(self) -> None:
        self.query.processAllAvailable()

    def stop(self) -> None:
        self.query.stop()

    def elements(self) -> list[Any]:
        out: list[Any] = []
        for r in sorted((r for r in self.rows if r["stream"] == "out"),
                        key=lambda r: (r["batch"], r["bucket"], r["seq"])):
            out.append(Insert(r["id"], r["le"], r["re"], json.loads(r["payload"])) if r["kind"] == "insert"
                       else Retract(r["id"], r["le"], r["re"], r["re_new"]))
        return out


def test_jsonl_files_landing_between_micro_batches_equal_the_oracle(spark: Any, tmp_path: Path) -> None:
    """A generated stream (retractions, disorder, bad lines) cut into two files that land one after the
    other, each read by the next micro-batch: no ``line`` column, the order is (file, line). The output
    CHT is the oracle's over the whole stream; each bad line is dead-lettered at its line, naming its file."""
    from udm.host.spark.stream_sources import FILE_ORDER, event_files
    from udm.host.spark.streaming import run_stream

    stream = generate(seed=49, events=36, groups=3, speculation=0.4, disorder="slightly", cti="regular", bad=0.08)
    whole = tmp_path / "whole.jsonl"
    write_stream(whole, stream)
    lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
    cuts = [0, len(lines) // 2, len(lines)]
    parts = len(cuts) - 1
    read = read_jsonl_elements(whole)
    first = {e.id for ln, e in read if ln <= cuts[1] and isinstance(e, Insert)}
    assert any(isinstance(e, Retract) and e.id in first for ln, e in read if ln > cuts[1])  # across files
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    run = _Stream(run_stream(SUM_BY_G, event_files(spark, inbox), buckets=1, order=FILE_ORDER), tmp_path / "ck")
    try:
        for k in range(parts):
            end = [json.dumps({"kind": "cti", "t": "inf"}) + "\n"] if k == parts - 1 else []
            part = lines[cuts[k]:cuts[k + 1]] + end
            _land(inbox / f"part-{k}.jsonl", lambda p, part=part: p.write_text("".join(part), encoding="utf-8"))
            run.step()
    finally:
        run.stop()
    assert run.batches == parts
    # the physical stream the engine saw (semantics-notes 44): each part's elements in line order, then its
    # CTIs at the end of its micro-batch
    logical: list[Any] = []
    for k in range(parts):
        part = [e for ln, e in read if cuts[k] < ln <= cuts[k + 1] and not isinstance(e, BadElement)]
        logical += [e for e in part if not isinstance(e, Cti)] + [e for e in part if isinstance(e, Cti)]
    expected = oracle_run(bind(parse_query(SUM_BY_G)), [*logical, Cti(INF)])
    verdict = verify(run.elements(), expected.cht)
    assert verdict, str(verdict)
    dead = [r for r in run.rows if r["stream"] == "dead"]
    # bad lines: each at its line within its part, the part named in the reason
    bad = [ln for ln, e in read if isinstance(e, BadElement)]
    assert bad
    want = sorted((ln - cuts[k], f"part-{k}.jsonl") for ln in bad for k in range(parts) if cuts[k] < ln <= cuts[k + 1])
    got = sorted((r["line"], r["reason"].rsplit("(", 1)[-1].rstrip(")"))
                 for r in dead if r["reason"].endswith(".jsonl)"))
    assert got == want
    # elements the engine refused (CTI violations, retractions that match nothing): the oracle's
    refused = sorted(json.loads(r["element"]).get("id") or "" for r in dead if not r["reason"].endswith(".jsonl)"))
    assert refused and refused == sorted(getattr(x.element, "id", "") for x in expected.rejected)


def test_files_landing_together_keep_their_own_order(spark: Any, tmp_path: Path) -> None:
    """Two files land in one micro-batch with 2 buckets: each file's retractions follow their inserts, and
    file a's cti(10) (line 4) applies at the end of the micro-batch, after file b's element at 7 (line 5,
    which would be behind the CTI if the files were interleaved by line). A third file ends the stream."""
    from udm.host.spark.stream_sources import FILE_ORDER, event_files
    from udm.host.spark.streaming import run_stream

    def ins(id: str, le: int, re: int, g: str, v: float) -> dict[str, Any]:
        return {"kind": "insert", "id": id, "le": le, "re": re, "payload": {"g": g, "v": v}}

    def ret(id: str, le: int, re: int, re_new: int, g: str) -> dict[str, Any]:
        return {"kind": "retract", "id": id, "le": le, "re": re, "re_new": re_new, "payload": {"g": g}}

    a = [ins("a1", 1, 9, "x", 1.0), ins("a2", 2, 5, "y", 2.0), ret("a1", 1, 9, 4, "x"), {"kind": "cti", "t": 10}]
    b = [ins("b1", 3, 6, "x", 5.0), ret("b1", 3, 6, 5, "x"), ins("b2", 12, 14, "y", 3.0), ins("b3", 6, 8, "y", 1.5),
         ins("b4", 7, 8, "x", 0.5)]
    c = [ins("c1", 20, 25, "x", 4.0), ret("b2", 12, 14, 13, "y"), {"kind": "cti", "t": "inf"}]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    run = _Stream(run_stream(SUM_BY_G, event_files(spark, inbox), buckets=2, order=FILE_ORDER), tmp_path / "ck")

    def text(rows: list[dict[str, Any]]) -> Any:
        return lambda p: p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    try:
        _land(inbox / "a.jsonl", text(a))
        _land(inbox / "b.jsonl", text(b))
        run.step()
        _land(inbox / "c.jsonl", text(c))
        run.step()
    finally:
        run.stop()
    assert run.batches == 2
    assert [r for r in run.rows if r["stream"] == "dead"] == []
    logical = [*_parse(a[:-1] + b), Cti(10), *_parse(c)]
    verdict = verify(run.elements(), oracle_run(bind(parse_query(SUM_BY_G)), logical).cht)
    assert verdict, str(verdict)


def _parse(rows: list[dict[str, Any]]) -> list[Any]:
    from udm.host.temporal.elements import parse_element

    return [parse_element(r) for r in rows]


def test_parquet_event_files_ordered_by_row(spark: Any, tmp_path: Path) -> None:
    """Parquet element files without a line column: the order is the row within the file; an insert and
    its retraction in one file, a second file after it; the CHT is the oracle's."""
    from udm.host.spark.stream_sources import FILE_ORDER, event_files
    from udm.host.spark.streaming import run_stream

    def table(rows: list[Any]) -> Any:
        cols = {"kind": pa.string(), "id": pa.string(), "le": pa.int64(), "re": pa.int64(), "re_new": pa.int64(),
                "t": pa.int64(), "payload": pa.string()}
        tb = pa.table({c: pa.array([r.get(c) for r in rows], t) for c, t in cols.items()})
        return lambda p: pq.write_table(tb, p)

    first = [{"kind": "insert", "id": "a", "le": 1, "re": 9, "payload": '{"g":"x","v":1.0}'},
             {"kind": "insert", "id": "b", "le": 2, "re": 12, "payload": '{"g":"x","v":2.0}'},
             {"kind": "retract", "id": "a", "le": 1, "re": 9, "re_new": 1},
             {"kind": "cti", "t": 5}]
    second = [{"kind": "retract", "id": "b", "le": 2, "re": 12, "re_new": 8},
              {"kind": "insert", "id": "c", "le": 15, "re": 16, "payload": '{"g":"y","v":3.0}'},
              {"kind": "cti", "t": INF}]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _land(inbox / "0.parquet", table(first))  # the schema is read from the files already there
    run = _Stream(run_stream(SUM_BY_G, event_files(spark, inbox, format="parquet"), buckets=1, order=FILE_ORDER),
                  tmp_path / "ck")
    try:
        run.step()
        _land(inbox / "1.parquet", table(second))
        run.step()
    finally:
        run.stop()
    logical = [Insert("a", 1, 9, {"g": "x", "v": 1.0}), Insert("b", 2, 12, {"g": "x", "v": 2.0}),
               Retract("a", 1, 9, 1), Cti(5), Retract("b", 2, 12, 8), Insert("c", 15, 16, {"g": "y", "v": 3.0}),
               Cti(INF)]
    verdict = verify(run.elements(), oracle_run(bind(parse_query(SUM_BY_G)), logical).cht)
    assert verdict, str(verdict)


def test_bad_order_and_missing_directory_are_one_line_errors(spark: Any, tmp_path: Path) -> None:
    from udm.host.spark.stream_sources import event_files
    from udm.host.spark.streaming import run_stream

    with pytest.raises(UdmError, match=r"event directory .*nowhere does not exist"):
        event_files(spark, tmp_path / "nowhere")
    (tmp_path / "in").mkdir()
    df = event_files(spark, tmp_path / "in")
    with pytest.raises(UdmError, match="order names column 'offset'"):
        run_stream(SUM_BY_G, df.drop("line"), order=("source_file", "offset"))


def test_rate_rows_become_point_inserts(spark: Any, tmp_path: Path) -> None:
    """`rate_elements`: each rate row (value, timestamp) is the insert r<value> at the timestamp in µs ticks,
    one tick long, payload {g: g<value % groups>, v: value} (checked row by row against the rate columns)."""
    import time
    from datetime import UTC

    from udm.host.spark.stream_sources import rate_elements
    from udm.host.spark.stream_stop import stop_between_batches

    rows: list[Any] = []
    q = (rate_elements(spark, 20, groups=3).writeStream.foreachBatch(lambda b, _: rows.extend(b.collect()))
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    deadline = time.monotonic() + 60
    while len(rows) < 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    stop_between_batches(q)
    assert len(rows) >= 10
    for r in rows:
        ts = r["timestamp"] if r["timestamp"].tzinfo else r["timestamp"].astimezone(UTC)
        micros = round(ts.timestamp() * 1_000_000)
        assert (r["kind"], r["id"], r["le"], r["re"]) == ("insert", f"r{r['value']}", micros, micros + 1)
        assert json.loads(r["payload"]) == {"g": f"g{r['value'] % 3}", "v": float(r["value"])}
    with pytest.raises(UdmError, match="rows_per_second and groups must be >= 1"):
        rate_elements(spark, 0)


def test_one_partition_offsets_keep_ctis_in_place(spark: Any, tmp_path: Path) -> None:
    """``order="offset"`` (a one-partition source, e.g. a one-partition topic): no ``line`` column, rows
    applied by offset with CTIs where they are, so an insert after cti(10) that starts at 5 is a CTI
    violation even in the CTI's micro-batch (with several partitions it would not be: semantics-notes 44);
    its dead letter's line is its offset."""
    from udm.host.spark.streaming import run_stream

    rows = [{"offset": 7, "kind": "insert", "id": "a", "le": 1, "re": 4, "payload": '{"g":"x","v":1.0}'},
            {"offset": 8, "kind": "retract", "id": "a", "le": 1, "re": 4, "re_new": 2},
            {"offset": 9, "kind": "cti", "t": 10},
            {"offset": 10, "kind": "insert", "id": "late", "le": 5, "re": 6, "payload": '{"g":"x","v":9.0}'},
            {"offset": 11, "kind": "insert", "id": "b", "le": 12, "re": 13, "payload": '{"g":"x","v":2.0}'},
            {"offset": 12, "kind": "cti", "t": INF}]
    src = tmp_path / "in"
    src.mkdir()
    (src / "0.json").write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)), encoding="utf-8")
    df = spark.readStream.schema("offset long, kind string, id string, le long, re long, re_new long, t long, "
                                 "payload string").json(str(src))
    run = _Stream(run_stream(SUM_BY_G, df, buckets=1, order="offset"), tmp_path / "ck")
    try:
        run.step()
    finally:
        run.stop()
    dead = [(r["line"], json.loads(r["element"])["id"]) for r in run.rows if r["stream"] == "dead"]
    assert dead == [(10, "late")]
    logical = _parse([{k: (json.loads(v) if k == "payload" else v) for k, v in r.items() if k != "offset"}
                      for r in rows if r.get("id") != "late"])
    verdict = verify(run.elements(), oracle_run(bind(parse_query(SUM_BY_G)), logical).cht)
    assert verdict, str(verdict)
