"""Engine: group & apply (SEMANTICS §6) and output payload shapes (semantics-notes 6)."""

from __future__ import annotations

import random

from test_engine_support import check_physical, cht, expected, gen_stream, rows, run, table, window_query

from udm.host.temporal.elements import Insert

TUMBLE10 = {"type": "tumbling", "size": 10}


def test_uda_output_carries_the_group_key_fields() -> None:
    stream = [Insert("a", 1, 2, {"sym": "A", "px": 10}), Insert("b", 2, 3, {"sym": "B", "px": 5}),
              Insert("c", 3, 4, {"sym": "A", "px": 30})]
    out, _ = run(window_query(TUMBLE10, "avg", input="px", group_by=["sym"], **{"as": "avg_px"}), stream)
    assert table(out) == rows((0, 10, {"sym": "A", "avg_px": 20.0}), (0, 10, {"sym": "B", "avg_px": 5.0}))


def test_two_key_fields_and_udo_payloads() -> None:
    stream = [Insert("a", 1, 2, {"x": 1, "y": "p", "v": 3}), Insert("b", 1, 2, {"x": 1, "y": "q", "v": 4}),
              Insert("c", 1, 2, {"x": 1, "y": "p", "v": 9})]
    out, _ = run(window_query(TUMBLE10, "topk", params={"k": 1, "by": "v"}, group_by=["x", "y"]), stream)
    # UDO payload: {**udo_payload, **group_key_fields}
    assert table(out) == rows((0, 10, {"x": 1, "y": "p", "v": 9, "rank": 1}),
                              (0, 10, {"x": 1, "y": "q", "v": 4, "rank": 1}))
    # a scalar UDO output x becomes {"value": x}
    out, _ = run(window_query(TUMBLE10, "topk", input="v", params={"k": 1}, group_by=["y"]), stream)
    assert table(out) == rows((0, 10, {"y": "p", "value": 9, "rank": 1}), (0, 10, {"y": "q", "value": 4, "rank": 1}))


def test_group_keys_are_compared_as_json_values() -> None:
    # 1, 1.0, True and "1" are different JSON values, so different groups
    stream = [Insert("a", 1, 2, {"k": 1}), Insert("b", 1, 2, {"k": 1.0}), Insert("c", 1, 2, {"k": True}),
              Insert("d", 1, 2, {"k": "1"}), Insert("e", 1, 2, {"k": [1, 2]}), Insert("f", 1, 2, {"k": [1, 2]})]
    out, _ = run(window_query(TUMBLE10, "count", group_by=["k"]), stream)
    assert table(out) == rows((0, 10, {"k": 1, "count": 1}), (0, 10, {"k": 1.0, "count": 1}),
                              (0, 10, {"k": True, "count": 1}), (0, 10, {"k": "1", "count": 1}),
                              (0, 10, {"k": [1, 2], "count": 2}))


def test_snapshot_and_count_windows_come_from_each_groups_own_events() -> None:
    stream = [Insert("a", 0, 10, {"g": "x"}), Insert("b", 5, 15, {"g": "y"})]
    out, _ = run(window_query({"type": "snapshot"}, "count", group_by=["g"]), stream)
    # without groups there would be windows [0,5), [5,10), [10,15); per group each event is one window
    assert table(out) == rows((0, 10, {"g": "x", "count": 1}), (5, 15, {"g": "y", "count": 1}))
    stream = [Insert("a", 1, 2, {"g": "x"}), Insert("b", 2, 3, {"g": "y"}), Insert("c", 3, 4, {"g": "x"})]
    out, _ = run(window_query({"type": "count_by_start", "n": 2}, "count", group_by=["g"]), stream)
    assert table(out) == rows((1, 4, {"g": "x", "count": 2}))


def test_grouped_random_streams_agree_with_the_reference() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        win = [TUMBLE10, {"type": "snapshot"}, {"type": "count_by_end", "n": 2}][seed % 3]
        q = window_query(win, "sum", input="v", group_by=["g"])
        stream = gen_stream(rng, n=30, groups=4)
        out, _ = run(q, stream, mode="each")
        assert cht(out) == expected(q, stream)
        check_physical(out)
