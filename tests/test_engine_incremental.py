"""Engine: incremental UDMs (seeds/000 §IV.A.2, §V.E) — per-window system-held state updated with add/remove
deltas, giving exactly the non-incremental output."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from test_engine_support import catalog_with, check_physical, cht, gen_stream, rows, run, table, window_query

from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import (
    UDA,
    Event,
    IncrementalTimeSensitiveUDA,
    IncrementalUDA,
    IncrementalUDO,
    TimeSensitiveUDA,
    WindowDescriptor,
    udm,
)

CALLS: list[tuple[str, Any]] = []


@udm(name="isum", version="1.0.0")
class ISum(IncrementalUDA):
    """Sum with a call log."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[int]) -> int:
        CALLS.append(("add", sorted(delta)))
        return state + sum(delta)

    def remove(self, state: int, delta: Sequence[int]) -> int:
        CALLS.append(("remove", sorted(delta)))
        return state - sum(delta)

    def compute(self, state: int) -> int:
        return state


@udm(name="nsum", version="1.0.0")
class NSum(UDA):
    """Non-incremental sum."""

    def compute(self, payloads: Sequence[int]) -> int:
        return sum(payloads)


@udm(name="itwa", version="1.0.0")
class ITwa(IncrementalTimeSensitiveUDA):
    """Incremental time-weighted sum: Σ v·len(lifetime ∩ W) (state: a running total)."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Event]) -> int:
        return state + sum(e.payload * (e.re - e.le) for e in delta)

    def remove(self, state: int, delta: Sequence[Event]) -> int:
        return state - sum(e.payload * (e.re - e.le) for e in delta)

    def compute(self, state: int, window: WindowDescriptor) -> int:
        return state


@udm(name="ntwa", version="1.0.0")
class NTwa(TimeSensitiveUDA):
    """Non-incremental counterpart of itwa."""

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> int:
        return sum(e.payload * (e.re - e.le) for e in events)


@udm(name="ilist", version="1.0.0")
class IList(IncrementalUDO):
    """Incremental operator: one output per distinct value (state: value -> count)."""

    def initial_state(self) -> dict:
        return {}

    def add(self, state: dict, delta: Sequence[int]) -> dict:
        for v in delta:
            state[v] = state.get(v, 0) + 1
        return state

    def remove(self, state: dict, delta: Sequence[int]) -> dict:
        for v in delta:
            state[v] -= 1
            if not state[v]:
                del state[v]
        return state

    def compute(self, state: dict) -> list:
        return [{"v": v, "n": n} for v, n in sorted(state.items())]


CAT = catalog_with(ISum, NSum, ITwa, NTwa, IList)
TUMBLE10 = {"type": "tumbling", "size": 10}


def test_incremental_state_gets_deltas_only_for_affected_windows() -> None:
    CALLS.clear()
    q = window_query(TUMBLE10, "isum", input="v")
    stream = [Insert("a", 1, 2, {"v": 1}), Insert("b", 3, 4, {"v": 2}), Insert("c", 12, 13, {"v": 4}),
              Cti(10),
              Retract("c", 12, 13, 15),  # stays in [10, 20): no delta at all (time-insensitive)
              Insert("d", 25, 26, {"v": 8}), Insert("e", 27, 28, {"v": 16}),
              Cti(25),
              Retract("d", 25, 26, 25)]  # full retraction: removed from [20, 30)
    out, _ = run(q, stream, CAT, mode="each")
    assert table(out) == rows((0, 10, {"isum": 3}), (10, 20, {"isum": 4}), (20, 30, {"isum": 16}))
    # a window is valued when it is released (here at the CTI past its end), so d, gone before [20, 30) was
    # ever valued, is never handed in, and c's shorter lifetime inside [10, 20) costs nothing
    assert sorted(v for k, d in CALLS if k == "add" for v in d) == [1, 2, 4, 16]  # each member once
    assert not any(k == "remove" for k, _ in CALLS)


def test_incremental_and_non_incremental_agree_on_random_streams() -> None:
    wins = [TUMBLE10, {"type": "hopping", "size": 6, "hop": 4}, {"type": "snapshot"},
            {"type": "count_by_start", "n": 2}, {"type": "count_by_end", "n": 2, "hop": 2}]
    for seed in range(40):
        rng = random.Random(seed)
        win = wins[seed % len(wins)]
        stream = gen_stream(rng, n=rng.randrange(2, 25), p_inf=0.05)
        gb = {"group_by": ["g"]} if seed % 3 else {}
        a, _ = run(window_query(win, "isum", input="v", **gb), stream, CAT)
        b, _ = run(window_query(win, "nsum", input="v", **gb), stream, CAT)
        assert table(a) == [(le, re, {"isum": p["nsum"], **{k: v for k, v in p.items() if k != "nsum"}})
                            for le, re, p in table(b)], (seed, win)
        check_physical(a)


@pytest.mark.parametrize("clip", ["none", "left", "right", "full"])
def test_time_sensitive_incremental_gets_clipped_deltas(clip: str) -> None:
    for seed in range(25):
        rng = random.Random(seed)
        stream = gen_stream(rng, n=rng.randrange(2, 20), p_inf=0.0)
        for win in (TUMBLE10, {"type": "snapshot"}):
            a, _ = run(window_query(win, "itwa", input="v", clip=clip), stream, CAT)
            b, _ = run(window_query(win, "ntwa", input="v", clip=clip), stream, CAT)
            strip = [(le, re, p["itwa"]) for le, re, p in table(a)]
            assert strip == [(le, re, p["ntwa"]) for le, re, p in table(b)], (seed, clip, win)


def test_incremental_operator() -> None:
    stream = [Insert("a", 1, 2, {"v": 5}), Insert("b", 2, 3, {"v": 5}), Insert("c", 3, 4, {"v": 7}),
              Retract("b", 2, 3, 2)]
    out, _ = run(window_query(TUMBLE10, "ilist", input="v"), stream, CAT)
    assert table(out) == rows((0, 10, {"v": 5, "n": 1}), (0, 10, {"v": 7, "n": 1}))


def test_first_party_incremental_aggregates_match_their_definition() -> None:
    # count, sum, avg, min, max on integer data: exact (no float rounding involved)
    for seed in range(10):
        rng = random.Random(seed)
        stream = gen_stream(rng, n=30, p_inf=0.0)
        for name, fn in (("count", len), ("sum", sum), ("min", min), ("max", max),
                         ("avg", lambda xs: sum(xs) / len(xs))):
            out, _ = run(window_query({"type": "hopping", "size": 8, "hop": 4}, name, input="v"), stream)
            ref, _ = run(window_query({"type": "hopping", "size": 8, "hop": 4}, "members", input="v"), stream)
            per: dict[tuple[int, int], list[int]] = {}
            for le, re, p in table(ref):
                per.setdefault((le, re), []).append(p["value"])
            assert cht(out) == cht([Insert(str(i), le, re, {name: fn(vs)})
                                    for i, ((le, re), vs) in enumerate(sorted(per.items()))])
