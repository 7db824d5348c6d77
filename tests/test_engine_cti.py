"""Engine: CTIs — never violated, prefix finality, liveliness per configuration, cleanup / bounded state,
and the consistency knobs max_delay / max_memory_time (SEMANTICS §7, seeds/000 §V.F, seeds/003)."""

from __future__ import annotations

import random

import pytest
from test_engine_support import check_physical, cht, ctis, expected, gen_stream, rows, run, runner, table, window_query

from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

TUMBLE10 = {"type": "tumbling", "size": 10}


def out_ctis(query: dict, stream: list, **kw: object) -> list[list[int]]:
    """Output CTIs emitted after each input element."""
    r = runner(query, **kw)  # type: ignore[arg-type]
    return [ctis(r.process(el)) for el in stream]


def test_liveliness_time_insensitive_tumbling() -> None:
    got = out_ctis(window_query(TUMBLE10, "count"),
                   [Insert("a", 1, 2, {}), Insert("b", 12, 13, {}), Cti(15), Cti(20), Cti(25), Cti(INF)])
    # start of the window containing c
    assert got == [[], [], [10], [20], [], [INF]]


def test_liveliness_hopping_and_gaps() -> None:
    got = out_ctis(window_query({"type": "hopping", "size": 10, "hop": 5}, "count"), [Insert("a", 1, 2, {}), Cti(12)])
    assert got[-1] == [5]  # earliest window with W.RE > 12 is [5, 15)
    got = out_ctis(window_query({"type": "hopping", "size": 3, "hop": 5}, "count"), [Insert("a", 1, 2, {}), Cti(4)])
    assert got[-1] == [4]  # between windows [0, 3) and [5, 8): c itself


def test_liveliness_time_sensitive_without_right_clipping() -> None:
    stream = [Insert("a", 2, 30, {"v": 1}), Insert("b", 12, 13, {"v": 1}), Cti(15), Retract("a", 2, 30, 16), Cti(20)]
    # a (RE >= c) is held by [0, 10): its RE may still change, and the UDM sees it -> output CTI 0
    assert out_ctis(window_query(TUMBLE10, "twa", input="v"), stream)[2] == [0]
    assert out_ctis(window_query(TUMBLE10, "twa", input="v"), stream)[4] == [20]
    # right clipping frees the windows that end before c
    assert out_ctis(window_query(TUMBLE10, "twa", input="v", clip="right"), stream)[2] == [10]


def test_liveliness_snapshot() -> None:
    got = out_ctis(window_query({"type": "snapshot"}, "count"), [Insert("a", 1, 10, {}), Insert("b", 5, 20, {}),
                                                                Cti(7)])
    assert got[-1] == [5]  # the earliest non-empty window with W.RE > 7 is [5, 10)


def test_liveliness_count_by_end_follows_the_hop() -> None:
    """a (ending after 10) may still end at 10, but with hop 2 no window starts at that second RE: the
    output CTI is 10, not 9 (one at [9, 10) would need the RE at an aligned position)."""
    stream = [Insert("x", 0, 3, {}), Insert("a", 1, 30, {}), Cti(10)]
    assert out_ctis(window_query({"type": "count_by_end", "n": 1, "hop": 2}, "count"), stream)[-1] == [10]
    assert out_ctis(window_query({"type": "count_by_end", "n": 1}, "count"), stream)[-1] == [9]


