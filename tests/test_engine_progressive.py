"""Progressive (early) output, ``early`` on a window step (seeds/003 §3.5): open windows holding the
watermark come out before they close and are revised with minimal diffs, optionally at most once per
``early`` ticks; the CHT and the CTI rules are unchanged (random streams over every window family against
the kit's oracle and output properties), and the run summary reports what each mode costs."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import check_physical, ctis, rows, run, runner, table, window_query
from window_cases import UDMS, run_random_cases

from udm.host.query.fluent import Stream
from udm.host.query.runners import RunRequest, get_engine
from udm.host.run_result import RunResult
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing.engine_conformance import write_stream


def pt(id: str, t: int) -> Insert:
    return Insert(id, t, t + 1, {"v": t})


def test_an_open_window_comes_out_at_once_and_is_revised() -> None:
    q = window_query({"type": "tumbling", "size": 10}, "count", early=0)
    out, _ = run(q, [pt("a", 1), pt("b", 3)], mode="each")
    check_physical(out)
    ins = [el for el in out if isinstance(el, Insert)]
    assert (ins[0].le, ins[0].re, ins[0].payload) == (0, 10, {"count": 1})  # before [0, 10) closes
    assert any(isinstance(el, Retract) and el.id == ins[0].id for el in out)
    assert table(out) == rows((0, 10, {"count": 2}),)
    # without early output nothing comes out before the window closes (watermark 3 < W.RE 10)
    r = runner(window_query({"type": "tumbling", "size": 10}, "count"))
    assert r.process(pt("a", 1)) == [] and r.process(pt("b", 3)) == []


def test_rate_limit_revises_at_most_once_per_period() -> None:
    stream: list[Element] = [pt(f"e{i}", i) for i in range(40)]
    outs = {}
    for early in (None, 0, 5):
        q = window_query({"type": "tumbling", "size": 20}, "count", **({} if early is None else {"early": early}))
        out, r = run(q, stream, mode="each")
        check_physical(out)
        assert table(out) == rows((0, 20, {"count": 20}), (20, 40, {"count": 20}))
        outs[early] = r.stats
    assert outs[None].retractions_out == 0
    assert outs[0].retractions_out > outs[5].retractions_out > 0
    # early output comes out before the window closes (negative delay); speculation only once it closed
    assert outs[0].emission_delay < 0 <= outs[None].emission_delay


def test_ctis_are_those_of_the_default_mode() -> None:
    stream: list[Element] = [pt("a", 1), pt("b", 3), Cti(4), pt("c", 12), Cti(13), pt("d", 25)]
    base, _ = run(window_query({"type": "tumbling", "size": 10}, "count"), stream, mode="each")
    early, _ = run(window_query({"type": "tumbling", "size": 10}, "count", early=0), stream, mode="each")
    assert ctis(early) == ctis(base)


def test_run_summary_reports_retractions_and_delay(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    write_stream(src, [pt(f"e{i}", i) for i in range(30)])
    local = get_engine("local")

    def run_file(s: Stream, name: str) -> RunResult:  # batches of 1: output is released after each element
        return local(RunRequest(bound=s.bind(), input=str(src), output=str(tmp_path / name), batch_size=1))

    plain = run_file(Stream.from_jsonl(src).tumbling(10).aggregate("count"), "a.jsonl")
    early = run_file(Stream.from_jsonl(src).tumbling(10).aggregate("count", early=0), "b.jsonl")
    assert plain.retractions_out == 0 and early.retractions_out > 0
    assert early.emission_delay < 0 <= plain.emission_delay
    assert f"{early.retractions_out} retractions out, mean emission delay -" in early.summary()
    assert early.to_json_dict()["retractions_out"] == early.retractions_out


WINDOWS = [
    lambda r: {"type": "tumbling", "size": r.randint(1, 8)},
    lambda r: {"type": "hopping", "size": r.randint(2, 9), "hop": r.randint(1, 4)},
    lambda r: {"type": "snapshot"},
    lambda r: {"type": "count_by_start", "n": r.randint(1, 3)},
    lambda r: {"type": "count_by_end", "n": r.randint(1, 3)},
    lambda r: {"type": "rows", "n": r.randint(1, 4), "slide": r.randint(1, 3)},
    lambda r: {"type": "session", "gap": r.randint(0, 5)},
]


def _step(seed: int, rng: random.Random) -> dict[str, Any]:
    return {**UDMS[seed % len(UDMS)], "early": rng.choice([0, 1, 4])}


@pytest.mark.parametrize("w", range(len(WINDOWS)))
def test_random_streams_agree_with_the_oracle(w: int) -> None:
    assert run_random_cases(WINDOWS[w], range(120), step=_step) == 240
