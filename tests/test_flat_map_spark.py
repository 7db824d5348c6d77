"""``flat_map`` (``explode``) on the Spark engines: the same output CHT as the kit's oracle and as the local
engine, the same dead letters (malformed payloads, retractions of refused events), on streams with disorder,
retraction chains, CTIs and bad lines; and how the Spark plans route it (a flat_map passes no routing field,
needs no rows together, and is split by id or cut into stages rather than run in one bucket)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.spark.graph import is_graph
from udm.host.spark.partition import BY_ID, graph_routing, partition_keys
from udm.host.spark.stage_replay import StagedReplay
from udm.host.spark.stages import plan_stages
from udm.host.temporal.elements import Insert, parse_element
from udm.host.testing import assert_equivalent, oracle
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate
from udm.sdk import INF

EXPLODE = {"op": "flat_map", "udm": "explode", "params": {"field": "tags", "as": "tag"}}
QUERIES: dict[str, list[dict[str, Any]]] = {
    "explode": [EXPLODE],
    "explode_then_count_per_tag": [EXPLODE, {"op": "window", "window": {"type": "tumbling", "size": 10},
                                             "group_by": ["tag"], "udm": "count", "as": "n"}],
    "topk_then_explode": [{"op": "window", "window": {"type": "hopping", "size": 10, "hop": 5}, "group_by": ["g"],
                           "udm": "topk", "params": {"k": 2, "by": "v"}},
                          {"op": "flat_map", "udm": "explode", "params": {"field": "tags"}}],
}


def test_routing_of_chains_with_a_flat_map() -> None:
    """No stateful step: by id. A window after it: its key is not the input's (the UDO may rewrite it), so two
    stages (by id, then by ``tag``). A window before it: one stage keyed by the window's key."""
    spec = {name: parse_query({"steps": steps}) for name, steps in QUERIES.items()}
    assert graph_routing(spec["explode"]) == BY_ID
    stages = plan_stages(spec["explode_then_count_per_tag"])
    assert [(s.routing, [n.op for n in s.nodes]) for s in stages] == [(BY_ID, ["flat_map"]),
                                                                       ({"s0": ["tag"]}, ["window"])]
    assert graph_routing(spec["topk_then_explode"]) == {"main": ["g"]}
    assert partition_keys(spec["topk_then_explode"]) == ["g"]
    assert all(is_graph(s) for s in spec.values())  # the graph plans take chains with a flat_map
    assert not is_graph(parse_query({"steps": QUERIES["explode_then_count_per_tag"][1:]}))


def _stream(seed: int) -> list[Any]:
    """Orders of tags (some not a list: malformed), with disorder, retractions, duplicates and bad lines.
    Lifetimes are finite: a staged streaming plan whose last stage is a tumbling window over endless events
    does not finish today, with or without a flat_map before it (a project does the same)."""
    rng = random.Random(seed)
    out = []
    for el in generate(seed=seed, events=30, groups=3, duration="long", speculation=0.4, disorder="slightly",
                       cti="regular", bad=0.05):
        if isinstance(el, Insert) and isinstance(el.payload, dict):
            p = {**el.payload, "tags": [f"t{j}" for j in range(rng.randint(0, 3))]}
            if rng.random() < 0.1:
                p["tags"] = "t0" if rng.random() < 0.5 else None
            el = Insert(el.id, el.le, el.re, p)
        out.append(el)
    return out


@pytest.mark.parametrize("per_key", [True, False])
def test_the_staged_streaming_plan_equals_the_oracle(per_key: bool) -> None:
    """The Structured Streaming stages of explode-then-count, replayed micro-batch by micro-batch without
    Spark (`StagedReplay`): by id, then per tag; the output CHT is the oracle's, the output CTI ends at INF."""
    spec = parse_query({"steps": QUERIES["explode_then_count_per_tag"]})
    elements = _stream(3)
    results = StagedReplay(spec, 2, per_key=per_key).run([("main", i, e) for i, e in enumerate(elements, 1)], 9)
    out = [el for b in results for el in b.out]
    assert_equivalent(out, oracle(bind(spec), elements))
    assert results[-1].cti == INF
    assert any("malformed payload for UDM explode" in d[2] for b in results for d in b.dead)


def _dead(path: Path) -> list[str]:
    """Dead letters as compared: an element made inside the graph (a window's output: no line) carries the
    id its engine gave it, which differs between one engine and per-bucket ones; the rest must agree."""
    recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    for r in recs:
        if r["line"] is None and r["element"] is not None:
            r["element"].pop("id", None)
    return sorted(json.dumps(r, sort_keys=True) for r in recs)


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_flat_map_equals_the_oracle_and_the_local_engine(spark: Any, tmp_path: Path, engine: str, name: str) -> None:
    elements = _stream(7)
    src = tmp_path / "in.jsonl"
    write_stream(src, elements)
    bound = bind(parse_query({"steps": QUERIES[name]}))
    reference = oracle(bound, elements)
    assert reference.rows(), "the query should produce something"
    local_out, out = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    local = run_local(RunRequest(bound, src, local_out, local_out.with_suffix(".dl.jsonl")))
    opts = {"buckets": 2}
    res = get_engine(engine)(RunRequest(bound, src, out, out.with_suffix(".dl.jsonl"), options=opts,
                                        batch_size=9 if engine == "spark-streaming" else None))
    assert_equivalent(_read(out), reference)
    assert cht(_read(out)) == cht(_read(local_out))
    dead = _dead(out.with_suffix(".dl.jsonl"))
    assert dead == _dead(local_out.with_suffix(".dl.jsonl"))
    assert any("malformed payload for UDM explode" in d for d in dead)
    assert res.dead_lettered == local.dead_lettered