def test_output_ctis_never_violated_and_prefix_final_on_random_streams() -> None:
    wins = [TUMBLE10, {"type": "hopping", "size": 6, "hop": 4}, {"type": "snapshot"},
            {"type": "count_by_start", "n": 2}, {"type": "count_by_end", "n": 2}]
    udms = [{"udm": "count"}, {"udm": "twa", "input": "v"}, {"udm": "twa", "input": "v", "clip": "right"},
            {"udm": "members", "input": "v", "clip": "left", "output": "unaltered"},
            {"udm": "follows", "params": {"field": "v", "a": 1, "b": 2}, "output": "time_bound"}]
    for seed in range(60):
        rng = random.Random(seed)
        q = window_query(wins[seed % 5], **udms[(seed // 5) % 5])
        stream = gen_stream(rng, n=25, p_cti=0.3)
        out, _ = run(q, stream, mode="each")
        check_physical(out)  # no element below an emitted CTI; CTIs non-decreasing; prefix finality
        assert cht(out) == expected(q, stream)


def test_cti_inf_in_gives_cti_inf_out() -> None:
    r = runner(window_query({"type": "snapshot"}, "count"))
    out = r.process_many([Insert("a", 1, INF, {}), Cti(INF)])
    assert table(out) == rows((1, INF, {"count": 1})) and out[-1] == Cti(INF)


# ---------------------------------------------------------------------------------------------------------
# cleanup
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", [
    window_query(TUMBLE10, "avg", input="v", group_by=["g"]),
    window_query({"type": "hopping", "size": 20, "hop": 5}, "sum", input="v"),
    window_query({"type": "hopping", "size": 20, "hop": 5}, "median", input="v"),
    window_query({"type": "snapshot"}, "count", group_by=["g"]),
    window_query({"type": "count_by_start", "n": 3, "hop": 2}, "count"),
    window_query({"type": "count_by_end", "n": 3}, "max", input="v"),
    window_query(TUMBLE10, "twa", input="v"),
], ids=["tumbling", "hopping-panes", "hopping-median", "snapshot", "cbs", "cbe", "twa-noclip"])
def test_state_stays_bounded_when_ctis_advance(q: dict) -> None:
    r = runner(q)
    peak = {"events": 0, "held": 0, "windows": 0, "groups": 0}
    rng = random.Random(1)
    for i in range(20_000):
        r.process(Insert(f"e{i}", i, i + 1 + rng.randrange(5), {"g": i % 7, "v": i % 13}))
        if i % 50 == 49:
            r.process(Cti(i - 10))
            for k, v in r.state_size().items():
                peak[k] = max(peak[k], v)
    assert peak["events"] < 200 and peak["held"] < 200 and peak["windows"] < 200, peak
    r.finish()
    assert r.state_size() == {"events": 0, "held": 0, "windows": 0, "groups": 0}


def test_closed_events_are_forgotten() -> None:
    # after a CTI passes an event's end it can never be retracted again: its id is free
    out, r = run({"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}}]},
                 [Insert("a", 1, 2, {"v": 1}), Cti(5), Retract("a", 1, 2, 1), Insert("a", 6, 7, {"v": 2})])
    assert table(out) == rows((1, 2, {"v": 1}), (6, 7, {"v": 2}))
    assert [d.reason.split(":")[0] for d in r.dead_letters] == ["CTI violation"]


# ---------------------------------------------------------------------------------------------------------
# consistency knobs
# ---------------------------------------------------------------------------------------------------------
def test_max_delay_inf_holds_output_until_the_cti() -> None:
    q = window_query(TUMBLE10, "count")
    q["steps"][0]["max_delay"] = "inf"
    r = runner(q)
    assert r.process(Insert("a", 1, 2, {})) == [] and r.process(Insert("b", 12, 13, {})) == []
    out = r.process(Cti(10))
    assert table(out) == rows((0, 10, {"count": 1})) and ctis(out) == [10]
    # with the default (speculative, max_delay 0) the window is out as soon as the watermark passes it
    r = runner(window_query(TUMBLE10, "count"))
    r.process(Insert("a", 1, 2, {}))
    assert table(r.process(Insert("b", 12, 13, {}))) == rows((0, 10, {"count": 1}))


def test_max_delay_ticks_behind_the_watermark() -> None:
    q = window_query(TUMBLE10, "count")
    q["steps"][0]["max_delay"] = 5
    r = runner(q)
    r.process(Insert("a", 1, 2, {}))
    assert r.process(Insert("b", 12, 13, {})) == []  # 12 - 5 < 10
    assert table(r.process(Insert("c", 16, 17, {}))) == rows((0, 10, {"count": 1}))  # 16 - 5 >= 10


def test_strong_consistency_means_no_retraction_for_disordered_input_before_ctis() -> None:
    rng = random.Random(3)
    stream = gen_stream(rng, n=60, p_retract=0.4, p_cti=0.15, p_inf=0.0)
    q = window_query(TUMBLE10, "sum", input="v")
    q["steps"][0]["max_delay"] = "inf"
    out, _ = run(q, stream, mode="each")
    assert not any(isinstance(el, Retract) for el in out)  # only final windows are released
    assert cht(out) == expected(q, stream)


def test_max_memory_time_dead_letters_what_is_older_than_m_minus_it() -> None:
    q = window_query(TUMBLE10, "count")
    q["steps"][0]["max_memory_time"] = 5
    stream = [Insert("d", 2, 9, {}), Insert("a", 10, 11, {}), Insert("b", 3, 4, {}), Insert("c", 6, 7, {}),
              Retract("d", 2, 9, 3)]
    out, r = run(q, stream)
    # m = 10 -> effective CTI 5: b (LE 3) is too old; the retraction (sync 3) too
    assert table(out) == rows((0, 10, {"count": 2}), (10, 20, {"count": 1}))
    assert [d.line for d in r.dead_letters] == [3, 5]
    assert r.stats.reasons == {"cti_violation": 2}
    out, r = run(q, stream, on_violation="adjust")  # adjust applies like for CTIs: b has RE 4 <= 5
    assert [d.line for d in r.dead_letters] == [3, 5]
