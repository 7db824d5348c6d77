"""`udm run` (INTERFACES §3): plumbing with a stand-in runner, and end to end with the local engine
(output CHT == the reference oracle's)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_harness import udm

from udm.host.errors import BadElement
from udm.host.io.batch import ElementBatch
from udm.host.model.spec import parse_query
from udm.host.query import runners
from udm.host.run_result import RunResult
from udm.host.temporal.elements import Cti, Element, Insert, element_to_json
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle

QUERY = {
    "steps": [
        {"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 0, "hi": 100}},
        {"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["sym"], "udm": "median",
         "input": "price", "as": "m"},
    ]
}


class FakeRunner:
    """Stands in for QueryRunner: passes valid elements through, dead-letters bad ones."""

    instances: list[FakeRunner] = []

    def __init__(self, bound: Any, on_violation: str | None = None) -> None:
        self.bound = bound
        self.dead_letters: list[Any] = []
        self.stats = RunResult()
        self.batches = 0
        FakeRunner.instances.append(self)

    def process_batch(self, batch: ElementBatch) -> list[Element]:
        self.batches += 1
        out: list[Element] = []
        for line, e in batch.to_elements():
            self.stats.elements_in += 1
            if isinstance(e, BadElement):
                self.dead_letters.append({"line": line, "reason": e.reason, "element": e.raw})
                self.stats.dead_lettered += 1
                self.stats.reasons[e.reason] += 1
            else:
                out.append(e)
        self.stats.elements_out += len(out)
        return out

    def run_all(self, inputs: Any) -> list[Any]:
        els = list(inputs)
        return self.process_batch(ElementBatch.from_elements(els, list(range(1, len(els) + 1)))) + self.finish()

    def finish(self) -> list[Element]:
        self.stats.elements_out += 1
        return [Cti(2**63 - 1)]

    def take_dead_letters(self) -> list[Any]:
        d, self.dead_letters = self.dead_letters, []
        return d

    def chattiness(self) -> dict[str, dict[str, int]]:
        return {}


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeRunner]]:
    FakeRunner.instances = []
    monkeypatch.setattr(runners, "make_runner", FakeRunner)
    yield FakeRunner


def _write(path: Path, elements: list[Any]) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(
        element_to_json(e) if not isinstance(e, dict) else e)) + "\n" for e in elements))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(QUERY))
    qy = tmp_path / "q.yaml"
    qy.write_text(yaml.safe_dump(QUERY))
    inp = _write(tmp_path / "in.jsonl", [
        {"kind": "insert", "id": "e1", "le": 1, "re": 5, "payload": {"sym": "A", "price": 10.5}},
        "not json",
        {"kind": "insert", "id": "e2", "le": 2, "re": 12, "payload": {"sym": "B", "price": 3}},
        {"kind": "cti", "t": 3},
    ])
    return {"q": q, "qy": qy, "in": inp, "out": tmp_path / "out.jsonl", "dl": tmp_path / "dl.jsonl"}


# ---------------------------------------------------------------------------------------------- plumbing
@pytest.mark.parametrize("query", ["q", "qy"])
def test_run_writes_output_dead_letters_and_summary(capsys: Any, fake_engine: Any, files: dict[str, Path],
                                                    query: str) -> None:
    code, out, err = udm(capsys, "run", str(files[query]), "--input", str(files["in"]), "--output",
                         str(files["out"]), "--dead-letter", str(files["dl"]))
    assert code == 0, err
    rows = [json.loads(x) for x in files["out"].read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["insert", "insert", "cti", "cti"]
    dl = [json.loads(x) for x in files["dl"].read_text().splitlines()]
    assert dl == [{"line": 2, "reason": dl[0]["reason"], "element": "not json"}]
    assert dl[0]["reason"].startswith("not valid JSON")
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("4 elements in, 4 out, 1 dead-lettered (local,")
    assert out == ""


def test_run_quiet_and_json_summary(capsys: Any, fake_engine: Any, files: dict[str, Path]) -> None:
    args = ["run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"])]
    res = udm(capsys, *args, "--quiet")
    assert res == (0, "", "")
    code, out, err = udm(capsys, *args, "--json")
    assert code == 0 and err == ""
    summary = json.loads(out)
    assert summary["elements_in"] == 4 and summary["dead_lettered"] == 1 and summary["engine"] == "local"


def test_run_to_stdout(capsys: Any, fake_engine: Any, files: dict[str, Path]) -> None:
    code, out, _ = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", "-", "-q")
    assert code == 0
    assert [json.loads(x)["kind"] for x in out.splitlines()] == ["insert", "insert", "cti", "cti"]


def test_batch_size_reaches_the_reader(capsys: Any, fake_engine: Any, files: dict[str, Path]) -> None:
    code, _, _ = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                     "--batch-size", "1", "-q")
    assert code == 0 and fake_engine.instances[-1].batches == 4


@pytest.mark.parametrize(("step", "needle"), [
    ({"udm": "nope"}, "no UDM named 'nope'; available: "),
    ({"udm": "topk", "params": {"k": 0}}, "bad parameters for UDM 'topk'"),
    ({"udm": "median", "output": "unaltered"}, "does not allow output 'unaltered'; allowed: window"),
    ({"udm": "median", "window": {"type": "tumbling", "size": 0}}, "size"),
])
def test_query_errors_fail_before_reading(capsys: Any, fake_engine: Any, tmp_path: Path, step: dict[str, Any],
                                          needle: str) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, **step}]}))
    code, _, err = udm(capsys, "run", str(q), "-i", str(tmp_path / "missing.jsonl"), "-o",
                         str(tmp_path / "o.jsonl"))
    assert code == 1
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert fake_engine.instances == []
    assert not (tmp_path / "o.jsonl").exists()


def test_engines_not_wired_yet(capsys: Any, fake_engine: Any, files: dict[str, Path],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners, "ENGINES", {"local": runners.run_local})
    monkeypatch.setattr(runners, "ENGINE_MODULES", {})
    for name in ("spark", "spark-streaming"):
        code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                           "--engine", name)
        assert code == 1
        assert f"engine {name!r} is not available yet" in err and len(err.strip().splitlines()) == 1
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                       "--engine", "flink")
    assert code == 1 and "unknown engine 'flink'; engines: local, spark, spark-streaming" in err


def test_engine_registry_is_used(capsys: Any, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[runners.RunRequest] = []

    def fake(req: runners.RunRequest) -> RunResult:
        seen.append(req)
        return RunResult(engine="spark", elements_in=7)

    monkeypatch.setitem(runners.ENGINES, "spark", fake)
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                       "--engine", "spark", "--batch-size", "50", "--checkpoint", "ck")
    assert code == 0 and err.startswith("7 elements in")
    assert seen[0].batch_size == 50 and str(seen[0].checkpoint) == "ck"


def test_missing_input_and_bad_spec_file(capsys: Any, fake_engine: Any, files: dict[str, Path],
                                         tmp_path: Path) -> None:
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(tmp_path / "nope.jsonl"), "-o", str(files["out"]))
    assert code == 1 and "does not exist" in err and "Traceback" not in err
    code, _, err = udm(capsys, "run", str(tmp_path / "nope.json"), "-i", str(files["in"]), "-o", str(files["out"]))
    assert code == 1 and "cannot read query spec" in err
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "junk").write_text("not a checkpoint")
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                       "--checkpoint", str(tmp_path / "ck"))
    assert code == 1 and "--checkpoint" in err and "holds no udm local run" in err
    before = files["in"].read_text()
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["in"]))
    assert code == 1 and "--input and --output are the same file" in err
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                       "--dead-letter", str(files["out"]))
    assert code == 1 and "--output and --dead-letter are the same file" in err
    assert files["in"].read_text() == before


# ---------------------------------------------------------------------------------------------- end to end
def _events(n: int) -> list[Element]:
    out: list[Element] = []
    for i in range(n):
        out.append(Insert(f"e{i}", i, i + 1 + (i % 7), {"sym": "ABC"[i % 3], "price": (i * 37) % 120}))
        if i % 10 == 9:
            out.append(Cti(i))
    return out


def test_end_to_end_matches_oracle(capsys: Any, files: dict[str, Path]) -> None:
    events = _events(300)
    _write(files["in"], [*events[:50], "garbage", *events[50:]])
    code, _, err = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]),
                       "--dead-letter", str(files["dl"]))
    assert code == 0, err
    from udm.host.io.jsonl import read_jsonl_elements

    got = [e for _, e in read_jsonl_elements(files["out"])]
    assert cht(got) == oracle(parse_query(QUERY), events)
    assert [json.loads(x)["line"] for x in files["dl"].read_text().splitlines()] == [51]


def test_subprocess_udm_run(files: dict[str, Path]) -> None:
    _write(files["in"], _events(100))
    udm_bin = Path(sys.executable).with_name("udm")
    cmd = [str(udm_bin)] if udm_bin.exists() else [sys.executable, "-m", "udm.host.cli.app"]
    res = subprocess.run([*cmd, "run", str(files["qy"]), "--input", str(files["in"]), "--output",
                          str(files["out"]), "--engine", "local"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "elements in" in res.stderr and "out" in res.stderr
    assert files["out"].read_text().strip()


def test_progress_bar_on_a_terminal(capsys: Any, fake_engine: Any, files: dict[str, Path],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from udm.host.cli import run_cmd

    buf = io.StringIO()
    monkeypatch.setattr(run_cmd, "err", Console(file=buf, force_terminal=True, width=120))
    code, _, _ = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]))
    assert code == 0 and "el/s\n" not in buf.getvalue() and "udm run" not in buf.getvalue()  # too short for a bar
    buf.seek(0)
    buf.truncate(0)
    monkeypatch.setattr(run_cmd, "BAR_AFTER", 0.0)  # as if the run lasted longer than the bar's delay
    code, _, _ = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]))
    assert code == 0
    text = buf.getvalue()
    assert "udm run" in text and "elements" in text and "el/s" in text  # the bar was drawn, with the rate
    assert "4 elements in, 4 out, 1 bad and dropped" in text  # (no --dead-letter file)
    buf.seek(0)
    buf.truncate(0)
    code, _, _ = udm(capsys, "run", str(files["q"]), "-i", str(files["in"]), "-o", str(files["out"]), "--quiet")
    assert code == 0 and buf.getvalue() == ""


@pytest.mark.slow
def test_bench_smoke(tmp_path: Path) -> None:
    """The end-to-end benchmark runs (tiny sizes) and finds the engine's answer equal to the baseline's."""
    from bench import bench_run

    out = tmp_path / "bench.json"
    assert bench_run.main(["--sizes", "3000,6000", "--json-out", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = [r for r in data["results"] if "n" in r]
    assert len(rows) == 4 and all(r["same_answer"] for r in rows)
    assert all(r["rss_mib"] > 10 and r["el_per_s"] > 0 for r in rows)
