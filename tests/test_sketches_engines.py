"""udm-sketches on every engine: windows on the local engine (tumbling, hopping with panes, snapshot,
session, rows), two-phase on Spark (partial + final) and the engine path it falls back to on retractions,
and Structured Streaming (state in the state store). Each run is compared with the kit's oracle or the
local engine on the same input, retractions included: exactly while the sketches are exact, exactly for
``approx_distinct`` however large (its estimate is a function of the set of values), and against exact
answers within the declared bound for the others."""

from __future__ import annotations

import json
import random
from bisect import bisect_left, bisect_right
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import check_physical, gen_stream, run, table, window_query

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.temporal.elements import Cti, Element, Insert, Retract, parse_element
from udm.host.testing import oracle, verify
from udm.host.testing.engine_conformance import write_stream
from udm.sdk import INF
from udm_sketches import ApproxQuantile, FrequentItems

SKETCHES = [("approx_distinct", {}), ("approx_quantile", {"qs": [0.0, 0.5, 1.0]}),
            ("frequent_items", {"k": 3})]
WINDOWS = [{"type": "tumbling", "size": 7}, {"type": "hopping", "size": 6, "hop": 4},
           {"type": "hopping", "size": 10, "hop": 3}, {"type": "snapshot"}, {"type": "session", "gap": 3},
           {"type": "rows", "n": 6, "slide": 3}]


def _exact(q: dict[str, Any], stream: list[Element], out: list[Element]) -> None:
    verdict = verify(out, oracle(parse_query(q), stream), rel_tol=0.0, abs_tol=0.0)
    assert verdict.ok, verdict.diff


@pytest.mark.parametrize(("name", "params"), SKETCHES, ids=[s[0] for s in SKETCHES])
@pytest.mark.parametrize("win", WINDOWS, ids=lambda w: "-".join(str(v) for v in w.values()))
def test_local_windows_equal_the_oracle_with_retractions(name: str, params: dict[str, Any],
                                                         win: dict[str, Any]) -> None:
    """Small windows (the sketches are exact): the local engine's CHT is the oracle's, exactly."""
    for seed in range(6):
        rng = random.Random(seed)
        q = window_query(win, name, input="v", params=params, **({"group_by": ["g"]} if seed % 2 else {}))
        stream = gen_stream(rng, n=40, maxlen=rng.choice([1, 3, 15]), p_inf=0.05, p_retract=0.4, values=6)
        if seed % 3 == 2:  # strings and numbers (an integral float is its integer)
            stream = [Insert(e.id, e.le, e.re, {**e.payload, "v": ["a", "b", 1.0, 2, "2", 2.5][e.payload["v"]]})
                      if isinstance(e, Insert) else e for e in stream]
            if name == "approx_quantile":
                continue
        out, r = run(q, stream, mode="each" if seed % 3 else "many")
        if win["type"] == "hopping":
            assert r.ops[0].sweep_kind == "merge"  # pane states merged per window
        check_physical(out)
        _exact(q, stream, out)


# -- beyond the exact regime -------------------------------------------------------------------------

WIDTH = 5000  # ticks per tumbling window: ~5,000 point events, thousands of distinct values


def _big_stream(n: int, seed: int, retract: float, strings: bool = False) -> list[Element]:
    """``n`` point events one tick apart with skewed values (heavy hitters and a long tail), a share of
    them deleted a few elements later, CTIs that every later element respects."""
    rng = random.Random(seed)
    out: list[Element] = []
    pending: list[Insert] = []
    for i in range(n):
        v: Any = int(8000 ** rng.random()) if rng.random() < 0.7 else rng.randrange(20_000)
        ev = Insert(f"e{i}", i, i + 1, {"g": "k", "v": f"s{v}" if strings else v})
        out.append(ev)
        if rng.random() < retract:
            pending.append(ev)
        if pending and rng.random() < 0.5:
            gone = pending.pop(0)
            out.append(Retract(gone.id, gone.le, gone.re, gone.le))
        if i % 1000 == 999 and not pending:
            out.append(Cti(i + 1))
    out += [Retract(e.id, e.le, e.re, e.le) for e in pending]
    return out


