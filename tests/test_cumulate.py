"""Cumulate windows (SEMANTICS §3 ``cumulate(size, step, offset=0)``, INTERFACES §2): each period's running
windows ``[offset + k*size, offset + k*size + i*step)``, i = 1..size/step.

- the query spec and the fluent API refuse a step that does not divide the size, naming the field;
- hand-computed cases (expected values worked out in the comments): overlap membership across a period's
  end, offsets and negative times, empty windows, retractions and late events as minimal diffs, endless
  events cut at T by the tumbling rule (``W.LE <= T``), output CTIs (the period start, SEMANTICS §7), a
  time-sensitive UDA with clipping;
- the incremental claim as behaviour, UDA calls counted: in order, each value is added once and each window
  costs at most one merge and one compute, for a period of 10 steps as for one of 1,000, with an invertible
  UDA and with a merge-only one; with late events the calls follow the windows that change; a snapshot
  taken mid-period resumes with its running state;
- the kit's brute-force oracle and output properties (liveliness included) over random streams with
  disorder, retraction chains, endless events and bad lines, every UDM shape, on the local engine (element
  by element and in batches), Spark batch (engine path, split by key or by time range; the two-phase
  algebraic plan) and Spark streaming.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from test_engine_support import (
    UDA_CALLS,
    CountingSum,
    catalog_with,
    check_physical,
    ctis,
    rows,
    run,
    table,
    window_query,
)
from window_cases import BATCHED, LOCAL, every_udm_every_disorder, run_random_cases

from udm.host.errors import QuerySpecError
from udm.host.model.spec import Cumulate, parse_query
from udm.host.query.fluent import Stream
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing.cht import cht
from udm.sdk import INF, IncrementalUDA, udm


def ev(id: str, le: int, re: int, v: int = 1, **p: object) -> Insert:
    return Insert(id, le, re, {"v": v, **p})


def cumulate(size: int, step: int, offset: int = 0) -> dict[str, Any]:
    return {"type": "cumulate", "size": size, "step": step, "offset": offset}


# ---------------------------------------------------------------------------------------------------------
# the spec
# ---------------------------------------------------------------------------------------------------------
def test_the_spec_requires_a_step_that_divides_the_size() -> None:
    assert Cumulate(size=86_400, step=60).offset == 0
    for window, says in [(cumulate(10, 3), "steps[0].window: Value error, cumulate: step 3 must divide size 10"),
                         ({"type": "cumulate", "size": 10, "step": 0}, "steps[0].window.step: Input should be"),
                         ({"type": "cumulate", "size": 10}, "steps[0].window.step: Field required"),
                         ({"type": "cumulate", "size": 10, "step": 5, "hop": 5}, "steps[0].window.hop: unknown"),
                         (cumulate(10**30, 10**30), "steps[0].window.size: Input should be less than")]:
        with pytest.raises(QuerySpecError) as err:
            parse_query(window_query(window, "count"))
        assert says in str(err.value), str(err.value)
    with pytest.raises(QuerySpecError, match="step 4 must divide size 10"):
        Stream.from_events([]).cumulate(10, 4)


def test_the_fluent_api_builds_the_same_step() -> None:
    fluent = Stream.from_events([ev("a", 1, 2, 5)]).cumulate(10, 5, offset=2).aggregate("sum", input="v", as_="sum")
    assert fluent.spec.to_json_dict()["steps"][0]["window"] == {"type": "cumulate", "size": 10, "step": 5, "offset": 2}
    # [1, 2) lies in period [-8, 2): its windows [-8, -3) (no member) and [-8, 2)
    assert cht(fluent.to_elements()).events() == [(-8, 2, {"sum": 5})]


# ---------------------------------------------------------------------------------------------------------
# hand-computed cases
# ---------------------------------------------------------------------------------------------------------
def test_running_windows_by_overlap_across_the_period_end() -> None:
    # cumulate(10, 2): period [0, 10) has windows [0,2) [0,4) [0,6) [0,8) [0,10); period [10, 20) likewise.
    # a [1,2) v=1; b [3,4) v=10; d [7,12) v=1000 spans the period end; c [12,13) v=100.
    #   [0,2): a = 1          [0,4), [0,6): a+b = 11         [0,8), [0,10): a+b+d = 1011 (d: 7 < 8)
    #   [10,12): d = 1000 (c starts at 12, not < 12)          [10,14) .. [10,20): d+c = 1100
    stream = [ev("a", 1, 2, 1), ev("b", 3, 4, 10), ev("d", 7, 12, 1000), ev("c", 12, 13, 100)]
    out, _ = run(window_query(cumulate(10, 2), "sum", input="v"), stream)
    assert table(out) == rows((0, 2, {"sum": 1}), (0, 4, {"sum": 11}), (0, 6, {"sum": 11}), (0, 8, {"sum": 1011}),
                              (0, 10, {"sum": 1011}), (10, 12, {"sum": 1000}), (10, 14, {"sum": 1100}),
                              (10, 16, {"sum": 1100}), (10, 18, {"sum": 1100}), (10, 20, {"sum": 1100}))
    check_physical(out)


def test_offset_negative_times_and_empty_windows() -> None:
    # cumulate(6, 3, offset=-2): periods [-8,-2) [-2,4) [4,10); windows [P, P+3) and [P, P+6).
    # x [-5,-4): [-8,-5) holds nothing (x starts at -5), [-8,-2) holds x; y [2,3): only [-2,4) ([-2,1) ends
    # before it); z [4,5): [4,7) and [4,10). Windows without a member give nothing.
    out, _ = run(window_query(cumulate(6, 3, -2), "count"), [ev("x", -5, -4), ev("y", 2, 3), ev("z", 4, 5)])
    assert table(out) == rows((-8, -2, {"count": 1}), (-2, 4, {"count": 1}), (4, 7, {"count": 1}),
                              (4, 10, {"count": 1}))


def test_a_step_equal_to_the_size_is_tumbling() -> None:
    # one window per period: [0,5) holds a and b ([4,6) overlaps both periods), [5,10) holds b and c
    stream = [ev("a", 1, 2), ev("b", 4, 6), ev("c", 9, 10)]
    out, _ = run(window_query(cumulate(5, 5), "count"), stream)
    assert table(out) == rows((0, 5, {"count": 2}), (5, 10, {"count": 2}))


def test_retractions_and_late_events_revise_only_the_windows_they_change() -> None:
    # cumulate(10, 5), count. a [1,2), b [6,7), then c [12,13) moves the watermark to 12: [0,5) = 1 and
    # [0,10) = 2 come out (W.RE <= 12). b deleted: [0,10) becomes 1 ([0,5) unchanged, not touched). A late
    # e [3,4): [0,5) becomes 2 and [0,10) 2 again. The end: [10,15) = [10,20) = 1 (c).
    stream = [ev("a", 1, 2), ev("b", 6, 7), ev("c", 12, 13), Retract("b", 6, 7, 6), ev("e", 3, 4)]
    out, _ = run(window_query(cumulate(10, 5), "count"), stream, mode="each")
    assert table(out) == rows((0, 5, {"count": 2}), (0, 10, {"count": 2}), (10, 15, {"count": 1}),
                              (10, 20, {"count": 1}))
    # physically: 2 early inserts, [0,10) revised twice and [0,5) once (a retraction and an insert each)
    inserts = [(e.le, e.re, e.payload["count"]) for e in out if isinstance(e, Insert)]
    assert inserts[:2] == [(0, 5, 1), (0, 10, 2)]
    assert sum(isinstance(e, Retract) for e in out) == 3
    check_physical(out)


def test_endless_events_stop_at_the_period_of_T() -> None:
    # semantics-notes 2, the tumbling rule: windows with W.LE <= T. cumulate(10, 5), count; a [2, inf),
    # b [5,7): T = 7, so period [0,10) only: [0,5) = 1 (b starts at 5), [0,10) = 2.
    q = window_query(cumulate(10, 5), "count")
    out, r = run(q, [ev("a", 2, INF), ev("b", 5, 7)])
    assert table(out) == rows((0, 5, {"count": 1}), (0, 10, {"count": 2}))
    assert r.stats.truncated_at == 7
    # a CTI at 23 moves T: periods starting at 10 and 20 (W.LE <= 23) come out whole, [20, 30) included
    out, r = run(q, [ev("a", 2, INF), ev("b", 5, 7), Cti(23)])
    assert table(out) == rows((0, 5, {"count": 1}), (0, 10, {"count": 2}), (10, 15, {"count": 1}),
                              (10, 20, {"count": 1}), (20, 25, {"count": 1}), (20, 30, {"count": 1}))
    assert r.stats.truncated_at == 23
    # it ends (at 14): nothing is cut, and period [10, 20) holds it in both its windows
    out, r = run(q, [ev("a", 2, INF), Retract("a", 2, INF, 14)])
    assert table(out) == rows((0, 5, {"count": 1}), (0, 10, {"count": 1}), (10, 15, {"count": 1}),
                              (10, 20, {"count": 1}))
    assert r.stats.truncated_at is None


def test_output_cti_is_the_start_of_the_period_still_open() -> None:
    # SEMANTICS §7: after cti(c), the start of the earliest window with W.RE > c (any can still get members).
    # cumulate(10, 2): cti(3) -> [0,4) is open -> 0; cti(13) -> [10,14) -> 10; cti(20) -> [20,22) -> 20.
    stream = [ev("a", 1, 2), Cti(3), ev("b", 12, 13), Cti(13), Cti(20)]
    out, _ = run(window_query(cumulate(10, 2), "count"), stream, mode="each")
    assert ctis(out) == [0, 10, 20, INF]
    check_physical(out)


def test_a_time_sensitive_uda_sees_members_clipped_to_each_running_window() -> None:
    # twa with full clipping, cumulate(4, 2): a [1,3) v=4, b [2,4) v=8.
    #   [0,2): a clipped to [1,2): 4*1 / 2 = 2.0
    #   [0,4): a [1,3) 4*2 + b [2,4) 8*2 = 24, / 4 = 6.0
    out, _ = run(window_query(cumulate(4, 2), "twa", input="v", clip="full"), [ev("a", 1, 3, 4), ev("b", 2, 4, 8)])
    assert table(out) == rows((0, 2, {"twa": 2.0}), (0, 4, {"twa": 6.0}))


def test_groups_have_their_own_running_windows() -> None:
    # group x: [0,3) holds x1, [0,6) x1+x2; group y: only [0,6) (y1 starts at 4)
    stream = [ev("x1", 0, 1, 1, g="x"), ev("y1", 4, 5, 7, g="y"), ev("x2", 5, 6, 2, g="x")]
    out, _ = run(window_query(cumulate(6, 3), "sum", input="v", group_by=["g"]), stream)
    assert table(out) == rows((0, 3, {"g": "x", "sum": 1}), (0, 6, {"g": "x", "sum": 3}),
                              (0, 6, {"g": "y", "sum": 7}))


# ---------------------------------------------------------------------------------------------------------
# incremental: UDA calls per event do not grow with the period
# ---------------------------------------------------------------------------------------------------------
@udm(name="counting_max", version="1.0.0", algebraic=True)
class CountingMax(IncrementalUDA):
    """A merge-only max (no ``remove``) that counts its calls into `UDA_CALLS`."""

    def initial_state(self) -> int | None:
        UDA_CALLS["initial_state"] += 1
        return None

    def add(self, state: int | None, delta: Sequence[int]) -> int:
        UDA_CALLS["add"] += 1
        UDA_CALLS["values"] += len(delta)
        m = max(delta)
        return m if state is None else max(state, m)

    def merge(self, a: int | None, b: int | None) -> int | None:
        UDA_CALLS["merge"] += 1
        return b if a is None else a if b is None else max(a, b)

    def compute(self, state: int | None) -> int | None:
        UDA_CALLS["compute"] += 1
        return state


CAT = catalog_with(CountingSum, CountingMax)


def _calls(name: str, steps: int, late: float, mode: str, n: int = 3000) -> tuple[dict[str, float], int]:
    """UDA calls per event for cumulate(3 * steps, 3) over ``n`` point events one pane apart (a fraction
    ``late`` of them up to 20 panes late), a CTI every 50 events; and the output's live windows."""
    rng = random.Random(5)
    stream: list[Any] = []
    for i in range(n):
        t = 3 * i - (3 * rng.randrange(1, 20) if rng.random() < late else 0)
        stream.append(ev(f"e{i}", t, t + 1, i % 17))
        if i % 50 == 49:
            stream.append(Cti(3 * i - 60))
    UDA_CALLS.clear()
    out, _ = run(window_query(cumulate(3 * steps, 3), name, input="v"), stream, CAT, mode=mode)
    return {k: v / n for k, v in UDA_CALLS.items()}, len(table(out))


