"""Arrival time on ``--engine spark-streaming`` (issue 27 item 5; semantics-notes 70): the driver stamps each
line as it reads it (standard input, a pipe, a watched directory) and Spark runs the stamped elements.

The reference is the local engine fed the same lines with the same injected clock (each engine reads the clock
once per line when neither ``--cti-every`` nor ``max_wait`` is set, so the stamps are equal), and the oracle over
the stamped elements; where the clock is read at moments a test cannot pin (``--cti-every``, ``max_wait``), the
CHT does not depend on them and the test checks what the clock decides."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from udm.host.errors import UdmError
from udm.host.io.arrival import ArrivalSource, ArrivalStamper, WatchedLines, open_lines
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.temporal.elements import Cti, Insert, parse_element
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle_run

SUM_BY_G = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 50}, "group_by": ["g"],
                       "udm": "sum", "input": "v"}]}


class Clock:
    """A clock the test moves: each reading returns the current time (``step`` added after each reading)."""

    def __init__(self, t: int = 1_000, step: int = 0) -> None:
        self.t = t
        self.step = step
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            t = self.t
            self.t += self.step
            return t


def _lines(rows: list[Any]) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


#: inserts over three keys, durations, retractions by id (some in a later micro-batch than their insert), CTIs
#: at the clock, a bad line, an id reused while live, the end of time in the middle and an insert after it
ROWS: list[Any] = [
    {"kind": "insert", "id": "a", "duration": 30, "payload": {"g": "x", "v": 1}},
    {"kind": "insert", "id": "b", "payload": {"g": "y", "v": 2}},
    {"kind": "insert", "id": "c", "duration": "inf", "payload": {"g": "z", "v": 3}},
    {"kind": "insert", "id": "d", "le": 0, "re": 40, "payload": {"g": "x", "v": 4}},
    b"{not json",
    {"kind": "retract", "id": "a"},
    {"kind": "cti"},
    {"kind": "insert", "id": "d", "payload": {"g": "y", "v": 5}},
    {"kind": "insert", "id": "e", "duration": 100, "payload": {"g": "y", "v": 6}},
    {"kind": "retract", "id": "c"},
    {"kind": "insert", "id": "f", "payload": {"g": "z", "v": 7}},
    {"kind": "retract", "id": "e"},
    {"kind": "cti"},
    {"kind": "insert", "id": "g", "duration": "inf", "payload": {"g": "x", "v": 8}},
    {"kind": "cti", "t": "inf"},
    {"kind": "insert", "id": "h", "payload": {"g": "x", "v": 9}},
]


def _run(engine: str, query: dict[str, Any], source: Any, out: Path, clock: Any, cti_every: int | None = None,
         **opts: Any) -> Any:
    req = RunRequest(bind(parse_query(query)), ArrivalSource(source, cti_every), out, out.with_suffix(".dl.jsonl"),
                     batch_size=opts.pop("batch_size", None), options={"clock": clock, "tick": 0.01, **opts})
    return (run_local if engine == "local" else get_engine(engine))(req)


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _dead(path: Path) -> list[tuple[Any, str]]:
    return sorted((d["line"], d["reason"]) for d in map(json.loads, path.read_text().splitlines()))


def _stamped(rows: list[Any], clock: Any) -> list[Any]:
    st = ArrivalStamper(clock)
    out: list[Any] = []
    for i, r in enumerate(rows, 1):
        out += [e for _, e in st.stamp(r if isinstance(r, bytes) else json.dumps(r), i)]
    return out


def test_open_lines_refuses_a_directory_on_the_local_engine(tmp_path: Path) -> None:
    with pytest.raises(UdmError, match="needs --engine spark-streaming"):
        open_lines(tmp_path, directory=False)
    with pytest.raises(UdmError, match="cannot read the live input"):
        open_lines(tmp_path / "missing.jsonl", directory=False)
    with pytest.raises(UdmError, match="needs --engine spark-streaming"):
        _run("local", SUM_BY_G, tmp_path, tmp_path / "o.jsonl", Clock())


def test_watched_lines_read_files_as_they_land_in_modification_order(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_bytes(b"b1\nb2")  # (a last line without a newline is a line)
    (tmp_path / "a.jsonl").write_bytes(b"a1\n")
    (tmp_path / ".hidden").write_bytes(b"h\n")
    os.utime(tmp_path / "b.jsonl", (1_000, 1_000))
    os.utime(tmp_path / "a.jsonl", (2_000, 2_000))
    w = WatchedLines(tmp_path, poll=0.01)
    try:
        got = [w.get(5) for _ in range(3)]
        assert got == [b"b1\n", b"b2", b"a1\n"]
        assert w.get(0.1) is None and not w.done
        (tmp_path / "_c.tmp").write_bytes(b"c1\n")
        assert w.get(0.1) is None
        os.replace(tmp_path / "_c.tmp", tmp_path / "c.jsonl")  # lands whole
        assert w.get(5) == b"c1\n"
        assert w.files == ["b.jsonl", "a.jsonl", "c.jsonl"]
    finally:
        w.close()


@pytest.mark.spark
def test_same_stamped_input_same_cht_on_local_and_spark_streaming(spark: Any, tmp_path: Path) -> None:
    """Keyed, two buckets, micro-batches of 4 elements: the CHT, dead letters and counts of the local engine,
    and the CHT the oracle gives over the stamped elements."""
    data = _lines(ROWS)
    local = _run("local", SUM_BY_G, io.BytesIO(data), tmp_path / "local.jsonl", Clock(1_000, 7))
    res = _run("spark-streaming", SUM_BY_G, io.BytesIO(data), tmp_path / "spark.jsonl", Clock(1_000, 7),
               batch_size=4, buckets=2)
    out = _read(tmp_path / "spark.jsonl")
    assert cht(out) == cht(_read(tmp_path / "local.jsonl"))
    assert cht(out) == oracle_run(bind(parse_query(SUM_BY_G)), _stamped(ROWS, Clock(1_000, 7))).cht
    assert _dead(tmp_path / "spark.dl.jsonl") == _dead(tmp_path / "local.dl.jsonl")
    assert len(_dead(tmp_path / "spark.dl.jsonl")) >= 3  # the bad line, the reused live id, the insert after the end
    assert (res.elements_in, res.dead_lettered, res.reasons) == (local.elements_in, local.dead_lettered, local.reasons)
    ctis = [e.t for e in out if isinstance(e, Cti)]
    assert ctis == sorted(set(ctis)) and ctis[-1] == 2**63 - 1 and len(ctis) >= 2


@pytest.mark.spark
def test_watched_directory_with_arrival_time(spark: Any, tmp_path: Path) -> None:
    """Files land while the run watches; ``--until-idle`` ends the input (the engines finish, as at the end
    of standard input): the CHT is the local engine's over the same lines, in landing order, on the same clock."""
    watch = tmp_path / "in"
    watch.mkdir()
    first, second = ROWS[:7], ROWS[7:14]

    def land() -> None:
        for k, rows in enumerate((first, second)):
            time.sleep(0.5 + k)
            (watch / f".part{k}").write_bytes(_lines(rows))
            os.replace(watch / f".part{k}", watch / f"part{k}.jsonl")

    t = threading.Thread(target=land)
    t.start()
    res = _run("spark-streaming", SUM_BY_G, str(watch), tmp_path / "dir.jsonl", Clock(5_000, 10), until_idle=4.0,
               buckets=2)
    t.join()
    local = _run("local", SUM_BY_G, io.BytesIO(_lines(first + second)), tmp_path / "local.jsonl", Clock(5_000, 10))
    assert cht(_read(tmp_path / "dir.jsonl")) == cht(_read(tmp_path / "local.jsonl"))
    assert (res.elements_in, res.dead_lettered) == (local.elements_in, local.dead_lettered) == (14, 2)


