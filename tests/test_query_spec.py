"""The query spec model (INTERFACES §2) and binding it to catalog UDMs before any event is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from udm.host.errors import ParamError, PolicyError, QuerySpecError, UnknownUDM
from udm.host.model.plan import bind
from udm.host.model.spec import Hopping, WindowStep, load_query, parse_query
from udm.sdk import INF

EXAMPLE = {
    "steps": [
        {"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 0, "hi": 100}},
        {"op": "window", "window": {"type": "hopping", "size": 10, "hop": 5}, "group_by": ["sym"],
         "udm": "median", "version": ">=1,<2", "input": "price", "params": {}, "as": "median_price",
         "clip": "none", "output": "window", "max_delay": 0, "max_memory_time": "inf"},
    ],
    "on_violation": "dead_letter",
}


def test_the_interfaces_example_parses() -> None:
    q = parse_query(EXAMPLE)
    w = q.steps[1]
    assert isinstance(w, WindowStep)
    assert w.window == Hopping(size=10, hop=5)
    assert (w.alias, w.max_memory_time, w.group_by) == ("median_price", INF, ["sym"])
    assert q.to_json_dict()["steps"][1]["max_memory_time"] == "inf"
    assert parse_query(q.to_json_dict()) == q


def test_defaults() -> None:
    q = parse_query({"steps": [{"op": "window", "window": {"type": "snapshot"}, "udm": "count"}]})
    w = q.steps[0]
    assert isinstance(w, WindowStep)
    assert (w.clip, w.output, w.alias, q.on_violation, w.max_delay) == ("none", "window", "count", "dead_letter", 0)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"steps": []}, "steps: List should have at least 1 item"),
        ({"steps": [{"op": "pivot"}]},
         "steps[0]: unknown op 'pivot'; expected one of 'filter', 'map', 'window', 'project', 'alter_lifetime'"),
        ({"steps": [{"op": "window", "window": {"type": "sliding", "size": 3}, "udm": "count"}]},
         "steps[0].window: unknown type 'sliding'"),
        ({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 0}, "udm": "count"}]},
         "steps[0].window.size: Input should be greater than 0"),
        ({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "count", "clip": "both"}]},
         "steps[0].clip: Input should be 'none', 'left', 'right' or 'full'"),
        ({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "count", "colour": 1}]},
         "steps[0].colour: unknown field"),
        ({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "count"}],
          "on_violation": "ignore"}, "on_violation: Input should be"),
    ],
)
def test_bad_specs_say_where(data: dict, needle: str) -> None:
    with pytest.raises(QuerySpecError) as info:
        parse_query(data)
    assert needle in str(info.value)


def test_load_json_and_yaml(tmp_path: Path) -> None:
    j = tmp_path / "q.json"
    j.write_text(json.dumps(EXAMPLE))
    y = tmp_path / "q.yaml"
    y.write_text(
        "steps:\n  - op: window\n    window: {type: tumbling, size: 10}\n    udm: avg\n    input: price\n"
    )
    assert load_query(j) == parse_query(EXAMPLE)
    step = load_query(y).steps[0]
    assert isinstance(step, WindowStep) and step.udm == "avg"
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(QuerySpecError, match="not valid JSON/YAML"):
        load_query(bad)
    with pytest.raises(QuerySpecError, match="cannot read query spec"):
        load_query(tmp_path / "missing.yaml")


def _window(**kw: object) -> dict:
    step = {"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count", **kw}
    return {"steps": [step]}


def test_bind_resolves_by_name_and_checks_before_reading_events() -> None:
    bound = bind(parse_query(EXAMPLE))
    assert [s.entry.name for s in bound.steps] == ["in_range", "median"]
    assert bound.steps[0].udm.params.hi == 100
    with pytest.raises(UnknownUDM, match="no UDM named 'mediam'; available: .*median"):
        bind(parse_query(_window(udm="mediam")))
    with pytest.raises(PolicyError, match="does not allow output 'unaltered'; allowed: window"):
        bind(parse_query(_window(udm="median", output="unaltered")))
    with pytest.raises(ParamError, match="parameter 'k'"):
        bind(parse_query(_window(udm="topk", params={"k": -1})))
    with pytest.raises(PolicyError, match="is a UDF; a window step needs a UDA or UDO"):
        bind(parse_query(_window(udm="in_range")))
    with pytest.raises(UnknownUDM, match="'median' is a uda, but this step needs a udf"):
        bind(parse_query({"steps": [{"op": "filter", "udf": "median"}]}))
    with pytest.raises(ParamError, match="UDF 'in_range' has no argument"):
        bind(parse_query({"steps": [{"op": "filter", "udf": "in_range", "args": {"x": "price"}}]}))
    with pytest.raises(ParamError, match="needs argument"):
        bind(parse_query({"steps": [{"op": "filter", "udf": "in_range"}]}))
    with pytest.raises(PolicyError, match="'as' names the result field of an aggregate"):
        bind(parse_query(_window(udm="topk", **{"as": "t"})))
    ok = bind(parse_query(_window(udm="follows", output="time_bound", clip="right")))
    assert ok.steps[0].entry.name == "follows"
