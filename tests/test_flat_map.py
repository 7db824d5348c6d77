"""``flat_map`` with span UDOs (SEMANTICS §10) on the local engine.

Hand-computed cases (outputs, the retractions an input retraction causes, the output CTIs, dead letters,
contract violations) worked out from §10 and §7; then random streams with disorder, retraction chains,
CTIs and bad elements, through `check_engine` against the kit's brute-force oracle (independent of the
engine) with the physical properties of §7 (liveliness after every input CTI); and long streams showing
the step's state stays bounded under advancing CTIs.

The UDOs: the first-party ``explode`` (time-insensitive), ``pieces`` (time-sensitive, its outputs depend on
the event's end, so any of them may change while the event can: the output CTI is held) and ``ticks``
(time-sensitive, ``time_bound``: output CTI = input CTI).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from udm.host.catalog import Catalog
from udm.host.engine import QueryRunner
from udm.host.errors import ContractViolation, ParamError, PolicyError
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import parse_query
from udm.host.query import Stream
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import cht, generate, oracle
from udm.host.testing.engine_conformance import check_engine, runner_engine
from udm.host.testing.generator import generate_related
from udm.sdk import INF, Event, MalformedPayload, SpanUDO, TimeSensitiveSpanUDO, udm
from udm_patterns import Explode
from udm_stats import Count, InRange, Sum


@udm(name="pieces", version="1.0.0")
class Pieces(TimeSensitiveSpanUDO):
    """A head point carrying the event's duration, and a tail over its last 2 ticks (long events only)."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        if "v" not in event.payload:
            raise MalformedPayload("field 'v' is missing")
        dur = "inf" if event.re >= INF else event.re - event.le
        yield event.le, event.le + 1, {"head": event.payload["v"], "dur": dur}
        if event.re < INF and event.re - event.le > 2:
            yield event.re - 2, event.re, {"tail": event.payload["v"]}


@udm(name="ticks", version="1.0.0", time_bound=True)
class Ticks(TimeSensitiveSpanUDO):
    """Points at LE, LE+2, ... before RE, at most 4; a lifetime change alters only points after it."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        for t in range(event.le, min(event.re, event.le + 8), 2):
            yield t, t + 1, {**event.payload, "at": t - event.le}


@udm(name="whole", version="1.0.0")
class Whole(TimeSensitiveSpanUDO):
    """The event itself, and a head over its first 3 ticks (or fewer)."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le, event.re, dict(event.payload)
        yield event.le, min(event.re, event.le + 3), {"head": True}


@udm(name="liar", version="2.0.0", time_bound=True)
class Liar(TimeSensitiveSpanUDO):
    """Declares time_bound, but its first output carries the event's end."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le, event.le + 1, {"re": "inf" if event.re >= INF else event.re}


@udm(name="adder", version="1.0.0", time_bound=True)
class Adder(TimeSensitiveSpanUDO):
    """Declares time_bound, but a shorter event gets one more output, at its second tick."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le, event.le + 1, {}
        if event.re - event.le <= 6:
            yield event.le + 1, event.le + 2, {"extra": True}