@pytest.mark.parametrize("name", ["counting_sum", "counting_max"])
@pytest.mark.parametrize("mode", ["each", "many"])
def test_in_order_each_value_is_added_once_and_each_window_costs_constant_calls(name: str, mode: str) -> None:
    for steps in (10, 1000):
        calls, windows = _calls(name, steps, 0.0, mode)
        assert windows == 3000  # (one window ends in every pane)
        assert calls["values"] == 1.0, (steps, calls)  # every value enters once: members are never re-added
        assert calls["compute"] == 1.0, (steps, calls)  # one compute per window
        assert calls.get("remove", 0) == 0, (steps, calls)
        assert calls.get("merge", 0) <= 1.0, (steps, calls)  # a merge-only window: its predecessor + a pane


@pytest.mark.parametrize("name", ["counting_sum", "counting_max"])
def test_late_events_cost_calls_per_window_changed_not_per_period_length(name: str) -> None:
    # element by element, 5 % of events late by up to 20 panes: each late one changes the windows from its
    # pane on, which are valued again (computes); the sweep goes back to the window before its pane (a mark)
    # instead of adding the period's values again, so the calls follow the computes at 10 and 1,000 steps
    short, _ = _calls(name, 10, 0.05, "each")
    long, _ = _calls(name, 1000, 0.05, "each")
    for calls in (short, long):
        work = calls["add"] + calls.get("merge", 0) + calls.get("remove", 0)
        assert work <= 2.5 * calls["compute"], calls
    assert long["values"] <= 2.5 and long["compute"] <= 2 * short["compute"], (short, long)


