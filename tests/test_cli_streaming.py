"""``udm run --engine spark-streaming`` options: the default micro-batch size (semantics-notes 45), a
time-based ``--trigger``, a user's table as input (``--time``), and the one-line errors (a bad trigger,
table output, pyspark not installed). Outputs are checked against the oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli_harness import udm
from udm.host.io.table_options import TableOptions, TableSource
from udm.host.io.tables import read_table_elements
from udm.host.query.plan import bind
from udm.host.query.spec import parse_query
from udm.host.temporal.elements import BadElement, parse_element
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

SUM_BY_G = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                       "udm": "sum", "input": "v"}]}


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _query(tmp_path: Path) -> Path:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(SUM_BY_G), encoding="utf-8")
    return q


@pytest.mark.spark
def test_default_batch_size_and_time_trigger(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    """Without --batch-size a run is staged in micro-batches of 10,000 elements (one here, plus the tail);
    --trigger paces them; the output is the oracle's."""
    stream = generate(seed=41, events=30, groups=3, speculation=0.3, cti="regular")
    src = tmp_path / "in.jsonl"
    write_stream(src, stream)
    ck = tmp_path / "ck"
    code, _, err = udm(capsys, "run", str(_query(tmp_path)), "-i", str(src), "-o", str(tmp_path / "o.jsonl"),
                       "--engine", "spark-streaming", "--trigger", "1 second", "--checkpoint", str(ck), "--quiet")
    assert code == 0, err
    meta = json.loads((ck / "run.json").read_text(encoding="utf-8"))
    assert meta["batch_size"] == 10_000 and meta["staged"]["head_batches"] == 1
    verdict = verify(_read(tmp_path / "o.jsonl"), oracle_run(bind(parse_query(SUM_BY_G)), stream).cht)
    assert verdict, str(verdict)


@pytest.mark.spark
def test_table_input_on_spark_streaming(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Parquet table with a time column, CTIs every 10 ticks and a row without a time: the streaming run
    reads it like the local engine (same reader) and gives the oracle's CHT and the same dead letter."""
    rows = [{"ts": t, "g": g, "v": float(v)} for t, g, v in
            [(1, "x", 1), (3, "y", 2), (12, "x", 3), (14, "x", 4), (25, "y", 5), (None, "y", 9), (31, "x", 6)]]
    table = tmp_path / "prices.parquet"
    pq.write_table(pa.Table.from_pylist(rows), table)
    out, dl = tmp_path / "o.jsonl", tmp_path / "dl.jsonl"
    code, _, err = udm(capsys, "run", str(_query(tmp_path)), "-i", str(table), "-o", str(out), "--dead-letter",
                       str(dl), "--time", "ts", "--cti-every", "10", "--engine", "spark-streaming", "--batch-size",
                       "3", "--quiet")
    assert code == 0, err
    read = read_table_elements(TableSource(table, TableOptions(time="ts", cti_every=10)))
    good = [e for _, e in read if not isinstance(e, BadElement)]
    verdict = verify(_read(out), oracle_run(bind(parse_query(SUM_BY_G)), good).cht)
    assert verdict, str(verdict)
    dead = [json.loads(x) for x in dl.read_text(encoding="utf-8").splitlines()]
    assert [d["line"] for d in dead] == [ln for ln, e in read if isinstance(e, BadElement)] == [6]


def test_streaming_option_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    write_stream(src, generate(seed=1, events=3, groups=1, cti="regular"))
    q = str(_query(tmp_path))
    base = ["run", q, "-i", str(src), "-o", str(tmp_path / "o.jsonl")]
    code, _, err = udm(capsys, *base, "--engine", "spark-streaming", "--trigger", "soon")
    assert code == 1 and "--trigger soon: expected an interval" in err
    code, _, err = udm(capsys, *base, "--trigger", "2 seconds")
    assert code == 1 and "--trigger is a --engine spark-streaming option" in err
    code, _, err = udm(capsys, "run", q, "-i", str(src), "-o", str(tmp_path / "o.parquet"), "--engine",
                       "spark-streaming")
    assert code == 1 and "table output is written by --engine local" in err


def test_pyspark_not_installed_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Simulate an install without pyspark: the run fails before reading anything, with one error line that
    names pyspark and the install command (no traceback)."""
    from udm.host.spark import session

    real = session._find_spec
    monkeypatch.setattr(session, "_find_spec", lambda m: None if m == "pyspark" else real(m))
    src = tmp_path / "in.jsonl"
    write_stream(src, generate(seed=2, events=3, groups=1, cti="regular"))
    code, out, err = udm(capsys, "run", str(_query(tmp_path)), "-i", str(src), "-o", str(tmp_path / "o.jsonl"),
                         "--engine", "spark-streaming")
    assert code == 1 and out == ""
    assert err.count("error:") == 1 and "Traceback" not in err
    assert "pyspark" in err and "pip install" in err
    assert not (tmp_path / "o.jsonl").exists()
