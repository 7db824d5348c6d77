"""Engine: every retraction form and minimal output diffs (seeds/000 §V.D; SEMANTICS §7 speculation).

Unchanged output is never retracted and re-inserted; an output whose end changes is one retraction;
output changes in payload are one full retraction plus one insert. The exact physical output of each
element is checked here (ids are the engine's, so they are taken from the output itself).
"""

from __future__ import annotations

import random

from test_engine_support import check_physical, cht, expected, gen_stream, rows, run, runner, table, window_query

from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

TUMBLE10 = {"type": "tumbling", "size": 10}
SNAP = {"type": "snapshot"}


def test_speculative_output_revised_by_a_late_insert() -> None:
    r = runner(window_query(TUMBLE10, "count"))
    assert r.process(Insert("a", 1, 2, {})) == []
    out = r.process(Insert("c", 15, 16, {}))  # watermark 15: window [0, 10) is output speculatively
    assert out == [Insert(out[0].id, 0, 10, {"count": 1})]
    oid = out[0].id
    out = r.process(Insert("b", 3, 4, {}))  # late (no CTI forbids it): the payload changes
    assert out[0] == Retract(oid, 0, 10, 0) and out[1] == Insert(out[1].id, 0, 10, {"count": 2})
    assert len(out) == 2 and out[1].id != oid


def test_unchanged_output_is_not_retracted_and_reinserted() -> None:
    r = runner(window_query(TUMBLE10, "sum", input="v"))
    r.process_many([Insert("a", 1, 5, {"v": 1}), Insert("b", 3, 4, {"v": 1}), Insert("z", 20, 21, {"v": 0})])
    assert r.process(Insert("c", 5, 6, {"v": 0})) == []  # recomputed, same sum: nothing emitted
    assert r.process(Retract("a", 1, 5, 3)) == []  # still in [0, 10): the window is not even touched
    assert r.process(Retract("c", 5, 6, 5)) == []  # member removed, same sum


def test_a_changed_end_is_one_retraction() -> None:
    r = runner(window_query(SNAP, "sum", input="v"))
    out = r.process_many([Insert("a", 0, 10, {"v": 1}), Insert("b", 12, 13, {"v": 5})])
    assert table(out) == rows((0, 10, {"sum": 1}))  # [12, 13) waits for the watermark to pass 13
    oid = out[0].id
    # shorten: window [0, 10) becomes [0, 6), same sum -> the output's end moves, one retraction
    assert r.process(Retract("a", 0, 10, 6)) == [Retract(oid, 0, 10, 6)]
    # extend back past the old end: the window [0, 6) and the gap [6, 12) merge into [0, 12)
    assert r.process(Retract("a", 0, 6, 12)) == [Retract(oid, 0, 6, 12)]
    # full retraction: the output goes away
    out = r.process(Retract("a", 0, 12, 0))
    assert out == [Retract(oid, 0, 12, 0)]
    fin = r.finish()
    assert table(fin) == rows((12, 13, {"sum": 5}))


def test_retraction_forms_against_the_reference() -> None:
    q = window_query({"type": "hopping", "size": 6, "hop": 2}, "sum", input="v", group_by=["g"])
    stream = [
        Insert("s", 0, 9, {"g": 1, "v": 1}), Retract("s", 0, 9, 4),  # shorten
        Insert("x", 2, 5, {"g": 1, "v": 2}), Retract("x", 2, 5, 11),  # extend
        Insert("f", 1, 7, {"g": 2, "v": 4}), Retract("f", 1, 7, 1),  # full
        Insert("i", 3, INF, {"g": 2, "v": 8}), Retract("i", 3, INF, 7),  # from infinity
        Insert("k", 4, 6, {"g": 1, "v": 16}), Retract("k", 4, 6, INF), Retract("k", 4, INF, 5),  # to inf and back
    ]
    out, _ = run(q, stream, mode="each")
    assert cht(out) == expected(q, stream)
    check_physical(out)


def test_output_ids_are_unique_and_retractions_name_live_outputs() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        stream = gen_stream(rng, n=25, p_retract=0.5)
        for win in (TUMBLE10, SNAP, {"type": "count_by_end", "n": 2}):
            out, _ = run(window_query(win, "topk", params={"k": 2, "by": "v"}), stream, mode="each")
            check_physical(out)  # asserts: unique live ids, retractions match a live output
            ids = [el.id for el in out if isinstance(el, Insert)]
            assert len(ids) == len(set(ids)) and all(isinstance(i, str) for i in ids)


def test_few_retractions_for_in_order_input() -> None:
    # in-order point events, windows released as the watermark passes them: no retraction at all
    stream = [Insert(f"e{i}", i, i + 1, {"v": i}) for i in range(100)] + [Cti(100)]
    out, _ = run(window_query(TUMBLE10, "sum", input="v"), stream, mode="each")
    assert not any(isinstance(el, Retract) for el in out)
    assert len(table(out)) == 10


def test_empty_preserving() -> None:
    # a window whose only member goes away produces nothing (its output is retracted)
    out, _ = run(window_query(TUMBLE10, "count"),
                 [Insert("a", 1, 2, {}), Insert("b", 30, 31, {}), Retract("a", 1, 2, 1)], mode="each")
    assert table(out) == rows((30, 40, {"count": 1}))
    assert any(isinstance(el, Retract) and el.re_new == el.le for el in out)
