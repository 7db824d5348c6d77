"""Retractions of a key-routed query input go to every bucket, and the bucket holding their id's inserts
keeps them (`udm.host.spark.retract_route`).

References: a brute-force model of the buckets (which bucket holds which id) for the Spark-free rule, and
the local engine (one engine over the whole input) for the Spark plans' output CHT and dead letters, on
inputs with retractions of unknown ids (orphans), retractions before their insert, and ids reused after
deletion."""

from __future__ import annotations

import base64
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from spark_runs import collected, local_dead
from stage_queries import JOIN_THEN_WINDOW

from udm.host.model.spec import parse_query
from udm.host.spark.retract_route import keep_own_retractions, orphans
from udm.host.temporal.elements import Cti, Insert, Retract


def _bucket_table(rows: list[tuple[str, int | None]]) -> pa.Table:
    return pa.table({"kind": pa.array([k for k, _ in rows], pa.string()),
                     "_idh": pa.array([h for _, h in rows], pa.int64()),
                     "line": pa.array(range(len(rows)), pa.int64())})


@pytest.mark.parametrize("seed", range(20))
def test_each_retraction_is_kept_by_the_bucket_of_its_inserts_and_orphans_are_found(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 5)
    home = {h: rng.randrange(n) for h in range(rng.randint(0, 30))}  # id hash -> the bucket of its inserts
    orphan_ids = set(range(100, 100 + rng.randint(0, 4)))
    retracted = [rng.choice(sorted(home)) for _ in range(rng.randint(0, 20)) if home] + sorted(orphan_ids)
    buckets: list[list[tuple[str, int | None]]] = [[] for _ in range(n)]
    for h, b in home.items():
        buckets[b] += [("insert", h)] * rng.randint(1, 2)
    for b in range(n):  # every bucket gets every retraction and CTI; bad rows (no id) stay where they are
        buckets[b] += [("retract", h) for h in retracted] + [("cti", None)]
    buckets[0].append(("retract", None))
    for rows in buckets:
        rng.shuffle(rows)
    kept_by: dict[int, list[int]] = {}
    reports, ids = [], []
    for b, rows in enumerate(buckets):
        table, unmatched = keep_own_retractions(_bucket_table(rows), report=b == 0)
        assert (unmatched is not None) == (b == 0)
        if unmatched is not None:
            reports.append(unmatched)
        kinds, hashes = table.column("kind").to_pylist(), table.column("_idh").to_pylist()
        assert kinds.count("insert") == sum(1 for k, _ in rows if k == "insert")
        no_id = sum(1 for k, h in zip(kinds, hashes, strict=True) if k == "retract" and h is None)
        assert kinds.count("cti") == 1 and no_id == (b == 0)
        for k, h in zip(kinds, hashes, strict=True):
            if k == "retract" and h is not None:
                kept_by.setdefault(h, []).append(b)
        inserted = np.unique([h for k, h in rows if k == "insert"]).astype(np.int64)
        ids.append(base64.b64encode(inserted.tobytes()).decode())
    for h in set(retracted):
        copies = retracted.count(h)
        assert kept_by.get(h, []) == ([] if h in orphan_ids else [home[h]] * copies)
    assert orphans(reports, ids) == sorted(orphan_ids)


@pytest.mark.parametrize("seed", range(10))
def test_orphans_are_the_dropped_hashes_no_bucket_holds_over_the_whole_int64_range(seed: int) -> None:
    """`orphans` against sets: hashes anywhere in int64 (xxhash64 is signed), empty buckets, repeats."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(-(2**63), 2**63 - 1, size=400, dtype=np.int64, endpoint=True)
    pool[:2] = (-(2**63), 2**63 - 1)
    held = [np.unique(rng.choice(pool, size=int(rng.integers(0, 120)))) for _ in range(int(rng.integers(1, 5)))]
    dropped = [rng.choice(pool, size=int(rng.integers(0, 60))) for _ in range(int(rng.integers(1, 3)))]
    blob = lambda a: base64.b64encode(np.asarray(a, np.int64).tobytes()).decode()  # noqa: E731
    known = {int(x) for h in held for x in h}
    expected = sorted({int(x) for d in dropped for x in d} - known)
    assert orphans([blob(d) for d in dropped], [blob(h) for h in held]) == expected


def _streams() -> dict[str, list[Any]]:
    """Both inputs keyed by ``k``: retractions without payload, one of an id never inserted (an orphan), one
    before its insert, an id reused after its deletion, and CTIs."""
    a = [Insert("a1", 1, 9, {"k": 1, "v": 3}), Insert("a2", 2, 8, {"k": 2, "v": 3}), Retract("zz", 1, 5, 3),
         Retract("a3", 3, 9, 4), Insert("a3", 3, 9, {"k": 3, "v": 4}), Retract("a1", 1, 9, 4),
         Insert("a4", 4, 12, {"k": 4, "v": 5}), Retract("a2", 2, 8, 2), Cti(2),
         Insert("a2", 6, 10, {"k": 2, "v": 5}), Retract("a2", 6, 10, 7), Retract("q", 5, 6, 5), Cti(5)]
    b = [Insert("b1", 0, 20, {"k": 1}), Insert("b2", 1, 20, {"k": 2}), Insert("b3", 2, 20, {"k": 3}),
         Retract("b3", 2, 20, 11), Insert("b4", 3, 20, {"k": 4}), Retract("nope", 3, 4, 3), Cti(6)]
    return {"a": a, "b": b}


@pytest.mark.spark
@pytest.mark.parametrize("violation", ["dead_letter", "error"])
def test_staged_plan_routes_retractions_as_one_engine_sees_them(spark: Any, violation: str) -> None:
    from udm.host.engine import QueryRunner
    from udm.host.errors import UdmError
    from udm.host.model.plan import bind
    from udm.host.spark.convert import elements_df
    from udm.host.spark.graph import run_graph_batch
    from udm.host.testing.cht import cht

    spec = parse_query(dict(JOIN_THEN_WINDOW, on_violation=violation))
    streams = _streams()
    local = QueryRunner(bind(spec))
    if violation == "error":
        with pytest.raises(UdmError):
            local.run_all(streams)
        with pytest.raises(UdmError, match="unknown id"):
            run_graph_batch(spec, {n: elements_df(spark, s) for n, s in streams.items()}, buckets=3).unpersist()
        return
    expected = local.run_all(streams)
    out, dead = collected(run_graph_batch(spec, {n: elements_df(spark, s) for n, s in streams.items()}, buckets=3),
                          "staged")
    assert cht(out) == cht(expected)
    assert dead == local_dead(local)
    assert any("unknown id 'zz'" in r for _, _, r in dead)


@pytest.mark.spark
def test_key_buckets_route_retractions_as_one_engine_sees_them(spark: Any) -> None:
    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import elements_df
    from udm.host.testing.cht import cht

    spec = parse_query({"steps": [{"id": "w", "op": "window", "window": {"type": "tumbling", "size": 4},
                                   "group_by": ["k"], "udm": "sum", "input": "v", "as": "s"}]})
    stream = _streams()["a"]
    local = QueryRunner(bind(spec))
    expected = local.run_all({spec.input_names[0]: stream})
    fields = ("line", "reason")
    out, dead = collected(run_batch(spec, elements_df(spark, stream), buckets=3, algebraic=False), "keys", fields)
    assert cht(out) == cht(expected)
    assert dead == local_dead(local, fields)
    assert any("unknown id 'zz'" in r for _, r in dead)
