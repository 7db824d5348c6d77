"""Algebraic UDAs as partial + final aggregation: same CHT as the oracle, and taken only when allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.spec import parse_query
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import collect_elements, elements_df
from udm.host.temporal.elements import Cti, Insert
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle
from udm.host.testing.verifier import verify
from udm.sdk import INF

pytestmark = pytest.mark.spark


def _points(n: int, groups: int, seed: int) -> list[Any]:
    import random

    rng = random.Random(seed)
    out: list[Any] = [Insert(f"e{i}", t, t + 1, {"g": f"k{rng.randrange(groups)}", "v": rng.uniform(-50, 50)})
                      for i, t in enumerate(sorted(rng.randrange(-30, 200) for _ in range(n)))]
    return [*out, Cti(INF)]


def _two_phase_equals_the_oracle(spark: Any, query: Any, stream: list[Any]) -> None:
    """``query`` over ``stream`` takes the two-phase plan, with the oracle's CHT and no dead letter."""
    run = run_batch(query, elements_df(spark, stream))
    try:
        assert run.path == "algebraic"
        verdict = verify(collect_elements(run.output), oracle(query, stream), rel_tol=1e-9, abs_tol=1e-6)
        assert verdict, str(verdict)
        assert run.dead_letters.count() == 0
    finally:
        run.unpersist()


@pytest.mark.parametrize(("udm", "window"), [
    ("sum", {"type": "tumbling", "size": 10, "offset": 3}),
    ("avg", {"type": "hopping", "size": 12, "hop": 8}),
    ("count", {"type": "hopping", "size": 5, "hop": 10}),  # gaps between windows
    ("variance", {"type": "hopping", "size": 20, "hop": 5}),
])
def test_two_phase_matches_oracle(spark: Any, udm: str, window: dict[str, Any]) -> None:
    query = parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm,
                                    "input": "v"}]})
    stream = _points(400, 5, seed=len(udm))
    _two_phase_equals_the_oracle(spark, query, stream)


@pytest.mark.parametrize(("window", "keys"), [({"type": "tumbling", "size": 10}, ["g"]),
                                             ({"type": "hopping", "size": 12, "hop": 4}, [])])
def test_two_phase_runs_several_algebraic_aggregates(spark: Any, window: dict[str, Any], keys: list[str]) -> None:
    """SEMANTICS §9: ``aggregates`` of algebraic UDAs take the two-phase plan, one output per window."""
    query = parse_query({"steps": [{"op": "window", "window": window, "group_by": keys, "aggregates": [
        {"udm": "count", "as": "n"}, {"udm": "avg", "input": "v", "as": "mean"},
        {"udm": "max", "input": "v", "as": "hi"}]}]})
    stream = _points(300, 4, seed=7)
    run = run_batch(query, elements_df(spark, stream))
    try:
        assert run.path == "algebraic"
        verdict = verify(collect_elements(run.output), oracle(query, stream), rel_tol=1e-9, abs_tol=1e-6)
        assert verdict, str(verdict)
    finally:
        run.unpersist()
    mixed = parse_query({"steps": [{"op": "window", "window": window, "group_by": keys, "aggregates": [
        {"udm": "count", "as": "n"}, {"udm": "median", "input": "v", "as": "med"}]}]})
    run = run_batch(mixed, elements_df(spark, stream))
    try:
        assert run.path != "algebraic"  # a holistic UDA: the engine path
        verdict = verify(collect_elements(run.output), oracle(mixed, stream), rel_tol=1e-9, abs_tol=1e-6)
        assert verdict, str(verdict)
    finally:
        run.unpersist()


def test_not_taken_for_retractions_or_holistic(spark: Any) -> None:
    q_sum = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                        "udm": "sum", "input": "v"}]}
    from udm.host.spark.algebraic import eligible_step

    assert eligible_step(parse_query(q_sum)) is not None
    q_med = {"steps": [{**q_sum["steps"][0], "udm": "median"}]}
    assert eligible_step(parse_query(q_med)) is None
    spec = generate(seed=5, events=30, groups=2, speculation=0.5)  # has retractions
    assert any(type(e).__name__ == "Retract" for e in spec)
    run = run_batch(q_sum, elements_df(spark, spec))
    try:
        assert run.path == "engine"
    finally:
        run.unpersist()


