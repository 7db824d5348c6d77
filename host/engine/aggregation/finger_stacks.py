"""Two stacks in front of a finger B-tree: sliding windows at two-stacks cost while keys come in order, FiBA's
O(log d) when they do not.

A window sweep over slices or event ends inserts mostly at the young end and evicts from the old end, but
not always (a spanning event leaves after panes that enter later; a late change reopens a window). FiBA
(`FingerBTree`) serves both, but even in order it pays about 12 combines per slide once the tree is a few
levels deep (splits at the right finger and merges at the left one repair spine aggregates whose
constant grows with the arity and the height), against about 4 for two stacks at any size (ESL's flat
curve, issue 26). Two stacks alone pay a combine per entry passed for anything out of order.

So the entries are split by key into two parts, the *old* one (a `FingerBTree`) holding keys below every
key of the *young* one (a `TwoStacks`):

- an insert or replace at or after the youngest key goes to the young stacks (in order: O(1) combines);
- every other change (a key older than the youngest, a removal) is made in the tree; when the young stacks
  hold the key's place, they are first *spilled* into the tree (their entries appended in key order, O(1)
  amortized combines each, at most once per entry: nothing goes from the tree back to the stacks);
- evictions take from the tree, then from the stacks once the tree is empty; the query is the tree's
  aggregate and the stacks', combined in key order.

A stream in order never touches the tree: every slide costs what two stacks cost, whatever the window. A
disordered one spills and then runs on the tree at FiBA's costs, plus the spill charged once to each entry
that arrived in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any, Generic, TypeVar

from .fiba import FingerBTree
from .protocol import Combine, unattached
from .two_stacks import TwoStacks

__all__ = ["FingerStacks"]

S = TypeVar("S")


class FingerStacks(Generic[S]):
    """`OrderedAggregator`: in-order entries in two stacks, the rest in a finger B-tree (see the module)."""

    __slots__ = ("_combine", "_min", "_old", "_young")

    def __init__(self, combine: Combine, min_arity: int = 4) -> None:
        self._combine = combine
        self._min = min_arity
        self._old: FingerBTree[S] = FingerBTree(combine, min_arity)
        self._young: TwoStacks[S] = TwoStacks(combine)

    def attach(self, combine: Combine) -> None:
        self._combine = combine
        self._old.attach(combine)
        self._young.attach(combine)

    def _spill(self) -> None:
        """The young entries go to the tree (all are younger than its entries: appended in order)."""
        old = self._old
        for k, v in self._young:
            old.insert(k, v)
        self._young = TwoStacks(self._combine)

    def _tree_for(self, key: int) -> FingerBTree[S] | None:
        """The tree when a change at ``key`` must be made there (the stacks spilled first if they hold its
        place); None when it goes to the young stacks (at or after their youngest key, or after the tree's)."""
        young = self._young
        if len(young):
            if key >= young.max_key():
                return None
            if key >= young.min_key():
                self._spill()
            return self._old
        old = self._old
        return old if len(old) and key <= old.max_key() else None

    # ---- operations -------------------------------------------------------------------------------
    def insert(self, key: int, value: S) -> None:
        tree = self._tree_for(key)
        if tree is None:
            self._young.insert(key, value)
        else:
            tree.insert(key, value)

    def replace(self, key: int, value: S) -> None:
        tree = self._tree_for(key)
        if tree is None:
            self._young.replace(key, value)
        else:
            tree.replace(key, value)

    def remove(self, key: int) -> None:
        young = self._young
        if len(young) and key >= young.min_key():
            self._spill()
        self._old.remove(key)

    def evict_before(self, key: int) -> int:
        old = self._old
        dropped = 0
        if len(old):
            dropped = old.evict_before(key)
            if len(old):
                return dropped  # (its oldest key is at or after ``key``: so is every young one)
        return dropped + self._young.evict_before(key)

    def get(self, key: int) -> S | None:
        old = self._old
        if len(old) and key <= old.max_key():
            return old.get(key)
        return self._young.get(key)

    def query(self) -> S | None:
        young = self._young.query()
        old = self._old
        if not len(old):
            return young
        got = old.query()
        return got if young is None else self._combine(got, young)

    def query_range(self, lo: int, hi: int) -> S | None:
        old = self._old.query_range(lo, hi) if len(self._old) else None
        young = self._young.query_range(lo, hi)
        if old is None:
            return young
        return old if young is None else self._combine(old, young)

    def __len__(self) -> int:
        return len(self._old) + len(self._young)

    def min_key(self) -> int:
        return self._old.min_key() if len(self._old) else self._young.min_key()

    def max_key(self) -> int:
        return self._young.max_key() if len(self._young) else self._old.max_key()

    def __iter__(self) -> Iterator[tuple[int, S]]:
        return chain(self._old, self._young)

    # ---- pickling ---------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"min_arity": self._min, "old": self._old, "young": self._young}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._combine = unattached
        self._min = state["min_arity"]
        self._old = state["old"]
        self._young = state["young"]