@pytest.mark.parametrize("udm_", ["counting_sum", "counting_max", "median"])
def test_a_snapshot_mid_period_resumes_with_its_running_state(udm_: str) -> None:
    """The running state of the open period (the prefix sweep and its marks) survives a snapshot: a run
    stopped mid-period and restored gives the uninterrupted run's output, late events after the restore
    included."""
    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.testing import oracle
    from udm.host.testing.generator import generate

    bq = bind(parse_query(window_query(cumulate(24, 3), udm_, input="v", group_by=["g"])), CAT)
    stream = generate(seed=5, events=80, groups=3, disorder="slightly", speculation=0.3, duration="mixed")
    half = len(stream) // 2
    first = QueryRunner(bq)
    out = [o for el in stream[:half] for o in first.process(el)]
    resumed = QueryRunner.restore(first.snapshot(), bq)
    out += [o for el in stream[half:] for o in resumed.process(el)] + resumed.finish()
    assert cht(out) == oracle(bq, stream)


# ---------------------------------------------------------------------------------------------------------
# the oracle, local engine
# ---------------------------------------------------------------------------------------------------------
def _window(rng: random.Random) -> dict[str, Any]:
    step = rng.randint(1, 4)
    return cumulate(step * rng.randint(1, 5), step, rng.randint(-3, 3))


