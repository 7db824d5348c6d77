"""The aggregators' costs as behaviour: combine calls counted, never time.

- In order (a sliding window: insert the youngest, evict the oldest, query), every aggregator makes a
  constant number of combines per operation, amortized, the same for a window of 10 and of 10,000 entries.
- Out of order, the finger B-tree makes O(log d) combines for an insert, an update of an entry, a replace,
  a remove and a range query at distance ``d`` from the young end: at most ``C * log2(d + 2)`` amortized
  (C = 8 for min_arity 2, 10 for 4) for d = 1..1000 over 100,000 entries, and no more over 100,000
  entries than over 20 d + 1,000 (the cost follows d, not log n).
- Two-stacks takes an update of its youngest entry in one combine (the common update of an open slice).
- Two stacks in front of a finger B-tree cost what two stacks cost in order, what the finger B-tree costs out
  of order once the first change out of order has spilled the stacks into the tree, and that spill costs a
  constant per entry spilled (each entry spills at most once).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from sortedcontainers import SortedList

from udm.host.engine.aggregation import FingerBTree, FingerStacks, TwoStacks

# combines per log2(d + 2) allowed out of order (measured 4-6.5 with min_arity 2, 5-8.5 with 4: a node's
# aggregate is a fold over its children, so the constant grows with the arity)
C_LOG = {"fiba2": 8.0, "fiba4": 10.0, "finger_stacks": 10.0}


class Counting:
    """A non-commutative-safe combine (integer sum) that counts its calls."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, a: int, b: int) -> int:
        self.calls += 1
        return a + b


MAKERS: dict[str, Callable[[Counting], Any]] = {
    "fiba2": lambda c: FingerBTree(c, min_arity=2),
    "fiba4": lambda c: FingerBTree(c),
    "two_stacks": TwoStacks,
    "finger_stacks": FingerStacks,
}
# amortized combines per in-order insert, per evicted entry, per query (two-stacks: a flip combines the
# entries it moves before they are evicted)
IN_ORDER_BOUND = {"fiba2": (5, 6, 2), "fiba4": (5, 8, 2), "two_stacks": (1, 1.5, 2), "finger_stacks": (1, 1.5, 2)}


def sliding(make: Callable[[Counting], Any], window: int, steps: int, hop: int = 1) -> tuple[float, float, float]:
    """(combines per insert, per evicted entry, per query) over ``steps`` slides of a window of ``window``."""
    c = Counting()
    t = make(c)
    ins = ev = q = 0
    evicted = 0
    for i in range(steps):
        before = c.calls
        t.insert(i, 1)
        mid = c.calls
        if i % hop == 0:
            evicted += t.evict_before(i - window + 1)
        after = c.calls
        assert t.query() == i + 1 - evicted  # every value is 1
        ins += mid - before
        ev += after - mid
        q += c.calls - after
    return ins / steps, ev / max(evicted, 1), q / steps


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_in_order_costs_a_constant_per_operation(name: str) -> None:
    bound = IN_ORDER_BOUND[name]
    for window, steps in ((10, 20_000), (1000, 20_000), (10_000, 60_000)):
        costs = sliding(MAKERS[name], window, steps)
        for what, got, most in zip(("insert", "evicted entry", "query"), costs, bound, strict=True):
            assert got <= most, f"{name}, window {window}: {got:.2f} combines per {what}, bound {most}"


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_bulk_evictions_cost_a_constant_per_entry(name: str) -> None:
    """Evicting 500 entries at a time (a hop of 500) costs no more per entry than one at a time."""
    _, per_entry, _ = sliding(MAKERS[name], 5000, 50_000, hop=500)
    assert per_entry <= IN_ORDER_BOUND[name][1]


def test_youngest_entry_updates_cost_one_combine() -> None:
    for name, make in MAKERS.items():
        c = Counting()
        t = make(c)
        for i in range(5000):
            t.insert(i, 1)
        before = c.calls
        for _ in range(1000):
            t.insert(4999, 1)
        per = (c.calls - before) / 1000
        assert per <= 2, f"{name}: {per} combines per update of the youngest entry"
        assert t.query() == 6000


def ooo_costs(make: Callable[[Counting], Any], n: int, d: int, steps: int) -> dict[str, float]:
    """Mean combines per operation at distance ``d`` from the young end of ``n`` entries, while the window
    slides (an append and an eviction per step keep the distance meaningful)."""
    c = Counting()
    t = make(c)
    gap = 1 << 40
    keys = SortedList(range(0, n * gap, gap))
    for k in keys:
        t.insert(k, 1)
    t.replace(keys[n // 2], 1)  # (a first change out of order: stacks in front of a tree spill into it here)
    nxt = n * gap
    total = dict.fromkeys(("insert", "update", "replace", "remove", "range"), 0)

    def count(what: str, fn: Callable[..., Any], *args: Any) -> None:
        before = c.calls
        fn(*args)
        total[what] += c.calls - before

    for _ in range(steps):
        t.insert(nxt, 1)
        keys.add(nxt)
        nxt += gap
        lo, hi = keys[-d - 1], keys[-d]  # d entries are younger than the new key
        k = (lo + hi) // 2
        assert lo < k < hi
        count("insert", t.insert, k, 1)
        keys.add(k)
        count("update", t.insert, keys[-d - 1], 1)
        count("replace", t.replace, keys[-d - 1], 1)
        count("range", t.query_range, keys[-d - 1], nxt)
        gone = keys[-d - 2]
        count("remove", t.remove, gone)
        keys.remove(gone)
        t.evict_before(keys[1])
        keys.pop(0)
    assert len(t) == len(keys)
    return {what: v / steps for what, v in total.items()}


@pytest.mark.parametrize("name", ["fiba2", "fiba4", "finger_stacks"])
def test_out_of_order_costs_log_distance(name: str) -> None:
    make = MAKERS[name]
    small: dict[int, dict[str, float]] = {}
    for d in (1, 2, 5, 10, 30, 100, 300, 1000):
        big = ooo_costs(make, 100_000, d, 300)
        for what, per in big.items():
            assert per <= C_LOG[name] * math.log2(d + 2), f"{name}: {what} at distance {d}: {per:.1f} combines"
        if d in (10, 1000):
            small[d] = ooo_costs(make, 20 * d + 1000, d, 300)  # big enough not to cap the climb
            for what, per in big.items():
                assert per <= 1.25 * small[d][what] + 2, f"{name}: {what} at distance {d} grows with n"


def test_spilling_the_stacks_costs_a_constant_per_entry() -> None:
    """Entries that came in order move into the tree once, at the first change among them: the in-order inserts
    and that one change cost no more per entry than the finger B-tree's own in-order inserts."""
    for n in (100, 10_000):
        c = Counting()
        t = FingerStacks(c)
        for k in range(n):
            t.insert(k, 1)
        t.replace(n // 2, 2)
        t.insert(n // 3, 1)  # (now a tree change at distance 2n/3: O(log n))
        assert t.query() == n + 2
        assert c.calls / n <= 1 + IN_ORDER_BOUND["fiba4"][0], f"{n} entries: {c.calls} combines"