@pytest.mark.spark
def test_cti_every_and_max_wait_release_while_the_input_is_quiet(spark: Any, tmp_path: Path) -> None:
    """A pipe that stays open: ``max_wait`` lets the held insert out once the injected clock moved past it, with
    no CTI and no other input; ``--cti-every`` CTIs follow the clock, on multiples of it; the output is in the
    file before the run ends. Closing the pipe ends the input."""
    query = {"steps": [{"op": "align", "max_delay": "inf", "max_wait": "2s"}]}
    r, w = os.pipe()
    clock = Clock(10_000_000)
    out = tmp_path / "o.jsonl"
    result: dict[str, Any] = {}

    def run() -> None:
        with os.fdopen(r, "rb") as f:
            result["res"] = _run("spark-streaming", query, f, out, clock, cti_every=5_000_000)

    t = threading.Thread(target=run)
    t.start()
    try:
        os.write(w, b'{"kind": "insert", "id": "a", "duration": "inf", "payload": {"v": 1}}\n')
        assert _wait_for(out, lambda rows: any(x["kind"] == "cti" for x in rows))  # cti(10 s) from the clock
        time.sleep(3)
        assert [x for x in _json(out) if x["kind"] == "insert"] == []  # held: "inf" never releases by watermark
        clock.t += 2_000_000
        assert _wait_for(out, lambda rows: any(x["kind"] == "insert" for x in rows))
        ins = [x for x in _json(out) if x["kind"] == "insert"]
        assert [(x["le"], x["re"], x["payload"]) for x in ins] == [(10_000_000, "inf", {"v": 1})]
        clock.t = 16_000_000
        assert _wait_for(out, lambda rows: any(x == {"kind": "cti", "t": 15_000_000} for x in rows))
        assert t.is_alive()  # all of it before the end of the input
    finally:
        os.close(w)
        t.join(120)
    got = _json(out)
    ctis = [x["t"] for x in got if x["kind"] == "cti"]
    assert ctis[:2] == [10_000_000, 15_000_000] and ctis[-1] == "inf"
    assert result["res"].elements_in >= 3  # the insert and the clock's CTIs


