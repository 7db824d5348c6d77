"""Arrival time (SEMANTICS §11; ``udm run --time @arrival``, `Stream.from_live`): a live input's elements take the
wall-clock time they are read at, in microseconds, non-decreasing, ties in read order; CTIs follow the clock
(``--cti-every``); ``align``'s ``max_wait`` releases held output by the clock, with no CTI progress.

Every test but the CLI's drives an injected clock, so the stamps, and so the results, are known exactly."""

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

from udm.host.errors import BadElement, UdmError
from udm.host.io.arrival import ArrivalSource, ArrivalStamper
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.fluent import Stream
from udm.host.query.runners import RunRequest, run_local
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF


class Clock:
    """A clock the test moves: each reading returns the current time (``step`` added after each reading)."""

    def __init__(self, t: int = 1_000, step: int = 0) -> None:
        self.t = t
        self.step = step

    def __call__(self) -> int:
        t = self.t
        self.t += self.step
        return t


def stamp_all(lines: list[Any], clock: Any, **kw: Any) -> list[Any]:
    st = ArrivalStamper(clock, **kw)
    out = []
    for i, x in enumerate(lines, 1):
        out += [e for _, e in st.stamp(json.dumps(x), i)]
    return out


def test_stamps_follow_the_clock_and_never_go_back() -> None:
    times = iter([50, 40, 40, 70])
    got = stamp_all([{"kind": "insert", "id": i} for i in "abcd"], lambda: next(times))
    assert [(e.id, e.le, e.re) for e in got] == [("a", 50, 51), ("b", 50, 51), ("c", 50, 51), ("d", 70, 71)]


def test_durations_retractions_ctis() -> None:
    got = stamp_all([
        {"kind": "insert", "id": "a", "duration": 30, "payload": {"v": 1}},
        {"kind": "insert", "id": "b", "le": 3, "re": 8},
        {"kind": "insert", "id": "c", "duration": "inf"},
        {"kind": "retract", "id": "c"},
        {"kind": "retract", "id": "a"},
        {"kind": "cti", "t": 5},
        {"kind": "retract", "id": "zz", "le": 1, "re": 2, "re_new": 1},
        {"kind": "cti", "t": "inf"},
    ], Clock(100, 10))
    assert got == [Insert("a", 100, 130, {"v": 1}), Insert("b", 110, 115, {}), Insert("c", 120, INF, {}),
                   Retract("c", 120, INF, 130), Retract("a", 100, 130, 130), Cti(150),
                   Retract("zz", 1, 2, 1), Cti(INF)]


def test_bad_lines() -> None:
    got = stamp_all([{"kind": "insert"}, {"kind": "ecti", "le": 1, "re": 2, "count": 0},
                     {"kind": "insert", "id": "a", "duration": 0}, [1]], Clock())
    assert all(isinstance(e, BadElement) for e in got)
    assert [e.reason for e in got][:3] == ["missing field 'id'", got[1].reason, "duration must be at least 1, got 0"]
    assert "no meaning on an input read with arrival time" in got[1].reason
    st = ArrivalStamper(Clock())
    assert isinstance(st.stamp(b"{not json", 9)[0][1], BadElement)


def test_cti_every_follows_the_clock_while_nothing_arrives() -> None:
    clock = Clock(1_000)
    st = ArrivalStamper(clock, cti_every=100)
    assert st.due() == [Cti(1_000)]
    assert st.due() == []
    clock.t = 1_250
    assert st.due() == [Cti(1_200)]  # several multiples passed at once: the highest


def _live_run(query: dict[str, Any], source: Any, clock: Any, tmp: Path, cti_every: int | None = None,
              **opts: Any) -> Any:
    out = tmp / "out.jsonl"
    res = run_local(RunRequest(bind(parse_query(query)), ArrivalSource(source, cti_every), out, tmp / "dl.jsonl",
                               options={"clock": clock, "tick": 0.01, **opts}))
    return res, [json.loads(x) for x in out.read_text().splitlines()]


