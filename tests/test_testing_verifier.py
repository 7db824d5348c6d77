"""The canonical verifier (seeds/002 §6.3) and engine conformance runs (check_engine)."""

from __future__ import annotations

import pytest

from udm.host.catalog import Catalog
from udm.host.model.spec import Hopping, QuerySpec, Snapshot, Tumbling, WindowStep
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import (
    CHT,
    assert_equivalent,
    check_composition,
    check_engine,
    generate,
    oracle,
    payloads_close,
    to_elements,
    verify,
)
from udm.sdk import INF
from udm_patterns import ALL as PATTERNS
from udm_stats import ALL as STATS


def rows(*r: tuple) -> CHT:
    return CHT.from_events(r)


def test_equal_streams_verify() -> None:
    out = [Insert("o1", 0, 5, {"sum": 3}), Retract("o1", 0, 5, 0), Insert("o2", 0, 5, {"sum": 4}), Cti(INF)]
    v = verify(out, rows((0, 5, {"sum": 4})))
    assert v.ok and bool(v) and v.diff == ""


def test_multiplicity_matters() -> None:
    want = rows((0, 5, {"x": 1}), (0, 5, {"x": 1}))
    assert not verify([Insert("a", 0, 5, {"x": 1})], want).ok
    assert verify([Insert("a", 0, 5, {"x": 1}), Insert("b", 0, 5, {"x": 1})], want).ok


def test_float_tolerance_inside_payloads() -> None:
    want = rows((0, 5, {"avg": 0.3, "nested": {"xs": [0.1, 2]}}))
    got = [Insert("a", 0, 5, {"avg": 0.1 + 0.2, "nested": {"xs": [0.1000000000000001, 2.0]}})]
    assert verify(got, want).ok
    assert not verify(got, want, rel_tol=0.0, abs_tol=0.0).ok
    assert not verify([Insert("a", 0, 5, {"avg": 0.31, "nested": {"xs": [0.1, 2]}})], want).ok
    assert payloads_close(float("nan"), float("nan"))
    assert not payloads_close(True, 1) and not payloads_close("1", 1) and payloads_close(3, 3.0)


def test_diff_is_readable() -> None:
    want = rows((0, 5, {"g": "a", "sum": 3}), (5, 10, {"g": "a", "sum": 6}), (10, 15, {"g": "a", "sum": 1}))
    got = [Insert("1", 0, 5, {"g": "a", "sum": 3}), Insert("2", 5, 10, {"g": "a", "sum": 7}),
           Insert("3", 20, 25, {"g": "a", "sum": 9}), Retract("ghost", 0, 1, 0)]
    v = verify(got, want)
    assert not v.ok
    assert v.diff.splitlines()[0] == ("CHT(output) != expected: 2 missing row(s), 2 unexpected row(s) "
                                      "(expected 3 rows, output has 3)")
    assert "payload differs:" in v.diff and "sum: expected 6, got 7" in v.diff
    assert "missing (expected, not in output):\n  - [10, 15) {\"g\":\"a\",\"sum\":1}" in v.diff
    assert "unexpected (in output, not expected):\n  + [20, 25) {\"g\":\"a\",\"sum\":9}" in v.diff
    assert "1 output element(s) were physically invalid" in v.diff
    with pytest.raises(AssertionError, match="sum: expected 6, got 7"):
        assert_equivalent(got, want)
    assert_equivalent(got[:1], [(0, 5, {"g": "a", "sum": 3})])  # expected given as triples


def test_infinite_times_in_diff() -> None:
    v = verify([], rows((3, INF, {"x": 1})))
    assert "[3, inf)" in v.diff


# -- engine conformance -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cat() -> Catalog:
    c = Catalog()
    for cls in (*STATS, *PATTERNS):
        c.add(cls)
    return c


def final_only_engine(cat: Catalog):  # type: ignore[no-untyped-def]
    """A correct but lazy engine: waits for the end, then emits the answer and cti(inf)."""

    def run(query: QuerySpec, elements: list) -> list:
        return [*to_elements(oracle(query, elements, cat), prefix="o"), Cti(INF)]

    return run


def test_check_engine_accepts_a_correct_engine(cat: Catalog) -> None:
    q = QuerySpec(steps=[WindowStep(window=Hopping(size=6, hop=3), udm="avg", input="v", group_by=["g"])])
    els = generate(seed=1, events=20, groups=2, values="float", disorder="slightly", speculation=0.4)
    report = check_engine(final_only_engine(cat), q, els, seed=1, catalog=cat)
    assert report.ok, report.text()
    assert len(report.runs) == 4 and "conforms" in report.text()


def test_check_engine_reports_wrong_output_and_broken_properties(cat: Catalog) -> None:
    q = QuerySpec(steps=[WindowStep(window=Tumbling(size=5), udm="sum", input="v")])
    good = final_only_engine(cat)

    def off_by_one(query: QuerySpec, elements: list) -> list:
        out = good(query, elements)
        first = out[0]
        return [Insert(first.id, first.le, first.re, {"sum": first.payload["sum"] + 1}), *out[1:]]

    def no_final_cti(query: QuerySpec, elements: list) -> list:
        return good(query, elements)[:-1]

    def crashing(query: QuerySpec, elements: list) -> list:
        raise RuntimeError("engine bug")

    els = generate(seed=2, events=10)
    r = check_engine(off_by_one, q, els, seed=2, variants=1, catalog=cat)
    assert not r.ok and "sum: expected" in r.text() and '"kind": "insert"' in r.text()
    r = check_engine(off_by_one, q, els, seed=2, variants=0, catalog=cat, shrink=True)
    assert r.minimal is not None and 1 <= len(r.minimal) <= 2, r.text()
    assert "minimal failing input" in r.text()
    r = check_engine(no_final_cti, q, els, seed=2, variants=0, catalog=cat)
    assert not r.ok and any("final CTI" in p for p in r.problems)
    r = check_engine(crashing, q, els, seed=2, variants=0, catalog=cat)
    assert r.problems == ["given stream: engine raised RuntimeError: engine bug"]


