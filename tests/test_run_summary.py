"""Summaries a newcomer can read: bad lines dropped for want of ``--dead-letter`` are counted with the hint,
no CTI warning when nothing was held, delays in the input's units (durations for timestamp inputs), el/s
readable at any rate, ``--final`` keeps the input's time type, and one count of contract checks in
``udm validate`` (its rows and its last line) and ``udm registry publish``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_harness import udm

from udm.host.run_result import RunResult
from udm.templates import ProjectOptions, render_project

COUNT = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count"}]}


def _files(tmp_path: Path, lines: list[str], query: dict[str, Any] = COUNT) -> tuple[Path, Path]:
    (tmp_path / "in.jsonl").write_text("".join(x + "\n" for x in lines))
    (tmp_path / "q.json").write_text(json.dumps(query))
    return tmp_path / "q.json", tmp_path / "in.jsonl"


def _point(i: int, t: int) -> str:
    return json.dumps({"kind": "insert", "id": f"e{i}", "le": t, "re": t + 1, "payload": {"v": i}})


def test_dropped_bad_lines_are_counted_with_the_hint(capsys: Any, tmp_path: Path) -> None:
    q, inp = _files(tmp_path, [_point(1, 1), "not json", '{"kind": "cti", "t": 20}'])
    code, _, err = udm(capsys, "run", str(q), "-i", str(inp), "-o", str(tmp_path / "out.jsonl"))
    assert code == 0
    first, warning = err.strip().splitlines()
    assert first.startswith("3 elements in, 3 out, 1 bad and dropped (local,")
    assert warning == ("warning: 1 bad input element was dropped: add --dead-letter FILE to keep each with its "
                       "line and reason")
    code, _, err = udm(capsys, "run", str(q), "-i", str(inp), "-o", str(tmp_path / "out.jsonl"), "--dead-letter",
                       str(tmp_path / "dl.jsonl"))
    assert code == 0 and err.strip().startswith("3 elements in, 3 out, 1 dead-lettered (local,")
    assert "warning" not in err and len((tmp_path / "dl.jsonl").read_text().splitlines()) == 1


def test_an_input_of_nothing_but_bad_lines_gets_no_cti_warning(capsys: Any, tmp_path: Path) -> None:
    q, inp = _files(tmp_path, ["garbage", '{"x": 1}', '{"kind": "insert"}'])
    code, _, err = udm(capsys, "run", str(q), "-i", str(inp), "-o", str(tmp_path / "o.jsonl"), "--dead-letter",
                       str(tmp_path / "dl.jsonl"))
    assert code == 0 and "CTI" not in err, err
    # ...while a good input without CTIs still gets it, with what was held (one event, one window)
    q, inp = _files(tmp_path, [_point(1, 1)])
    code, _, err = udm(capsys, "run", str(q), "-i", str(inp), "-o", str(tmp_path / "o.jsonl"))
    assert code == 0 and "warning: input 'main' sent no CTI: the engine held up to 1 live events and 1 live " \
                         "windows" in err


def test_mean_emission_delay_in_ticks_for_elements(capsys: Any, tmp_path: Path) -> None:
    # all in one batch: both windows are first emitted at the end of the batch, when the watermark is 35:
    # [0, 10) is late by 25 ticks and [10, 20) by 15, a mean of +20.0 (by hand)
    q, inp = _files(tmp_path, [_point(1, 1), _point(2, 11), _point(3, 35)])
    code, _, err = udm(capsys, "run", str(q), "-i", str(inp), "-o", str(tmp_path / "o.jsonl"))
    assert code == 0 and "mean emission delay +20.0 ticks past the window's end" in err, err


def test_mean_emission_delay_as_a_duration_for_timestamp_tables(capsys: Any, tmp_path: Path) -> None:
    """The same stream as the test above with timestamps one second apart per tick: windows of 10 s (µs
    ticks), delays 25 s and 15 s, a mean of 20 s."""
    stamp = [datetime.fromtimestamp(t, UTC) for t in (1, 11, 35)]
    pq.write_table(pa.table({"ts": pa.array(stamp, pa.timestamp("us", tz="UTC")), "v": [1, 2, 3]}),
                   tmp_path / "t.parquet")
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{**COUNT["steps"][0], "window": {"type": "tumbling", "size": 10_000_000}}]}))
    code, _, err = udm(capsys, "run", str(q), "-i", str(tmp_path / "t.parquet"), "--time", "ts", "-o",
                       str(tmp_path / "o.jsonl"))
    assert code == 0 and "mean emission delay +20 s past the window's end" in err, err


@pytest.mark.parametrize(("rate", "text"), [(8 / 24.1, "0.33 el/s"), (5.24, "5.2 el/s"), (123456.7, "123,457 el/s")])
def test_el_per_second_is_readable_at_any_rate(rate: float, text: str) -> None:
    """A Spark run of 8 elements spends ~24 s starting up: 0.33 el/s, not "0 el/s"."""
    res = RunResult(engine="spark", elements_in=round(rate * 10), seconds=round(rate * 10) / rate)
    assert f", {text})" in res.summary()


def test_final_output_keeps_the_inputs_time_type(capsys: Any, tmp_path: Path) -> None:
    stamp = [datetime(2024, 1, 1, 0, 0, s, tzinfo=UTC) for s in (1, 2, 12)]
    pq.write_table(pa.table({"ts": pa.array(stamp, pa.timestamp("ms", tz="UTC")), "v": [1, 2, 3]}),
                   tmp_path / "stamped.parquet")
    pq.write_table(pa.table({"ts": [1, 2, 12], "v": [1, 2, 3]}), tmp_path / "ticks.parquet")
    (tmp_path / "stamped.csv").write_text("ts,v\n2024-01-01T00:00:01Z,1\n2024-01-01T00:00:12Z,2\n")
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{**COUNT["steps"][0], "window": {"type": "tumbling", "size": 10_000_000}}]}))

    def final(src: str, out: str, *extra: str) -> pa.Table:
        code, _, err = udm(capsys, "run", str(q), "-i", str(tmp_path / src), "--time", "ts", "-o",
                           str(tmp_path / out), "--final", *extra)
        assert code == 0, err
        return pq.read_table(tmp_path / out)

    got = final("stamped.parquet", "a.parquet")
    assert got.schema.field("le").type == pa.timestamp("us", tz="UTC")
    assert got.column("le").to_pylist() == [datetime(2024, 1, 1, 0, 0, s, tzinfo=UTC) for s in (0, 10)]
    assert final("stamped.csv", "b.parquet").schema.field("re").type == pa.timestamp("us", tz="UTC")
    assert final("ticks.parquet", "c.parquet").schema.field("le").type == pa.int64()
    assert final("stamped.parquet", "d.parquet", "--times", "ticks").schema.field("le").type == pa.int64()


def _tally(text: str) -> list[str]:
    return re.findall(r"\d+ passed(?:, \d+ not applicable)?(?:, \d+ failed)?", text)


@pytest.mark.slow
def test_one_count_of_contract_checks_in_validate_and_publish(capsys: Any, tmp_path: Path) -> None:
    """The kit runs 9 checks on an incremental algebraic UDA, some of which do not apply to it: the
    ``contracts`` row, the last line of ``udm validate`` and ``publish`` give the same two numbers, which
    add up to the checks the kit reports (``--json``)."""
    project = tmp_path / "p"
    render_project(ProjectOptions("tally_avg", "uda", incremental=True), project)
    code, out, err = udm(capsys, "validate", str(project), "--json")
    assert code == 0, err
    checks = [r for r in json.loads(out)["results"] if r["check"].startswith("contract:")]
    skipped = sum(bool(r["skipped"]) for r in checks)
    want = f"{len(checks) - skipped} passed, {skipped} not applicable"
    assert 0 < skipped < len(checks)
    code, out, err = udm(capsys, "validate", str(project))
    assert code == 0, err
    assert _tally(out) == [want, want]  # the contracts row, then the last line
    assert out.strip().splitlines()[-1] == f"1 manifest accepted; contract checks: {want}"
    code, out, err = udm(capsys, "registry", "publish", str(project), "--registry", str(tmp_path / "reg"),
                         "--no-isolation")
    assert code == 0, err
    assert _tally(out) == [want]