def test_run_local_over_a_stream(tmp_path: Path) -> None:
    src = io.BytesIO(b'{"kind": "insert", "id": "a", "payload": {"g": 1}}\n\n'
                     b'{"kind": "insert", "id": "b", "duration": 20, "payload": {"g": 1}}\n'
                     b'{"kind": "bogus"}\n')
    query = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count", "as": "n"}]}
    res, out = _live_run(query, src, Clock(100, 7), tmp_path)
    assert res.elements_in == 3  # (the blank line is no element)
    assert res.dead_lettered == 1
    inserts = [(o["le"], o["re"], o["payload"]["n"]) for o in out if o["kind"] == "insert"]
    # the clock is read once per line: a at 100, b at 107 (for 20 ticks), the bad line at 114
    assert inserts == [(100, 110, 2), (110, 120, 1), (120, 130, 1)]


def test_max_wait_releases_without_cti_progress(tmp_path: Path) -> None:
    """A pipe that stays open: the held insert goes out once the clock has moved ``max_wait`` past its
    arrival, though no CTI and no other element comes."""
    r, w = os.pipe()
    clock = Clock(1_000_000)
    query = {"steps": [{"op": "align", "max_delay": "inf", "max_wait": "2s"}]}
    out = tmp_path / "out.jsonl"
    result: dict[str, Any] = {}

    def run() -> None:
        with os.fdopen(r, "rb") as f:
            result["res"] = run_local(RunRequest(bind(parse_query(query)), ArrivalSource(f), out, None,
                                                 options={"clock": clock, "tick": 0.01}))

    t = threading.Thread(target=run)
    t.start()
    try:
        os.write(w, b'{"kind": "insert", "id": "a", "duration": "inf"}\n')
        time.sleep(0.3)
        assert _lines(out) == []  # held: not final, and "inf" never releases by the watermark
        clock.t += 1_999_999
        time.sleep(0.3)
        assert _lines(out) == []
        clock.t += 1
        deadline = time.time() + 10
        while not _lines(out) and time.time() < deadline:
            time.sleep(0.02)
        assert _lines(out) == [{"kind": "insert", "id": "o1", "le": 1_000_000, "re": "inf", "payload": {}}]
    finally:
        os.close(w)
        t.join(30)
    assert result["res"].elements_in == 1


def _lines(p: Path) -> list[Any]:
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def test_fluent_from_live() -> None:
    src = io.BytesIO(b'{"kind": "insert", "id": "a", "payload": {"v": 3}}\n{"kind": "cti"}\n'
                     b'{"kind": "insert", "id": "b", "duration": 4, "payload": {"v": 5}}\n')
    got = Stream.from_live(src, clock=Clock(10, 5)).align(max_delay="inf").to_elements()
    assert got == [Insert("o1", 10, 11, {"v": 3}), Cti(15), Insert("o2", 20, 24, {"v": 5}), Cti(INF)]


def test_cli_time_arrival(tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "project", "set": {"seen": True}}]}))
    lines = b"".join(json.dumps({"kind": "insert", "id": f"e{i}", "payload": {"i": i}}).encode() + b"\n"
                     for i in range(50))
    before = time.time_ns() // 1000
    res = subprocess.run([sys.executable, "-m", "udm.host.cli.app", "run", str(q), "--input", "-", "--time",
                          "@arrival", "--cti-every", "1ms", "--output", "-", "-q"], input=lines, capture_output=True,
                         timeout=120)
    after = time.time_ns() // 1000
    assert res.returncode == 0, res.stderr.decode()
    out = [json.loads(x) for x in res.stdout.decode().splitlines()]
    ins = [o for o in out if o["kind"] == "insert"]
    assert [o["payload"]["i"] for o in ins] == list(range(50))
    les = [o["le"] for o in ins]
    assert les == sorted(les) and before <= les[0] and les[-1] <= after
    assert all(o["re"] == o["le"] + 1 for o in ins)
    assert out[-1] == {"kind": "cti", "t": "inf"}


def test_cli_refuses_table_options_with_arrival(tmp_path: Path) -> None:
    from udm.host.cli.table_args import TableArgs, table_sources

    with pytest.raises(UdmError, match="--unit does not go with --time @arrival"):
        table_sources(TableArgs(time=["@arrival"], unit=["s"]), {"main": "-"})
    src = table_sources(TableArgs(time=["@arrival"], cti_every=["2s"]), {"main": "-"})["main"]
    assert src == ArrivalSource("-", 2_000_000)
    with pytest.raises(UdmError, match="single input"):
        bq = bind(parse_query({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "union", "from": ["a", "b"]}]}))
        run_local(RunRequest(bq, {"a": ArrivalSource(io.BytesIO(b"")), "b": "/dev/null"}, tmp_path / "o.jsonl"))
