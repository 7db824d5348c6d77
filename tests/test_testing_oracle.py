"""The reference oracle against hand-computed expectations (SEMANTICS §1–6, docs/semantics-notes.md).

Every expected value below is worked out by hand from the spec in the comment above it, never taken
from the oracle's own output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from udm.host.catalog import Catalog
from udm.host.errors import ContractViolation, ViolationError
from udm.host.model.spec import (
    CountByEnd,
    CountByStart,
    FilterStep,
    Hopping,
    MapStep,
    QuerySpec,
    Snapshot,
    Tumbling,
    WindowStep,
)
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import CHT, cht, oracle, oracle_run
from udm.host.testing.oracle import OracleUndecidable
from udm.sdk import INF, UDA, UDO, TimeSensitiveUDO, udm
from udm_patterns import ALL as PATTERNS
from udm_stats import ALL as STATS


@udm(name="first_member", version="1.0.0", input_type="any", output_type="any")
class First(UDA):
    """The first member in canonical order (order-sensitive on purpose)."""

    def compute(self, payloads: Sequence[Any]) -> Any:
        return payloads[0]


@udm(name="boom", version="1.0.0")
class Boom(UDA):
    """Always raises."""

    def compute(self, payloads: Sequence[Any]) -> Any:
        raise RuntimeError("kaboom")


@udm(name="scalars", version="1.0.0", input_type="float", output_type="float")
class Scalars(UDO):
    """Yields its inputs doubled, as scalars."""

    def compute(self, payloads: Sequence[Any]) -> Any:
        return [2 * p for p in payloads]


@udm(name="early", version="1.0.0", allowed_output=("window", "unaltered"))
class Early(TimeSensitiveUDO):
    """Yields one output starting one tick before the window (a contract violation under unaltered)."""

    def compute(self, events: Sequence[Any], window: Any) -> Any:
        return [(window.le - 1, window.re, {"n": len(events)})]


@pytest.fixture(scope="module")
def cat() -> Catalog:
    c = Catalog()
    for cls in (*STATS, *PATTERNS, First, Boom, Scalars, Early):
        entry = c.add(cls)
        assert entry.valid, entry.problems
    return c


def ins(i: str, le: int, re: int, **payload: Any) -> Insert:
    return Insert(i, le, re, payload)


def run(cat: Catalog, els: Sequence[Any], *steps: Any, **query: Any) -> CHT:
    return oracle(QuerySpec(steps=list(steps), **query), els, cat)


def win(window: Any, udm_name: str, **kw: Any) -> WindowStep:
    return WindowStep(window=window, udm=udm_name, **kw)


def expect(*rows: tuple[int, int, dict[str, Any]]) -> CHT:
    return CHT.from_events(rows)


# -- CHT (SEMANTICS §1/§2) ------------------------------------------------------------------------


def test_seed_table_i_ii_cht() -> None:
    # seeds/000 Table II: E0 inserted open-ended, extended... retracted to 10, then to 5; E1 inserted [4, 9).
    stream = [
        Insert("E0", 1, INF, {"p": "P1"}),
        Retract("E0", 1, INF, 10),
        Retract("E0", 1, 10, 5),
        Insert("E1", 4, 9, {"p": "P2"}),
    ]
    # Table I: (1, 5, P1), (4, 9, P2)
    assert cht(stream) == expect((1, 5, {"p": "P1"}), (4, 9, {"p": "P2"}))


def test_cht_ignores_invalid_elements_and_cti_violations() -> None:
    stream = [
        ins("a", 1, 5, v=1),
        ins("a", 2, 3, v=9),                 # duplicate live id
        Insert("z", 4, 4, {"v": 9}),         # le == re
        Retract("nope", 1, 5, 2),            # unknown id
        Retract("a", 1, 6, 2),               # does not match the live [1, 5)
        Cti(6),
        ins("b", 5, 9, v=2),                 # sync 5 < cti 6: violation
        Retract("a", 1, 5, 8),               # sync min(5, 8) = 5 < 6: violation
        ins("c", 6, 7, v=3),                 # fine
        Cti(3),                              # lower CTI: ignored, not an error
        ins("d", 5, 8, v=4),                 # still a violation of cti 6
        Insert("e", 7, 8, ["not", "a", "dict"]),  # type: ignore[arg-type]
    ]
    assert cht(stream) == expect((1, 5, {"v": 1}), (6, 7, {"v": 3}))
    # adjust: an insert violating cti 6 with re > 6 becomes [6, re); one with re <= 6 is dead-lettered
    adjusted = cht([Cti(6), ins("x", 2, 9, v=1), ins("y", 2, 6, v=2)], on_violation="adjust")
    assert adjusted == expect((6, 9, {"v": 1}))
    with pytest.raises(ViolationError):
        cht([Cti(6), ins("x", 2, 9, v=1)], on_violation="error")


def test_cht_full_retraction_frees_the_id_and_extension_is_allowed() -> None:
    stream = [ins("a", 1, 3, v=1), Retract("a", 1, 3, 1), ins("a", 2, 4, v=2), Retract("a", 2, 4, 9)]
    assert cht(stream) == expect((2, 9, {"v": 2}))
    # duplicates are a multiset
    assert cht([ins("a", 1, 2, v=1), ins("b", 1, 2, v=1)])[(1, 2, '{"v":1}')] == 2


def test_cht_an_id_closed_by_a_cti_is_free_again() -> None:
    """An event ending before the CTI can no longer be named (a retraction's sync time would be below the
    CTI), so its id may come back (semantics-notes 63); one ending at the CTI can still be extended."""
    assert cht([ins("a", 1, 3, v=1), Cti(5), ins("a", 6, 8, v=2)]) == expect((1, 3, {"v": 1}), (6, 8, {"v": 2}))
    assert cht([ins("a", 1, 5, v=1), Cti(5), ins("a", 6, 8, v=2)]) == expect((1, 5, {"v": 1}))
    assert cht([ins("a", 1, 5, v=1), Cti(5), Retract("a", 1, 5, 9)]) == expect((1, 9, {"v": 1}))
    # reused twice; a retraction then names the newest event only
    stream = [ins("a", 1, 2, v=1), Cti(3), ins("a", 4, 5, v=2), Cti(6), ins("a", 7, 9, v=3), Retract("a", 7, 9, 8)]
    assert cht(stream) == expect((1, 2, {"v": 1}), (4, 5, {"v": 2}), (7, 8, {"v": 3}))


@pytest.mark.parametrize("query", [
    {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"], "udm": "sum",
                "input": "v", "as": "s"}]},
    {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 0}},
               {"op": "window", "window": {"type": "count_by_start", "n": 2}, "udm": "count", "as": "n"}]},
])
def test_reused_ids_the_engine_and_the_oracle_agree(query: dict[str, Any]) -> None:
    from udm.host.engine.runner import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query

    stream: list[Any] = [
        Insert("a", 1, 3, {"g": "x", "v": 1}), Insert("b", 2, 12, {"g": "y", "v": 2}),
        Cti(5),
        Insert("a", 6, 7, {"g": "y", "v": 4}),  # a ended before the CTI: free again
        Insert("b", 6, 8, {"g": "x", "v": 8}),  # b is still open: a duplicate live id
        Cti(12),
        Insert("b", 13, 14, {"g": "x", "v": 16}),  # b ended at the CTI: still live (an extension may name it)
        Retract("b", 2, 12, 15),
        Cti(15),
        Insert("a", 16, 17, {"g": "x", "v": 32}),  # the second a ended before the CTI
        Cti(INF),
    ]
    bound = bind(parse_query(query))
    runner = QueryRunner(bound)
    out = runner.process_many(stream, range(1, len(stream) + 1)) + runner.finish()
    expected = oracle_run(bound, stream)
    assert cht(out) == expected.cht
    assert sorted(d.line for d in runner.take_dead_letters()) == sorted(r.index + 1 for r in expected.rejected)
    assert [r.index + 1 for r in expected.rejected] == [5, 7]


# -- windows (SEMANTICS §3) -----------------------------------------------------------------------

EVENTS = [ins("a", 1, 3, v=1), ins("b", 4, 7, v=2), ins("c", 6, 11, v=4), ins("d", 12, 13, v=8)]


def test_tumbling(cat: Catalog) -> None:
    # windows [0,5) [5,10) [10,15): a,b | b,c | c,d
    assert run(cat, EVENTS, win(Tumbling(size=5), "sum", input="v")) == expect(
        (0, 5, {"sum": 3}), (5, 10, {"sum": 6}), (10, 15, {"sum": 12}))


def test_tumbling_with_offset(cat: Catalog) -> None:
    # offset 2: [-3,2) a | [2,7) a,b,c | [7,12) c | [12,17) d
    assert run(cat, EVENTS, win(Tumbling(size=5, offset=2), "sum", input="v", **{"as": "s"})) == expect(
        (-3, 2, {"s": 1}), (2, 7, {"s": 7}), (7, 12, {"s": 4}), (12, 17, {"s": 8}))


def test_hopping_with_offset(cat: Catalog) -> None:
    # size 4, hop 2, offset 1: windows [1+2k, 5+2k). a=[1,2) in k=-1,0; b=[4,6) in k=0,1,2
    els = [ins("a", 1, 2, v=1), ins("b", 4, 6, v=2)]
    assert run(cat, els, win(Hopping(size=4, hop=2, offset=1), "sum", input="v")) == expect(
        (-1, 3, {"sum": 1}), (1, 5, {"sum": 3}), (3, 7, {"sum": 2}), (5, 9, {"sum": 2}))


def test_hopping_with_gaps(cat: Catalog) -> None:
    # size 2, hop 5: windows [5k, 5k+2). a=[1,3) -> [0,2); b=[3,4) falls in the gap; c=[4,8) -> [5,7)
    els = [ins("a", 1, 3, v=1), ins("b", 3, 4, v=2), ins("c", 4, 8, v=4)]
    assert run(cat, els, win(Hopping(size=2, hop=5), "count")) == expect(
        (0, 2, {"count": 1}), (5, 7, {"count": 1}))


def test_snapshot_with_an_endless_event(cat: Catalog) -> None:
    # endpoints 1 3 5 7 8 and an event with RE = INF: [1,3) a | [3,5) a,b | [5,7) b | [7,8) b,c | [8,INF) b
    els = [ins("a", 1, 5, v=1), ins("b", 3, INF, v=10), ins("c", 7, 8, v=100)]
    assert run(cat, els, win(Snapshot(), "sum", input="v")) == expect(
        (1, 3, {"sum": 1}), (3, 5, {"sum": 11}), (5, 7, {"sum": 10}), (7, 8, {"sum": 110}),
        (8, INF, {"sum": 10}))


def test_snapshot_gap_is_empty_preserving(cat: Catalog) -> None:
    # endpoints 1 2 4 5: [2,4) has no member -> no output
    els = [ins("a", 1, 2, v=1), ins("b", 4, 5, v=2)]
    assert run(cat, els, win(Snapshot(), "count")) == expect((1, 2, {"count": 1}), (4, 5, {"count": 1}))


def test_count_by_start_with_hop(cat: Catalog) -> None:
    # distinct LEs 1 2 4 6. n=2: windows [s_i, s_{i+1}+1) holding members with s_i <= LE <= s_{i+1}.
    els = [ins("a", 1, 2, v=1), ins("b", 2, 3, v=2), ins("d", 2, 3, v=8), ins("c", 4, 5, v=4),
           ins("e", 6, 7, v=16)]
    # hop 1: [1,3) a,b,d=11 | [2,5) b,d,c=14 | [4,7) c,e=20
    assert run(cat, els, win(CountByStart(n=2), "sum", input="v")) == expect(
        (1, 3, {"sum": 11}), (2, 5, {"sum": 14}), (4, 7, {"sum": 20}))
    # hop 2: i = 1, 3 only
    assert run(cat, els, win(CountByStart(n=2, hop=2), "sum", input="v")) == expect(
        (1, 3, {"sum": 11}), (4, 7, {"sum": 20}))


def test_count_by_start_membership_is_by_start_not_overlap(cat: Catalog) -> None:
    # a=[1,10) overlaps every window but only belongs to those whose LE range holds 1
    els = [ins("a", 1, 10, v=1), ins("b", 3, 4, v=2), ins("c", 5, 6, v=4)]
    # n=1: [1,2) a | [3,4) b | [5,6) c
    assert run(cat, els, win(CountByStart(n=1), "sum", input="v")) == expect(
        (1, 2, {"sum": 1}), (3, 4, {"sum": 2}), (5, 6, {"sum": 4}))


def test_count_by_end_with_hop(cat: Catalog) -> None:
    # distinct finite REs 3 5 8; the endless e never belongs. n=2: [r_i - 1, r_{i+1}), r_i <= RE <= r_{i+1}
    els = [ins("a", 0, 3, v=1), ins("b", 1, 5, v=2), ins("c", 2, 5, v=4), ins("d", 4, 8, v=8),
           ins("e", 0, INF, v=100)]
    # [2,5): a,b,c = 7 | [4,8): b,c,d = 14
    assert run(cat, els, win(CountByEnd(n=2), "sum", input="v")) == expect((2, 5, {"sum": 7}), (4, 8, {"sum": 14}))
    assert run(cat, els, win(CountByEnd(n=2, hop=2), "sum", input="v")) == expect((2, 5, {"sum": 7}))
    # n=1 hop 1: [2,3) a | [4,5) b,c | [7,8) d
    assert run(cat, els, win(CountByEnd(n=1), "count")) == expect(
        (2, 3, {"count": 1}), (4, 5, {"count": 2}), (7, 8, {"count": 1}))


# -- endless events on tumbling/hopping windows (semantics-notes 2) --------------------------------


def test_endless_event_on_tumbling_is_cut_at_the_largest_finite_time(cat: Catalog) -> None:
    els = [ins("a", 2, INF, v=1), ins("b", 3, 4, v=2), Cti(12)]
    # T = 12 (the CTI): windows with W.LE <= 12: [0,5) a,b | [5,10) a | [10,15) a
    res = oracle_run(QuerySpec(steps=[win(Tumbling(size=5), "sum", input="v")]), els, cat)
    assert res.cht == expect((0, 5, {"sum": 3}), (5, 10, {"sum": 1}), (10, 15, {"sum": 1}))
    assert res.truncated_at == 12
    # no CTI: T = 4 (b's RE): only [0,5)
    assert run(cat, els[:2], win(Tumbling(size=5), "sum", input="v")) == expect((0, 5, {"sum": 3}))
    # a retraction's re_new counts too: b extended to 9 -> T = 9: [0,5) | [5,10) a,b=3
    els2 = [*els[:2], Retract("b", 3, 4, 9)]
    assert run(cat, els2, win(Tumbling(size=5), "sum", input="v")) == expect((0, 5, {"sum": 3}), (5, 10, {"sum": 3}))


def test_T_is_taken_from_what_the_first_step_accepts(cat: Catalog) -> None:
    # b is filtered out, but the stream reached 31 anyway: a=[2, INF) fills [0,5) ... [30,35) (W.LE <= 31)
    els = [ins("a", 2, INF, v=1), ins("b", 30, 31, v=50)]
    steps = [FilterStep(udf="in_range", args={"field": "v"}, params={"lo": 0, "hi": 10}),
             win(Tumbling(size=5), "sum", input="v")]
    assert run(cat, els, *steps) == expect(*[(5 * k, 5 * k + 5, {"sum": 1}) for k in range(7)])


def test_windows_of_a_later_step_with_finite_members_are_never_cut(cat: Catalog) -> None:
    # step 1: a=[0, INF), T = 7 (the CTI): count over [0,5) and [5,10) (W.LE <= 7) = 1 each.
    # step 2: max over tumbling 8: [0,8) holds both rows, [8,16) holds [5,10): finite, so never cut.
    els = [ins("a", 0, INF), Cti(7)]
    steps = [win(Tumbling(size=5), "count"), win(Tumbling(size=8), "max", input="count")]
    assert run(cat, els, *steps) == expect((0, 8, {"max": 1}), (8, 16, {"max": 1}))


# -- clipping (SEMANTICS §4) and output policies (§5) ---------------------------------------------


@pytest.mark.parametrize(("clip", "first", "second"), [
    ("none", (3, 7), (3, 7)),
    ("left", (3, 7), (5, 7)),
    ("right", (3, 5), (3, 7)),
    ("full", (3, 5), (5, 7)),
])
def test_clipping_policies(cat: Catalog, clip: str, first: tuple[int, int], second: tuple[int, int]) -> None:
    # a=[3,7) in tumbling windows [0,5) and [5,10); `members` shows the clipped lifetime it was handed
    got = run(cat, [ins("a", 3, 7, x=1)], win(Tumbling(size=5), "members", clip=clip))
    assert got == expect((0, 5, {"le": first[0], "re": first[1], "x": 1}),
                         (5, 10, {"le": second[0], "re": second[1], "x": 1}))


def test_output_policies(cat: Catalog) -> None:
    els = [ins("a", 3, 7, x=1)]
    # unaltered with left clipping: outputs keep the clipped lifetimes [3,7) and [5,7)
    assert run(cat, els, win(Tumbling(size=5), "members", clip="left", output="unaltered")) == expect(
        (3, 7, {"le": 3, "re": 7, "x": 1}), (5, 7, {"le": 5, "re": 7, "x": 1}))
    # clip: the output lifetime [3,7) intersected with each window
    assert run(cat, els, win(Tumbling(size=5), "members", output="clip")) == expect(
        (3, 5, {"le": 3, "re": 7, "x": 1}), (5, 7, {"le": 3, "re": 7, "x": 1}))
    # unaltered without clipping: in [5,10) the output [3,7) starts before the window -> violation
    with pytest.raises(ContractViolation, match="members"):
        run(cat, els, win(Tumbling(size=5), "members", output="unaltered"))


def test_time_bound_output_of_follows(cat: Catalog) -> None:
    els = [ins("x", 1, 2, type="A"), ins("y", 3, 4, type="B")]
    # window [0,10): y is a B after an A at 1 -> output [3, min(4, 10)) with a_le = 1
    step = win(Tumbling(size=10), "follows", output="time_bound")
    assert run(cat, els, step) == expect((3, 4, {"type": "B", "a_le": 1}))
    assert run(cat, els, win(Tumbling(size=10), "follows")) == expect((0, 10, {"type": "B", "a_le": 1}))


def test_unaltered_output_before_the_window_is_a_contract_violation(cat: Catalog) -> None:
    with pytest.raises(ContractViolation, match=r"early.*\[0, 5\)"):
        run(cat, [ins("a", 1, 2)], win(Tumbling(size=5), "early", output="unaltered"))


def test_time_sensitive_uda(cat: Catalog) -> None:
    # twa over [0,10): (2*5 + 4*7) / 10 = 3.8
    els = [ins("a", 0, 5, v=2), ins("b", 3, 12, v=4)]
    got = run(cat, els, win(Tumbling(size=10), "twa", input="v", clip="right"))
    # [0,10): a=[0,5), b=[3,10) -> 3.8 ; [10,20): b=[10,12) -> 4*2/10 = 0.8
    assert got == expect((0, 10, {"twa": 3.8}), (10, 20, {"twa": 0.8}))


# -- canonical order (SEMANTICS §5, notes 5) ------------------------------------------------------


def test_members_are_handed_over_in_canonical_order(cat: Catalog) -> None:
    # equal lifetimes: ties broken by canonical JSON text, so 10 ("10") comes before 9 ("9")
    els = [ins("a", 1, 3, v=9), ins("b", 1, 3, v=10)]
    assert run(cat, els, win(Tumbling(size=5), "first_member", input="v")) == expect((0, 5, {"first_member": 10}))
    # order is by the *clipped* lifetime: in [10,20) a=[5,15) comes first unclipped, c=[10,12) when left-clipped
    els = [ins("a", 5, 15, v=1), ins("c", 10, 12, v=3)]
    none = run(cat, els, win(Tumbling(size=10), "first_member", input="v"))
    left = run(cat, els, win(Tumbling(size=10), "first_member", input="v", clip="left"))
    assert none == expect((0, 10, {"first_member": 1}), (10, 20, {"first_member": 1}))
    assert left == expect((0, 10, {"first_member": 1}), (10, 20, {"first_member": 3}))


# -- group & apply, input mapping, payload shape (SEMANTICS §6, notes 3, 4, 6) --------------------


def test_group_by_and_missing_fields(cat: Catalog) -> None:
    els = [ins("a", 0, 2, g="x", v=1), ins("b", 1, 3, g="x", v=2), ins("c", 0, 1, g="y", v=5),
           ins("d", 0, 1, v=100),          # no group key: dead-lettered by the step
           ins("e", 0, 1, g="y"),          # no input field: dead-lettered
           Retract("d", 0, 1, 0)]          # retraction of a dead-lettered insert: unknown id
    assert run(cat, els, win(Tumbling(size=5), "sum", input="v", group_by=["g"])) == expect(
        (0, 5, {"g": "x", "sum": 3}), (0, 5, {"g": "y", "sum": 5}))


def test_snapshot_windows_are_per_group(cat: Catalog) -> None:
    # group x alone has endpoints 0, 4; group y 2, 6: no [0,2) [2,4) [4,6) split across groups
    els = [ins("a", 0, 4, g="x"), ins("b", 2, 6, g="y")]
    assert run(cat, els, win(Snapshot(), "count", group_by=["g"])) == expect(
        (0, 4, {"g": "x", "count": 1}), (2, 6, {"g": "y", "count": 1}))


def test_input_mapping_and_udo_payloads(cat: Catalog) -> None:
    els = [ins("a", 0, 2, g="k", price=3, n="p"), ins("b", 1, 3, g="k", price=5, n="q"),
           ins("c", 1, 3, g="k", price=5, n="r"), ins("d", 2, 4, g="k", price=1, n="s")]
    # topk k=2 by value over {"value": price, "n": n}; ties by canonical text: q before r. Keys added.
    step = win(Tumbling(size=10), "topk", input={"value": "price", "n": "n"}, params={"k": 2}, group_by=["g"])
    assert run(cat, els, step) == expect((0, 10, {"value": 5, "n": "q", "rank": 1, "g": "k"}),
                                         (0, 10, {"value": 5, "n": "r", "rank": 2, "g": "k"}))
    # a scalar UDO output x becomes {"value": x}
    assert run(cat, els[:2], win(Tumbling(size=10), "scalars", input="price")) == expect(
        (0, 10, {"value": 6}), (0, 10, {"value": 10}))
    # no input: the whole payload; median of a field-name input
    assert run(cat, els, win(Tumbling(size=10), "median", input="price")) == expect((0, 10, {"median": 4.0}))


# -- span steps and composition (notes 7, seeds/002 §7) -------------------------------------------


def test_filter_map_then_window(cat: Catalog) -> None:
    els = [ins("a", 0, 2, v=1), ins("b", 1, 3, v=50), ins("c", 2, 4, v=7), ins("d", 3, 4, w=1)]
    steps = [
        FilterStep(udf="in_range", args={"field": "v"}, params={"lo": 0, "hi": 10}),  # drops b; d lacks v
        MapStep(udf="in_range", args={"field": "v"}, params={"lo": 5, "hi": 10}, **{"as": "big"}),
    ]
    assert run(cat, els, *steps) == expect((0, 2, {"v": 1, "big": False}), (2, 4, {"v": 7, "big": True}))
    # then count per `big` over tumbling 10
    assert run(cat, els, *steps, win(Tumbling(size=10), "count", group_by=["big"])) == expect(
        (0, 10, {"big": False, "count": 1}), (0, 10, {"big": True, "count": 1}))


def test_window_step_feeding_a_window_step(cat: Catalog) -> None:
    # per-5 sums 3, 6, 12 (test_tumbling), then the max over tumbling 20 of those sums
    steps = [win(Tumbling(size=5), "sum", input="v"), win(Tumbling(size=20), "max", input="sum")]
    assert run(cat, EVENTS, *steps) == expect((0, 20, {"max": 12}))
    # a finite max_memory_time after a window step depends on that step's physical output
    bad = [steps[0], win(Tumbling(size=20), "max", input="sum", max_memory_time=3)]
    with pytest.raises(OracleUndecidable):
        run(cat, EVENTS, *bad)


# -- max_memory_time (notes 8) and contract violations (notes 9) ----------------------------------


def test_max_memory_time(cat: Catalog) -> None:
    els = [ins("a", 10, 11, v=1),
           ins("b", 3, 4, v=2),    # m = 10, effective cti 10 - 5 = 5: 3 < 5 -> violation
           ins("c", 6, 7, v=4),    # 6 >= 5: fine
           ins("d", 4, 8, v=8)]    # 4 < 5: violation; under adjust -> [5, 8)
    step = win(Tumbling(size=100), "sum", input="v", max_memory_time=5)
    assert run(cat, els, step) == expect((0, 100, {"sum": 5}))
    assert run(cat, els, step, on_violation="adjust") == expect((0, 100, {"sum": 13}))
    members = win(Tumbling(size=100), "members", input={"v": "v"}, max_memory_time=5, clip="none")
    got = run(cat, els, members, on_violation="adjust")
    assert (0, 100, '{"le":5,"re":8,"v":8}') in got


def test_udm_raising_is_a_contract_violation_naming_udm_version_and_window(cat: Catalog) -> None:
    with pytest.raises(ContractViolation, match=r"'boom' 1\.0\.0 in window \[0, 5\).*kaboom"):
        run(cat, [ins("a", 1, 2, v=1)], win(Tumbling(size=5), "boom", input="v"))


def test_oracle_imports_nothing_from_the_engine() -> None:
    import ast
    from pathlib import Path

    import udm.host.testing as kit

    for path in Path(kit.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert "engine" not in node.module.split("."), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any("udm.host.engine" in a.name for a in node.names), path.name
