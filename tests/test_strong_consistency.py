"""Strong consistency (SEMANTICS §7, semantics-notes 72): a window step with ``max_delay: "inf"`` outputs a
window only once no valid element can change it, so its output has no retraction — for every UDM kind,
clipping and output policy, and every window family — and the same CHT as the kit's brute-force oracle.
The issue-27 case on all three engines, then random streams: in order with retraction chains (>= 2,000
cases on the local engine), out of order (a smaller sample: validity alone, not order, keeps the CTI's
promise), and a smaller sample on the Spark paths."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import check_engine, registered_engine, runner_engine
from udm.host.testing.cht import cht
from udm.host.testing.generator import generate
from udm.sdk import INF

LOCAL = runner_engine(QueryRunner)

#: the issue-27 case: in-order input, a's end moves from 20 to 15 after cti(10)
ISSUE = [Insert("a", 1, 20, {"v": 1}), Cti(10), Retract("a", 1, 20, 15), Cti(INF)]


def issue_query(**kw: Any) -> BoundQuery:
    step = {"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "members", "clip": "left",
            "output": "unaltered", "max_delay": "inf", **kw}
    return bind(parse_query({"steps": [step]}))


def retractions(out: list[Element]) -> list[Element]:
    return [e for e in out if isinstance(e, Retract)]


def ctis(out: list[Element]) -> list[int]:
    return [e.t for e in out if isinstance(e, Cti)]


#: worked by hand: every window holds a, whose end the UDM sees (left clipping only), so none is final
#: before a's end is: [0,5) [5,10) [10,15) with a clipped on the left
ISSUE_CHT = [(1, 15, {"le": 1, "re": 15, "v": 1}), (5, 15, {"le": 5, "re": 15, "v": 1}),
             (10, 15, {"le": 10, "re": 15, "v": 1})]


def _want(rows: list[tuple[int, int, dict[str, Any]]]) -> Any:
    return cht([Insert(f"w{i}", le, re, p) for i, (le, re, p) in enumerate(rows)])


def test_issue_case_holds_the_windows_until_the_end_is_final() -> None:
    out = LOCAL(issue_query(), ISSUE)
    assert retractions(out) == []
    assert cht(out) == _want(ISSUE_CHT)
    # after cti(10) the windows [0,5) and [5,10) wait for a's end: the output CTI is the first one's start
    assert out.trace[1] == [Cti(0)]  # type: ignore[attr-defined]
    assert out.trace[2] == []  # type: ignore[attr-defined]
    assert ctis(out) == [0, INF]


def test_speculation_retracts_the_same_case() -> None:
    """The contrast: with the default ``max_delay: 0`` the windows come out at cti(10) and are revised."""
    out = LOCAL(issue_query(max_delay=0), ISSUE)
    assert len(retractions(out)) == 2 and cht(out) == _want(ISSUE_CHT)


def test_a_final_window_is_released_at_the_cti() -> None:
    """Strong consistency waits only for what can still change: right clipping hides a's end, so the
    windows before cti(10) are final there."""
    out = LOCAL(issue_query(clip="full"), ISSUE)
    assert retractions(out) == [] and out.trace[1][-1] == Cti(10)  # type: ignore[attr-defined]
    assert [e.le for e in out.trace[1] if isinstance(e, Insert)] == [1, 5]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("window", "stream", "held"), [
    # count_by_end: the window [6, 10) ends at b's RE 10 = c, which can still move (extended: [6, 12))
    ({"type": "count_by_end", "n": 2}, [Insert("a", 1, 7, {}), Insert("b", 5, 10, {}), Cti(10),
                                        Retract("b", 5, 10, 12), Cti(INF)], 6),
    # snapshot: [7, 10) ends at an endpoint that goes away when b is extended ([7, 12) then)
    ({"type": "snapshot"}, [Insert("a", 1, 7, {}), Insert("b", 5, 10, {}), Cti(10), Retract("b", 5, 10, 12),
                            Cti(INF)], 7),
    # session gap 0: the session ends at 10 = c with b, which can still be extended
    ({"type": "session", "gap": 0}, [Insert("a", 1, 7, {}), Insert("b", 5, 10, {}), Cti(10),
                                     Retract("b", 5, 10, 12), Cti(INF)], 1),
    # rows: a and b share LE 5 and both end after c; b's end can still move before a's and reorder them,
    # so the window of row 2 (holding one of the two) waits, even for a sum
    ({"type": "rows", "n": 2}, [Insert("x", 1, 3, {"v": 1}), Insert("a", 5, 12, {"v": 2}),
                                Insert("b", 5, 30, {"v": 3}), Insert("y", 7, 8, {"v": 4}), Cti(10),
                                Retract("b", 5, 30, 11), Cti(INF)], 1),
])
def test_windows_that_hang_on_the_cti_wait(window: dict[str, Any], stream: list[Element], held: int) -> None:
    """Each family's own finality: the window that could change comes out only once final, and the output
    CTI waits at its start (for a time-insensitive UDM, where speculation would give more)."""
    udm: dict[str, Any] = {"udm": "sum", "input": "v"} if window["type"] == "rows" else {"udm": "count"}
    q = bind(parse_query({"steps": [{"op": "window", "window": window, **udm, "max_delay": "inf"}]}))
    out = LOCAL(q, stream)
    assert retractions(out) == []
    rep = check_engine(LOCAL, q, stream, variants=0)
    assert rep.ok, rep.text()
    cut = next(i for i, e in enumerate(stream) if isinstance(e, Cti))
    assert ctis(out.trace[cut]) == [held]  # type: ignore[attr-defined]
    fast = bind(parse_query({"steps": [{"op": "window", "window": window, **udm}]}))
    assert retractions(LOCAL(fast, stream))  # (speculation did retract here)


def test_only_windows_holding_a_moving_end_wait() -> None:
    """count_by_start(1, hop 3): windows at the 1st and 4th LE; b (2nd LE) is in none, so its open end
    holds nothing back: both windows come out at cti(10), and the output CTI is 10."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "count_by_start", "n": 1, "hop": 3},
                                     "udm": "members", "clip": "left", "output": "unaltered",
                                     "max_delay": "inf"}]}))
    stream = [Insert("a", 0, 1, {}), Insert("b", 2, 30, {}), Insert("c", 4, 5, {}), Insert("d", 6, 7, {}), Cti(10),
              Retract("b", 2, 30, 12), Cti(INF)]
    out = LOCAL(q, stream)
    assert [(e.le, e.re) for e in out.trace[4] if isinstance(e, Insert)] == [(0, 1), (6, 7)]  # type: ignore[attr-defined]
    assert ctis(out.trace[4]) == [10] and retractions(out) == []  # type: ignore[attr-defined]
    assert check_engine(LOCAL, q, stream, variants=0).ok