@udm(name="outside", version="1.0.0")
class Outside(TimeSensitiveSpanUDO):
    """Breaks the contract: an output starting before the event."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le - 1, event.le + 1, {}


@udm(name="scalars", version="1.0.0")
class Scalars(SpanUDO):
    """Breaks the contract: yields numbers, not payload objects."""

    def compute(self, payload: Any) -> Iterator[Any]:
        yield 1


@udm(name="flaky", version="1.0.0")
class Flaky(SpanUDO):
    """Breaks the contract: a different number of outputs on every call."""

    calls = 0

    def compute(self, payload: Any) -> Iterator[dict[str, Any]]:
        Flaky.calls += 1
        for i in range(Flaky.calls):
            yield {"i": i}


@udm(name="crash", version="1.0.0")
class Crash(SpanUDO):
    """Raises on a payload with ``boom``."""

    def compute(self, payload: Any) -> Iterator[dict[str, Any]]:
        if "boom" in payload:
            raise KeyError("boom")
        yield dict(payload)


CAT = Catalog()
for _cls in (Explode, Pieces, Ticks, Whole, Liar, Adder, Outside, Scalars, Flaky, Crash, Count, Sum, InRange):
    CAT.add(_cls)
ENGINE = runner_engine(QueryRunner, CAT)
EXPLODE = {"op": "flat_map", "udm": "explode", "params": {"field": "tags", "as": "tag"}}


def q(*steps: dict[str, Any], **extra: Any) -> BoundQuery:
    return bind(parse_query({"steps": list(steps), **extra}), CAT)


def run(bq: BoundQuery, elements: list[Element]) -> tuple[list[Element], list[Any], QueryRunner]:
    """Output, dead letters and the runner, the elements fed one by one as lines 1, 2, ..."""
    r = QueryRunner(bq)
    out = [o for i, el in enumerate(elements, 1) for o in r.process(el, line=i)] + r.finish()
    return out, r.take_dead_letters(), r


def kinds(out: list[Element]) -> list[str]:
    return [type(e).__name__ for e in out]


# ---------------------------------------------------------------------------------------------------
# time-insensitive: explode


def test_explode_outputs_keep_the_lifetime_and_a_retraction_changes_exactly_its_event() -> None:
    els = [Insert("a", 1, 10, {"k": "x", "tags": [1, 2, 3]}), Insert("b", 4, 6, {"k": "y", "tags": ["p"]}),
           Cti(3), Retract("a", 1, 10, 5), Retract("b", 4, 6, 4), Cti(INF)]
    out, dead, _ = run(q(EXPLODE), els)
    assert dead == []
    assert cht(out).events() == [(1, 5, {"k": "x", "tag": 1}), (1, 5, {"k": "x", "tag": 2}),
                                 (1, 5, {"k": "x", "tag": 3})]
    # a's three outputs shortened with it (one retraction each, to 5), b's one output deleted; CTIs pass
    assert kinds(out) == ["Insert"] * 4 + ["Cti"] + ["Retract"] * 4 + ["Cti"]
    rets = [e for e in out if isinstance(e, Retract)]
    assert [(r.le, r.re, r.re_new) for r in rets] == [(1, 10, 5)] * 3 + [(4, 6, 4)]
    assert out[4] == Cti(3) and out[-1] == Cti(INF)
    ids = {e.id for e in out if isinstance(e, Insert)}
    assert len(ids) == 4 and {r.id for r in rets} == ids


def test_explode_field_and_as() -> None:
    ev = [Insert("a", 0, 2, {"k": 1, "xs": ["u", "v"]}), Cti(INF)]
    keep = cht(run(q({"op": "flat_map", "udm": "explode", "params": {"field": "xs"}}), ev)[0]).events()
    assert keep == [(0, 2, {"k": 1, "xs": "u"}), (0, 2, {"k": 1, "xs": "v"})]
    moved = cht(run(q({"op": "flat_map", "udm": "explode", "params": {"field": "xs", "as": "x"}}), ev)[0]).events()
    assert moved == [(0, 2, {"k": 1, "x": "u"}), (0, 2, {"k": 1, "x": "v"})]


def test_malformed_payloads_and_their_retractions_are_dead_letters_with_the_reason() -> None:
    els = [Insert("a", 1, 5, {"tags": "no"}), Insert("b", 2, 5, {"k": 1}), Insert("c", 3, 5, {"tags": []}),
           Insert("d", 3, 5, {"tags": [7]}), Retract("a", 1, 5, 2), Retract("c", 3, 5, 4), Cti(INF)]
    out, dead, r = run(q(EXPLODE), els)
    assert cht(out).events() == [(3, 5, {"tag": 7})]
    reasons = [(d.element["id"], d.reason) for d in dead]
    assert reasons == [
        ("a", "step s0: malformed payload for UDM explode 1.0.0: field 'tags' must be a list, got a string"),
        ("b", "step s0: malformed payload for UDM explode 1.0.0: missing field 'tags'"),
        ("a", "step s0: retraction of unknown id 'a'"),
    ]
    assert [d.line for d in dead] == [1, 2, 5]
    assert r.stats.reasons == {"malformed": 2, "unknown_id": 1}  # c (an empty list) just gives no outputs


def test_on_violation_error_stops_at_a_malformed_payload() -> None:
    bq = q(EXPLODE, on_violation="error")
    with pytest.raises(Exception, match="line 1.*malformed payload for UDM explode 1.0.0"):
        run(bq, [Insert("a", 1, 5, {"tags": 3}), Cti(INF)])


def test_disorder_gives_the_same_cht_as_in_order() -> None:
    events = [Insert(f"e{i}", le, le + d, {"tags": list(range(i % 3))}) for i, (le, d) in
              enumerate([(5, 3), (1, 9), (3, 1), (8, 2), (2, 6)])]
    in_order = sorted(events, key=lambda e: e.le)
    want = [(e.le, e.re, {"tag": t}) for e in in_order for t in e.payload["tags"]]
    for order in (events, in_order, list(reversed(events))):
        got = cht(run(q(EXPLODE), [*order, Cti(INF)])[0]).events()
        assert sorted(got, key=repr) == sorted(want, key=repr)


# ---------------------------------------------------------------------------------------------------
# time-sensitive


def test_time_sensitive_retraction_emits_the_minimal_diff_and_the_cti_is_held() -> None:
    # [0, 10): head [0, 1) dur 10, tail [8, 10); shortened to [0, 6): head's payload changes (dur 6): the old
    # head deleted, a new one inserted; the tail moves to [4, 6): deleted and inserted. Extended to [0, 8):
    # head changes again, tail [6, 8). The output CTI is held at LE 0 while the event can change.
    els = [Insert("a", 0, 10, {"v": 1}), Cti(4), Retract("a", 0, 10, 6), Cti(5), Retract("a", 0, 6, 8),
           Cti(9), Cti(INF)]
    out, dead, _ = run(q({"op": "flat_map", "udm": "pieces"}), els)
    assert dead == []
    assert cht(out).events() == [(0, 1, {"dur": 8, "head": 1}), (6, 8, {"tail": 1})]
    assert [e for e in out if isinstance(e, Cti)] == [Cti(0), Cti(9), Cti(INF)]  # held at 0 until a closes
    first_ret = [e for e in out if isinstance(e, Retract)][:2]
    assert sorted((r.le, r.re, r.re_new) for r in first_ret) == [(0, 1, 0), (8, 10, 8)]


def test_time_sensitive_unchanged_outputs_are_untouched_and_moved_ends_are_one_retraction() -> None:
    # ticks: points at 0, 2, 4, 6 for [0, 10); shortened to [0, 5): only the point at 6 goes
    out, _, _ = run(q({"op": "flat_map", "udm": "ticks"}), [Insert("a", 0, 10, {}), Cti(3),
                                                           Retract("a", 0, 10, 5), Cti(INF)])
    assert kinds(out) == ["Insert"] * 4 + ["Cti", "Retract", "Cti"]
    assert out[4] == Cti(3)  # time_bound: the input CTI at once
    assert (out[5].le, out[5].re, out[5].re_new) == (6, 7, 6)
    # an output whose (LE, payload) stays and whose end moves is retracted to its new end, not re-inserted
    out, _, _ = run(q({"op": "flat_map", "udm": "whole"}), [Insert("a", 0, 10, {"v": 2}), Retract("a", 0, 10, 6),
                                                           Retract("a", 0, 6, 2), Retract("a", 0, 2, INF)])
    ids = [e.id for e in out if isinstance(e, Insert)]
    assert len(ids) == 2  # never re-inserted: every change below is a retraction of one of the two
    changes = [(e.id == ids[0], e.re, e.re_new) for e in out if isinstance(e, Retract)]
    assert changes[0] == (True, 10, 6)  # the event's image shortened; the head [0, 3) untouched
    assert sorted(changes[1:3]) == [(False, 3, 2), (True, 6, 2)]  # both shortened to 2
    assert sorted(changes[3:]) == [(False, 2, 3), (True, 2, INF)]  # extended: the image to INF, the head to 3


def test_time_bound_broken_is_a_contract_violation_naming_udm_event_and_value() -> None:
    bq = q({"op": "flat_map", "udm": "liar"})
    with pytest.raises(ContractViolation) as exc:
        run(bq, [Insert("a", 0, 10, {"x": 1}), Retract("a", 0, 10, 5)])
    msg = str(exc.value)
    assert "UDM liar 2.0.0 on event [0, 10) {'x': 1}" in msg and "time_bound" in msg and "(0, 1" in msg


def test_time_bound_broken_names_whether_the_retraction_changes_or_adds_an_output() -> None:
    """Both ways a retraction can break ``time_bound`` (its changes must start at or after its sync time,
    ``re_new`` here): one that changes an earlier output (liar: its first output carries the end) and one
    that adds an output before it (adder: a shorter event gets an output at its second tick)."""
    for name, what, output in (("liar", "changes", "(0, 1"), ("adder", "adds", "(1, 2, {'extra': True})")):
        bq = q({"op": "flat_map", "udm": name})
        with pytest.raises(ContractViolation) as exc:
            run(bq, [Insert("a", 0, 10, {"x": 1}), Retract("a", 0, 10, 5)])
        msg = str(exc.value)
        assert (f"declared time_bound, but the retraction to re_new 5 (sync time 5) {what} an output starting "
                "before it") in msg, msg
        assert output in msg, msg


def test_outputs_outside_the_event_or_not_objects_are_contract_violations() -> None:
    with pytest.raises(ContractViolation, match=r"UDM outside 1.0.0 on event \[3, 5\).*inside the event's "
                                                r"\[3, 5\).*\(2, 4, \{\}\)"):
        run(q({"op": "flat_map", "udm": "outside"}), [Insert("a", 3, 5, {})])
    with pytest.raises(ContractViolation, match="UDM scalars 1.0.0 on event.*must be a JSON object, got: 1"):
        run(q({"op": "flat_map", "udm": "scalars"}), [Insert("a", 3, 5, {})])
    with pytest.raises(ContractViolation, match="UDM crash 1.0.0 on event.*compute raised KeyError"):
        run(q({"op": "flat_map", "udm": "crash"}), [Insert("a", 3, 5, {"boom": 1})])


def test_a_nondeterministic_span_udo_is_caught_on_the_retraction() -> None:
    Flaky.calls = 0
    with pytest.raises(ContractViolation, match="must be deterministic"):
        run(q({"op": "flat_map", "udm": "flaky"}), [Insert("a", 0, 5, {}), Retract("a", 0, 5, 3)])


# ---------------------------------------------------------------------------------------------------
# binding, API


def test_binding_refuses_the_wrong_kind_both_ways_with_what_is_available() -> None:
    with pytest.raises(PolicyError, match=r"'sum' is a UDA; a flat_map step runs a span UDO.*explode"):
        q({"op": "flat_map", "udm": "sum"})
    with pytest.raises(PolicyError, match="'explode' is a span UDO, run once per event: use it in a flat_map"):
        q({"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "explode"})
    with pytest.raises(ParamError, match="bad parameters for UDM 'explode'.*'sep'"):
        q({"op": "flat_map", "udm": "explode", "params": {"sep": ","}})


def test_fluent_flat_map_is_the_spec_step() -> None:
    s = Stream.query(catalog=CAT).flat_map("explode", params={"field": "tags"}).filter("in_range", args={"field": "v"})
    assert s.spec.to_json_dict()["steps"][0] == {"op": "flat_map", "udm": "explode", "params": {"field": "tags"}}
    evs = [Insert("a", 0, 3, {"tags": ["x", "y"]}), Cti(INF)]
    got = Stream.from_events(evs, catalog=CAT).flat_map("explode", params={"field": "tags"}).to_elements()
    got = cht(got)
    assert got.events() == [(0, 3, {"tags": "x"}), (0, 3, {"tags": "y"})]


def test_snapshot_and_restore_mid_run_give_the_same_output() -> None:
    bq = q({"op": "flat_map", "udm": "pieces"})
    els = [Insert("a", 0, 10, {"v": 1}), Insert("b", 2, 9, {"v": 2}), Cti(3), Retract("a", 0, 10, 6),
           Retract("b", 2, 9, 12), Cti(7), Retract("b", 2, 12, 8), Cti(INF)]
    whole, _, _ = run(bq, els)
    r = QueryRunner(bq)
    first = [o for el in els[:4] for o in r.process(el)]
    r2 = QueryRunner.restore(r.snapshot(), bq)
    rest = [o for el in els[4:] for o in r2.process(el)] + r2.finish()
    assert first + rest == whole


# ---------------------------------------------------------------------------------------------------
# random streams against the oracle


def _tagged(elements: list[Element], seed: int) -> list[Element]:
    """Inserts get a list ``tags`` of 0-3 elements (sometimes missing or not a list: malformed)."""
    rng = random.Random(seed)
    out: list[Element] = []
    for el in elements:
        if isinstance(el, Insert) and isinstance(el.payload, dict):
            p = {**el.payload, "tags": [f"t{j}" for j in range(rng.randint(0, 3))]}
            roll = rng.random()
            if roll < 0.07:
                del p["tags"]
            elif roll < 0.12:
                p["tags"] = "t0"
            if rng.random() < 0.05:
                p.pop("v", None)
            el = Insert(el.id, el.le, el.re, p)
        out.append(el)
    return out


KNOBS: list[dict[str, Any]] = [
    {"events": 8, "disorder": "slightly", "speculation": 0.4, "bad": 0.1, "duration": "mixed"},
    {"events": 10, "disorder": "out_of_order", "speculation": 0.5, "chain": 2, "cti": "eager"},
    {"events": 7, "disorder": "highly", "duration": "long", "speculation": 0.6, "bad": 0.15},
    {"events": 9, "overlap": "high", "duplicates": 0.3, "speculation": 0.3, "cti": "lazy", "duration": "short"},
]

QUERIES = {
    "explode": [EXPLODE],
    "pieces": [{"op": "flat_map", "udm": "pieces"}],
    "ticks": [{"op": "flat_map", "udm": "ticks"}],
    "explode_then_window": [EXPLODE, {"op": "window", "window": {"type": "tumbling", "size": 5},
                                      "group_by": ["tag"], "udm": "count", "as": "n"}],
    "window_then_pieces": [{"op": "window", "window": {"type": "hopping", "size": 6, "hop": 3}, "group_by": ["g"],
                            "udm": "sum", "input": "v", "as": "v"}, {"op": "flat_map", "udm": "pieces"}],
    "filter_then_pieces": [{"op": "filter", "udf": "in_range", "args": {"field": "v"},
                            "params": {"lo": 0, "hi": 70}},
                           {"op": "flat_map", "udm": "pieces"}],
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_random_streams_against_the_oracle(name: str) -> None:
    bq = q(*QUERIES[name])
    cases = 40
    outputs = 0
    for seed in range(cases):
        els = _tagged(generate(seed=seed, groups=2, **KNOBS[seed % len(KNOBS)]), seed)
        outputs += len(oracle(bq, els, CAT))
        rep = check_engine(ENGINE, bq, els, seed=seed, variants=1 if seed % 2 else 0, catalog=CAT)
        assert rep.ok, rep.text()
    assert outputs > cases  # the streams exercise the step (not all refused)


def test_a_graph_with_flat_map_on_both_branches_of_a_union() -> None:
    bq = bind(parse_query({"inputs": {"a": {}, "b": {}}, "steps": [
        {"id": "x", "from": "a", **EXPLODE}, {"id": "y", "from": "b", "op": "flat_map", "udm": "ticks"},
        {"id": "u", "op": "union", "from": ["x", "y"]}]}), CAT)
    for seed in range(25):
        st = generate_related(["a", "b"], seed=seed, keys=2, events=7, speculation=0.4, disorder="slightly")
        st = {k: _tagged(v, seed) for k, v in st.items()}
        rep = check_engine(ENGINE, bq, st, seed=seed, variants=1, catalog=CAT,
                           interleavings=("sync", "random"))
        assert rep.ok, rep.text()


def test_the_engine_fails_a_held_cti_passed_on_early() -> None:
    """The checks above can fail: an engine passing a time-sensitive flat_map's CTIs straight on (as a
    time-insensitive one may) breaks its own CTIs or prefix finality on these streams."""
    bq = q({"op": "flat_map", "udm": "pieces"})

    def eager(b: BoundQuery) -> QueryRunner:
        r = QueryRunner(b)
        r.ops[0].passes_ctis = True  # type: ignore[attr-defined]
        return r

    bad = 0
    for seed in range(20):
        els = _tagged(generate(seed=seed, groups=2, **KNOBS[seed % len(KNOBS)]), seed)
        bad += not check_engine(runner_engine(eager, CAT), bq, els, seed=seed, variants=0, catalog=CAT).ok
    assert bad >= 3


# ---------------------------------------------------------------------------------------------------
# bounded state


@pytest.mark.parametrize("name", ["explode", "pieces", "ticks"])
def test_state_stays_bounded_under_advancing_ctis(name: str) -> None:
    bq = q(*QUERIES[name])
    r = QueryRunner(bq)
    most = 0
    for i in range(3000):
        le = i * 2
        r.process(Insert(f"e{i}", le, le + 5, {"v": i, "tags": ["a", "b"]}))
        if i % 7 == 3:
            r.process(Retract(f"e{i}", le, le + 5, le + 3))
        if i % 10 == 9:
            r.process(Cti(le))
            most = max(most, r.ops[0].state_size()["events"])
    assert most <= 12  # the events not yet closed by the CTI (RE >= CTI), never the whole history
    r.finish()
    assert r.ops[0].state_size() == {"events": 0}