def _members(stream: list[Element], size: int, hop: int) -> dict[int, list[Any]]:
    """Window start -> the surviving members' values (point events; what the exact answers are over)."""
    alive: dict[str, Insert] = {}
    for el in stream:
        if isinstance(el, Insert):
            alive[el.id] = el
        elif isinstance(el, Retract) and el.re_new == el.le:
            del alive[el.id]
    wins: dict[int, list[Any]] = {}
    for ev in alive.values():
        k = ev.le // hop
        while k * hop + size > ev.le and k * hop <= ev.le:
            wins.setdefault(k * hop, []).append(ev.payload["v"])
            k -= 1
    return wins


def _check_quantiles(values_by_window: dict[int, list[Any]], got: dict[int, Any], qs: list[float]) -> None:
    bound = ApproxQuantile(ApproxQuantile.Params(qs=tuple(qs))).error_bound()
    assert got.keys() == values_by_window.keys()
    misses = 0
    for le, vs in values_by_window.items():
        ordered, n = sorted(vs), len(vs)
        for q, x in zip(qs, got[le], strict=True):
            lo, hi = bisect_left(ordered, x) / n, bisect_right(ordered, x) / n
            misses += not (lo - bound <= q <= hi + bound)
    assert misses <= 1, misses  # (a 99 % bound per value)


def _check_frequent(values_by_window: dict[int, list[Any]], got: dict[int, Any], lg: int) -> None:
    eps = FrequentItems(FrequentItems.Params(lg_max_map_size=lg)).error_bound()
    assert got.keys() == values_by_window.keys()
    for le, vs in values_by_window.items():
        counts, n = Counter(vs), len(vs)
        assert got[le], le
        for r in got[le]:
            f = counts[r["item"]]
            assert r["lower_bound"] <= f <= r["upper_bound"] and abs(r["estimate"] - f) <= eps * n, (le, r, f)


def _by_le(out: list[Element], alias: str) -> dict[int, Any]:
    return {le: p[alias] for le, _, p in table(out)}


BIG_QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": WIDTH}, "group_by": ["g"],
                        "aggregates": [{"udm": "approx_distinct", "input": "v", "as": "d"},
                                       {"udm": "approx_quantile", "input": "v", "params": {"qs": [0.1, 0.5, 0.9]},
                                        "as": "q"},
                                       {"udm": "frequent_items", "input": "v",
                                        "params": {"k": 20, "lg_max_map_size": 7}, "as": "top"}]}]}


def test_local_windows_beyond_the_exact_regime_with_retractions() -> None:
    stream = _big_stream(20_000, seed=1, retract=0.1)
    out, _ = run(BIG_QUERY, stream)
    check_physical(out)
    members = _members(stream, WIDTH, WIDTH)
    want = oracle(parse_query(BIG_QUERY), stream)
    got_d, want_d = _by_le(out, "d"), {le: p["d"] for (le, _, pj) in want for p in [json.loads(pj)]}
    assert got_d == want_d  # approx_distinct: the oracle's one add of the members gives the same estimate
    for le, vs in members.items():
        d = len(set(vs))
        assert d > 1000 and abs(got_d[le] - d) <= 0.0497 * d
    _check_quantiles(members, _by_le(out, "q"), [0.1, 0.5, 0.9])
    _check_frequent(members, _by_le(out, "top"), 7)