# -------------------------------------------------------------------------------------------------------
# random streams
# -------------------------------------------------------------------------------------------------------
#: every UDM kind: a UDF feeding the window (filter), incremental UDA, holistic UDA, time-sensitive UDA,
#: time-insensitive UDO, time-sensitive UDOs (one with time_bound output): name, step part, output policies
KINDS: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("udf", {"udm": "count"}, ("window",)),
    ("incremental", {"udm": "sum", "input": "v"}, ("window",)),
    ("holistic", {"udm": "median", "input": "v"}, ("window",)),
    ("twa", {"udm": "twa", "input": "v"}, ("window",)),
    ("topk", {"udm": "topk", "params": {"k": 2, "by": "v"}}, ("window",)),
    ("members", {"udm": "members", "input": {"v": "v"}}, ("window", "unaltered", "clip")),
    ("follows", {"udm": "follows"}, ("window", "unaltered", "clip", "time_bound")),
]
CLIPS = ("none", "left", "right", "full")
FAMILIES: dict[str, list[dict[str, Any]]] = {
    "tumbling": [{"type": "tumbling", "size": 5}, {"type": "tumbling", "size": 3, "offset": 1}],
    "hopping": [{"type": "hopping", "size": 6, "hop": 4}, {"type": "hopping", "size": 3, "hop": 7, "offset": 1}],
    "cumulate": [{"type": "cumulate", "size": 6, "step": 2}, {"type": "cumulate", "size": 4, "step": 1, "offset": 1}],
    "snapshot": [{"type": "snapshot"}],
    "count_by_start": [{"type": "count_by_start", "n": 2}, {"type": "count_by_start", "n": 3, "hop": 2},
                       {"type": "count_by_start", "n": 1, "hop": 3}],
    "count_by_end": [{"type": "count_by_end", "n": 2}, {"type": "count_by_end", "n": 1},
                     {"type": "count_by_end", "n": 3, "hop": 2}, {"type": "count_by_end", "n": 1, "hop": 2}],
    "rows": [{"type": "rows", "n": 3, "slide": 2}, {"type": "rows", "n": 2, "partial": True},
             {"type": "rows", "n": 1, "slide": 3}],
    "session": [{"type": "session", "gap": 2}, {"type": "session", "gap": 0}],
}


def combos() -> list[tuple[str, dict[str, Any], str, str]]:
    """Every (kind, clip, output) a query may ask for (``unaltered`` members need left clipping: an output
    may not start before its window)."""
    out = []
    for (name, part, outputs), clip in itertools.product(KINDS, CLIPS):
        for policy in outputs:
            if name == "members" and policy == "unaltered" and clip in ("none", "right"):
                continue
            out.append((name, part, clip, policy))
    return out


COMBOS = combos()


