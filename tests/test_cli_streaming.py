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
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
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
                       "5", "--quiet")
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
    (tmp_path / "inbox").mkdir()
    code, _, err = udm(capsys, "run", q, "-i", str(tmp_path / "inbox"), "-o", str(tmp_path / "o.jsonl"), "--engine",
                       "spark-streaming", "--batch-size", "10")
    assert code == 1 and "--batch-size counts the elements of a staged file" in err
    code, _, err = udm(capsys, *base, "--until-idle", "5")
    assert code == 1 and "--until-idle is a --engine spark-streaming option" in err


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


@pytest.mark.spark
def test_watch_a_directory_until_idle_and_resume(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``--input DIR`` on spark-streaming watches the directory: one file is there at the start, a second
    lands after the first micro-batch is committed; the run stops after --until-idle seconds without input.
    A third file (retracting an event of the first, and an insert behind a CTI) lands while nothing runs,
    and the same command with the same --checkpoint reads only it. The second output is the oracle's over
    the three files in landing order, begins with the first run's output (nothing replayed twice), and
    every micro-batch of the second run showed its status line; a bad line is dead-lettered at its line in
    its file, the CTI violation at its line."""
    import re
    import threading
    import time
    from collections.abc import Iterator
    from contextlib import contextmanager

    from udm.host.cli import run_cmd

    files = [
        [{"kind": "insert", "id": "a", "le": 1, "re": 9, "payload": {"g": "x", "v": 1.0}},
         {"kind": "insert", "id": "b", "le": 2, "re": 5, "payload": {"g": "y", "v": 2.0}}],
        [{"kind": "insert", "id": "c", "le": 4, "re": 6, "payload": {"g": "x", "v": 3.0}}, "not json",
         {"kind": "cti", "t": 3}],
        [{"kind": "retract", "id": "a", "le": 1, "re": 9, "re_new": 4, "payload": {"g": "x"}},
         {"kind": "insert", "id": "d", "le": 12, "re": 13, "payload": {"g": "y", "v": 5.0}},
         {"kind": "insert", "id": "late", "le": 1, "re": 2, "payload": {"g": "x", "v": 7.0}},
         {"kind": "cti", "t": "inf"}],
    ]
    inbox, ck = tmp_path / "inbox", tmp_path / "ck"
    inbox.mkdir()

    def land(k: int) -> None:
        tmp = tmp_path / f".{k}.jsonl"
        tmp.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in files[k]),
                       encoding="utf-8")
        tmp.rename(inbox / f"{k}.jsonl")

    def later() -> None:
        deadline = time.monotonic() + 120
        while not (ck / "spark" / "commits" / "0").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        land(1)

    lines: list[str] = []

    class Display:  # the CLI's progress bar, with its status line
        def __call__(self, done: int, total: int | None, elements: int) -> None:
            pass

        def status(self, text: str) -> None:
            lines.append(text)

    @contextmanager
    def bar(enabled: bool) -> Iterator[Display]:
        yield Display()

    monkeypatch.setattr(run_cmd, "_progress_bar", bar)
    out1, out2, dl = tmp_path / "o1.jsonl", tmp_path / "o2.jsonl", tmp_path / "dl.jsonl"
    q = str(_query(tmp_path))

    def run(out: Path) -> None:
        code, _, err = udm(capsys, "run", q, "-i", str(inbox), "-o", str(out), "--dead-letter", str(dl),
                           "--engine", "spark-streaming", "--until-idle", "1", "--checkpoint", str(ck))
        assert code == 0, err

    land(0)
    t = threading.Thread(target=later)
    t.start()
    run(out1)
    t.join()
    assert len(list((ck / "spark" / "commits").glob("[0-9]*"))) == 2
    land(2)
    lines.clear()
    run(out2)
    assert len(list((ck / "spark" / "commits").glob("[0-9]*"))) == 3
    logical = [parse_element(r) for f in files for r in f if not isinstance(r, str) and r.get("kind") != "cti"]
    logical.insert(3, parse_element({"kind": "cti", "t": 3}))  # file 1's CTI: at the end of its micro-batch
    logical.append(parse_element({"kind": "cti", "t": "inf"}))
    verdict = verify(_read(out2), oracle_run(bind(parse_query(SUM_BY_G)), logical).cht)
    assert verdict, str(verdict)
    first = out1.read_text(encoding="utf-8")
    assert first and out2.read_text(encoding="utf-8").startswith(first)
    dead = [json.loads(x) for x in dl.read_text(encoding="utf-8").splitlines()]
    assert [(d["line"], d["reason"].endswith("(1.jsonl)")) for d in dead] == [(2, True), (3, False)]
    assert dead[1]["element"]["id"] == "late"
    assert lines and all(re.fullmatch(r"micro-batch \d+: \d+ ms, state [\d,]+ rows \d+\.\d MB", x) for x in lines)
