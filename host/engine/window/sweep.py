"""How a window's value is computed from its members, at a cost per window that does not grow with the window.

Windows of a group are evaluated in order (seeds/004 §4, general stream slicing). Consecutive windows share
most members, so a *sweep* carries the aggregate of one window to the next: the members that enter (their
start position is reached) are added, those that leave (the window's start passed their end position) are
taken out. Positions are the family's own (a pane index, a tick, a bucket, a row number), always ints.

* `RunningSweep` — an invertible UDA (incremental, with ``remove``): one running state; entering calls
  ``add``, leaving subtracts (``remove`` with the values that entered, kept per leave position until then).
* `MergeSweep` — a time-insensitive incremental UDA with ``merge`` but no ``remove`` (``min``, ``max``, a
  sketch): one partial per leave position, combined in an ordered aggregator. Where members leave in the
  order they entered (count and row windows, panes of short events) two stacks give O(1) amortized merges per
  window; where they need not (snapshot windows, spanning events) two stacks in front of a finger B-tree
  (`FingerStacks`): the same O(1) while they do, FiBA's O(log d) at distance ``d`` from the young end once
  they do not. It never calls ``remove``.
* members (no sweep) — every other UDM (holistic UDAs, UDOs, time-sensitive ones): the family hands the
  window's members, in canonical order, to ``compute``.

A sweep is reset (and filled again from the window's members) when the next window to evaluate is not the
successor of the last one: a gap without members, or a late change that reopened an evaluated window.
"""

from __future__ import annotations

import heapq
from typing import Any

from ..aggregation import FingerStacks, TwoStacks

__all__ = ["MergeSweep", "RunningSweep", "Sweep", "sweep_kind"]


def sweep_kind(wu: Any) -> str:
    """``running``, ``merge`` or ``members``: how a window step evaluates windows of this UDM."""
    if not wu.incremental or wu.time_sensitive:
        return "members"
    if getattr(wu, "invertible", True):
        return "running"
    return "merge"


class Sweep:
    """The aggregate of the members of the window being swept (see the module docstring)."""

    __slots__ = ()

    def enter(self, pos: int, items: list[Any]) -> None:
        """Members that leave after position ``pos`` enter (their values, as the UDM receives them)."""
        raise NotImplementedError

    def leave_before(self, pos: int) -> None:
        """Members whose leave position is below ``pos`` leave."""
        raise NotImplementedError

    def state(self) -> Any:
        """The UDM state of the current members (None: no member)."""
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def attach(self, wu: Any) -> None:
        """Bind the UDM again after a restore."""


class MergeSweep(Sweep):
    """Partials per leave position in an ordered aggregator; the value is their merge."""

    __slots__ = ("fifo", "tree", "wu")

    def __init__(self, wu: Any, fifo: bool = False) -> None:
        self.wu = wu
        #: members leave in the order they enter (two stacks suffice)
        self.fifo = fifo
        self.tree: Any = TwoStacks(wu.merge) if fifo else FingerStacks(wu.merge)

    def attach(self, wu: Any) -> None:
        self.wu = wu
        self.tree.attach(wu.merge)

    def enter(self, pos: int, items: list[Any]) -> None:
        wu = self.wu
        self.tree.insert(pos, wu.add(wu.initial_state(), items, None))

    def enter_partial(self, pos: int, partial: Any) -> None:
        """A ready partial (a slice's, computed once) enters at ``pos``."""
        self.tree.insert(pos, partial)

    def leave_before(self, pos: int) -> None:
        self.tree.evict_before(pos)

    def state(self) -> Any:
        return self.tree.query()

    def clear(self) -> None:
        self.tree = TwoStacks(self.wu.merge) if self.fifo else FingerStacks(self.wu.merge)

    def __getstate__(self) -> Any:
        return (self.tree, self.fifo)

    def __setstate__(self, s: Any) -> None:
        self.tree, self.fifo = s
        self.wu = None


class RunningSweep(Sweep):
    """One running state: ``add`` on enter, ``remove`` on leave (the values kept until then)."""

    __slots__ = ("count", "heap", "leaving", "st", "wu")

    def __init__(self, wu: Any) -> None:
        self.wu = wu
        self.st: Any = None
        self.count = 0
        #: leave position -> the values that leave there, and the positions as a heap
        self.leaving: dict[int, list[Any]] = {}
        self.heap: list[int] = []

    def attach(self, wu: Any) -> None:
        self.wu = wu

    def enter(self, pos: int, items: list[Any]) -> None:
        wu = self.wu
        st = self.st
        if st is None:
            st = wu.initial_state()
        self.st = wu.add_values(st, items, None)
        self.count += len(items)
        got = self.leaving.get(pos)
        if got is None:
            self.leaving[pos] = list(items)
            heapq.heappush(self.heap, pos)
        else:
            got.extend(items)

    def leave_before(self, pos: int) -> None:
        h = self.heap
        if not h or h[0] >= pos:
            return
        lv = self.leaving
        items: list[Any] = []
        while h and h[0] < pos:
            items.extend(lv.pop(heapq.heappop(h)))
        self.count -= len(items)
        if self.count == 0:
            self.clear()
            return
        if self.count < len(items):  # fewer stay than leave: the state of those that stay, made afresh
            wu = self.wu
            self.st = wu.add_values(wu.initial_state(), [v for vs in lv.values() for v in vs], None)
            return
        self.st = self.wu.remove(self.st, items, None)

    def state(self) -> Any:
        return self.st if self.count else None

    def clear(self) -> None:
        self.st = None
        self.count = 0
        self.leaving = {}
        self.heap = []

    def __getstate__(self) -> Any:
        return (self.st, self.count, self.leaving, self.heap)

    def __setstate__(self, s: Any) -> None:
        self.st, self.count, self.leaving, self.heap = s
        self.wu = None


def make_sweep(kind: str, wu: Any, fifo: bool = False) -> Sweep | None:
    if kind == "merge":
        return MergeSweep(wu, fifo)
    if kind == "running":
        return RunningSweep(wu)
    return None
