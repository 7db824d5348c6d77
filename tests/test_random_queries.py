"""Random queries against the oracle: window steps drawn from every window type, first-party UDA, UDO and
time-sensitive UDM, clip and output policy, progressive output and ``max_delay``; and small query graphs
(union, join, left anti-join, then alter_lifetime, project, align, finalize, flat_map or a window). Each
runs over a generated stream (disorder, retraction chains, duplicates, CTI eagerness, int or float values)
fed to the local engine in random slices (one element, a few, a batch, all), and on Spark for a few seeds;
its output must have the oracle's CHT (`udm.host.testing.verifier`).

The grammar is wider than what binds: a draw the query model or the oracle refuses (a UDA with
``output: clip``, a finalize the oracle cannot decide) is skipped, and each block asserts that most of its
draws ran. A failure prints the seed and the query's JSON, which reproduce it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.errors import UdmError
from udm.host.model.plan import bind
from udm.host.model.spec import QuerySpec, parse_query
from udm.host.testing import oracle
from udm.host.testing.engine_conformance import registered_engine
from udm.host.testing.generator import generate, generate_related, interleave
from udm.host.testing.oracle_steps import OracleUndecidable
from udm.host.testing.verifier import verify

UDAS = ("sum", "count", "min", "max", "avg", "median", "variance", "twa", "approx_distinct")
UDOS = ("members", "follows", "topk")


def _window(r: random.Random) -> dict[str, Any]:
    kind = r.choice(["tumbling", "hopping", "cumulate", "snapshot", "count_by_start", "count_by_end", "rows",
                     "session"])
    if kind == "tumbling":
        return {"type": kind, "size": r.choice([1, 2, 3, 5, 10, 20]), "offset": r.choice([0, 0, 1, 3])}
    if kind == "hopping":
        size = r.choice([2, 4, 5, 10, 20])
        return {"type": kind, "size": size, "hop": r.choice([1, 2, size, size + 1]), "offset": r.choice([0, 2])}
    if kind == "cumulate":
        step = r.choice([1, 2, 5])
        return {"type": kind, "size": step * r.choice([1, 2, 4]), "step": step, "offset": r.choice([0, 1])}
    if kind == "snapshot":
        return {"type": kind}
    if kind in ("count_by_start", "count_by_end"):
        return {"type": kind, "n": r.choice([1, 2, 3, 5]), "hop": r.choice([1, 1, 2])}
    if kind == "rows":
        return {"type": kind, "n": r.choice([1, 2, 3, 5]), "slide": r.choice([1, 1, 2]), "partial": r.random() < 0.3}
    return {"type": kind, "gap": r.choice([0, 1, 3, 10])}


def _udm_call(r: random.Random, udm: str, field: str) -> dict[str, Any]:
    """The UDM's part of a window step: its input, output field and parameters."""
    if udm in UDOS:
        params = {"follows": {"field": "type", "a": "A", "b": "B"}, "topk": {"k": 2, "by": field}}
        return {"udm": udm, **({"params": params[udm]} if udm in params else {})}
    return {"udm": udm, "as": "x", **({} if udm == "count" else {"input": field})}


def window_query(r: random.Random) -> dict[str, Any]:
    step: dict[str, Any] = {"op": "window", "window": _window(r), "group_by": r.choice([[], ["g"]]),
                            **_udm_call(r, r.choice(UDAS + UDOS), "v")}
    if r.random() < 0.4:
        step["clip"] = r.choice(["none", "left", "right", "full"])
    if r.random() < 0.4:
        step["output"] = r.choice(["window", "unaltered", "clip", "time_bound"])
    if r.random() < 0.15:
        step["early"] = r.choice([0, 3])
    if r.random() < 0.15:
        step["max_delay"] = r.choice([1, 5])
    return {"steps": [step]}


def window_stream(r: random.Random, seed: int) -> list[Any]:
    return generate(seed=seed, events=r.choice([10, 30, 80]), duration=r.choice(["point", "short", "long", "mixed"]),
                    overlap=r.choice(["high", "medium", "low"]),
                    disorder=r.choice(["in_order", "slightly", "out_of_order", "highly"]),
                    cti=r.choice(["lazy", "regular", "eager"]), speculation=r.choice([0.0, 0.2, 0.5]),
                    chain=r.choice([1, 2, 3]), groups=r.choice([1, 3]), types=("A", "B", "C"),
                    values=r.choice(["int", "float"]), duplicates=r.choice([0.0, 0.1]))


