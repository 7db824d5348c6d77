"""The sweep of windows that only grow: each window is the one before it plus what enters (cumulate, within a
period), so nothing leaves until the family starts the sweep again (`clear`) at the next period.

One state carries the whole run: the values of a pane enter with one ``add`` (a UDA with ``remove``, whose
panes keep values) or a pane's partial with one ``merge`` (a merge-only UDA, whose panes keep partials), so
a window costs O(1) UDA calls however long its period. ``merge`` never mutates its arguments (the UDA
contract), so a pane's partial may start the state; ``add`` may, so on a merge-only UDA values enter as a
fresh state merged in.

A late change to a pane the sweep took in does not start it again from the period's start: the family
`rewind`s it to the last window it `mark`ed before that pane and goes forward from there, so the UDA calls
follow the windows that change, not the length of the period. A mark is the state itself for a merge-only
UDA (merged states are never mutated), else the length of the log of values that entered, which a rewind
takes out with one ``remove``.
"""

from __future__ import annotations

from typing import Any

from ..rules import INF
from .sweep import Sweep

__all__ = ["PrefixSweep"]


class PrefixSweep(Sweep):
    """One state that members enter and never leave, with marks to go back to (see the module docstring)."""

    __slots__ = ("has", "log", "low", "marks", "partials", "st", "wu")

    def __init__(self, wu: Any, partials: bool) -> None:
        self.wu = wu
        #: members enter as partials merged in (a merge-only UDA), else as values added
        self.partials = partials
        self.st: Any = None
        self.has = False
        #: the least leave position entered: the family clears the sweep before any member would leave
        self.low = INF
        #: the values that entered, in order (values added only: a rewind removes a suffix)
        self.log: list[Any] = []
        #: (window, state or log length, has) per marked window, in window order
        self.marks: list[tuple[int, Any, bool]] = []

    def attach(self, wu: Any) -> None:
        self.wu = wu

    def enter(self, pos: int, items: list[Any]) -> None:
        wu = self.wu
        if self.partials:
            self._merge(wu.add(wu.initial_state(), items, None))
        else:
            self.st = wu.add_values(self.st if self.has else wu.initial_state(), items, None)
            self.has = True
            self.log.extend(items)
        if pos < self.low:
            self.low = pos

    def enter_state(self, pos: int, st: Any, items: list[Any]) -> None:
        """Values ``items`` entered, from ``pos`` on, and ``st`` is the state with them (`grid_prefix` added
        them at once; a merge-only UDA's marks are states, so nothing is logged)."""
        self.st = st
        self.has = True
        if not self.partials:
            self.log.extend(items)
        if pos < self.low:
            self.low = pos

    def enter_partial(self, pos: int, partial: Any) -> None:
        """A pane's partial enters (a merge-only UDA)."""
        self._merge(partial)
        if pos < self.low:
            self.low = pos

    def _merge(self, partial: Any) -> None:
        self.st = self.wu.merge(self.st, partial) if self.has else partial
        self.has = True

    def leave_before(self, pos: int) -> None:
        if self.low < pos:
            raise AssertionError("a member would leave a prefix sweep: the family must start it again")

    def state(self) -> Any:
        return self.st if self.has else None

    def mark(self, k: int) -> None:
        """The sweep now holds window ``k``."""
        self.marks.append((k, self.st if self.partials else len(self.log), self.has))

    def rewind(self, j: int) -> int | None:
        """Go back to the last marked window at or before ``j``; returns it (None: none, the sweep is empty)."""
        marks = self.marks
        while marks and marks[-1][0] > j:
            marks.pop()
        if not marks:
            self.clear()
            return None
        k, at, has = marks[-1]
        if self.partials:
            self.st = at
        elif at < len(self.log):
            gone = self.log[at:]
            del self.log[at:]
            self.st = self.wu.remove(self.st, gone, None) if has else None
        self.has = has
        return k

    def clear(self) -> None:
        self.st = None
        self.has = False
        self.low = INF
        self.log = []
        self.marks = []

    def __getstate__(self) -> Any:
        return (self.st, self.has, self.low, self.partials, self.log, self.marks)

    def __setstate__(self, s: Any) -> None:
        self.st, self.has, self.low, self.partials, self.log, self.marks = s
        self.wu = None
