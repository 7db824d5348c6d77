"""``udm run --engine spark`` reads an element file on the executors, in byte ranges, with the local
engine's reader (`udm.host.spark.file_source`). The reference is the local reader itself
(`udm.host.io.jsonl.JsonlReader` over the whole file): every row — good, bad, its line number, its reason
— must be the same whatever the ranges, and the CLI's output CHT and dead-letter file must be the
local engine's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_harness import udm
from udm.host.io.jsonl import JsonlReader
from udm.host.spark.file_source import scan_file
from udm.host.temporal.elements import parse_element
from udm.host.testing.verifier import verify

INF = 2**63 - 1

#: a file with every kind of line the reader distinguishes (its fast path and its per-line path)
LINES = [
    '{"kind": "insert", "id": "a", "le": 1, "re": 5, "payload": {"g": "x", "v": 1.5, "n": 2, "s": "é\\"q"}}',
    "",
    '{"kind": "insert", "id": 7, "le": 2, "re": "inf", "payload": {"g": "y", "v": 2.0, "deep": {"a": [1, 2]}}}',
    "   ",
    "not json",
    '{"kind": "cti", "t": 3}',
    '{"kind": "insert", "id": "late", "le": 1, "re": 2, "payload": {"g": "x", "v": 0.1}}',
    '{"kind": "insert", "id": "b", "le": 4, "re": 4, "payload": {"g": "x", "v": 1.0}}',
    '{"kind": "retract", "id": "a", "le": 1, "re": 5, "re_new": 4}',
    '{"kind": "insert", "id": "c", "le": 6, "re": 9, "payload": "{\\"g\\": \\"x\\"}"}',
    '{"kind": "insert", "id": 1.5, "le": 6, "re": 9, "payload": {"g": "y", "v": 1e-7}}',
    '{"kind": "insert", "id": "d", "le": 12, "re": 15, "payload": {"g": "y", "v": 1e20}}',
    '{"kind": "cti", "t": "INF"}',
    '{"kind": "insert", "id": "after", "le": 20, "re": 21, "payload": {"g": "y", "v": 3.0}}',
]
QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "group_by": ["g"], "udm": "sum",
                    "input": "v"}]}


def _write(path: Path, lines: list[str], copies: int = 1, final_newline: bool = True) -> None:
    text = "\n".join(lines * copies)
    path.write_text(text + ("\n" if final_newline else ""), encoding="utf-8")


def _rows(tables: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for tb in tables:
        for r in tb.to_pylist():
            payload = r["payload"]
            if isinstance(payload, str):
                payload = json.loads(payload)
            out.append((r["line"], r["kind"], r["id"], r["le"], r["re"], r["re_new"], r["t"],
                        json.dumps(payload, sort_keys=True), r["error"],
                        None if r["raw"] is None else json.loads(r["raw"])))
    return out


def test_scan_counts_elements_and_cuts_ranges_after_newlines(tmp_path: Path) -> None:
    """Ranges tile the file, each starting after a newline with the right first line number; elements
    are the non-blank lines (blank and whitespace-only lines are counted as lines, not elements)."""
    src = tmp_path / "in.jsonl"
    _write(src, LINES, copies=50, final_newline=False)
    data = src.read_bytes()
    scan = scan_file(src, 7, min_bytes=1)
    assert len(scan.ranges) == 7
    assert scan.ranges[0][0] == 0 and scan.ranges[-1][1] == len(data)
    for (a, b, first), nxt in zip(scan.ranges, (*scan.ranges[1:], (len(data), 0, 0)), strict=True):
        assert b == nxt[0] and (a == 0 or data[a - 1:a] == b"\n")
        assert first == data[:a].count(b"\n") + 1
    assert scan.elements == sum(1 for ln in data.split(b"\n") if ln.strip())
    assert scan.facts.infinite and scan.ctis
    plain = tmp_path / "plain.jsonl"
    _write(plain, [LINES[0], LINES[6]])
    facts = scan_file(plain, 2).facts
    assert (facts.infinite, scan_file(plain, 2).ctis) == (False, False)


@pytest.mark.spark
@pytest.mark.parametrize("parts", [1, 4, 9])
def test_ranges_read_as_the_local_reader_reads_the_file(spark: Any, tmp_path: Path, parts: int) -> None:
    from udm.host.spark.file_source import file_elements_df

    src = tmp_path / "in.jsonl"
    _write(src, LINES, copies=40)
    expected = _rows([b.table for b in JsonlReader(src, batch_size=97)])
    got = _rows([file_elements_df(spark, scan_file(src, parts, min_bytes=1)).toArrow()])
    assert sorted(got, key=lambda r: r[0]) == expected


@pytest.mark.spark
@pytest.mark.parametrize("query", [QUERY, {**QUERY, "steps": [{**QUERY["steps"][0], "udm": "median"}]}])
def test_cli_spark_run_equals_the_local_run(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           query: dict[str, Any]) -> None:
    """Output CHT, dead-letter file (line, reason, element) and the counts in the summary are the local
    engine's."""
    src = tmp_path / "in.jsonl"
    _write(src, LINES, copies=3)
    q = tmp_path / "q.json"
    q.write_text(json.dumps(query), encoding="utf-8")
    runs = {}
    for engine in ("local", "spark"):
        out, dl = tmp_path / f"{engine}.jsonl", tmp_path / f"{engine}.dead.jsonl"
        code, _, err = udm(capsys, "run", str(q), "-i", str(src), "-o", str(out), "--dead-letter", str(dl),
                           "--engine", engine)
        assert code == 0, err
        els = [parse_element(json.loads(x)) for x in out.read_text(encoding="utf-8").splitlines()]
        dead = [json.loads(x) for x in dl.read_text(encoding="utf-8").splitlines()]
        runs[engine] = (els, dead, err.split(" elements in")[0].strip())
    verdict = verify(runs["spark"][0], runs["local"][0])
    assert verdict, str(verdict)
    assert runs["spark"][1] == runs["local"][1]
    assert runs["spark"][2] == runs["local"][2] == f"{sum(1 for x in LINES if x.strip()) * 3}"


