"""The fluent query API (udm.host.query.Stream): same QuerySpec as a file, binding before any event is
read, and runs whose output CHT equals the reference oracle's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_run import FakeRunner

from udm.host.errors import ParamError, PolicyError, QuerySpecError, UdmError, UnknownUDM
from udm.host.model.spec import parse_query
from udm.host.query import Stream, runners
from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> type[FakeRunner]:
    FakeRunner.instances = []
    monkeypatch.setattr(runners, "make_runner", FakeRunner)
    return FakeRunner


def _events(n: int = 120) -> list[Element]:
    out: list[Element] = []
    for i in range(n):
        out.append(Insert(f"e{i}", i, i + 3 + (i % 5), {"sym": "AB"[i % 2], "price": (i * 31) % 110, "value": i % 13}))
        if i % 4 == 3:
            out.append(Retract(f"e{i}", i, i + 3 + (i % 5), i + 1))
        if i % 10 == 9:
            out.append(Cti(i - 2))
    return out


INTERFACES_EXAMPLE = {
    "steps": [
        {"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 0, "hi": 100}},
        {"op": "window", "window": {"type": "hopping", "size": 10, "hop": 5}, "group_by": ["sym"],
         "udm": "median", "version": ">=1,<2", "input": "price", "params": {}, "as": "median_price",
         "clip": "none", "output": "window", "max_delay": 0, "max_memory_time": "inf"},
    ],
    "on_violation": "dead_letter",
}


def test_builds_the_same_spec_as_a_file() -> None:
    s = (Stream.query()
         .filter("in_range", args={"field": "price"}, params={"lo": 0, "hi": 100})
         .group_by("sym")
         .hopping(10, 5)
         .aggregate("median", input="price", as_="median_price", version=">=1,<2"))
    assert s.spec == parse_query(INTERFACES_EXAMPLE)
    assert s.to_json_dict() == parse_query(INTERFACES_EXAMPLE).to_json_dict()


@pytest.mark.parametrize(("method", "args", "expected"), [
    ("tumbling", (10,), {"type": "tumbling", "size": 10, "offset": 0}),
    ("tumbling", (10, 3), {"type": "tumbling", "size": 10, "offset": 3}),
    ("hopping", (10, 5), {"type": "hopping", "size": 10, "hop": 5, "offset": 0}),
    ("snapshot", (), {"type": "snapshot"}),
    ("count_by_start", (3, 2), {"type": "count_by_start", "n": 3, "hop": 2}),
    ("count_by_end", (4,), {"type": "count_by_end", "n": 4, "hop": 1}),
])
def test_window_methods(method: str, args: tuple[int, ...], expected: dict[str, Any]) -> None:
    s = getattr(Stream.query(), method)(*args).aggregate("count")
    assert s.spec.steps[0].window.model_dump() == expected


def test_apply_and_map_and_options() -> None:
    s = (Stream.query()
         .map("in_range", as_="ok", args={"field": "price"}, params={"lo": 0, "hi": 50})
         .group_by(["sym"])
         .tumbling(10)
         .apply("topk", params={"k": 2, "by": "price"}, clip="left", output="window")
         .on_violation("adjust"))
    spec = s.spec
    assert spec.on_violation == "adjust"
    assert spec.steps[0].as_ == "ok" and spec.steps[0].op == "map"
    w = spec.steps[1]
    assert (w.udm, w.params, w.clip, w.group_by, w.as_) == ("topk", {"k": 2, "by": "price"}, "left", ["sym"], None)
    s.bind()


def test_streams_are_immutable_values() -> None:
    base = Stream.query().group_by("sym").tumbling(5)
    a = base.aggregate("max", input="price")
    b = base.aggregate("min", input="price")
    assert a.spec.steps[0].udm == "max" and b.spec.steps[0].udm == "min"
    assert a.spec.steps[0].alias == "max"
    with pytest.raises(QuerySpecError, match="no .aggregate"):
        _ = base.spec


@pytest.mark.parametrize(("build", "exc", "needle"), [
    (lambda s: s.tumbling(5).aggregate("nope"), UnknownUDM, "no UDM named 'nope'; available: "),
    (lambda s: s.tumbling(5).apply("topk", params={"k": 0}), ParamError, "parameter 'k'"),
    (lambda s: s.tumbling(5).apply("topk", params={"kk": 1}), ParamError, "kk"),
    (lambda s: s.tumbling(5).aggregate("median", output="unaltered"), PolicyError, "allowed: window"),
    (lambda s: s.tumbling(5).aggregate("topk"), PolicyError, "use .apply('topk'"),
    (lambda s: s.tumbling(5).apply("median"), PolicyError, "use .aggregate('median'"),
    (lambda s: s.filter("nope_udf"), UnknownUDM, "nope_udf"),
    (lambda s: s.filter("in_range", args={"zzz": "price"}), ParamError, "no argument(s) zzz"),
])
def test_errors_before_any_event_is_read(fake_engine: Any, tmp_path: Path, build: Any, exc: type[Exception],
                                         needle: str) -> None:
    s = build(Stream.from_jsonl(tmp_path / "does-not-exist.jsonl"))
    with pytest.raises(exc, match=None) as info:
        s.to_elements()
    assert needle in str(info.value)
    assert fake_engine.instances == []  # nothing ran, the missing file was never opened


@pytest.mark.parametrize(("build", "needle"), [
    (lambda s: s.aggregate("median"), "needs a window first"),
    (lambda s: s.tumbling(0), "size"),
    (lambda s: s.window({"type": "weird"}), "unknown type 'weird'"),
    (lambda s: s.group_by("a").filter("in_range"), "finish the window step"),
    (lambda s: s.on_violation("ignore"), "on_violation"),
    (lambda s: s.tumbling(5).aggregate("count", clip="sideways"), "clip"),
])
def test_build_errors(build: Any, needle: str) -> None:
    with pytest.raises(QuerySpecError) as info:
        build(Stream.query())
    assert needle in str(info.value)


def test_no_steps_or_no_source() -> None:
    with pytest.raises(QuerySpecError, match="no steps"):
        _ = Stream.from_events([]).spec
    with pytest.raises(QuerySpecError, match="no source"):
        Stream.query().tumbling(5).aggregate("count").to_elements()
    with pytest.raises(UdmError):
        Stream.query().tumbling(5).aggregate("count").run("out.jsonl")


def test_plumbing_with_a_stand_in_engine(fake_engine: Any, tmp_path: Path) -> None:
    evs = [{"kind": "insert", "id": "a", "le": 1, "re": 4, "payload": {"sym": "A"}}, {"kind": "nope"}, Cti(2)]
    dls: list[Any] = []
    out = Stream.from_events(evs).tumbling(5).aggregate("count").to_elements(dead_letters=dls)
    assert out == [Insert("a", 1, 4, {"sym": "A"}), Cti(2), Cti(2**63 - 1)]
    assert [d["line"] for d in dls] == [2] and "unknown element kind" in dls[0]["reason"]
    p = tmp_path / "in.jsonl"
    p.write_text("\n".join(json.dumps(e if isinstance(e, dict) else element_to_json(e)) for e in evs) + "\n")
    q = Stream.from_jsonl(p).tumbling(5).aggregate("count")
    assert q.to_elements() == out
    res = q.run(tmp_path / "out.jsonl", dead_letter=tmp_path / "dl.jsonl")
    assert res.elements_in == 3 and res.dead_lettered == 1
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3
    assert "Stream<jsonl(" in repr(q)


# ---------------------------------------------------------------------------------------------- real engine
@pytest.mark.parametrize("build", [
    lambda s: s.group_by("sym").tumbling(10).aggregate("median", input="price", as_="m"),
    lambda s: s.filter("in_range", args={"field": "price"}, params={"lo": 0, "hi": 100})
               .group_by("sym").hopping(10, 5).aggregate("sum", input="price"),
    lambda s: s.snapshot().aggregate("count"),
    lambda s: s.group_by("sym").tumbling(20).apply("topk", params={"k": 2, "by": "price"}, clip="full"),
    lambda s: s.count_by_start(3, 2).aggregate("max", input="value", as_="hi"),
])
def test_runs_match_the_oracle(build: Any, tmp_path: Path) -> None:
    events = _events()
    s = build(Stream.from_events(events))
    assert cht(s.to_elements()) == oracle(s.spec, events)
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(element_to_json(e)) + "\n" for e in events))
    f = build(Stream.from_jsonl(p))
    assert cht(f.to_elements()) == cht(s.to_elements())


def test_lmerge_of_two_physical_copies() -> None:
    from udm.host.testing import cht, generate, lmerge_inputs, oracle

    copies = lmerge_inputs(generate(seed=4, events=20, speculation=0.4, disorder="slightly"), 2, seed=4)
    a = Stream.from_events(copies["i0"], name="a")
    b = Stream.from_events(copies["i1"], name="b")
    merged = a.lmerge(b, algorithm="R4")
    assert merged.spec.steps[-1].op == "lmerge"
    out = merged.to_elements()
    assert cht(out) == oracle(merged.bind(), {"a": copies["i0"], "b": copies["i1"]}) == cht(copies["i0"])
