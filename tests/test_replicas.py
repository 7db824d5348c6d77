"""High availability and cutover by logical merge (`ReplicaMerge`, seeds/001 §II and §V.B).

HA: two replicas of one query read physically different copies of the input (another arrival order, other
retractions and CTIs), each running on its own engine; one is killed mid-stream (it stops, its output stops
mid-way, the merge is told). The merged output's CHT must be the oracle's for the uninterrupted query.
Cutover: an old plan runs; a new, equivalent plan starts late, replays the input from the start, joins, and
once it has caught up the old one is killed — the merged CHT is again the oracle's."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.query.replicas import ReplicaMerge
from udm.host.query.runners import RunRequest, get_engine
from udm.host.temporal.elements import parse_element
from udm.host.testing import cht, generate, oracle, physical_variants
from udm.host.testing.engine_conformance import write_stream

COUNT = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "count", "as": "n"}]}
# the same meaning (every generated v is a number), another plan: a filter, hopping windows with hop = size
NEW_PLAN = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}},
                      {"op": "window", "window": {"type": "hopping", "size": 10, "hop": 10}, "group_by": ["g"],
                       "udm": "count", "as": "n"}]}


def query(data: dict[str, Any]) -> BoundQuery:
    return bind(parse_query(data))


def stream(seed: int) -> list[Any]:
    # finite lifetimes: T (semantics-notes 2) then does not depend on the physical copy a replica reads
    return generate(seed=seed, events=60, groups=3, duration="long", disorder="slightly", speculation=0.3,
                    cti="regular")


def run_replica(bq: BoundQuery, elements: list[Any], merge: ReplicaMerge, name: str, upto: int | None) -> None:
    """One local replica, element by element; it dies after ``upto`` input elements (None: it finishes)."""
    runner = QueryRunner(bq)
    for i, el in enumerate(elements):
        if upto is not None and i == upto:
            merge.kill(name)
            return
        merge.feed(name, runner.process(el))
    merge.feed(name, runner.finish())


@pytest.mark.parametrize("victim", ["r0", "r1"])
def test_ha_kill_one_replica_mid_stream(victim: str) -> None:
    bq = query(COUNT)
    for seed in range(60):
        base = stream(seed)
        copies = physical_variants(base, 2, seed=seed)  # each replica reads its own physical copy
        merge = ReplicaMerge(bq, ["r0", "r1"])
        assert merge.algorithm == "R3"  # a grouped count: (LE, payload) is a key
        kill_at = random.Random(seed).randrange(len(copies[0]) + 1)
        # the replicas progress side by side; the victim dies at kill_at
        runners = {r: QueryRunner(bq) for r in ("r0", "r1")}
        feeds = dict(zip(("r0", "r1"), copies, strict=True))
        for i in range(max(len(c) for c in copies)):
            for r, runner in runners.items():
                if r == victim and i == kill_at:
                    merge.kill(r)
                if r in merge.killed or i >= len(feeds[r]):
                    continue
                merge.feed(r, runner.process(feeds[r][i]))
        for r, runner in runners.items():
            if r not in merge.killed:
                merge.feed(r, runner.finish())
        merge.finish()
        assert cht(merge.output) == oracle(bq, base), (seed, victim, kill_at)


def test_cutover_to_a_new_plan() -> None:
    old, new = query(COUNT), query(NEW_PLAN)
    for seed in range(40):
        base = stream(seed)
        elements = physical_variants(base, 1, seed=seed)[0]
        merge = ReplicaMerge(old, ["old", "new"])
        merge.kill("new")  # not running yet
        switch = random.Random(seed).randrange(len(elements) + 1)
        v1 = QueryRunner(old)
        for el in elements[:switch]:
            merge.feed("old", v1.process(el))
        # the new plan starts now, replays the input from its start, and joins from the current merged CTI
        merge.join("new")
        v2 = QueryRunner(new)
        for i, el in enumerate(elements):
            merge.feed("new", v2.process(el))
            if i + 1 < len(elements) - switch and "old" not in merge.killed:
                merge.feed("old", v1.process(elements[switch + i]))  # the old plan keeps running meanwhile
            if "old" not in merge.killed and merge.caught_up("new"):
                merge.kill("old")  # cut over
        merge.feed("new", v2.finish())
        merge.finish()
        assert cht(merge.output) == oracle(old, base), (seed, switch)


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_ha_local_replica_killed_while_a_spark_replica_carries_on(spark: Any, tmp_path: Path, engine: str) -> None:
    bq = query(COUNT)
    base = stream(5)
    copies = physical_variants(base, 2, seed=5)
    write_stream(tmp_path / "in.jsonl", copies[1])
    get_engine(engine)(RunRequest(bq, tmp_path / "in.jsonl", tmp_path / "spark.jsonl", tmp_path / "dl.jsonl",
                                  options={"buckets": 2}))
    merge = ReplicaMerge(bq, ["local", "spark"])
    spark_out = _read(tmp_path / "spark.jsonl")
    half = len(spark_out) // 2
    merge.feed("spark", spark_out[:half])  # the Spark replica's first micro-batches
    run_replica(bq, copies[0], merge, "local", upto=len(copies[0]) // 2)  # the local one dies half-way
    merge.feed("spark", spark_out[half:])
    merge.finish()
    assert "local" in merge.killed
    assert cht(merge.output) == oracle(bq, base)


def test_ha_with_udm_run_over_replica_output_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The file-level recipe: each replica wrote its output file, one of them died half-way (its file stops
    mid-stream, without cti(inf)); ``udm run`` of an lmerge over the files gives the uninterrupted answer."""
    import yaml
    from cli_harness import udm

    bq = query(COUNT)
    base = stream(8)
    copies = physical_variants(base, 2, seed=8)
    outs = []
    for i, copy in enumerate(copies):
        runner = QueryRunner(bq)
        if i == 0:  # dies half-way through its input
            outs.append([e for el in copy[: len(copy) // 2] for e in runner.process(el)])
        else:
            outs.append(runner.run_all(copy))
    for i, out in enumerate(outs):
        write_stream(tmp_path / f"r{i}.jsonl", out)
    (tmp_path / "merge.yaml").write_text(yaml.safe_dump(
        {"inputs": {"r0": {}, "r1": {}}, "steps": [{"id": "m", "op": "lmerge", "from": ["r0", "r1"]}]}))
    code, _, err = udm(capsys, "run", str(tmp_path / "merge.yaml"), "--input", f"r0={tmp_path / 'r0.jsonl'}",
                       "--input", f"r1={tmp_path / 'r1.jsonl'}", "-o", str(tmp_path / "merged.jsonl"))
    assert code == 0, err
    assert cht(_read(tmp_path / "merged.jsonl")) == oracle(bq, base)
