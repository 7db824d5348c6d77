"""Retraction-chain repair (seeds/003 §4.6 Finalize, semantics-notes 20): retractions that overtake their insert
or their previous chain link are stitched back; what stays unmatched past the horizon is a dead letter."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_engine_support import check_physical, run

from udm.host.errors import QuerySpecError, ViolationError
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract, sync_time
from udm.host.testing.cht import cht
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle, oracle_run
from udm.sdk import INF

SNAP = {"op": "window", "window": {"type": "snapshot"}, "group_by": ["g"], "udm": "count"}
HOP = {"op": "window", "window": {"type": "hopping", "size": 10, "hop": 5}, "group_by": ["g"], "udm": "sum",
       "input": "v"}


def _query(step: dict[str, Any], horizon: Any = "inf", **extra: Any) -> dict[str, Any]:
    q: dict[str, Any] = {"steps": [step], **extra}
    if horizon is not None:
        q["repair"] = {"horizon": horizon}
    return q


def _overtake(stream: list[Element], rng: random.Random) -> tuple[list[Element], int]:
    """Move retractions earlier (before their insert, before an earlier link of their chain), as a network
    would. A retraction never moves past a CTI above its sync time (that CTI would make it late anyway)."""
    out = list(stream)
    moved = 0
    for j in range(len(out)):
        el = out[j]
        if not isinstance(el, Retract) or rng.random() < 0.4:
            continue
        i = j
        while i > 0 and j - i < 8 and not (isinstance(out[i - 1], Cti) and out[i - 1].t > sync_time(el)):
            i -= 1
        k = rng.randint(i, j)
        if k < j:
            out.insert(k, out.pop(j))
            moved += 1
    return out, moved


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("step", [SNAP, HOP], ids=["snapshot-count", "hopping-sum"])
def test_repaired_stream_has_the_cht_of_the_ordered_one(seed: int, step: dict[str, Any]) -> None:
    stream = generate(seed=seed, events=30, groups=2, speculation=0.7, chain=3, duration="mixed",
                      disorder="slightly", cti="regular")
    plain = parse_query(_query(step, None))
    if oracle_run(plain, stream).rejected:
        pytest.skip("generated stream is not clean")  # never happens with bad=0; guards the reference
    shuffled, moved = _overtake(stream, random.Random(seed))
    out, r = run(_query(step), shuffled)
    check_physical(out)
    # the reference: the oracle over the stream as it was sent, in order
    assert cht(out) == oracle(plain, stream)
    assert r.dead_letters == []
    assert oracle(parse_query(_query(step)), shuffled) == oracle(plain, stream)  # the kit agrees
    if moved:
        _, r0 = run(_query(step, None), shuffled)  # without repair the overtaking retractions are refused
        before_insert = _overtook_insert(shuffled)
        assert len(r0.dead_letters) >= before_insert


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("horizon", [0, 3, 8])
def test_finite_horizon_agrees_with_the_kit(seed: int, horizon: int) -> None:
    """With a short horizon some retractions expire: the engine and the kit's reference (written naively
    from semantics-notes 20) refuse the same ones and agree on the CHT."""
    stream = generate(seed=seed, events=30, groups=2, speculation=0.7, chain=3, duration="mixed",
                      disorder="slightly", cti="regular")
    shuffled, _ = _overtake(stream, random.Random(seed + 100))
    q = parse_query(_query(HOP, horizon))
    out, r = run(_query(HOP, horizon), shuffled)
    check_physical(out)
    ref = oracle_run(q, shuffled)
    assert cht(out) == ref.cht
    assert len(r.dead_letters) == len(ref.rejected)


def _overtook_insert(stream: list[Element]) -> int:
    seen: set[str] = set()
    n = 0
    for el in stream:
        if isinstance(el, Insert):
            seen.add(el.id)
        elif isinstance(el, Retract) and el.id not in seen:
            n += 1
    return n


def test_chain_links_swapped_and_insert_last_by_hand() -> None:
    """[1, 10) shortened to 8 then to 5, arriving as: link 2, link 1, insert. Snapshot count by hand:
    events a [1, 5), b [2, 4): windows [1, 2) 1, [2, 4) 2, [4, 5) 1."""
    stream: list[Element] = [Retract("a", 1, 8, 5), Retract("a", 1, 10, 8), Insert("b", 2, 4, {"g": "x"}),
                             Insert("a", 1, 10, {"g": "x"}), Cti(INF)]
    out, r = run(_query(SNAP, 20), stream)
    assert cht(out) == {(1, 2, '{"count":1,"g":"x"}'): 1, (2, 4, '{"count":2,"g":"x"}'): 1,
                        (4, 5, '{"count":1,"g":"x"}'): 1}
    assert r.dead_letters == []


def test_unmatched_past_the_horizon_or_a_cti_is_dead_lettered_with_its_reason() -> None:
    stream: list[Element] = [
        Retract("x", 3, 4, 3),  # its insert never comes: refused when the watermark (25, next line) > 3 + 10
        Retract("late", 20, 30, 25),  # a CTI above its sync time (25) comes first
        Insert("a", 5, 6, {"g": "x"}),
        Cti(26),
        Insert("b", 40, 41, {"g": "x"}),
        Retract("y", 50, 60, 55),  # waits until the end of input
        Retract("a2", 45, 47, 46),  # its insert arrives in time: repaired
        Insert("a2", 45, 47, {"g": "x"}),
    ]
    out, r = run(_query(SNAP, 10), stream)
    reasons = [(d.line, d.reason, d.category) for d in r.dead_letters]
    assert reasons == [
        (1, "retraction of unknown id 'x' (nothing matched it within the repair horizon (10 ticks))", "unknown_id"),
        (2, "retraction of unknown id 'late' (CTI 26 passed it)", "unknown_id"),
        (6, "retraction of unknown id 'y' (the input ended)", "unknown_id"),
    ]
    in_order = [e for e in stream if not (isinstance(e, Retract) and e.id in ("x", "late", "y", "a2"))]
    expected = oracle(parse_query(_query(SNAP, None)), [*in_order, Retract("a2", 45, 47, 46)])
    assert cht(out) == expected
    assert (r.stats.dead_lettered, r.stats.reasons["unknown_id"]) == (3, 3)


def test_mismatching_link_is_refused_as_a_mismatch() -> None:
    stream: list[Element] = [Insert("a", 1, 10, {"g": "x"}), Retract("a", 1, 7, 5), Cti(INF)]
    out, r = run(_query(SNAP, 100), stream)
    assert [d.reason for d in r.dead_letters] == [
        "retraction of 'a' says [1, 7) but the live event is [1, 10) (the input ended)"]
    assert cht(out) == oracle(parse_query(_query(SNAP, None)), stream[:1])


def test_error_policy_fails_on_an_unmatched_retraction() -> None:
    with pytest.raises(ViolationError, match="retraction of unknown id 'x'"):
        run(_query(SNAP, 5, on_violation="error"), [Retract("x", 1, 3, 2), Insert("a", 20, 21, {"g": "x"})])


def test_per_input_repair_and_spec_round_trip() -> None:
    spec = {"inputs": {"main": {"repair": {"horizon": "inf"}}}, "steps": [SNAP]}
    q = parse_query(spec)
    assert q.input_repair("main") is not None and q.input_repair("main").horizon == INF  # type: ignore[union-attr]
    assert q.to_json_dict()["inputs"]["main"]["repair"] == {"horizon": "inf"}
    assert parse_query(q.to_json_dict()) == q
    assert parse_query({"steps": [SNAP]}).input_repair("main") is None
    with pytest.raises(QuerySpecError, match="horizon"):
        parse_query({"repair": {"horizon": -1}, "steps": [SNAP]})
    with pytest.raises(QuerySpecError):
        parse_query({"repair": {"horizon": 5, "extra": 1}, "steps": [SNAP]})
    bind(q)


def test_snapshot_restore_keeps_waiting_retractions() -> None:
    from udm.host.engine import QueryRunner

    bq = bind(parse_query(_query(SNAP, "inf")))
    r = QueryRunner(bq)
    out = r.process(Retract("a", 1, 10, 4), 1)
    r2 = QueryRunner.restore(r.snapshot(), bq)
    out += r2.process(Insert("a", 1, 10, {"g": "x"}), 2) + r2.finish()
    assert cht(out) == {(1, 4, '{"count":1,"g":"x"}'): 1} and r2.dead_letters == []


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_spark_paths_repair_in_one_bucket(spark: Any, tmp_path: Any, engine: str) -> None:
    """A repaired input runs in one bucket on Spark: same CHT as the ordered stream's, same dead letters as
    the local engine's (finite horizon, so some retractions expire)."""
    import json

    from udm.host.query.runners import RunRequest, get_engine, run_local
    from udm.host.temporal.elements import parse_element
    from udm.host.testing.engine_conformance import write_stream

    stream = generate(seed=4, events=40, groups=3, speculation=0.7, chain=3, duration="mixed",
                      disorder="slightly", cti="regular")
    shuffled, moved = _overtake(stream, random.Random(4))
    shuffled = [*shuffled[:5], Retract("ghost", 1, 9, 4), *shuffled[5:]]  # never matched: a dead letter
    assert moved
    src = tmp_path / "in.jsonl"
    write_stream(src, shuffled)
    q = _query(HOP, 1000)

    def go(name: str) -> tuple[list[Any], list[str]]:
        out = tmp_path / f"{name}.jsonl"
        req = RunRequest(bind(parse_query(q)), src, out, tmp_path / f"{name}.dl.jsonl",
                         batch_size=7 if name == "spark-streaming" else None, checkpoint=None, options={})
        (run_local if name == "local" else get_engine(name))(req)
        els = [parse_element(json.loads(x)) for x in out.read_text().splitlines()]
        return els, sorted((tmp_path / f"{name}.dl.jsonl").read_text().splitlines())

    local_out, local_dead = go("local")
    out, dead = go(engine)
    assert cht(out) == cht(local_out) == oracle(parse_query(_query(HOP, None)), stream)
    assert dead == local_dead and len(dead) == 1 and "'ghost'" in dead[0]
