"""Engine: filter/map steps (span-based UDFs) and multi-step queries, where the output of one step
(inserts, retractions and CTIs) is the input of the next."""

from __future__ import annotations

import random

from test_engine_support import check_physical, cht, ctis, expected, gen_stream, rows, run, table

from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

IN_RANGE = {"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 2, "hi": 5}}
TUMBLE10 = {"type": "tumbling", "size": 10}


def test_filter_keeps_lifetimes_and_passes_retractions_of_kept_events() -> None:
    q = {"steps": [IN_RANGE]}
    stream = [Insert("a", 1, 9, {"v": 3}), Insert("b", 2, 4, {"v": 9}), Retract("a", 1, 9, 5), Retract("b", 2, 4, 2),
              Cti(6)]
    out, r = run(q, stream, mode="each")
    assert table(out) == rows((1, 5, {"v": 3}))
    assert ctis(out) == [6, INF] and r.dead_letters == []
    assert not any(isinstance(el, Retract) and el.re_new == 2 for el in out)  # b was filtered out


def test_map_adds_a_field() -> None:
    q = {"steps": [{"op": "map", "udf": "in_range", "args": {"field": "v"}, "params": {"hi": 5}, "as": "ok"}]}
    out, _ = run(q, [Insert("a", 1, 9, {"v": 3}), Insert("b", 2, 4, {"v": 9})])
    assert table(out) == rows((1, 9, {"v": 3, "ok": True}), (2, 4, {"v": 9, "ok": False}))


def test_filter_then_window() -> None:
    q = {"steps": [IN_RANGE, {"op": "window", "window": TUMBLE10, "udm": "sum", "input": "v"}]}
    stream = [Insert("a", 1, 2, {"v": 3}), Insert("b", 2, 3, {"v": 9}), Insert("c", 12, 13, {"v": 4}),
              Retract("a", 1, 2, 1)]
    out, _ = run(q, stream, mode="each")
    assert table(out) == rows((10, 20, {"sum": 4}))
    check_physical(out)


def test_window_then_window() -> None:
    # per-symbol counts per tumbling window, then the max of those counts over snapshot windows
    q = {"steps": [{"op": "window", "window": TUMBLE10, "udm": "count", "group_by": ["s"]},
                   {"op": "window", "window": {"type": "snapshot"}, "udm": "max", "input": "count"}]}
    stream = [Insert("a", 1, 2, {"s": "x"}), Insert("b", 3, 4, {"s": "x"}), Insert("c", 5, 6, {"s": "y"}),
              Insert("d", 12, 13, {"s": "y"}), Cti(10), Insert("e", 14, 15, {"s": "y"})]
    out, _ = run(q, stream, mode="each")
    assert table(out) == rows((0, 10, {"max": 2}), (10, 20, {"max": 2}))
    check_physical(out)


def test_missing_field_at_a_later_step_is_dead_lettered_by_that_step() -> None:
    q = {"steps": [{"op": "window", "window": TUMBLE10, "udm": "count"},
                   {"op": "window", "window": TUMBLE10, "udm": "sum", "input": "nope"}]}
    out, r = run(q, [Insert("a", 1, 2, {})])
    assert table(out) == []
    [dl] = r.dead_letters
    assert dl.reason == "step s1: missing field 'nope'" and dl.element["payload"] == {"count": 1}  # type: ignore[index]


def test_random_multi_step_queries_agree_with_the_reference() -> None:
    wins = [TUMBLE10, {"type": "hopping", "size": 6, "hop": 3}, {"type": "snapshot"},
            {"type": "count_by_start", "n": 2}]
    for seed in range(40):
        rng = random.Random(seed)
        w1, w2 = wins[seed % 4], wins[(seed // 4) % 4]
        steps: list[dict] = [{"op": "window", "window": w1, "udm": "sum", "input": "v", "group_by": ["g"], "as": "v"},
                             {"op": "window", "window": w2, "udm": "max", "input": "v"}]
        if seed % 2:
            steps.insert(0, IN_RANGE)
        q = {"steps": steps}
        stream = gen_stream(rng, n=25, p_inf=0.0)
        out, _ = run(q, stream, mode="each" if seed % 3 else "many")
        assert cht(out) == expected(q, stream), seed
        check_physical(out)