def strong_query(kind: str, part: dict[str, Any], clip: str, output: str, window: dict[str, Any],
                 grouped: bool) -> BoundQuery:
    step: dict[str, Any] = {"op": "window", "window": window, **part, "clip": clip, "output": output,
                            "max_delay": "inf", **({"group_by": ["g"]} if grouped else {})}
    steps = [step]
    if kind == "udf":
        steps.insert(0, {"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 10, "hi": 90}})
    return bind(parse_query({"steps": steps}))


def random_cases(family: str, seeds: range, disorder: str = "in_order"
                 ) -> Iterator[tuple[int, BoundQuery, list[Element]]]:
    """Seed by seed: a combination (every one in turn), a window of the family, a stream with retraction
    chains (speculated ends, phantoms fully retracted, open ends closed later) and CTIs."""
    for seed in seeds:
        rng = random.Random(seed)
        kind, part, clip, output = COMBOS[seed % len(COMBOS)]
        q = strong_query(kind, part, clip, output, rng.choice(FAMILIES[family]), seed % 3 == 0)
        stream = generate(seed=seed, events=rng.randint(1, 10), groups=rng.randint(1, 2),
                          duration=rng.choice(["point", "short", "long", "mixed", "infinite"]), disorder=disorder,
                          speculation=rng.choice([0.3, 0.6, 1.0]), chain=rng.randint(1, 2),
                          cti=rng.choice(["lazy", "regular", "eager"]), types=("A", "B", "C"))
        yield seed, q, stream


def _check(run: Any, q: BoundQuery, stream: list[Element], seed: int, variants: int = 0) -> int:
    """The kit's check (oracle CHT, output properties, liveliness from the trace), and no retraction."""
    rep = check_engine(run, q, stream, seed=seed, variants=variants)
    assert rep.ok, f"seed {seed}: {q.spec.to_json_dict()}\n{rep.text()}"
    for r in rep.runs:
        assert retractions(r.output) == [], f"seed {seed} ({r.label}): {q.spec.to_json_dict()}\n{r.output}"
    return len(rep.runs)


#: per family; 7 x 330 = 2,310 in-order streams
IN_ORDER = 330


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_in_order_streams_with_retractions_give_no_retraction(family: str) -> None:
    n = sum(_check(LOCAL, q, stream, seed) for seed, q, stream in random_cases(family, range(IN_ORDER)))
    assert n == IN_ORDER


def test_every_combination_is_drawn() -> None:
    assert len(COMBOS) == 4 * 5 + 3 * 4 - 2 + 4 * 4  # 5 window-only kinds, members (3 - 2 refused), follows
    assert len(COMBOS) * 7 <= IN_ORDER  # every combination meets every family 7 times


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_out_of_order_streams_give_no_retraction_either(family: str) -> None:
    """Finality rests on the CTI alone (every valid element respects it), not on arrival order: disordered
    streams and a physical variant of each also give no retraction."""
    runs = sum(_check(LOCAL, q, stream, seed, variants=1)
               for seed, q, stream in random_cases(family, range(10_000, 10_040), disorder="highly"))
    assert runs == 80


# -------------------------------------------------------------------------------------------------------
# Spark
# -------------------------------------------------------------------------------------------------------
SPARK_ENGINES = ["spark", "spark-streaming"]


def _spark(engine: str) -> Any:
    # (one element per micro-batch on streaming: the CTI and the retraction reach the held window apart)
    return registered_engine(engine, buckets=2, batch_size=1 if engine == "spark-streaming" else None)


@pytest.mark.spark
@pytest.mark.parametrize("engine", SPARK_ENGINES)
def test_issue_case_on_spark(spark: Any, engine: str) -> None:
    out = _spark(engine)(issue_query(), ISSUE)
    assert retractions(out) == []
    assert cht(out) == _want(ISSUE_CHT)
    assert ctis(out)[-1] == INF and all(t <= 0 or t >= INF for t in ctis(out))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("engine", SPARK_ENGINES)
def test_random_streams_on_spark(spark: Any, engine: str) -> None:
    """A sample: one in-order case per family, the families shared between the two Spark paths, held to
    the same checks."""
    run = registered_engine(engine, buckets=2, batch_size=5 if engine == "spark-streaming" else None)
    families = sorted(FAMILIES)[SPARK_ENGINES.index(engine)::2]
    runs = 0
    for i, family in enumerate(families):
        seed, q, stream = next(random_cases(family, range(20_000 + 7 * i, 20_001 + 7 * i)))
        runs += _check(run, q, stream, seed)
    assert runs == len(families)


@pytest.mark.spark
def test_algebraic_plan_emits_final_output_only(spark: Any) -> None:
    """The two-phase plan of an algebraic UDA (insert-only input) computes each window once, from the whole
    input: under max_delay INF it gives the engine's CHT and no retraction."""
    from udm.host.spark.algebraic import eligible_step

    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "sum",
                                     "input": "v", "max_delay": "inf"}]}))
    assert eligible_step(q.spec) is not None
    stream = [Insert(f"e{i}", i, i + 1, {"v": i}) for i in range(12)] + [Cti(INF)]
    out = registered_engine("spark", buckets=2)(q, stream)
    assert retractions(out) == []
    assert cht(out) == cht(LOCAL(q, stream))