def test_composition_output_of_one_query_feeds_another(cat: Catalog) -> None:
    first = QuerySpec(steps=[WindowStep(window=Tumbling(size=5), udm="sum", input="v", group_by=["g"])])
    second = QuerySpec(steps=[WindowStep(window=Snapshot(), udm="max", input="sum")])
    els = generate(seed=3, events=15, groups=2)
    report = check_composition(final_only_engine(cat), first, second, els, catalog=cat)
    assert report.ok, report.text()
    assert len(report.runs) == 2


# -- the local engine, once it exists --------------------------------------------------------------

QUERIES = [
    {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "sum", "input": "v",
                "group_by": ["g"]}]},
    {"steps": [{"op": "window", "window": {"type": "hopping", "size": 6, "hop": 2, "offset": 1}, "udm": "avg",
                "input": "v"}]},
    {"steps": [{"op": "window", "window": {"type": "snapshot"}, "udm": "count"}]},
    {"steps": [{"op": "window", "window": {"type": "count_by_start", "n": 3, "hop": 2}, "udm": "median",
                "input": "v"}]},
    {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "twa", "input": "v",
                "clip": "full"}]},
    {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 10, "hi": 80}},
               {"op": "window", "window": {"type": "hopping", "size": 8, "hop": 4}, "udm": "topk",
                "input": {"value": "v", "g": "g"}, "params": {"k": 2}}]},
]


def _engine(cat: Catalog):  # type: ignore[no-untyped-def]
    from udm.host.engine import QueryRunner
    from udm.host.testing import runner_engine

    return runner_engine(QueryRunner, cat)


@pytest.mark.parametrize("qi", range(len(QUERIES)))
@pytest.mark.parametrize("seed", [0, 1])
def test_local_engine_conforms(qi: int, seed: int, cat: Catalog) -> None:
    from udm.host.model.spec import parse_query

    run = _engine(cat)
    q = parse_query(QUERIES[qi])
    els = generate(seed=seed, events=25, groups=2, disorder="out_of_order", speculation=0.4, duration="mixed",
                   cti="regular", bad=0.1)
    report = check_engine(run, q, els, seed=seed, catalog=cat)
    assert report.ok, report.text()


@pytest.mark.parametrize("seed", range(4))
def test_local_engine_fuzz(seed: int, cat: Catalog) -> None:
    """Random window/UDM/policy combinations (single window step) against the oracle and properties."""
    import random

    from udm.host.model.spec import parse_query

    run = _engine(cat)
    rng = random.Random(seed)
    windows = [{"type": "tumbling", "size": 5, "offset": 2}, {"type": "hopping", "size": 6, "hop": 4},
               {"type": "hopping", "size": 3, "hop": 7, "offset": 1}, {"type": "snapshot"},
               {"type": "count_by_start", "n": 2, "hop": 2}, {"type": "count_by_end", "n": 3}]
    udms = [("sum", {"input": "v"}), ("variance", {"input": "v"}), ("twa", {"input": "v"}),
            ("members", {"input": {"v": "v"}}), ("follows", {}),
            ("topk", {"input": {"value": "v", "type": "type"}, "params": {"k": 2}})]
    by_name = {c.manifest.name: c.manifest for c in (*STATS, *PATTERNS)}
    for w in windows:
        name, kw = rng.choice(udms)
        man = by_name[name]
        step: dict = {"op": "window", "window": w, "udm": name, **kw, "clip": rng.choice(man.allowed_clip),
                      "output": rng.choice(man.allowed_output)}
        if step["output"] in ("unaltered", "time_bound"):
            step["clip"] = "left"
        q = parse_query({"steps": [step]})
        els = generate(seed=seed, events=rng.randint(5, 20), groups=2, types=("A", "B", "C"), duration="mixed",
                       disorder=rng.choice(["in_order", "slightly", "out_of_order", "highly"]),
                       speculation=rng.choice([0, 0.5]), chain=2, cti=rng.choice(["lazy", "regular", "eager"]),
                       bad=0.1)
        report = check_engine(run, q, els, seed=seed, variants=2, catalog=cat)
        assert report.ok, f"{step}\n{report.text()}"


def test_local_engine_chained_window_steps_beyond_T(cat: Catalog) -> None:
    from udm.host.model.spec import parse_query

    run = _engine(cat)
    q = parse_query({"steps": [
        {"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "count"},
        {"op": "window", "window": {"type": "tumbling", "size": 8}, "udm": "max", "input": "count"}]})
    els = [Insert("a", 0, INF, {}), Cti(7)]
    report = check_engine(run, q, els, seed=0, variants=0, catalog=cat)
    assert report.ok, report.text()


# -- the Spark paths (CI: `make test`; marked `spark`) ---------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("engine_name", ["spark", "spark-streaming"])
@pytest.mark.parametrize("qi", [0, 2, 4, 5])
def test_spark_paths_conform(engine_name: str, qi: int, cat: Catalog, spark: object) -> None:
    from udm.host.model.spec import parse_query
    from udm.host.testing import registered_engine

    q = parse_query(QUERIES[qi])
    els = generate(seed=qi, events=20, groups=2, disorder="out_of_order", speculation=0.4, duration="mixed",
                   cti="regular", bad=0.1)
    report = check_engine(registered_engine(engine_name, catalog=cat, batch_size=7), q, els, seed=qi,
                          variants=1, catalog=cat)
    assert report.ok, report.text()
