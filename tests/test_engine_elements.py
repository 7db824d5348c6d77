"""Engine: physical elements, validation, dead letters and the on_violation policies (SEMANTICS §1–2).

Most tests run a span-only query (a filter that keeps every event), whose output CHT is the CHT of the
valid input: that shows exactly what the engine accepted.
"""

from __future__ import annotations

import pytest
from test_engine_support import ctis, rows, run, runner, table, window_query

from udm.host.errors import BadElement, ViolationError
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

#: keeps every event whose payload field "p" is a number: output CHT == CHT of the valid input
PASS = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "p"}}]}
P1, P2 = {"p": 1}, {"p": 2}


def test_seed000_table2_physical_stream_gives_table1_cht() -> None:
    # seeds/000 Table II: E0 inserted [1, inf), retracted to 10, then to 5; E1 inserted [4, 9)
    stream = [Insert("E0", 1, INF, P1), Retract("E0", 1, INF, 10), Retract("E0", 1, 10, 5), Insert("E1", 4, 9, P2)]
    out, r = run(PASS, stream)
    assert table(out) == rows((1, 5, P1), (4, 9, P2))  # Table I
    assert r.dead_letters == []


def test_seed003_table1_bitemporal_stream_gives_table2_cht() -> None:
    # seeds/003 Table 1: insert [1, inf) P1, CTI 1, two retractions (to 10, to 5), insert [4, 9) P2, CTI 10
    stream = [Insert("a", 1, INF, P1), Cti(1), Retract("a", 1, INF, 10), Retract("a", 1, 10, 5),
              Insert("b", 4, 9, P2), Cti(10)]
    out, r = run(PASS, stream)
    assert table(out) == rows((1, 5, P1), (4, 9, P2))  # Table 2
    assert ctis(out) == [1, 10, INF]  # span-based: CTIs pass through
    assert r.dead_letters == []


def test_seed_table_through_a_window_query() -> None:
    # the same CHT seen by count over snapshot windows: endpoints 1, 4, 5, 9
    stream = [Insert("E0", 1, INF, P1), Retract("E0", 1, INF, 10), Retract("E0", 1, 10, 5), Insert("E1", 4, 9, P2)]
    out, _ = run(window_query({"type": "snapshot"}, "count"), stream)
    assert table(out) == rows((1, 4, {"count": 1}), (4, 5, {"count": 2}), (5, 9, {"count": 1}))


@pytest.mark.parametrize(
    ("bad", "category", "reason"),
    [
        (Insert("x", 5, 5, P1), "invalid_lifetime", "le < re"),
        (Insert("x", 7, 3, P1), "invalid_lifetime", "le < re"),
        (Insert("a", 2, 3, P1), "duplicate_id", "duplicate live id 'a'"),
        (Retract("zz", 1, 4, 2), "unknown_id", "unknown id 'zz'"),
        (Retract("a", 1, 9, 2), "lifetime_mismatch", "[1, 9)"),
        (Retract("a", 0, 5, 2), "lifetime_mismatch", "[0, 5)"),
        (Retract("a", 1, 5, 0), "invalid_lifetime", "re_new >= le"),
        (Insert("x", 1, 3, ["not", "a", "dict"]), "malformed", "payload"),  # type: ignore[arg-type]
    ],
)
def test_invalid_elements_are_dead_lettered_with_reason_line_and_count(bad, category, reason) -> None:
    stream = [Insert("a", 1, 5, P1), bad, Insert("b", 2, 6, P2)]
    out, r = run(PASS, stream)
    assert table(out) == rows((1, 5, P1), (2, 6, P2))  # the bad element changed nothing
    assert len(r.dead_letters) == 1
    dl = r.dead_letters[0]
    assert dl.line == 2 and reason in dl.reason
    assert dl.element is not None and dl.element["id"] == bad.id
    assert r.stats.dead_lettered == 1 and r.stats.reasons == {category: 1}
    assert dl.to_json() == {"line": 2, "reason": dl.reason, "element": dl.element}


def test_cti_violations_and_ignored_lower_ctis() -> None:
    stream = [
        Insert("a", 1, 20, P1),
        Cti(10),
        Insert("late", 5, 30, P2),  # sync 5 < 10
        Retract("a", 1, 20, 8),  # sync min(20, 8) = 8 < 10
        Retract("a", 1, 20, 10),  # sync 10: fine (shortens to exactly the CTI)
        Cti(7),  # lower CTI: ignored, not an error
        Insert("ok", 10, 12, P2),  # sync 10 >= 10
    ]
    out, r = run(PASS, stream)
    assert table(out) == rows((1, 10, P1), (10, 12, P2))
    assert [(d.line, d.reason.split(":")[0]) for d in r.dead_letters] == [(3, "CTI violation"), (4, "CTI violation")]
    assert r.stats.reasons == {"cti_violation": 2}
    assert ctis(out) == [10, INF]


def test_extension_at_the_cti_is_valid() -> None:
    # a retraction with RE == CTI may extend the event: its sync time is the CTI itself
    stream = [Insert("a", 1, 10, P1), Cti(10), Retract("a", 1, 10, 15)]
    out, r = run(PASS, stream)
    assert table(out) == rows((1, 15, P1)) and r.dead_letters == []