def _follows(seed: int, rng: random.Random) -> dict[str, Any]:
    """Every UDM shape of `window_cases.UDMS`, and a time_bound UDO (liveliness: output CTI = input CTI)."""
    if seed % 5 == 4:
        return {"udm": "follows", "params": {"field": "g", "a": "k0", "b": "k1"}, "output": "time_bound",
                "clip": "left"}
    return every_udm_every_disorder(seed, rng)


def test_local_engine_agrees_with_the_oracle_element_by_element() -> None:
    assert run_random_cases(_window, range(120), engine=LOCAL, step=_follows) >= 240


def test_local_engine_agrees_with_the_oracle_in_batches() -> None:
    assert run_random_cases(_window, range(120, 240), engine=BATCHED, step=_follows) >= 240


def test_long_periods_agree_with_the_oracle() -> None:
    """Periods of many steps (the sweep carries a window to the next across tens of panes)."""

    def window(rng: random.Random) -> dict[str, Any]:
        return cumulate(40, rng.choice([1, 2]), rng.randint(0, 5))

    assert run_random_cases(window, range(240, 280), engine=BATCHED) >= 80


# ---------------------------------------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_spark_paths_agree_with_the_oracle(spark: Any, engine: str) -> None:
    """Keyed seeds run per key bucket, keyless ones by time range (Spark batch) or in one bucket."""
    from udm.host.testing import registered_engine

    run_ = registered_engine(engine, buckets=2, batch_size=7 if engine == "spark-streaming" else None)
    assert run_random_cases(_window, range(6), engine=run_, variants=0, step=_follows) == 6