def _json(p: Path) -> list[Any]:
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def _wait_for(p: Path, ok: Any, timeout: float = 90) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ok(_json(p)):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.spark
@pytest.mark.slow
def test_cli_stdin_with_arrival_time_on_spark_streaming(tmp_path: Path) -> None:
    """``udm run --engine spark-streaming --input - --time @arrival``: each line stamped with the real clock
    as it is read, in microseconds, non-decreasing in the read order; CTIs follow the clock."""
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "project", "set": {"seen": True}}]}))
    data = _lines([{"kind": "insert", "id": f"e{i}", "payload": {"i": i}} for i in range(40)])
    before = time.time_ns() // 1000
    res = subprocess.run([sys.executable, "-m", "udm.host.cli.app", "run", str(q), "--input", "-", "--time",
                          "@arrival", "--cti-every", "1ms", "--engine", "spark-streaming", "--master", "local[1]",
                          "--output", str(tmp_path / "o.jsonl"), "-q"], input=data, capture_output=True, timeout=300)
    after = time.time_ns() // 1000
    assert res.returncode == 0, res.stderr.decode()[-3000:]
    out = _json(tmp_path / "o.jsonl")
    ins = [o for o in out if o["kind"] == "insert"]
    assert sorted(o["payload"]["i"] for o in ins) == list(range(40))
    by_i = sorted(ins, key=lambda o: o["payload"]["i"])
    les = [o["le"] for o in by_i]
    assert les == sorted(les) and before <= les[0] and les[-1] <= after  # read order = stamp order
    assert all(o["re"] == o["le"] + 1 and o["payload"]["seen"] is True for o in ins)
    ctis = [o["t"] for o in out if o["kind"] == "cti"]
    assert ctis[-1] == "inf" and all(isinstance(c, int) and before <= c <= after for c in ctis[:-1])


@pytest.mark.spark
def test_fluent_from_live_runs_on_spark_streaming(spark: Any, tmp_path: Path) -> None:
    """``Stream.from_live(...).run(out, engine="spark-streaming")`` is the Python form of the CLI run."""
    from udm.host.query.fluent import Stream

    rows = ROWS[:4] + ROWS[5:7]  # a at 100 for 30 (retracted at 120), b at 105, c at 110, d at 115, cti(125)
    Stream.from_live(io.BytesIO(_lines(rows))).align(max_delay="inf").run(
        tmp_path / "o.jsonl", engine="spark-streaming", clock=Clock(100, 5), tick=0.01)
    expected = [Insert("a", 100, 120, {"g": "x", "v": 1}), Insert("b", 105, 106, {"g": "y", "v": 2}),
                Insert("c", 110, 2**63 - 1, {"g": "z", "v": 3}), Insert("d", 115, 155, {"g": "x", "v": 4})]
    assert cht(_read(tmp_path / "o.jsonl")) == cht([*expected, Cti(2**63 - 1)])
