"""The early input reader (`udm.host.io.early_read`) and the command lines it starts on
(`udm.host.cli.run_argv`): taken over only on an exact match, never visible in what a run writes."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_harness import udm

from bench import gen
from udm.host.cli.run_argv import run_input
from udm.host.io import early_read
from udm.host.io.jsonl import DEFAULT_BATCH_SIZE, JsonlReader
from udm.host.query import runners

OPTS = early_read.READER_OPTIONS


def _threads() -> list[str]:
    """The reader threads alive now (early reader, `JsonlReader`'s parse pool and block reader)."""
    return [t.name for t in threading.enumerate() if t.name.startswith(("udm-early-read", "udm-jsonl-reader"))]


def _elements(batches: Any) -> list[Any]:
    return [x for b in batches for x in b.to_elements()]


@pytest.fixture
def events(tmp_path: Path) -> Path:
    p = tmp_path / "in.jsonl"
    gen.disordered(p, 3000)
    return p


@pytest.fixture(autouse=True)
def _no_leftover() -> Any:
    yield
    early_read.discard()
    assert _threads() == []


# ------------------------------------------------------------------------------------------ which command lines
@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "q.json", "--input", "in.jsonl", "--output", "o.jsonl"], ("in.jsonl", None)),
    (["--debug", "run", "q.json", "-i", "in.jsonl", "-o", "-", "--quiet", "--json"], ("in.jsonl", None)),
    (["run", "q.json", "--input=in.jsonl", "--output=o", "--batch-size", "500"], ("in.jsonl", 500)),
    (["run", "q.json", "--input", "in.jsonl", "--engine", "local", "--dead-letter", "d"], ("in.jsonl", None)),
    (["run", "q.json", "--input", "in.jsonl", "--engine", "spark"], None),   # another engine reads it
    (["run", "q.json", "--input", "-"], None),                               # stdin
    (["run", "q.json", "--input", "a=in.jsonl"], None),                      # NAME=PATH: a graph's input
    (["run", "q.json", "--input", "a.jsonl", "--input", "b.jsonl"], None),   # several inputs
    (["run", "q.json", "--input", "in.jsonl", "--checkpoint", "ck"], None),  # the checkpointed feed
    (["run", "q.json", "--input", "in.jsonl", "--time", "ts"], None),        # a table
    (["run", "q.json", "--input", "prices.parquet"], None),
    (["run", "q.json", "--input", "in.jsonl", "--help"], None),
    (["run", "q.json", "--input", "in.jsonl", "--inp", "x"], None),          # unknown (abbreviated) option
    (["run", "--input", "in.jsonl"], None),                                  # no query
    (["run", "q.json", "--input", "in.jsonl", "--batch-size", "0"], None),
    (["list"], None),
    ([], None),
])
def test_run_input_only_for_one_jsonl_file_on_the_local_engine(argv: list[str], expected: Any) -> None:
    assert run_input(argv) == expected


def test_reader_options_are_the_runs() -> None:
    """Otherwise no claim could ever succeed."""
    assert early_read.READER_OPTIONS == runners.READER_OPTIONS


# ------------------------------------------------------------------------------------------ claim
def test_claimed_on_an_exact_match_gives_the_same_batches(events: Path) -> None:
    expected = _elements(JsonlReader(events, 256, **OPTS))
    assert early_read.start(str(events), 256) is not None
    reader = early_read.claim(events, 256, OPTS)
    assert reader is not None
    got = _elements(reader)
    assert got == expected and len(got) == 3000
    assert reader.bytes_done == events.stat().st_size
    assert early_read.claim(events, 256, OPTS) is None  # handed over once


