"""lmerge feedback (seeds/001 §V.D, semantics-notes 25): with ``feedback: true`` the lmerge tells the step
feeding a lagging input that nothing before the output CTI is needed, and that step skips the work.

Two "plans" (a filter UDF each) over physical variants of one stream: the merged CHT must stay the oracle's
(the common CHT) in every interleaving — including events skipped and then extended past the fast-forward
time by a retraction — while the lagging plan calls its UDF fewer times than without feedback."""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.engine.ops import span
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import check_engine, generate, lmerge_inputs, runner_engine
from udm.host.testing.generator import interleave
from udm.sdk import INF

ENGINE = runner_engine(QueryRunner)


def plans(feedback: bool, algorithm: str = "R4") -> BoundQuery:
    flt = {"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 20, "hi": 80}}
    return bind(parse_query({"inputs": {"i0": {}, "i1": {}}, "steps": [
        {"id": "p0", "from": "i0", **flt}, {"id": "p1", "from": "i1", **flt},
        {"id": "m", "op": "lmerge", "from": ["p0", "p1"], "algorithm": algorithm, "feedback": feedback}]}))


@pytest.mark.parametrize("algorithm", ["R3", "R4"])
def test_feedback_keeps_the_common_cht(algorithm: str) -> None:
    bq = plans(True, algorithm)
    for seed in range(300):
        rng = random.Random(seed)
        base = generate(seed=seed, events=rng.randint(1, 14), disorder="slightly", speculation=0.5, chain=3,
                        cti="regular")
        inputs = lmerge_inputs(base, 2, seed=seed, case=algorithm)  # type: ignore[arg-type]
        rep = check_engine(ENGINE, bq, inputs, seed=seed, variants=0,
                           interleavings=("sync", "sequential", "random"))
        assert rep.ok, rep.text()


def calls(feedback: bool, inputs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[int, Any]:
    """How many inserts the filters' UDF was asked about (rows handed to it), and the run's output."""
    count = [0]
    real = span.udf_values

    def counted(udm: Any, label: str, args: dict[str, str], b: Any, rows: Any) -> Any:
        count[0] += int((b.kind[rows] == 0).sum())
        return real(udm, label, args, b, rows)

    monkeypatch.setattr(span, "udf_values", counted)
    r = QueryRunner(plans(feedback))
    out = [e for name, el in interleave(inputs, ["i0", "i1"], how="sequential") for e in r.process(el, input=name)]
    out += r.finish()
    return count[0], (out, r.chattiness()["m"])


def test_the_lagging_plan_is_fast_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    # i0 runs ahead (it is read first, whole): every output CTI it drives tells p1 to skip what ends before
    base = generate(seed=3, events=200, disorder="slightly", speculation=0.3, cti="regular")
    inputs = lmerge_inputs(base, 2, seed=3)
    with_fb, (out_fb, counts) = calls(True, inputs, monkeypatch)
    without, (out, _) = calls(False, inputs, monkeypatch)
    n0 = sum(isinstance(e, Insert) for e in inputs["i0"])
    n1 = sum(isinstance(e, Insert) for e in inputs["i1"])
    assert without == n0 + n1
    assert with_fb == n0  # i0 ended first: the output reached cti(INF), so p1 skipped everything
    assert counts["feedback_signals"] >= 1
    from udm.host.testing import cht
    assert cht(out_fb) == cht(out)


def test_hand_skipped_event_extended_past_the_fast_forward_is_computed() -> None:
    r = QueryRunner(plans(True, "R3"))
    r.process(Insert("x", 1, 20, {"v": 50}), input="i0")
    r.process(Cti(10), input="i0")  # output CTI 10: p1 is told to skip what ends before 10
    p1 = next(op for op in r.ops if op.name == "p1")
    assert p1.feedback.skip_below == 10
    r.process(Insert("y", 1, 5, {"v": 50}), input="i1")  # ends before 10: skipped, not computed
    assert len(p1.feedback.skipped) == 1
    r.process(Retract("y", 1, 5, 20), input="i1")  # now it reaches 10: computed and passed on
    assert not p1.feedback.skipped
    r.detach("m", "p0")
    out = r.process(Cti(INF), input="i1")  # i1 alone carries the stream: [1, 20) must be there
    assert [(e.le, e.re_new) for e in out if isinstance(e, Retract)] == [(1, 20)] and out[-1] == Cti(INF)