def test_local_panes_beyond_the_exact_regime_equal_the_oracle_for_approx_distinct() -> None:
    q = window_query({"type": "hopping", "size": 2 * WIDTH, "hop": WIDTH // 2}, "approx_distinct", input="v")
    stream = _big_stream(12_000, seed=2, retract=0.1, strings=True)
    out, r = run(q, stream)
    assert r.ops[0].sweep_kind == "merge"
    _exact(q, stream, out)  # merged pane sketches, one number per set of values


# -- Spark ---------------------------------------------------------------------------------------------


def _spark_run(spark: Any, query: dict[str, Any], stream: list[Element]) -> tuple[str, list[Element]]:
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements, elements_df

    res = run_batch(query, elements_df(spark, stream))
    try:
        return res.path, collect_elements(res.output)
    finally:
        res.unpersist()


@pytest.mark.spark
@pytest.mark.slow
def test_spark_two_phase_equals_the_local_engine(spark: Any) -> None:
    """Inserts only: the partial + final plan ships sketches; ``approx_distinct`` is the local engine's
    number exactly, the others are within their bounds of the exact answers."""
    stream = [el for el in _big_stream(20_000, seed=3, retract=0.0)] + [Cti(INF)]
    path, got = _spark_run(spark, BIG_QUERY, stream)
    assert path == "algebraic"
    local, _ = run(BIG_QUERY, stream)
    assert _by_le(got, "d") == _by_le(local, "d")
    members = _members(stream, WIDTH, WIDTH)
    _check_quantiles(members, _by_le(got, "q"), [0.1, 0.5, 0.9])
    _check_frequent(members, _by_le(got, "top"), 7)
    q = window_query({"type": "hopping", "size": 6, "hop": 2}, "approx_distinct", input="v", group_by=["g"])
    small = [el for el in gen_stream(random.Random(4), n=60, maxlen=1, p_retract=0.0, p_inf=0.0)]
    path, got = _spark_run(spark, q, small)
    assert path == "algebraic"
    _exact(q, small, got)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(("name", "params"), SKETCHES, ids=[s[0] for s in SKETCHES])
def test_spark_with_retractions_takes_the_engine_path_and_equals_the_oracle(spark: Any, name: str,
                                                                           params: dict[str, Any]) -> None:
    q = window_query({"type": "hopping", "size": 8, "hop": 4}, name, input="v", params=params, group_by=["g"])
    stream = gen_stream(random.Random(7), n=60, maxlen=5, p_retract=0.4, values=6)
    path, got = _spark_run(spark, q, stream)
    assert path != "algebraic"
    _exact(q, stream, got)


def _file_run(engine: str, query: dict[str, Any], src: Path, out: Path, **kw: Any) -> list[Element]:
    req = RunRequest(bind(parse_query(query)), src, out, out.with_suffix(".dl.jsonl"),
                     batch_size=kw.pop("batch_size", None), checkpoint=None, options=kw)
    (run_local if engine == "local" else get_engine(engine))(req)
    return [parse_element(json.loads(x)) for x in out.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.mark.spark
@pytest.mark.slow
def test_spark_streaming_keeps_sketches_in_state_and_equals_oracle_and_local(spark: Any, tmp_path: Path) -> None:
    """Micro-batches with retractions across them: the engine per key (its sketches and kept members) lives
    in the state store between micro-batches."""
    q = {"steps": [{"op": "window", "window": {"type": "hopping", "size": 10, "hop": 5}, "group_by": ["g"],
                    "aggregates": [{"udm": "approx_distinct", "input": "v", "as": "d"},
                                   {"udm": "approx_quantile", "input": "v", "as": "med"},
                                   {"udm": "frequent_items", "input": "v", "params": {"k": 2}, "as": "top"}]}]}
    stream = gen_stream(random.Random(11), n=60, maxlen=6, p_retract=0.4, values=6, groups=3)
    src = tmp_path / "small.jsonl"
    write_stream(src, stream)
    got = _file_run("spark-streaming", q, src, tmp_path / "small.out.jsonl", batch_size=13)
    _exact(q, stream, got)
    # beyond the exact regime: approx_distinct's estimates are the local engine's
    qd = window_query({"type": "tumbling", "size": WIDTH}, "approx_distinct", input="v", group_by=["g"])
    big = _big_stream(12_000, seed=5, retract=0.05)
    src = tmp_path / "big.jsonl"
    write_stream(src, big)
    streamed = _file_run("spark-streaming", qd, src, tmp_path / "big.out.jsonl", batch_size=4000)
    local = _file_run("local", qd, src, tmp_path / "big.local.jsonl")
    assert _by_le(streamed, "approx_distinct") == _by_le(local, "approx_distinct")
    assert len(_by_le(local, "approx_distinct")) == 3