@pytest.mark.spark
def test_the_algebraic_plan_reads_the_ranges_itself(spark: Any, tmp_path: Path) -> None:
    """A clean file (inserts and CTIs only) takes the two-phase plan with the read fused into its first
    phase; its output CHT is the local engine's."""
    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements
    from udm.host.spark.file_source import file_elements_df
    from udm.host.testing.oracle import oracle_run

    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1,
                         "payload": {"g": f"g{i % 3}", "v": i * 0.5}}) for i in range(300)]
    lines.insert(100, json.dumps({"kind": "cti", "t": 90}))
    _write(src, lines)
    scan = scan_file(src, 4, min_bytes=1)
    run = run_batch(QUERY, file_elements_df(spark, scan), scan=scan, buckets=2)
    try:
        assert run.path == "algebraic"
        out = collect_elements(run.output)
    finally:
        run.unpersist()
    stream = [e for _, e in read_jsonl_elements(src)]
    verdict = verify(out, oracle_run(bind(parse_query(QUERY)), stream).cht, rel_tol=1e-9)
    assert verdict, str(verdict)


def _spy_driver_plan(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record what `final_on_driver` answered in each ``udm run --engine spark`` (None: refused)."""
    from udm.host.spark import engine

    calls: list[Any] = []
    real = engine.final_on_driver

    def spy(*args: Any) -> Any:
        out = real(*args)
        calls.append(out)
        return out

    monkeypatch.setattr(engine, "final_on_driver", spy)
    return calls


def _clean_lines(n: int = 400) -> list[str]:
    lines = [json.dumps({"kind": "insert", "id": f"e{i}", "le": i // 3, "re": i // 3 + 1,
                         "payload": {"g": f"g{(i * 7) % 5}", "v": (i % 11) * 0.5}}) for i in range(n)]
    lines.insert(n // 2, json.dumps({"kind": "cti", "t": (n // 2) // 3 - 1}))
    return lines


@pytest.mark.spark
@pytest.mark.parametrize("name", ["sum", "median"])
def test_cli_spark_run_of_a_clean_file_ends_on_the_driver(spark: Any, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A clean file takes the two-phase plan with its final phase on the driver (no `run_batch`): output CHT
    and summary counts are the local engine's; the output lists each group's windows in time order,
    groups in the order they first appear in the file, and ends with the final CTI; no dead letters."""
    from udm.host.spark import engine

    calls = _spy_driver_plan(monkeypatch)
    src = tmp_path / "in.jsonl"
    lines = _clean_lines()
    _write(src, lines)
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{**QUERY["steps"][0], "udm": name}]}), encoding="utf-8")
    runs = {}
    for eng in ("local", "spark"):
        if eng == "spark":
            monkeypatch.setattr(engine, "run_batch", lambda *a, **k: pytest.fail("run_batch ran"))
        out, dl = tmp_path / f"{eng}.jsonl", tmp_path / f"{eng}.dead.jsonl"
        code, _, err = udm(capsys, "run", str(q), "-i", str(src), "-o", str(out), "--dead-letter", str(dl),
                           "--engine", eng)
        assert code == 0, err
        runs[eng] = ([json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()],
                     dl.read_text(encoding="utf-8"), err.split(" elements in")[0].strip())
    assert len(calls) == 1 and calls[0] is not None
    verdict = verify([parse_element(x) for x in runs["spark"][0]], [parse_element(x) for x in runs["local"][0]])
    assert verdict, str(verdict)
    assert runs["spark"][1] == runs["local"][1] == ""
    assert runs["spark"][2] == runs["local"][2] == str(len(lines))
    els = runs["spark"][0]
    assert els[-1] == {"kind": "cti", "t": "inf"} and all(e["kind"] == "insert" for e in els[:-1])
    groups = [e["payload"]["g"] for e in els[:-1]]
    first_seen = list(dict.fromkeys(json.loads(x)["payload"]["g"] for x in lines if '"insert"' in x))
    assert list(dict.fromkeys(groups)) == first_seen
    for g in first_seen:
        les = [e["le"] for e in els[:-1] if e["payload"]["g"] == g]
        assert les == sorted(les) and len(set(les)) == len(les)