def test_adjust_policy_moves_late_inserts_to_the_cti() -> None:
    stream = [
        Insert("a", 1, 4, P1),
        Cti(10),
        Insert("x", 5, 30, P2),  # late, RE > 10: becomes [10, 30)
        Insert("y", 2, 8, P2),  # late, RE <= 10: dead-lettered
        Retract("a", 1, 4, 2),  # late retraction: dead-lettered even under adjust
        Retract("x", 5, 30, 20),  # the source still names x by its original LE: accepted
    ]
    out, r = run(PASS, stream, on_violation="adjust")
    assert table(out) == rows((1, 4, P1), (10, 20, P2))
    assert [d.line for d in r.dead_letters] == [4, 5]
    # deleting an adjusted event: re_new down to its effective LE (the CTI), quoted with its original LE;
    # re_new = 5 would have sync time 5 < CTI 10
    out, r = run(PASS, [Cti(10), Insert("x", 5, 30, P2), Retract("x", 5, 30, 5), Retract("x", 5, 30, 10)],
                 on_violation="adjust")
    assert table(out) == [] and [d.line for d in r.dead_letters] == [3]


def test_error_policy_fails_fast_naming_the_element_and_line() -> None:
    r = runner(PASS, on_violation="error")
    r.process(Insert("a", 1, 5, P1), 1)
    with pytest.raises(ViolationError) as exc:
        r.process(Insert("a", 2, 3, P1), 17)
    msg = str(exc.value)
    assert "line 17" in msg and "duplicate live id 'a'" in msg and "'id': 'a'" in msg  # names the element
    # the spec's query-level default is used when no override is given
    q = {**PASS, "on_violation": "error"}
    r = runner(q)
    with pytest.raises(ViolationError, match="unknown id"):
        r.process(Retract("nope", 1, 3, 2), 4)


def test_bad_elements_from_the_reader_are_dead_lettered_in_place() -> None:
    r = runner(PASS)
    bad = BadElement("missing field 'le'", line=2, raw={"kind": "insert", "id": "q"})
    out = r.process_many([Insert("a", 1, 5, P1), bad, Insert("b", 2, 3, P2)], [1, 2, 3]) + r.finish()
    assert table(out) == rows((1, 5, P1), (2, 3, P2))
    [dl] = r.dead_letters
    assert (dl.line, dl.reason, dl.element) == (2, "missing field 'le'", {"kind": "insert", "id": "q"})
    assert r.stats.elements_in == 3 and r.stats.reasons == {"malformed": 1}


def test_elements_after_the_end_of_input_are_refused() -> None:
    r = runner(PASS)
    out = r.process(Insert("a", 1, 5, P1)) + r.process(Cti(INF))
    assert ctis(out) == [INF]
    assert r.process(Insert("b", 7, 9, P1), 9) == []
    assert r.dead_letters[-1].line == 9 and "ended" in r.dead_letters[-1].reason
    assert r.finish() == []  # already finished: idempotent
    assert r.finish() == []


def test_finish_is_end_of_input_and_idempotent() -> None:
    r = runner(window_query({"type": "tumbling", "size": 10}, "count"))
    out = r.process(Insert("a", 1, 2, {}))
    assert out == []  # window [0, 10) is not complete yet (watermark 1)
    fin = r.finish()
    assert table(fin) == rows((0, 10, {"count": 1}))
    assert fin[-1] == Cti(INF)
    assert r.finish() == []
    assert r.stats.elements_in == 1 and r.stats.elements_out == 2


def test_take_dead_letters_returns_and_clears() -> None:
    r = runner(PASS)
    r.process_many([Retract("x", 1, 2, 1), Retract("y", 1, 2, 1)])
    got = r.take_dead_letters()
    assert [d.element["id"] for d in got] == ["x", "y"]  # type: ignore[index]
    assert r.dead_letters == [] and r.take_dead_letters() == []
    assert r.stats.dead_lettered == 2


def test_missing_payload_fields_are_malformed_for_that_step() -> None:
    # semantics-notes 3: a needed field missing -> dead letter; its later retractions are unknown ids
    q = window_query({"type": "tumbling", "size": 10}, "sum", input="v", group_by=["g"])
    stream = [Insert("a", 1, 2, {"g": "x", "v": 1}), Insert("b", 1, 2, {"v": 5}), Insert("c", 3, 4, {"g": "x"}),
              Retract("b", 1, 2, 1)]
    out, r = run(q, stream)
    assert table(out) == rows((0, 10, {"g": "x", "sum": 1}))
    assert [(d.line, d.reason) for d in r.dead_letters] == [
        (2, "missing field 'g'"), (3, "missing field 'v'"), (4, "retraction of unknown id 'b'")]
    assert r.stats.reasons == {"missing_field": 2, "unknown_id": 1}


def test_retraction_forms_on_the_cht() -> None:
    stream = [
        Insert("s", 0, 10, {"p": 1}), Retract("s", 0, 10, 6),  # shorten
        Insert("e", 0, 10, {"p": 2}), Retract("e", 0, 10, 14),  # extend
        Insert("f", 0, 10, {"p": 3}), Retract("f", 0, 10, 0),  # full retraction
        Insert("n", 0, 10, {"p": 4}), Retract("n", 0, 10, 10),  # no-op
        Insert("i", 0, INF, {"p": 5}), Retract("i", 0, INF, 3), Retract("i", 0, 3, INF),  # edge: back to inf
    ]
    out, r = run(PASS, stream)
    assert table(out) == rows((0, 6, {"p": 1}), (0, 14, {"p": 2}), (0, 10, {"p": 4}), (0, INF, {"p": 5}))
    assert r.dead_letters == []
    # a fully retracted id may be inserted again
    out, r = run(PASS, [Insert("a", 0, 5, P1), Retract("a", 0, 5, 0), Insert("a", 2, 4, P2)])
    assert table(out) == rows((2, 4, P2)) and r.dead_letters == []