def test_falls_back_when_an_event_spans_panes(spark: Any) -> None:
    stream = [Insert("a", 1, 2, {"g": "x", "v": 1}), Insert("b", 3, 25, {"g": "x", "v": 2})]
    q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
    from udm.host.spark import algebraic

    # the partial phase alone refuses it (running the engine path needs the engine)
    with pytest.raises(Exception, match="not-eligible"):
        algebraic.run_algebraic(parse_query(q), elements_df(spark, stream), 2).collect()


def _violated(rows: list[tuple[int, str, int]]) -> bool:
    """Brute force, straight from SEMANTICS §1: some insert comes after a CTI with LE below its time."""
    return any(kind_i == "insert" and line_i > line_c and le < t
               for line_c, kind_c, t in rows if kind_c == "cti" for line_i, kind_i, le in rows)


@pytest.mark.parametrize("seed", range(40))
def test_cti_check_is_sound_and_exact_on_runs_of_lines(seed: int) -> None:
    """The final phase's CTI rule against brute force: never eligible when some insert violates a CTI;
    when partitions are runs of lines (files, in-memory tables) it says exactly when one does."""
    import random

    import numpy as np

    from udm.host.spark.algebraic import _ctis_respected, _facts

    rng = random.Random(seed)
    n = rng.randrange(1, 40)
    rows, t = [], 0
    for line in range(1, n + 1):
        if rng.random() < 0.25:
            rows.append((line, "cti", t + rng.randrange(-3, 6)))
        else:
            t += rng.randrange(0, 4)
            rows.append((line, "insert", t + rng.randrange(-4, 3)))
    parts = rng.randrange(1, 5)
    contiguous = seed % 2 == 0
    if contiguous:
        cuts = sorted(rng.sample(range(1, n + 1), min(parts - 1, n - 1)))
        which = [sum(line > c for c in cuts) for line, _, _ in rows]
    else:
        which = [rng.randrange(parts) for _ in rows]

    def facts_of(p: int) -> Any:
        mine = [r for r, w in zip(rows, which, strict=True) if w == p]
        ins = [(line, le) for line, kind, le in mine if kind == "insert"]
        return _facts(True, [np.array([x[0] for x in ins], dtype=np.int64)] if ins else [],
                      [np.array([x[1] for x in ins], dtype=np.int64)] if ins else [],
                      [(line, t) for line, kind, t in mine if kind == "cti"])

    ok = _ctis_respected([facts_of(p) for p in range(parts)])
    if _violated(rows):
        assert not ok
    elif contiguous:
        assert ok


def test_interior_ctis_keep_the_plan(spark: Any) -> None:
    """A stream with a CTI every few events (how real streams arrive) still takes the two-phase plan;
    one insert that violates a CTI sends it to the engine path, which dead-letters exactly that insert."""
    events = _points(300, 4, seed=3)[:-1]
    stream: list[Any] = []
    for i, e in enumerate(events):
        stream.append(e)
        if i % 25 == 24:
            stream.append(Cti(e.le))
    stream.append(Cti(INF))
    q = parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                                "udm": "sum", "input": "v"}]})
    for data, path, dead in ((stream, "algebraic", 0),
                             ([*stream[:200], Insert("late", -100, -99, {"g": "k1", "v": 1.0}), *stream[200:]],
                              "engine", 1)):
        df = elements_df(spark, data).repartitionByRange(7, "line")  # partitions are runs of lines
        run = run_batch(q, df, buckets=3)
        try:
            assert run.path == path
            verdict = verify(collect_elements(run.output), oracle(q, data), rel_tol=1e-9, abs_tol=1e-6)
            assert verdict, str(verdict)
            assert run.dead_letters.count() == dead
        finally:
            run.unpersist()


def test_ints_stay_ints_next_to_floats(spark: Any) -> None:
    """A window whose values are all ints sums to an int, as in the local engine, even when another
    window of the same partition holds floats (a parsed column of both would be all floats)."""
    import json

    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind

    stream: list[Any] = [Insert(f"i{i}", i, i + 1, {"g": "x", "v": i}) for i in range(5)]
    stream += [Insert(f"f{i}", 20 + i, 21 + i, {"g": "x", "v": i + 0.5}) for i in range(5)]
    stream += [Insert(f"r{i}", 40 + i, 41 + i, {"g": "y", "v": float(i)}) for i in range(5)]  # 2.0, not 2
    stream.append(Cti(INF))
    q = parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                                "udm": "sum", "input": "v"}]})
    runner = QueryRunner(bind(q))
    out = [o for el in stream for o in runner.process(el)] + list(runner.finish())
    local = sorted(json.dumps(e.payload) for e in out if isinstance(e, Insert))
    run = run_batch(q, elements_df(spark, stream))
    try:
        assert run.path == "algebraic"
        got = sorted(json.dumps(e.payload) for e in collect_elements(run.output) if isinstance(e, Insert))
    finally:
        run.unpersist()
    assert got == local
    assert '{"g": "x", "sum": 10}' in got and '{"g": "y", "sum": 10.0}' in got


