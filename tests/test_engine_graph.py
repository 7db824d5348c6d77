"""The runner over query graphs: inputs validated one by one with their own policy, dead letters naming
their input, CTIs held back by the slowest input, multicast, per-input end, and snapshot/restore."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.errors import BadElement, ViolationError
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import cht
from udm.sdk import INF

UNION = {"inputs": {"a": {}, "b": {"on_violation": "adjust"}},
         "steps": [{"id": "u", "op": "union", "from": ["a", "b"]}]}


def runner(spec: dict[str, Any]) -> QueryRunner:
    return QueryRunner(bind(parse_query(spec)))


def ctis(out: list[Element]) -> list[int]:
    return [e.t for e in out if isinstance(e, Cti)]


def test_output_cti_is_the_minimum_over_inputs_and_inf_only_when_all_end() -> None:
    r = runner(UNION)
    assert ctis(r.process(Cti(10), 1, "a")) == []  # b has sent no CTI: it holds the output back
    assert ctis(r.process(Cti(4), 1, "b")) == [4]
    assert ctis(r.process(Cti(20), 2, "b")) == [10]
    # a has ended, but its end reaches the operators only when every input has (T is over all inputs)
    assert ctis(r.process(Cti(INF), 3, "a")) == []
    assert not r.finished
    assert ctis(r.finish())[-1] == INF and r.finished


def test_each_input_is_validated_with_its_own_policy_and_dead_letters_name_it() -> None:
    r = runner(UNION)
    r.process(Cti(10), 1, "a")
    r.process(Cti(10), 1, "b")
    late_a = r.process(Insert("x", 5, 20, {"v": 1}), 2, "a")  # dead_letter (the query's default)
    late_b = r.process(Insert("x", 5, 20, {"v": 2}), 2, "b")  # adjust: becomes [10, 20)
    assert late_a == [] and [(e.le, e.re) for e in late_b if isinstance(e, Insert)] == [(10, 20)]
    r.process(BadElement("not valid JSON"), 3, "b")  # type: ignore[arg-type]
    dls = r.take_dead_letters()
    assert [(d.input, d.line, d.category) for d in dls] == [("a", 2, "cti_violation"), ("b", 3, "malformed")]
    assert dls[0].to_json()["input"] == "a"
    assert r.stats.inputs["a"]["dead_lettered"] == 1 and r.stats.inputs["b"]["elements_in"] == 3


def test_error_policy_names_the_input() -> None:
    r = QueryRunner(bind(parse_query(UNION)), on_violation="error")
    with pytest.raises(ViolationError, match="of input 'b'"):
        r.process(BadElement("not valid JSON"), 7, "b")  # type: ignore[arg-type]


def test_an_input_that_ended_refuses_more_elements_but_others_go_on() -> None:
    r = runner(UNION)
    r.process(Cti(INF), 1, "a")
    assert r.process(Insert("x", 1, 2, {}), 2, "a") == []
    assert [e for e in r.process(Insert("y", 1, 2, {}), 2, "b") if isinstance(e, Insert)]
    assert [d.reason for d in r.take_dead_letters()] == ["CTI violation: input already ended (cti inf)"]


def test_unknown_input_name_is_a_clear_error() -> None:
    r = runner(UNION)
    with pytest.raises(ValueError, match=r"no input 'c' \(inputs: a, b\)"):
        r.process(Insert("x", 1, 2, {}), 1, "c")


def test_multicast_feeds_every_consumer_the_same_stream() -> None:
    r = runner({"steps": [
        {"id": "l", "from": "main", "op": "project", "set": {"side": "l"}},
        {"id": "r", "from": "main", "op": "project", "set": {"side": "r"}},
        {"id": "u", "op": "union", "from": ["l", "r"]}]})
    out = r.process_many([Insert("e", 1, 5, {"v": 1}), Retract("e", 1, 5, 3), Cti(2)]) + r.finish()
    assert cht(out) == cht([Insert("1", 1, 3, {"v": 1, "side": "l"}), Insert("2", 1, 3, {"v": 1, "side": "r"})])


def _stream() -> dict[str, list[Element]]:
    a: list[Element] = [Insert(f"a{i}", i, i + 3, {"k": i % 3, "v": i}) for i in range(0, 40, 2)]
    b: list[Element] = [Insert(f"b{i}", i, i + 5, {"k": i % 3, "w": i}) for i in range(1, 40, 3)]
    a[5:5] = [Retract("a4", 4, 7, 5), Cti(6)]
    b[4:4] = [Cti(8)]
    return {"a": a, "b": b}


JOIN = {"inputs": {"a": {}, "b": {}},
        "steps": [{"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "b_"},
                  {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["k"],
                   "udm": "sum", "input": "v", "as": "s"}]}


def _feed(r: QueryRunner, items: list[tuple[str, Element]]) -> list[Element]:
    out: list[Element] = []
    for name, el in items:
        out += r.process(el, None, name)
    return out


def test_snapshot_and_restore_mid_stream_give_the_uninterrupted_output() -> None:
    s = _stream()
    items = [("a", e) for e in s["a"]] + [("b", e) for e in s["b"]]
    items.sort(key=lambda x: x[1].le if isinstance(x[1], Insert) else getattr(x[1], "t", 0))
    whole = runner(JOIN)
    expected = _feed(whole, items) + whole.finish()
    for cut in (1, len(items) // 3, len(items) // 2, len(items) - 1):
        first = runner(JOIN)
        out = _feed(first, items[:cut])
        restored = QueryRunner.restore(first.snapshot(), bind(parse_query(JOIN)))
        out += _feed(restored, items[cut:]) + restored.finish()
        assert out == expected, f"cut at {cut}"


def test_state_of_a_join_is_bounded_under_ctis_on_both_inputs() -> None:
    r = runner({"inputs": {"a": {}, "b": {}},
                "steps": [{"op": "join", "from": ["a", "b"], "on": "k"}]})
    peak = 0
    for t in range(0, 20_000, 2):
        r.process(Insert(f"a{t}", t, t + 4, {"k": t % 50}), None, "a")
        r.process(Insert(f"b{t}", t + 1, t + 3, {"k": t % 50}), None, "b")
        if t % 100 == 0:
            r.process(Cti(t), None, "a")
            r.process(Cti(t), None, "b")
            peak = max(peak, r.state_size()["events"])
    assert peak <= 2 * 60  # about two CTI periods of both sides, not 20,000 events


def test_a_dead_letter_downstream_names_the_input_its_stream_comes_from() -> None:
    # the window's output (released while an element of b is being read) lacks the join field 'x':
    # it derives from input a, so the dead letter names a
    r = runner({"inputs": {"a": {}, "b": {}},
                "steps": [{"id": "w", "from": "a", "op": "window", "window": {"type": "tumbling", "size": 10},
                           "group_by": ["k"], "udm": "count"},
                          {"id": "j", "op": "join", "from": ["w", "b"], "on": "x"}]})
    r.process_interleaved([("a", 1, Insert("e", 1, 2, {"k": 1})), ("a", 2, Insert("g", 20, 21, {"k": 1})),
                           ("b", 1, Insert("f", 30, 31, {"x": 1}))])  # output is released after b's element
    dls = r.take_dead_letters()
    assert [(d.input, d.category) for d in dls] == [("a", "missing_field")]
    assert "step j: missing join field 'x' in the left input 'w'" in dls[0].reason


def test_an_input_ending_early_does_not_truncate_before_the_others_end() -> None:
    # T (SEMANTICS §3) is over all inputs: the window reading input a must not cut its endless event at a's
    # own largest time just because a ended first
    spec = {"inputs": {"a": {}, "b": {}},
            "steps": [{"id": "w", "from": "a", "op": "window", "window": {"type": "tumbling", "size": 10},
                       "udm": "count"},
                      {"id": "u", "op": "union", "from": ["w", "b"]}]}
    outs = []
    for order in (["a", "b"], ["b", "a"]):
        r = runner(spec)
        feed = {"a": [Insert("e", 1, INF, {}), Cti(INF)], "b": [Insert("f", 35, 36, {}), Cti(INF)]}
        out: list[Element] = []
        for name in order:
            for el in feed[name]:
                out += r.process(el, None, name)
        outs.append(cht(out + r.finish()))
    assert outs[0] == outs[1]
    # count windows of e up to T = 36 (f's end, the largest finite time over both inputs), and f itself
    assert sorted(le for le, _, _ in outs[0]) == [0, 10, 20, 30, 35]
    assert r.stats.truncated_at == 36
