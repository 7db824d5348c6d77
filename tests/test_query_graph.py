"""Query graphs (SEMANTICS §10, INTERFACES §2): names, `from`, output, and every bind-time refusal —
each message names the step (or input) at fault, and nothing is read before it."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.errors import QuerySpecError, UdmError
from udm.host.model.graph import resolve
from udm.host.model.plan import bind
from udm.host.model.spec import load_query, parse_query

WINDOW = {"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count"}


def graph(data: dict[str, Any]) -> Any:
    return resolve(parse_query(data))


def test_a_linear_spec_is_a_chain_over_main() -> None:
    g = graph({"steps": [{"op": "project", "drop": ["x"]}, WINDOW]})
    assert g.inputs == ("main",)
    assert [(n.name, n.sources) for n in g.nodes] == [("s0", ("main",)), ("s1", ("s0",))]
    assert g.output == "s1" and g.is_linear


def test_ids_from_and_output_name_the_edges_in_topological_order() -> None:
    g = graph({
        "inputs": {"a": {}, "b": {}},
        "steps": [
            {"id": "j", "op": "join", "from": ["fa", "b"], "on": "k"},
            {"id": "fa", "from": "a", "op": "project", "keep": ["k"]},
            {"id": "out", "from": "j", "op": "project", "drop": ["k"]},
        ],
        "output": "out",
    })
    assert [n.name for n in g.nodes] == ["fa", "j", "out"]  # j reads fa, so fa comes first
    assert g.node("j").sources == ("fa", "b") and not g.is_linear
    assert g.consumers("b") == [(g.node("j"), 1)]


def test_multicast_a_step_read_by_two_consumers() -> None:
    g = graph({"steps": [
        {"id": "p", "op": "project", "drop": ["x"]},
        {"id": "l", "from": "p", "op": "project", "set": {"side": "l"}},
        {"id": "r", "from": "p", "op": "project", "set": {"side": "r"}},
        {"id": "u", "op": "union", "from": ["l", "r"]},
    ]})
    assert [c.name for c, _ in g.consumers("p")] == ["l", "r"]


@pytest.mark.parametrize(("data", "needle"), [
    ({"steps": [{"op": "union", "from": ["main"]}]}, "steps[0] 's0' (union): union reads two or more inputs, got 1"),
    ({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "join", "from": ["a", "b", "a"], "on": "k"}]},
     "steps[0] 's0' (join): join reads exactly two inputs (left, right), got 3"),
    ({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "project", "from": ["a", "b"], "keep": ["k"]}]},
     "steps[0] 's0' (project): project reads exactly one input, got 2"),
    ({"steps": [{"op": "project", "from": "nope", "keep": ["k"]}]},
     "steps[0] 's0' (project): 'from' names 'nope', which is neither an input nor a step (known: main, s0)"),
    ({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "project", "keep": ["k"]}]},
     "the query has several inputs (a, b); say which this step reads with 'from'"),
    ({"steps": [{"id": "x", "from": "y", "op": "project", "keep": ["a"]},
                {"id": "y", "from": "x", "op": "project", "keep": ["a"]}]},
     "the query graph has a cycle: x -> y -> x"),
    ({"steps": [{"id": "x", "op": "project", "from": "x", "keep": ["a"]}]}, "steps[0] 'x' (project): reads itself"),
    ({"steps": [{"id": "a", "op": "project", "keep": ["a"]}, {"id": "a", "op": "project", "keep": ["a"]}]},
     "steps[1] (project): id 'a' is already the name of steps[0]"),
    ({"inputs": {"a": {}}, "steps": [{"id": "a", "op": "project", "keep": ["a"]}]},
     "id 'a' is also the name of an input"),
    ({"steps": [{"op": "project", "keep": ["a"]}, {"id": "z", "from": "main", "op": "project", "keep": ["a"]}],
      "output": "z"}, "steps[0] 's0' (project): unused"),
    ({"inputs": {"a": {}, "b": {}}, "steps": [{"from": "a", "op": "project", "keep": ["a"]}]},
     "input 'b' is declared but no step that reaches the output reads it"),
    ({"steps": [{"op": "project", "keep": ["a"]}], "output": "main"}, "output 'main' is an input, not a step"),
    ({"steps": [{"op": "project", "keep": ["a"]}], "output": "q"}, "output 'q' is not a step"),
])
def test_bad_graphs_are_refused_naming_the_step(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(QuerySpecError) as exc:
        bind(parse_query(data))
    assert needle in str(exc.value)


@pytest.mark.parametrize(("data", "needle"), [
    ({"steps": [{"op": "project"}]}, "project needs at least one of keep, drop, rename, set"),
    ({"steps": [{"op": "project", "rename": {"a": "c", "b": "c"}}]}, "rename maps two fields to one name"),
    ({"steps": [{"op": "alter_lifetime", "le": {"snap": {"size": 5}}}]}, "le 'snap' needs a 'const' or 'inf' duration"),
    ({"steps": [{"op": "alter_lifetime", "duration": {"const": 0}}]}, "Input should be greater than 0"),
    ({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "join", "from": ["a", "b"], "on": []}]},
     "steps[0].on: Value should have at least 1 item"),
    ({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "join", "from": ["a", "b"], "on": "k", "type": "outer"}]},
     "steps[0].type"),
])
def test_bad_operator_parameters_are_refused_at_parse_time(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(QuerySpecError) as exc:
        parse_query(data)
    assert needle in str(exc.value)


def test_lmerge_binds_and_checks_join_at() -> None:
    spec = parse_query({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "lmerge", "from": ["a", "b"]}]})
    assert bind(spec).steps[0].step.algorithm == "R4"  # nothing declared: the general algorithm
    for join_at, needle in (({"c": 5}, "does not read"), ({"a": 1, "b": 2}, "names every input")):
        bad = parse_query({"inputs": {"a": {}, "b": {}},
                           "steps": [{"op": "lmerge", "from": ["a", "b"], "join_at": join_at}]})
        with pytest.raises(UdmError, match=needle):
            bind(bad)


def test_join_where_udf_is_bound_and_checked() -> None:
    base = {"inputs": {"a": {}, "b": {}}, "steps": [{"op": "join", "from": ["a", "b"], "on": "k"}]}
    ok = dict(base, steps=[dict(base["steps"][0], where={"udf": "in_range", "args": {"field": "v"},
                                                          "params": {"lo": 0, "hi": 5}})])
    assert bind(parse_query(ok)).steps[0].entry is not None
    bad = dict(base, steps=[dict(base["steps"][0], where={"udf": "no_such_udf"})])
    with pytest.raises(UdmError, match="no_such_udf"):
        bind(parse_query(bad))


def test_on_shorthands_and_per_input_policies() -> None:
    spec = parse_query({"inputs": {"a": {"on_violation": "adjust"}, "b": {}},
                        "steps": [{"op": "join", "from": ["a", "b"], "on": ["k", ["x", "y"]]}],
                        "on_violation": "error"})
    assert spec.steps[0].on == [("k", "k"), ("x", "y")]
    assert spec.input_policy("a") == "adjust" and spec.input_policy("b") == "error"
    again = parse_query(spec.to_json_dict())
    assert again == spec


def test_yaml_reads_the_join_key_on(tmp_path: Any) -> None:
    # YAML 1.1 reads a bare `on` key as the boolean true
    p = tmp_path / "q.yaml"
    p.write_text("inputs: {a: {}, b: {}}\nsteps:\n  - {op: join, from: [a, b], on: [[k, id]]}\n")
    assert load_query(p).steps[0].on == [("k", "id")]