# ---------------------------------------------------------------------------------------------------------
# holistic UDAs (median): the members themselves are the pane states (`_Collected`)
# ---------------------------------------------------------------------------------------------------------
_WINDOWS = [{"type": "tumbling", "size": 10, "offset": 3}, {"type": "hopping", "size": 12, "hop": 4},
            {"type": "hopping", "size": 5, "hop": 10}, {"type": "cumulate", "size": 20, "step": 5}]


@pytest.mark.parametrize("window", _WINDOWS)
def test_holistic_two_phase_matches_oracle(spark: Any, window: dict[str, Any]) -> None:
    """A holistic UDA takes the two-phase plan; its CHT is the oracle's (ties on (LE, RE) included: the
    generated stream has several events per tick)."""
    query = parse_query({"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "median",
                                    "input": "v"}]})
    stream = _points(400, 5, seed=11)
    _two_phase_equals_the_oracle(spark, query, stream)


def _joined_catalog() -> Any:
    from collections.abc import Sequence

    from tests.test_engine_support import catalog_with
    from udm.sdk import UDA, udm

    @udm(name="joined", version="1.0.0", input_type="any", output_type="any")
    class Joined(UDA):
        """Order-sensitive: the window's values in the order the host gives them."""

        def compute(self, payloads: Sequence[Any]) -> str:
            return "|".join(json.dumps(p) for p in payloads)

    return catalog_with(Joined)


@pytest.mark.parametrize("window", _WINDOWS)
@pytest.mark.parametrize("mixed", [False, True])
def test_holistic_members_reach_compute_in_canonical_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          window: dict[str, Any], mixed: bool) -> None:
    """Phase 1 over several byte ranges of a file, phase 2 as `final_on_driver` runs it: an order-sensitive
    UDA sees each window's members as the engine gives them (SEMANTICS §5: by (LE, RE), ties by the
    canonical JSON of the value), whatever the file order and the ranges. ``mixed``: values of several
    JSON types (the per-row fold)."""
    import random

    import pyarrow as pa

    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.model import plan
    from udm.host.spark import algebraic
    from udm.host.spark.file_source import scan_file
    from udm.host.testing.oracle import oracle_run

    cat = _joined_catalog()
    monkeypatch.setattr(algebraic, "bind", lambda spec: plan.bind(spec, cat))
    rng = random.Random(3)
    lines = []
    for i in range(300):
        le = rng.randrange(0, 60)
        v: Any = rng.choice([rng.randrange(-9, 30) * 0.5, f"s{rng.randrange(12)}", rng.randrange(100)]) \
            if mixed else round(rng.uniform(-5, 5), 1)
        lines.append(json.dumps({"kind": "insert", "id": f"e{i}", "le": le, "re": le + 1,  # (ties: 5 a tick)
                                 "payload": {"g": f"g{i % 3}", "v": v}}))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    q = {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": "joined", "input": "v"}]}
    spec = parse_query(q)
    assert algebraic.eligible_step(spec, holistic=True) is not None
    assert algebraic.eligible_step(spec) is None  # (not algebraic)
    scan = scan_file(src, 4, min_bytes=1)
    ranges = pa.RecordBatch.from_pydict({"path": [scan.path] * len(scan.ranges),
                                         "start": [r[0] for r in scan.ranges], "stop": [r[1] for r in scan.ranges],
                                         "first_line": [r[2] for r in scan.ranges]})
    partial = pa.Table.from_batches(list(algebraic._range_partial(spec.to_json_dict(), 1)(iter([ranges]))))
    out = algebraic._final(spec.to_json_dict(), True)(partial)
    from udm.host.spark.convert import elements_of

    got = elements_of(out)
    stream = [e for _, e in read_jsonl_elements(src)]
    verdict = verify(got, oracle_run(plan.bind(spec, cat), stream, cat).cht)
    assert verdict, str(verdict)