def _after(r: random.Random, src: str, name: str) -> dict[str, Any]:
    """One single-input step reading ``src``."""
    step: dict[str, Any] = {"id": name, "from": src}
    op = r.choice(["alter_lifetime", "project", "align", "finalize", "flat_map", "window", "window"])
    if op == "alter_lifetime":
        le = r.choice(["keep", {"shift": r.choice([-3, 2])}, {"snap": {"size": r.choice([2, 5])}}])
        duration = r.choice([{"const": r.choice([1, 4, 10])}, "inf"] + (["keep"] if le == "keep" else []))
        step.update(op=op, le=le, duration=duration)
    elif op == "project":
        step.update(op=op, set={"tag": r.choice([1, "z"])})
    elif op == "align":
        step.update(op=op, max_delay=r.choice([0, 3, 10]))
    elif op == "finalize":
        step.update(op=op, max_memory_time=r.choice([5, 20, 100]))
    elif op == "flat_map":
        step.update(op=op, udm="explode", params={"field": "v"})
    else:
        udm = r.choice(["count", "sum", "min", "max", "avg", "median", "members"])
        step.update(op="window", window=_window(r), group_by=r.choice([[], ["k"]]), **_udm_call(r, udm, "v"))
        if udm != "members":
            step["as"] = "v"  # (what follows reads ``v`` again)
    return step


def graph_query(r: random.Random) -> dict[str, Any]:
    shape = r.choice(["one", "union", "join", "left_anti"])
    steps: list[dict[str, Any]] = []
    src = "a"
    if shape == "union":
        steps.append({"id": "u", "op": "union", "from": ["a", "b"], "distinct": r.random() < 0.3})
        src = "u"
    elif shape != "one":
        steps.append({"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "r_",
                      "type": "inner" if shape == "join" else "left_anti"})
        src = "j"
    for i in range(r.choice([0, 1, 1, 2]) if steps else r.choice([1, 2])):
        steps.append(_after(r, src, f"x{i}"))
        src = steps[-1]["id"]
    return {"inputs": {"a": {}, "b": {}}, "steps": steps, "output": src}


def graph_streams(r: random.Random, seed: int) -> dict[str, list[Any]]:
    return generate_related(2, seed=seed, keys=r.choice([1, 3]), events=r.choice([10, 30, 60]),
                            duration=r.choice(["point", "short", "long", "mixed"]),
                            disorder=r.choice(["in_order", "slightly", "out_of_order"]),
                            cti=r.choice(["lazy", "regular", "eager"]), speculation=r.choice([0.0, 0.3]),
                            values=r.choice(["int", "float"]), key_type=r.choice(["str", "num"]))


def _case(kind: str, seed: int) -> tuple[dict[str, Any], QuerySpec, Any, Any] | None:
    """The seed's query, its spec, input and the oracle's CHT; None when the draw does not bind or the
    oracle cannot decide it."""
    r = random.Random(seed)
    query = window_query(r) if kind == "window" else graph_query(r)
    try:
        spec = parse_query(query)
        bind(spec)
    except UdmError:
        return None
    data = window_stream(r, seed) if kind == "window" else graph_streams(r, seed)
    try:
        expected = oracle(spec, data)
    except (UdmError, OracleUndecidable):
        return None
    return query, spec, data, expected


def _local(spec: QuerySpec, data: Any, r: random.Random) -> list[Any]:
    """The local engine over ``data`` in random slices (a graph's inputs interleaved in a random way)."""
    runner = QueryRunner(bind(spec))
    out: list[Any] = []
    if isinstance(data, dict):
        for line, (name, el) in enumerate(interleave(data, how=r.choice(["sync", "random", "sequential"]),
                                                     seed=r.randrange(1000)), 1):
            out += runner.process(el, line, name) or []
        return out + runner.finish()
    at = 0
    while at < len(data):
        size = r.choice([1, 2, 7, 64, len(data)])
        out += runner.process_many(data[at:at + size])
        at += size
    return out + runner.finish()


def _check_block(kind: str, seeds: range, run: Any) -> None:
    failures: list[str] = []
    ran = 0
    for seed in seeds:
        case = _case(kind, seed)
        if case is None:
            continue
        query, spec, data, expected = case
        ran += 1
        try:
            got = run(spec, data, random.Random(-seed))
        except Exception as exc:  # every failure of the block is reported, not only the first
            failures.append(f"seed {seed}: {json.dumps(query)} raised {type(exc).__name__}: {exc}")
            continue
        report = verify(got, expected)
        if not report:
            failures.append(f"seed {seed}: {json.dumps(query)}\n{report}")
    assert not failures, "\n\n".join(failures)
    assert ran >= len(seeds) // 2, f"only {ran} of {len(seeds)} draws bound and were decidable"


@pytest.mark.parametrize("start", range(0, 600, 100))
def test_window_queries_on_the_local_engine_equal_the_oracle(start: int) -> None:
    _check_block("window", range(start, start + 100), _local)


@pytest.mark.parametrize("start", range(0, 400, 100))
def test_query_graphs_on_the_local_engine_equal_the_oracle(start: int) -> None:
    _check_block("graph", range(start, start + 100), _local)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["window", "graph"])
def test_random_queries_on_spark_batch_equal_the_oracle(spark: Any, kind: str) -> None:
    engine = registered_engine("spark")
    _check_block(kind, range(1000, 1012), lambda spec, data, _r: engine(spec, data))
