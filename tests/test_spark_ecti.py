"""External CTIs (``ecti``, SEMANTICS §11) on the Spark engines: an input file holding ECTIs runs in one bucket
(each range counts the whole input, a key bucket would see part of it), through the same input gate as the
local engine. The output — including where each effective CTI comes out — and the dead letters are the local
engine's, and the CHT is the oracle's."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.spark.file_source import may_hold_ecti, scan_file
from udm.host.temporal.elements import Cti, Ecti, Element, Insert, Retract, parse_element, sync_time
from udm.host.testing import oracle
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate
from udm.sdk import INF

pytestmark = pytest.mark.spark

KEYED = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "group_by": ["g"], "udm": "count",
                    "as": "n"}]}
GRAPH = {"inputs": {"a": {}, "b": {}}, "steps": [
    {"id": "u", "op": "union", "from": ["a", "b"]},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 5}, "group_by": ["g"], "udm": "count",
     "as": "n"}]}


def with_ectis(els: list[Element], width: int, seed: int) -> list[Element]:
    """Plain CTIs dropped; one exact ECTI per ``width`` ticks of sync time, each before its range's data, and
    one wrong one (a surplus element follows) for the dead letters."""
    rng = random.Random(seed)
    body = [e for e in els if not isinstance(e, Cti)]
    syncs = [sync_time(e) for e in body if isinstance(e, (Insert, Retract))]
    out: list[Element] = list(body)
    for k in range(min(syncs) // width, max(syncs) // width + 1):
        a = k * width
        n = sum(1 for s in syncs if a <= s < a + width)
        first = next((i for i, e in enumerate(out)
                      if isinstance(e, (Insert, Retract)) and a <= sync_time(e) < a + width), len(out))
        out.insert(rng.randint(0, first), Ecti(a, a + width, n if k % 4 else max(0, n - 1)))
    return [*out, Cti(INF)]


def stream(seed: int) -> list[Element]:
    els = with_ectis(generate(seed=seed, events=40, groups=3, disorder="out_of_order", speculation=0.3,
                              cti="none"), 6, seed)
    # and a surplus for sure: [1010, 1020) complete while [1000, 1010) is not, then one element more
    tail = [Ecti(1000, 1010, 1), Ecti(1010, 1020, 1), Insert("z1", 1015, 1016, {"g": "k0"}),
            Insert("z2", 1016, 1017, {"g": "k1"}), Insert("z0", 1005, 1006, {"g": "k2"})]
    return [*els[:-1], *tail, els[-1]]


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _run(engine: str, query: dict[str, Any], source: Any, out: Path) -> Any:
    # batches of 10 elements (local read chunks, streaming micro-batches): output CTIs come between them
    req = RunRequest(bind(parse_query(query)), source, out, out.with_suffix(".dl.jsonl"), batch_size=10,
                     options={"buckets": 2})
    return (run_local if engine == "local" else get_engine(engine))(req)


def test_scan_sees_ectis(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    write_stream(p, stream(1))
    assert scan_file(p, 2).ectis and may_hold_ecti(p)
    write_stream(p, [Insert("a", 1, 2, {}), Cti(3)])
    assert not scan_file(p, 2).ectis and not may_hold_ecti(p)


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_keyed_query_over_an_input_with_ectis(spark: Any, tmp_path: Path, engine: str) -> None:
    els = stream(7)
    src = tmp_path / "in.jsonl"
    write_stream(src, els)
    _run("local", KEYED, src, tmp_path / "local.jsonl")
    res = _run(engine, KEYED, src, tmp_path / "spark.jsonl")
    local, got = _read(tmp_path / "local.jsonl"), _read(tmp_path / "spark.jsonl")
    assert cht(got) == cht(local) == oracle(parse_query(KEYED), els)
    # the effective CTIs make output final between batches (Spark batch runs each bucket as one batch)
    assert len([e for e in local if isinstance(e, Cti)]) > 2
    if engine == "spark-streaming":
        assert len([e for e in got if isinstance(e, Cti)]) > 2
    dead = sorted((tmp_path / "spark.dl.jsonl").read_text().splitlines())
    assert dead == sorted((tmp_path / "local.dl.jsonl").read_text().splitlines())
    assert any("surplus for the ECTI" in d for d in dead)
    assert res.dead_lettered == len(dead)


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_graph_with_an_ecti_input(spark: Any, tmp_path: Path, engine: str) -> None:
    streams = {"a": stream(3), "b": generate(seed=4, events=30, groups=3, disorder="slightly", cti="regular")}
    files = {}
    for n, els in streams.items():
        files[n] = tmp_path / f"{n}.jsonl"
        write_stream(files[n], els)
    _run("local", GRAPH, files, tmp_path / "local.jsonl")
    _run(engine, GRAPH, files, tmp_path / "spark.jsonl")
    got = cht(_read(tmp_path / "spark.jsonl"))
    assert got == cht(_read(tmp_path / "local.jsonl")) == oracle(parse_query(GRAPH), streams)
    assert sorted((tmp_path / "spark.dl.jsonl").read_text().splitlines()) == \
        sorted((tmp_path / "local.dl.jsonl").read_text().splitlines())
