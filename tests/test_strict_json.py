"""Strict JSON in, strict JSON out (SEMANTICS §1): a payload's NaN, Infinity or a number overflowing a double
and a time outside ``(-2**63, 2**63-1)`` are dead letters with a reason, on both JSON Lines paths (pyarrow's
block parse and the per-line parser) and for tables; every writer's output — elements, dead letters,
``--json`` summaries, tables written as JSON — passes a strict parser, and a non-finite result is an error,
never a ``NaN`` in a file."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_harness import udm

from udm.host.errors import BadElement, UdmError
from udm.host.io.jsonl import read_jsonl_elements
from udm.host.io.tables import read_table_elements
from udm.host.temporal import strict
from udm.host.temporal.elements import Cti, Insert, Retract, parse_element
from udm.sdk import INF


def _no_constants(name: str) -> Any:
    raise AssertionError(f"not RFC 8259 JSON: {name}")


def strict_lines(text: str) -> list[Any]:
    """Every line through a strict parser: ``NaN``/``Infinity`` fail, and so does ``1e999`` (json turns
    it into ``inf``, which the check after the parse catches)."""
    out = []
    for line in text.splitlines():
        value = json.loads(line, parse_constant=_no_constants)
        assert strict.nonfinite_in(value) is None, line
        out.append(value)
    return out


def _good(i: int) -> str:
    return json.dumps({"kind": "insert", "id": f"g{i}", "le": i, "re": i + 1, "payload": {"v": i + 0.5, "l": [1.5]}})


#: (line, the words its dead letter's reason must hold); each is a lenient parser's element, not a strict one's
HOSTILE = [
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": NaN, "l": [1.5]}}', "NaN is not a JSON number"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": Infinity, "l": [1.5]}}', "Infinity"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": -Infinity, "l": [1.5]}}', "-Infinity"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": 1e999, "l": [1.5]}}', "overflows a double"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": 1.5, "l": [-1e400]}}', "overflows a double"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": 1.5, "l": [1.5], "n": {"x": NaN}}}', "NaN"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": 1.5, "l": [1' + "0" * 400 + ']}}',
     "overflows a double"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 99999999999999999999999, "payload": {"v": 1.5, "l": [1.5]}}',
     "re 99999999999999999999999 is out of range"),
    ('{"kind": "insert", "id": "a", "le": 1, "re": 9223372036854775807, "payload": {"v": 1.5, "l": [1.5]}}',
     'out of range: a time is an integer between -2**63 and 2**63-1, both excluded (write "inf"'),
    ('{"kind": "insert", "id": "a", "le": -9223372036854775808, "re": 2, "payload": {"v": 1.5, "l": [1.5]}}',
     "le -9223372036854775808 is out of range"),
    ('{"kind": "insert", "id": "a", "le": 1.5, "re": 2, "payload": {"v": 1.5, "l": [1.5]}}', "integer tick"),
    ('{"kind": "retract", "id": "a", "le": 1, "re": 2, "re_new": 9223372036854775807}', "re_new 9223372036854775807"),
    ('{"kind": "cti", "t": 9223372036854775807}', "t 9223372036854775807 is out of range"),
    ('{"kind": "cti", "t": -99999999999999999999}', "out of range"),
]


@pytest.mark.parametrize("fast", [True, False], ids=["pyarrow-blocks", "per-line"])
@pytest.mark.parametrize(("line", "reason"), HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_a_hostile_line_is_one_dead_letter_with_its_reason(line: str, reason: str, fast: bool) -> None:
    # 100 good lines around it: enough for the block parse (it refuses the block and the lines are re-read)
    text = "\n".join([*(_good(i) for i in range(50)), line, *(_good(i) for i in range(50, 100))]) + "\n"
    got = read_jsonl_elements(io.BytesIO(text.encode()), fast=fast)
    assert len(got) == 101
    bad = [(ln, e) for ln, e in got if isinstance(e, BadElement)]
    assert len(bad) == 1, bad
    (ln, e), = bad
    assert ln == 51 and reason in e.reason, e.reason
    assert all(isinstance(e, Insert) for ln, e in got if ln != 51)


@pytest.mark.parametrize("fast", [True, False], ids=["pyarrow-blocks", "per-line"])
def test_the_edges_of_the_range_and_inf_are_times(fast: bool) -> None:
    lo, hi = -(2**63) + 1, 2**63 - 2
    lines = [json.dumps({"kind": "insert", "id": "lo", "le": lo, "re": hi, "payload": {"v": 1.5}}),
             json.dumps({"kind": "insert", "id": "inf", "le": 0, "re": "inf", "payload": {"v": 1.5}}),
             json.dumps({"kind": "retract", "id": "inf", "le": 0, "re": "inf", "re_new": "inf"}),
             json.dumps({"kind": "cti", "t": "inf"})]
    text = "\n".join([*(_good(i) for i in range(70)), *lines]) + "\n"
    got = [e for _, e in read_jsonl_elements(io.BytesIO(text.encode()), fast=fast)][70:]
    assert got == [Insert("lo", lo, hi, {"v": 1.5}), Insert("inf", 0, INF, {"v": 1.5}), Retract("inf", 0, INF, INF),
                   Cti(INF)]


def test_typed_sources_store_inf_as_the_int64_maximum() -> None:
    """A Spark ``long`` column (or an element built in Python) stores INF as 2**63-1 (SEMANTICS §1): only
    JSON text must spell it "inf". Beyond int64 is out of range everywhere; a payload NaN is malformed."""
    assert parse_element({"kind": "cti", "t": 2**63 - 1}) == Cti(INF)
    with pytest.raises(BadElement, match="out of range"):
        parse_element({"kind": "cti", "t": 2**63 - 1}, json_text=True)
    with pytest.raises(BadElement, match="out of range"):
        parse_element({"kind": "cti", "t": 2**64})
    with pytest.raises(BadElement, match="payload field 'v.x' is not a finite number"):
        parse_element({"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": {"x": math.nan}}})
    with pytest.raises(BadElement, match="payload field 'w' is not a finite number"):
        parse_element({"kind": "retract", "id": "a", "le": 1, "re": 2, "re_new": 1, "payload": {"w": 10**400}})


def test_strict_loads_and_time_value_on_their_own() -> None:
    assert strict.loads(b'\xef\xbb\xbf{"a": [1, 2.5e3]}') == {"a": [1, 2500.0]}
    assert strict.loads("[" + "9" * 308 + "]") == [int("9" * 308)]
    for text in ("NaN", "[Infinity]", '{"a": -Infinity}', "1e999", "-1E+400", "[" + "9" * 309 + "]",
                 '{"a": -' + "1" * 400 + "}"):
        with pytest.raises(strict.NotStrictJSON):
            strict.loads(text)
    assert strict.time_value("INF", "re", allow_inf=True) == INF
    for value in (True, 1.0, 2.5, math.nan, None, "5", 2**63 - 1, -(2**63)):
        with pytest.raises(BadElement):
            strict.time_value(value, "re", allow_inf=True)


def test_table_rows_with_non_finite_values_or_out_of_range_times(tmp_path: Path) -> None:
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({
        "ts": pa.array([1, 2, 2**63 - 1, 4, 5, 6], pa.int64()),
        "v": [1.0, math.nan, 3.0, -math.inf, None, 2.0],
        "l": [[1.0], [2.0], [3.0], [4.0], [math.inf], [1.0]],
    }), p)
    got = read_table_elements(p, time="ts")
    reasons = {ln: e.reason for ln, e in got if isinstance(e, BadElement)}
    assert reasons == {2: "malformed value: column 'v' is not a finite number (NaN or an infinity)",
                       3: "column 'ts': no time (null, not a time, or out of range)",
                       4: "malformed value: column 'v' is not a finite number (NaN or an infinity)",
                       5: "malformed value: column 'l' is not a finite number (NaN or an infinity)"}
    assert [e.id for _, e in got if isinstance(e, Insert)] == ["r1", "r6"]
    # a float time that leaves int64 once scaled to microsecond ticks
    q = tmp_path / "s.parquet"
    pq.write_table(pa.table({"ts": [1.5, 1e30, -1e30, math.nan], "v": [1, 2, 3, 4]}), q)
    got = read_table_elements(q, time="ts", unit="s")
    assert [type(e).__name__ for _, e in got] == ["Insert", "BadElement", "BadElement", "BadElement"]
    assert got[0][1].le == 1_500_000


HOSTILE_FILE = "\n".join([
    '{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"g": "x", "v": 1.5}}',
    '{"kind": "insert", "id": "b", "le": 2, "re": 3, "payload": {"g": "x", "v": NaN}}',
    '{"kind": "insert", "id": "c", "le": 3, "re": 4, "payload": {"g": "x", "v": 1e999}}',
    '{"kind": "insert", "id": "d", "le": 4, "re": 99999999999999999999999, "payload": {"g": "x", "v": 1}}',
    '{"kind": "insert", "id": "e", "le": 5, "re": 6, "payload": {"g": "y", "v": 2.25}}',
    '{"kind": "cti", "t": 10}',
]) + "\n"
SUM = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"], "udm": "sum",
                  "input": "v", "as": "total"}]}


def test_every_writer_emits_strict_json(capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text(HOSTILE_FILE)
    (tmp_path / "q.json").write_text(json.dumps(SUM))
    code, stdout, err = udm(capsys, "run", str(tmp_path / "q.json"), "--input", str(tmp_path / "in.jsonl"),
                           "--output", str(tmp_path / "out.jsonl"), "--dead-letter", str(tmp_path / "bad.jsonl"),
                           "--json")
    assert code == 0, err
    summary = strict_lines(stdout)
    assert summary[0]["dead_lettered"] == 3
    out = strict_lines((tmp_path / "out.jsonl").read_text())
    assert [o["payload"] for o in out if o["kind"] == "insert"] == [{"g": "x", "total": 1.5},
                                                                    {"g": "y", "total": 2.25}]
    dead = strict_lines((tmp_path / "bad.jsonl").read_text())
    assert [(d["line"], d["reason"].split(":")[0]) for d in dead] == [(2, "malformed value"), (3, "malformed value"),
                                                                      (4, "re 99999999999999999999999 is out of range")]
    assert dead[0]["element"] == {"raw": HOSTILE_FILE.splitlines()[1]}  # not strict JSON: the line as text
    # a table input's bad row is echoed in the dead letter with its NaN spelled as a string
    pq.write_table(pa.table({"ts": [1, 2], "g": ["x", "x"], "v": [math.nan, 4.0]}), tmp_path / "t.parquet")
    code, stdout, err = udm(capsys, "run", str(tmp_path / "q.json"), "--input", str(tmp_path / "t.parquet"),
                           "--time", "ts", "--output", str(tmp_path / "t.json"), "--output-format", "json",
                           "--final", "--dead-letter", str(tmp_path / "tbad.jsonl"), "--json")
    assert code == 0, err
    strict_lines(stdout)
    assert strict_lines((tmp_path / "t.json").read_text()) == [{"le": 0, "re": 10, "g": "x", "total": 4.0}]
    (tdead,) = strict_lines((tmp_path / "tbad.jsonl").read_text())
    assert tdead["line"] == 1 and tdead["element"] == {"ts": 1, "g": "x", "v": "NaN"}
    # the CLI's other --json documents
    for args in (["list", "--json"], ["info", "sum", "--json"], ["validate", "--no-contracts", "--json"]):
        code, stdout, err = udm(capsys, *args)
        assert code == 0, err
        json.loads(stdout, parse_constant=_no_constants)


@pytest.mark.parametrize("fmt", ["elements", "json"])
def test_a_result_that_is_not_finite_is_an_error_naming_its_field(capsys: Any, tmp_path: Path, fmt: str) -> None:
    """Two finite doubles whose sum overflows: the UDA's result is an infinity, which no JSON output can carry.
    The run stops with one line naming the field instead of writing ``Infinity``."""
    els = [{"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1, "payload": {"g": "x", "v": 1e308}}
           for i in range(2)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(e) + "\n" for e in els))
    (tmp_path / "q.json").write_text(json.dumps(SUM))
    out = tmp_path / ("out.jsonl" if fmt == "elements" else "out.json")
    code, _, err = udm(capsys, "run", str(tmp_path / "q.json"), "--input", str(tmp_path / "in.jsonl"),
                       "--output", str(out), "--output-format", fmt)
    assert code == 1
    assert "'total'" in err and "not a finite number" in err and "Traceback" not in err
    assert "Infinity" not in out.read_text()


def test_dumps_and_echo() -> None:
    with pytest.raises(UdmError, match="output field 'a.b\\[1\\]' is not a finite number"):
        strict.dumps({"a": {"b": [1.0, math.inf]}})
    assert strict.echo_dumps({"x": [math.nan, -math.inf, 1.5]}) == '{"x": ["NaN", "-Infinity", 1.5]}'


def test_a_dead_letter_quotes_a_value_nested_too_deeply_as_a_note() -> None:
    """A line the decoder could read but the encoder cannot write back (nested past the recursion limit, found
    by test_fuzz under pytest's deeper stack) is quoted as a note, not raised from the reader."""
    from udm.host.temporal.strict import TOO_DEEP, echo_dumps

    deep: list[Any] = []
    for _ in range(20_000):
        deep = [deep]
    assert json.loads(echo_dumps(deep)) == TOO_DEEP
    assert json.loads(echo_dumps({"v": [deep], "x": float("nan")})) == TOO_DEEP
    assert json.loads(echo_dumps({"v": [1, 2.5], "x": float("nan")})) == {"v": [1, 2.5], "x": "NaN"}