@pytest.mark.spark
@pytest.mark.parametrize(("udm_", "keys"), [("sum", ["g"]), ("max", []), ("avg", ["g"])])
def test_spark_two_phase_plan_takes_cumulate(spark: Any, udm_: str, keys: list[str]) -> None:
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.testing.oracle import oracle
    from udm.host.testing.verifier import verify

    rng = random.Random(len(udm_))
    stream: list[Any] = [Insert(f"e{i}", t, t + 1, {"g": f"k{rng.randrange(3)}", "v": rng.randrange(-50, 50)})
                         for i, t in enumerate(sorted(rng.randrange(-30, 200) for _ in range(300)))]
    stream.append(Cti(INF))
    query = parse_query(window_query(cumulate(24, 4, 1), udm_, input="v", group_by=keys))
    result = run_batch(query, elements_df(spark, stream))
    try:
        assert result.path == "algebraic"
        verdict = verify(collect_elements(result.output), oracle(query, stream), rel_tol=1e-9, abs_tol=1e-9)
        assert verdict, str(verdict)
    finally:
        result.unpersist()


@pytest.mark.spark
def test_spark_engine_path_splits_a_keyless_cumulate_by_time_range(spark: Any) -> None:
    """A holistic UDA (no two-phase plan) and no key: the periods are cut into time ranges, each range
    owning the windows that start in it."""
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.testing.oracle import oracle
    from udm.host.testing.verifier import verify

    rng = random.Random(3)
    stream: list[Any] = []
    for i in range(400):
        le = rng.randrange(0, 300)
        stream.append(Insert(f"e{i}", le, le + rng.randrange(1, 30), {"v": rng.randrange(100)}))
    stream.append(Cti(INF))
    query = parse_query(window_query(cumulate(20, 5), "median", input="v"))
    result = run_batch(query, elements_df(spark, stream), buckets=3)
    try:
        assert result.split == "time" and result.buckets > 1
        verdict = verify(collect_elements(result.output), oracle(query, stream), rel_tol=1e-9, abs_tol=1e-9)
        assert verdict, str(verdict)
    finally:
        result.unpersist()


def test_two_phase_window_states_merge_once_per_running_window() -> None:
    """The two-phase plan's final phase (`udm.host.spark.algebraic._window_states`, no Spark needed): a
    running window is its predecessor's state merged with its new pane's, one merge per window."""
    from udm.host.engine.window.geometry import geometry_of
    from udm.host.spark.algebraic import _window_states

    merges = [0]

    def merge(a: int, b: int) -> int:
        merges[0] += 1
        return a + b

    geo = geometry_of(Cumulate(size=3000, step=3))  # 1,000 panes a period
    panes = {s: 1 for s in range(0, 1000, 2)}  # every other pane of period 0 holds a 1
    panes[1500] = 5  # and pane 1500, in the middle of period 1
    got = _window_states(geo, panes, merge)
    # window j of period 0 (ending with pane j) holds the even panes 0..j: j // 2 + 1 of them; period 1
    # starts again: its windows from 1500 on hold pane 1500 alone
    assert got == [(j, j // 2 + 1) for j in range(1000)] + [(j, 5) for j in range(1500, 2000)]
    assert merges[0] == 499  # one per window that gains a pane after its period's first
