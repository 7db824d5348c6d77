"""SEMANTICS §1 input typing (semantics-notes 17): a value that does not match the declared input type of the
UDM reading it is a dead letter of that step, on every path; a UDM raising on well-typed input is still a
contract violation naming it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import catalog_with, check_physical, run, runner

import udm.host.engine.window.grid as grid
from udm.host.errors import ContractViolation
from udm.host.input_types import input_type
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.temporal.elements import Cti, Element, Insert, Retract, parse_element
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.oracle import oracle, oracle_run
from udm.sdk import INF, UDA, udm

SUM_V = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
POISON: list[Any] = ["str", True, None, {"x": 1}, [1, 2]]


@pytest.mark.parametrize(("declared", "kind", "kinds"), [
    ("float", "uda", ("number",)),
    ("Sequence[float]", "uda", ("number",)),  # compute(payloads: Sequence[float]): the members' type
    ("list[float]", "udf", ("array",)),  # a UDF's argument itself
    ("int | None", "udf", ("integer", "null")),
    ("Optional[str]", "udo", ("string", "null")),
    ("bool", "udf", ("boolean",)),
    ("dict[str, float]", "udf", ("object",)),
    ("any", "uda", None), ("event", "udo", None), ("payload", "udo", None), ("Word", "udf", None),
    ("Sequence[object]", "uda", None), ("Sequence[Event]", "udo", None), ("int | Word", "udf", None),
])
def test_declared_types_read(declared: str, kind: str, kinds: tuple[str, ...] | None) -> None:
    tp = input_type(declared, kind)
    assert (tp.kinds if tp is not None else None) == kinds


def test_number_accepts_ints_and_floats_not_booleans() -> None:
    tp = input_type("float", "uda")
    assert tp is not None
    assert [tp.accepts(v) for v in (1, 2.5, float("nan"), True, "1", None)] == [True, True, True, False, False,
                                                                                  False]


def _poisoned(seed: int, n: int = 160) -> tuple[list[Element], set[str]]:
    """In-order point events (the fast path takes them) and some with a retraction, a few poisoned."""
    rng = random.Random(seed)
    out: list[Element] = []
    bad: set[str] = set()
    for i in range(n):
        v: Any = rng.choice(POISON) if rng.random() < 0.08 else rng.randint(-9, 9)
        if not isinstance(v, int) or isinstance(v, bool):
            bad.add(f"e{i}")
        le = i // 2
        out.append(Insert(f"e{i}", le, le + rng.choice((1, 1, 3)), {"g": f"k{i % 3}", "v": v}))
        if rng.random() < 0.05:
            out.append(Retract(f"e{i}", le, out[-1].re, le))  # type: ignore[union-attr]
        if i % 40 == 39:
            out.append(Cti(le))
    return [*out, Cti(INF)], bad


def _clean(stream: list[Element], bad: set[str]) -> list[Element]:
    return [e for e in stream if not (isinstance(e, (Insert, Retract)) and e.id in bad)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["each", "many", "batches"])
def test_engine_dead_letters_wrong_types_and_goes_on(seed: int, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stream, bad = _poisoned(seed)
    assert bad
    taken: list[int] = []
    bulk = grid.GridFamily.bulk_insert

    def counting(self: Any, groups: Any, codes: Any, ids: Any, le: Any, re: Any, vals: Any, *rest: Any) -> None:
        taken.append(len(le))
        bulk(self, groups, codes, ids, le, re, vals, *rest)

    monkeypatch.setattr(grid.GridFamily, "bulk_insert", counting)
    if mode in ("each", "many"):
        out, r = run(SUM_V, stream, mode=mode)
    else:
        r = runner(SUM_V)
        out = r.process_batch(ElementBatch.from_elements(stream, list(range(1, len(stream) + 1)))) + r.finish()
        assert sum(taken) > 0  # the window took the batch's inserts in bulk
    check_physical(out)
    # the reference: the oracle over the stream without the poisoned events (their retractions vanish too)
    assert cht(out) == oracle(parse_query(SUM_V), _clean(stream, bad))
    # and the kit's oracle reads the poisoned stream the same way
    assert oracle(parse_query(SUM_V), stream) == oracle(parse_query(SUM_V), _clean(stream, bad))
    typed = [d for d in r.dead_letters if d.reason.startswith("wrong type")]
    assert sorted(d.element["id"] for d in typed) == sorted(bad)  # type: ignore[index]
    for d in typed:
        v = d.element["payload"]["v"]  # type: ignore[index]
        assert f"field 'v' is {_json_name(v)}, sum 1.0.0 expects float" in d.reason
    # a retraction of a poisoned event is an unknown id, not a crash
    assert all(d.reason.startswith(("wrong type", "retraction of unknown id")) for d in r.dead_letters)


def _json_name(v: Any) -> str:
    return {str: "string", bool: "boolean", type(None): "null", dict: "object", list: "array"}[type(v)]


def test_udf_argument_is_typed() -> None:
    q = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 0, "hi": 5}},
                   {"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count"}]}
    stream: list[Element] = [Insert("a", 1, 2, {"v": 1}), Insert("b", 2, 3, {"v": "2"}), Insert("c", 3, 4, {"v": 3}),
                             Retract("b", 2, 3, 2), Cti(INF)]
    out, r = run(q, stream)
    assert cht(out) == oracle(parse_query(q), stream)
    assert [d.reason for d in r.dead_letters] == ["wrong type: field 'v' is string, in_range 1.0.0 expects float",
                                                  "retraction of unknown id 'b'"]


def test_whole_payload_checked_against_a_scalar_declaration() -> None:
    q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "sum"}]}
    out, r = run(q, [Insert("a", 1, 2, {"v": 1}), Cti(INF)])
    assert cht(out) == oracle(parse_query(q), [Insert("a", 1, 2, {"v": 1})]) and not cht(out)
    assert r.dead_letters[0].reason == "wrong type: the payload is object, sum 1.0.0 expects float"


@udm(name="picky", version="1.0.0")
class Picky(UDA):
    """Raises on 13 though 13 is a well-typed number: a contract violation, not a dead letter."""

    def compute(self, payloads: Sequence[float]) -> float:
        if 13 in payloads:
            raise ValueError("unlucky")
        return float(sum(payloads))


def test_udm_raising_on_well_typed_input_is_a_contract_violation() -> None:
    cat = catalog_with(Picky)
    q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "picky", "input": "v"}]}
    stream: list[Element] = [Insert("a", 1, 2, {"v": "x"}), Insert("b", 2, 3, {"v": 13}), Cti(INF)]
    with pytest.raises(ContractViolation, match=r"UDM picky 1.0.0 in window \[0, 10\): compute raised ValueError"):
        run(q, stream, cat)
    with pytest.raises(ContractViolation, match=r"picky'? 1.0.0"):
        oracle(bind(parse_query(q), cat), stream)
    out, r = run(q, stream[:1] + stream[2:], cat)  # the string alone: a dead letter, no violation
    assert cht(out) == {} and r.dead_letters[0].reason.startswith("wrong type: field 'v' is string")
    assert runner(q, cat) is not None


def test_cli_issue_example_exits_zero(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in [
        {"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"v": 1}},
        {"kind": "insert", "id": "b", "le": 2, "re": 3, "payload": {"v": "str"}},
        {"kind": "insert", "id": "c", "le": 3, "re": 4, "payload": {"v": 2.5}}]) + "\n")
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                        "udm": "sum", "input": "v"}]}))
    res = subprocess.run([sys.executable, "-m", "udm.host.cli.app", "run", str(q), "--input", str(src), "--output",
                          str(tmp_path / "out.jsonl"), "--dead-letter", str(tmp_path / "dl.jsonl")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    dl = [json.loads(x) for x in (tmp_path / "dl.jsonl").read_text().splitlines()]
    assert [(d["line"], d["reason"]) for d in dl] == [(2, "wrong type: field 'v' is string, sum 1.0.0 expects float")]
    out = [parse_element(json.loads(x)) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert cht(out) == oracle(parse_query(json.loads(q.read_text())),
                              [Insert("a", 1, 2, {"v": 1}), Insert("c", 3, 4, {"v": 2.5})])


# ---------------------------------------------------------------------------------------------------------
# Spark: the engine path, the algebraic two-phase plan (falls back to the engine path), streaming


def _spark_run(engine: str, query: dict[str, Any], src: Path, out: Path, **kw: Any) -> Any:
    req = RunRequest(bind(parse_query(query)), src, out, out.with_suffix(".dl.jsonl"),
                     batch_size=kw.pop("batch_size", None), checkpoint=None, options=kw)
    return (run_local if engine == "local" else get_engine(engine))(req)


def _dead(path: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(x) for x in path.read_text().splitlines() if x.strip()), key=lambda d: d["line"])


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("query", [SUM_V, {"steps": [{**SUM_V["steps"][0], "udm": "max"}]}],
                         ids=["sum", "max"])
def test_spark_paths_dead_letter_wrong_types(spark: Any, tmp_path: Path, engine: str, query: dict) -> None:
    """Inserts only with point lifetimes: the batch path tries the algebraic plan first (``max`` would not
    raise on strings, so the plan must check the type itself), then runs the engine path."""
    stream, bad = _poisoned(3)
    stream = [e for e in stream if not isinstance(e, Retract)]
    src = tmp_path / "in.jsonl"
    write_stream(src, stream)
    local = _spark_run("local", query, src, tmp_path / "local.jsonl")
    res = _spark_run(engine, query, src, tmp_path / "spark.jsonl", batch_size=37)
    out = [parse_element(json.loads(x)) for x in (tmp_path / "spark.jsonl").read_text().splitlines()]
    assert cht(out) == oracle_run(parse_query(query), stream).cht == oracle(parse_query(query), _clean(stream, bad))
    assert _dead(tmp_path / "spark.dl.jsonl") == _dead(tmp_path / "local.dl.jsonl")
    assert len(_dead(tmp_path / "spark.dl.jsonl")) == len(bad)
    assert (res.dead_lettered, res.reasons) == (local.dead_lettered, local.reasons)


@pytest.mark.spark
def test_algebraic_plan_refuses_wrong_types(spark: Any) -> None:
    from udm.host.spark import algebraic
    from udm.host.spark.convert import elements_df

    stream = [Insert("a", 1, 2, {"g": "x", "v": 1}), Insert("b", 3, 4, {"g": "x", "v": "s"})]
    q = {"steps": [{**SUM_V["steps"][0], "udm": "max"}]}
    with pytest.raises(Exception, match="not-eligible"):
        algebraic.run_algebraic(parse_query(q), elements_df(spark, stream), 2).collect()


AGGREGATES = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                         "aggregates": [{"udm": "count", "as": "n"}, {"udm": "sum", "input": "v", "as": "total"},
                                        {"udm": "max", "input": "w", "as": "top"}]}]}
#: "b" carries a string where sum reads a number, "c" a boolean where max does: both refused by the step
TYPED_STREAM = [Insert("a", 1, 2, {"g": "x", "v": 1, "w": 2.5}), Insert("b", 3, 4, {"g": "x", "v": "s", "w": 1}),
                Insert("c", 5, 6, {"g": "x", "v": 2, "w": True}), Insert("d", 12, 13, {"g": "x", "v": 4, "w": 0})]


def test_aggregates_check_each_udas_input_type() -> None:
    """Several UDAs over one membership (semantics-notes 28): each checks the value it receives; an element
    wrong for any of them is a dead letter of the step, and the windows are those of the rest."""
    bq = bind(parse_query(AGGREGATES))
    r = runner(AGGREGATES)
    out = r.run_all(TYPED_STREAM)
    assert cht(out) == oracle_run(bq, TYPED_STREAM).cht
    rows = sorted((e.le, e.re, json.dumps(e.payload, sort_keys=True)) for e in out if isinstance(e, Insert))
    assert rows == [(0, 10, json.dumps({"g": "x", "n": 1, "top": 2.5, "total": 1}, sort_keys=True)),
                    (10, 20, json.dumps({"g": "x", "n": 1, "top": 0, "total": 4}, sort_keys=True))]
    reasons = sorted(d.reason for d in r.take_dead_letters())
    assert len(reasons) == 2 and all(x.startswith("wrong type: field") for x in reasons)
    assert "'v' is string" in reasons[0] + reasons[1] and "'w' is boolean" in reasons[0] + reasons[1]


@pytest.mark.spark
def test_two_phase_aggregates_refuse_wrong_types(spark: Any) -> None:
    from udm.host.spark import algebraic
    from udm.host.spark.convert import elements_df

    with pytest.raises(Exception, match="not-eligible"):
        algebraic.run_algebraic(parse_query(AGGREGATES), elements_df(spark, TYPED_STREAM), 2).collect()
