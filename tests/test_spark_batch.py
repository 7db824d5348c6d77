"""The Spark batch path against the reference oracle: same scenarios, same oracle as the local engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.errors import ViolationError
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import cht_df, collect_elements, elements_df
from udm.host.testing.cht import CHT
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = pytest.mark.spark


def _w(window: dict[str, Any], udm: str, **kw: Any) -> dict[str, Any]:
    return {"op": "window", "window": window, "udm": udm, **kw}


QUERIES: dict[str, dict[str, Any]] = {
    "tumbling_sum_by_g": {"steps": [_w({"type": "tumbling", "size": 10}, "sum", input="v", group_by=["g"])]},
    "hopping_median_by_g": {"steps": [_w({"type": "hopping", "size": 10, "hop": 5}, "median", input="v",
                                         group_by=["g"])]},
    "snapshot_count_keyless": {"steps": [_w({"type": "snapshot"}, "count")]},
    "count_by_start_avg": {"steps": [_w({"type": "count_by_start", "n": 3}, "avg", input="v", group_by=["g"])]},
    "topk_udo": {"steps": [_w({"type": "tumbling", "size": 20}, "topk", params={"k": 2, "by": "v"},
                              group_by=["g"])]},
    "filter_then_twa_full_clip": {"steps": [
        {"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 10, "hi": 90}},
        _w({"type": "tumbling", "size": 15}, "twa", input="v", clip="full", group_by=["g"])]},
}


def _stream(seed: int) -> list[Any]:
    return generate(seed=seed, events=60, groups=4, duration="mixed", speculation=0.3, disorder="slightly",
                    bad=0.1)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_batch_matches_oracle(spark: Any, name: str) -> None:
    query = parse_query(QUERIES[name])
    stream = _stream(seed=len(name))
    expected = oracle_run(bind(query), stream)
    run = run_batch(query, elements_df(spark, stream))
    try:
        out = collect_elements(run.output)
        verdict = verify(out, expected.cht)
        assert verdict, f"{name}: {verdict}"
        # the native CHT helper agrees with the reference CHT of the same output
        native = CHT.from_events((r["le"], r["re"], json.loads(r["payload"])) for r in cht_df(run.output).collect())
        assert verify(native, expected.cht), name
        dead = sorted(r["line"] for r in run.dead_letters.collect())
        assert dead == sorted(rej.index + 1 for rej in expected.rejected)
        assert run.buckets == (1 if name.endswith("keyless") else 2)
    finally:
        run.unpersist()


def test_on_violation_error_fails_with_engine_message(spark: Any) -> None:
    stream = generate(seed=3, events=20, groups=2, bad=0.2, bad_kinds=("unknown_retract",))
    with pytest.raises(ViolationError):
        run_batch(QUERIES["tumbling_sum_by_g"] | {"on_violation": "error"}, elements_df(spark, stream))


def test_cli_engine_spark_equals_local(spark: Any, tmp_path: Path) -> None:
    from udm.host.io.jsonl import read_jsonl_elements, write_jsonl
    from udm.host.query.runners import RunRequest, get_engine, run_local

    stream = _stream(seed=11)
    src = tmp_path / "in.jsonl"
    write_jsonl(src, stream)
    bound = bind(parse_query(QUERIES["hopping_median_by_g"]))
    runs = {}
    for engine in ("local", "spark"):
        run = run_local if engine == "local" else get_engine("spark")
        res = run(RunRequest(bound, src, tmp_path / f"{engine}.jsonl", tmp_path / f"{engine}.dl.jsonl"))
        out = [e for _, e in read_jsonl_elements(tmp_path / f"{engine}.jsonl")]
        dl = sorted(json.loads(x)["line"] for x in (tmp_path / f"{engine}.dl.jsonl").read_text().splitlines())
        runs[engine] = (out, dl, res.dead_lettered, res.reasons)
    assert verify(runs["spark"][0], runs["local"][0])
    assert runs["spark"][1] == runs["local"][1] and runs["spark"][2] == runs["local"][2]
    # the summary counts dead letters by the same categories on both engines
    assert runs["spark"][3] == runs["local"][3] and sum(runs["local"][3].values()) == runs["local"][2] > 0