@pytest.mark.spark
def test_cli_spark_driver_plan_refuses_bad_lines(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed line, a reused id or a late insert: the driver's plan refuses the file and the engine path
    dead-letters each as the local engine does (line, reason, element)."""
    calls = _spy_driver_plan(monkeypatch)
    lines = _clean_lines(200)
    late = json.dumps({"kind": "insert", "id": "late", "le": 0, "re": 1, "payload": {"g": "g1", "v": 1.0}})
    bad = {"malformed": [*lines[:50], "{not json", *lines[50:]], "duplicate": [*lines, lines[10]],
           "late": [*lines, late]}
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{**QUERY["steps"][0], "udm": "median"}]}), encoding="utf-8")
    for what, content in bad.items():
        src = tmp_path / f"{what}.jsonl"
        _write(src, content)
        dead = {}
        for eng in ("local", "spark"):
            out, dl = tmp_path / f"{what}.{eng}.jsonl", tmp_path / f"{what}.{eng}.dead.jsonl"
            code, _, err = udm(capsys, "run", str(q), "-i", str(src), "-o", str(out), "--dead-letter", str(dl),
                               "--engine", eng)
            assert code == 0, err
            dead[eng] = [json.loads(x) for x in dl.read_text(encoding="utf-8").splitlines()]
        assert calls[-1] is None, what
        assert dead["spark"] == dead["local"] and len(dead["local"]) >= 1, what
