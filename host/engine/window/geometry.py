"""Where tumbling, hopping and cumulate windows lie (SEMANTICS §3), in panes: the one statement of that rule.

The time axis is cut into *panes* of width ``p`` from the offset; pane ``s`` is ``[off + s*p, off + (s+1)*p)``.
Every window is a run ``[a, b)`` of consecutive panes, and windows are numbered so that ``W.RE`` rises with the
index (the grid family releases them in that order):

* `HopGeometry` — hopping (tumbling: ``hop = size``), ``p = gcd(size, hop)``: window ``k`` is
  ``[off + k*hop, off + k*hop + size)``, panes ``[k*H, k*H + L)`` with ``H = hop/p``, ``L = size/p``;
* `CumulateGeometry` — ``p = step``, ``n = size/step`` windows per period: window ``j`` of period
  ``P = j // n`` is ``[off + P*size, off + (j+1)*step)``, panes ``[P*n, j + 1)``.

An event lies in panes ``pane(LE) .. pane(RE - 1)`` and belongs (by overlap) to exactly the windows holding one
of them. The arithmetic forms take an int or a numpy column alike (`span`, `extent`, `pane`, `first_window`);
the others answer for one time or pane, where an infinite end needs its own case.
"""

from __future__ import annotations

from math import gcd
from typing import Any

from ..rules import INF

__all__ = ["CumulateGeometry", "Geometry", "HopGeometry", "geometry_of"]


class Geometry:
    """Panes and windows of one grid window spec (see the module docstring)."""

    #: the offset, the pane width, and the most panes a window covers
    off: int
    p: int
    width: int
    #: does every window extend the one before it, except where a new run starts (`span` start moves)?
    grows = False

    def pane(self, t: Any) -> Any:
        """The pane holding time ``t`` (an int or a column)."""
        return (t - self.off) // self.p

    def span(self, k: Any) -> tuple[Any, Any]:
        """Window ``k``'s panes ``[a, b)`` (an index or a column of them)."""
        raise NotImplementedError

    def extent(self, k: Any) -> tuple[Any, Any]:
        """Window ``k``'s ``[W.LE, W.RE)`` (an index or a column of them)."""
        a, b = self.span(k)
        return self.off + a * self.p, self.off + b * self.p

    def first_window(self, s: Any) -> Any:
        """The first window holding pane ``s`` (past `last_window` for a pane no window holds)."""
        raise NotImplementedError

    def last_window(self, s: int) -> int:
        """The last window holding pane ``s`` (INF for the end of an endless event)."""
        if s >= INF:
            return INF
        return self.last_windows(s)

    def last_windows(self, s: Any) -> Any:
        """The last window holding pane ``s`` (a finite pane, or a column of them)."""
        raise NotImplementedError

    def last_closed(self, t: int) -> int:
        """The last window with ``W.RE <= t``."""
        if t >= INF:
            return INF
        return self._last_closed(t)

    def last_starting_before(self, t: int) -> int:
        """The last window with ``W.LE < t``."""
        if t >= INF:
            return INF
        return self.last_started(t - 1)

    def last_started(self, m: int) -> int:
        """The last window with ``W.LE <= m`` (how far windows of endless events reach at watermark ``m``)."""
        raise NotImplementedError

    def _last_closed(self, t: int) -> int:
        raise NotImplementedError


class HopGeometry(Geometry):
    """``hopping{size, hop, offset}``; ``tumbling{size, offset}`` is ``hop = size``."""

    def __init__(self, size: int, hop: int, off: int) -> None:
        self.size = size
        self.hop = hop
        self.off = off
        self.p = gcd(size, hop)
        self.L = size // self.p
        self.H = hop // self.p
        self.width = self.L

    def span(self, k: Any) -> tuple[Any, Any]:
        a = k * self.H
        return a, a + self.L

    def first_window(self, s: Any) -> Any:
        return -((self.L - 1 - s) // self.H)  # ceil((s - L + 1) / H)

    def last_windows(self, s: Any) -> Any:
        return s // self.H

    def _last_closed(self, t: int) -> int:
        return (t - self.off - self.size) // self.hop

    def last_started(self, m: int) -> int:
        return (m - self.off) // self.hop


class CumulateGeometry(Geometry):
    """``cumulate{size, step, offset}``: each period's running windows, one per step."""

    grows = True

    def __init__(self, size: int, step: int, off: int) -> None:
        self.size = size
        self.off = off
        self.p = step
        self.n = size // step
        self.width = self.n

    def span(self, k: Any) -> tuple[Any, Any]:
        return (k // self.n) * self.n, k + 1

    def first_window(self, s: Any) -> Any:
        return s  # (the window that ends with pane s; every later one of its period holds it too)

    def last_windows(self, s: Any) -> Any:
        return (s // self.n) * self.n + self.n - 1  # the period's last window

    def _last_closed(self, t: int) -> int:
        return (t - self.off) // self.p - 1  # window j ends with pane j

    def last_started(self, m: int) -> int:
        return ((m - self.off) // self.size) * self.n + self.n - 1  # every window of m's period starts <= m


def geometry_of(spec: Any) -> Geometry:
    """The geometry of a ``tumbling``, ``hopping`` or ``cumulate`` window spec."""
    if spec.type == "cumulate":
        return CumulateGeometry(spec.size, spec.step, spec.offset)
    return HopGeometry(spec.size, getattr(spec, "hop", spec.size), spec.offset)
