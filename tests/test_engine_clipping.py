"""Engine: input clipping (SEMANTICS §4), canonical member order and output timestamping policies (§5),
and UDM contract violations reported by name, version, window and value."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from test_engine_support import catalog_with, rows, run, table, window_query

from udm.host.errors import ContractViolation
from udm.host.temporal.elements import Cti, Insert
from udm.sdk import INF, UDA, UDO, Event, TimeSensitiveUDO, WindowDescriptor, udm

TUMBLE10 = {"type": "tumbling", "size": 10}
A = [Insert("a", 5, 25, {"v": 1})]


def members(clip: str, output: str = "window") -> list:
    out, _ = run(window_query(TUMBLE10, "members", input="v", clip=clip, output=output), A)
    return table(out)


def test_clip_none_left_right_full() -> None:
    def m(le: int, re: int) -> dict:
        return {"le": le, "re": re, "value": 1}

    assert members("none") == rows((0, 10, m(5, 25)), (10, 20, m(5, 25)), (20, 30, m(5, 25)))
    assert members("left") == rows((0, 10, m(5, 25)), (10, 20, m(10, 25)), (20, 30, m(20, 25)))
    assert members("right") == rows((0, 10, m(5, 10)), (10, 20, m(5, 20)), (20, 30, m(5, 25)))
    assert members("full") == rows((0, 10, m(5, 10)), (10, 20, m(10, 20)), (20, 30, m(20, 25)))


def test_output_policies_unaltered_and_clip() -> None:
    def m(le: int, re: int) -> dict:
        return {"le": le, "re": re, "value": 1}

    # unaltered keeps the UDO's lifetimes (here: the clipped member lifetimes)
    assert members("full", "unaltered") == rows((5, 10, m(5, 10)), (10, 20, m(10, 20)), (20, 25, m(20, 25)))
    # clip intersects the UDO's lifetime [5, 25) with each window
    assert members("none", "clip") == rows((5, 10, m(5, 25)), (10, 20, m(5, 25)), (20, 25, m(5, 25)))


def test_unaltered_output_before_the_window_is_a_contract_violation() -> None:
    with pytest.raises(ContractViolation) as exc:
        members("none", "unaltered")
    msg = str(exc.value)
    assert "members 1.0.0" in msg and "[10, 20)" in msg and "(5, 25" in msg


def test_time_bound_policy_with_follows() -> None:
    stream = [Insert("x", 1, 3, {"type": "A"}), Insert("y", 4, 6, {"type": "B"}), Insert("z", 12, 13, {"type": "B"}),
              Cti(8)]
    for output, lifetime in (("time_bound", (4, 6)), ("unaltered", (4, 6)), ("clip", (4, 6)), ("window", (0, 10))):
        out, _ = run(window_query(TUMBLE10, "follows", output=output), stream)
        assert table(out) == rows((*lifetime, {"type": "B", "a_le": 1})), output


def test_time_bound_liveliness_output_cti_equals_input_cti() -> None:
    stream = [Insert("x", 1, 3, {"type": "A"}), Insert("y", 4, 6, {"type": "B"}), Cti(5)]
    r_out, _ = run(window_query(TUMBLE10, "follows", output="time_bound"), stream, mode="each")
    assert [el.t for el in r_out if isinstance(el, Cti)] == [5, INF]
    # the window [0, 10) was emitted speculatively before cti(5): its outputs start at 4 < 5
    first_cti = next(i for i, el in enumerate(r_out) if isinstance(el, Cti))
    assert any(isinstance(el, Insert) for el in r_out[:first_cti])


# ---------------------------------------------------------------------------------------------------------
# canonical member order (semantics-notes 5)
# ---------------------------------------------------------------------------------------------------------
@udm(name="first_value", version="2.0.0")
class First(UDA):
    """The first member handed over (order-sensitive on purpose)."""

    def compute(self, payloads: Sequence[object]) -> object:
        return payloads[0]


def test_members_are_handed_over_in_canonical_order() -> None:
    cat = catalog_with(First)
    stream = [Insert("a", 1, 20, {"v": "x"}), Insert("b", 12, 13, {"v": "y"}), Insert("c", 10, 15, {"v": "z"})]
    # window [10, 20): unclipped order a (1,20), c (10,15), b (12,13); left-clipped: c (10,15), a (10,20), b
    out, _ = run(window_query(TUMBLE10, "first_value", input="v"), stream, cat)
    assert table(out) == rows((0, 10, {"first_value": "x"}), (10, 20, {"first_value": "x"}))
    out, _ = run(window_query(TUMBLE10, "first_value", input="v", clip="left"), stream, cat)
    assert table(out) == rows((0, 10, {"first_value": "x"}), (10, 20, {"first_value": "z"}))
    # ties on (LE, RE): canonical JSON text of the value, whatever the arrival order
    ties = [Insert("p", 2, 3, {"v": "b"}), Insert("q", 2, 3, {"v": "a"}), Insert("r", 2, 3, {"v": {"k": 1}})]
    out, _ = run(window_query(TUMBLE10, "first_value", input="v"), ties, cat)
    assert table(out) == rows((0, 10, {"first_value": "a"}))  # '"a"' < '"b"' < '{"k":1}'


# ---------------------------------------------------------------------------------------------------------
# contract violations
# ---------------------------------------------------------------------------------------------------------
@udm(name="raiser", version="3.1.0")
class Raiser(UDA):
    """Raises."""

    def compute(self, payloads: Sequence[object]) -> object:
        raise ValueError("boom")


@udm(name="no_iter", version="1.0.0")
class NoIter(UDO):
    """Returns None instead of an iterable."""

    def compute(self, payloads: Sequence[object]) -> None:  # type: ignore[override]
        return None


@udm(name="empty_life", version="1.0.0")
class EmptyLife(TimeSensitiveUDO):
    """Yields an output with RE <= LE."""

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> list:
        return [(window.le + 1, window.le + 1, {"x": 1})]


@udm(name="not_event", version="1.0.0")
class NotEvent(TimeSensitiveUDO):
    """Yields a bare string."""

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> list:
        return ["nope"]


@udm(name="liar", version="1.0.0", time_bound=True)
class Liar(TimeSensitiveUDO):
    """Declares time_bound but always restamps the whole window (changes before the CTI)."""

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> list:
        return [(window.le, window.re, {"n": len(events)})]


@pytest.mark.parametrize(
    ("cls", "output", "needle"),
    [
        (Raiser, "window", "raiser 3.1.0 in window [0, 10): compute raised ValueError"),
        (NoIter, "window", "no_iter 1.0.0 in window [0, 10): an operator must return an iterable"),
        (EmptyLife, "unaltered", "empty_life 1.0.0 in window [0, 10): output lifetime needs"),
        (NotEvent, "unaltered", "not_event 1.0.0 in window [0, 10)"),
    ],
)
def test_contract_violations_name_udm_version_window_and_value(cls: type, output: str, needle: str) -> None:
    cat = catalog_with(cls)
    extra = {"output": output} if output != "window" else {}
    with pytest.raises(ContractViolation) as exc:
        run(window_query(TUMBLE10, cls.manifest.name, **extra), [Insert("a", 1, 2, {"v": 1})], cat)
    assert needle in str(exc.value)


def test_broken_time_bound_promise_is_a_contract_violation_not_a_cti_violation() -> None:
    cat = catalog_with(Liar)
    stream = [Insert("a", 1, 2, {}), Cti(5), Insert("b", 6, 7, {})]
    with pytest.raises(ContractViolation, match=r"liar 1.0.0 in window \[0, 10\).*time_bound"):
        run(window_query(TUMBLE10, "liar", output="time_bound"), stream, cat, mode="each")
    # with the `window` policy the same UDM is fine: output CTI waits for the window
    out, _ = run(window_query(TUMBLE10, "liar", output="window"), stream, cat, mode="each")
    assert table(out) == rows((0, 10, {"n": 2}))