@pytest.mark.parametrize("change", ["append", "rewrite", "replace", "touch", "batch_size", "options", "copy"])
def test_not_claimed_when_anything_differs(events: Path, tmp_path: Path, change: str) -> None:
    assert early_read.start(str(events), 256) is not None
    source, batch_size, opts = events, 256, dict(OPTS)
    if change == "append":
        with events.open("a") as f:
            f.write('{"kind":"cti","t":99999}\n')
    elif change == "rewrite":  # same size, other bytes
        data = events.read_bytes()
        events.write_bytes(data.replace(b'"sym":"A"', b'"sym":"Z"', 1))
        os.utime(events, ns=(events.stat().st_atime_ns, events.stat().st_mtime_ns + 1_000_000))
    elif change == "replace":  # another file under the same name
        other = tmp_path / "other.jsonl"
        shutil.copyfile(events, other)
        os.replace(other, events)
    elif change == "touch":
        st = events.stat()
        os.utime(events, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    elif change == "batch_size":
        batch_size = 512
    elif change == "options":
        opts = {"workers": 1, "prefetch": 3}
    else:
        source = tmp_path / "copy.jsonl"
        shutil.copyfile(events, source)
    assert early_read.claim(source, batch_size, opts) is None
    assert _threads() == []


def test_off_switch(events: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(early_read.ENV, "0")
    assert early_read.start(str(events)) is None
    assert _threads() == []


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_nothing_started_for_what_is_not_a_readable_file(tmp_path: Path, what: str) -> None:
    path = tmp_path / "nope.jsonl"
    if what == "directory":
        path.mkdir()
    assert early_read.start(str(path)) is None
    assert _threads() == []


def test_discard_stops_a_reader_that_is_waiting_with_batches_ahead(events: Path) -> None:
    reader = early_read.start(str(events), 16)  # 3000 lines: more than AHEAD_BATCHES batches of 16
    assert reader is not None
    early_read.discard()
    assert _threads() == []


# ------------------------------------------------------------------------------------------ udm run, end to end
SHAPES: dict[str, dict[str, Any]] = {
    "span": {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "price"},
                        "params": {"lo": 0, "hi": 50}}]},
    "tumbling": {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["sym"],
                            "udm": "sum", "input": "price", "as": "total"}]},
    "hopping_median": {"steps": [{"op": "window", "window": {"type": "hopping", "size": 50, "hop": 10},
                                  "udm": "median", "input": "price", "as": "m"}]},
}


def _run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, q: Path,
         inp: Path, on: bool, tag: str) -> tuple[int, str, bytes, bytes]:
    monkeypatch.setenv(early_read.ENV, "1" if on else "0")
    out, dl = tmp_path / f"out-{tag}.jsonl", tmp_path / f"dl-{tag}.jsonl"
    code, _, err = udm(capsys, "run", str(q), "--input", str(inp), "--output", str(out), "--dead-letter", str(dl),
                       "--quiet")
    assert _threads() == []
    return code, err, out.read_bytes() if out.exists() else b"", dl.read_bytes() if dl.exists() else b""


@pytest.fixture
def takes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the early readers the run took over."""
    taken: list[int] = []
    real = early_read.EarlyReader.take

    def take(self: early_read.EarlyReader) -> Any:
        taken.append(1)
        return real(self)

    monkeypatch.setattr(early_read.EarlyReader, "take", take)
    return taken


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_output_is_the_same_with_and_without_the_early_reader(
        shape: str, events: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, takes: list[int]) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(SHAPES[shape]))
    with events.open("a") as f:  # bad lines: dead letters, the same with the early reader
        f.write('{"kind":"insert","id":"x","le":5}\nnot json\n{"kind":"cti","t":"soon"}\n')
    off = _run(capsys, monkeypatch, tmp_path, q, events, False, "off")
    assert takes == []
    on = _run(capsys, monkeypatch, tmp_path, q, events, True, "on")
    assert takes == [1]
    assert off[0] == 0 and off[2] and off[3].count(b"\n") == 3
    assert on == off


def test_a_failing_query_leaves_no_thread_and_says_the_same(
        events: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        takes: list[int]) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                        "udm": "no_such_udm", "input": "price", "as": "x"}]}))
    off = _run(capsys, monkeypatch, tmp_path, q, events, False, "off")
    on = _run(capsys, monkeypatch, tmp_path, q, events, True, "on")
    assert off[0] == 1 and "no_such_udm" in off[1] and len(off[1].strip().splitlines()) == 1
    assert on == off and takes == []


def test_a_missing_input_is_reported_by_the_normal_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(SHAPES["tumbling"]))
    off = _run(capsys, monkeypatch, tmp_path, q, tmp_path / "missing.jsonl", False, "off")
    on = _run(capsys, monkeypatch, tmp_path, q, tmp_path / "missing.jsonl", True, "on")
    assert off[0] == 1 and "missing.jsonl does not exist" in off[1]
    assert on == off


def test_the_default_batch_size_is_the_runs(events: Path) -> None:
    assert early_read.start(str(events)) is not None
    reader = early_read.claim(str(events), DEFAULT_BATCH_SIZE, OPTS)
    assert reader is not None
    reader.close()
