"""What every multi-input operator keeps per input port: the port's latest CTI and the output CTI rule.

SEMANTICS §10: the output CTI of a multi-input operator never exceeds the minimum of its inputs' CTIs (an
input that has sent no CTI holds it back), and ``cti(INF)`` comes out only when every input has ended.
"""

from __future__ import annotations

from ..rules import NEG

__all__ = ["PortClock"]


class PortClock:
    """The CTIs of each input port and the output CTI they allow."""

    __slots__ = ("ctis", "out")

    def __init__(self, ports: int) -> None:
        self.ctis = [NEG] * ports
        #: the latest output CTI
        self.out = NEG

    def advance(self, port: int, t: int) -> int | None:
        """Record ``cti(t)`` on ``port``; returns the output CTI it releases (when the minimum moved)."""
        if t > self.ctis[port]:
            self.ctis[port] = t
        low = min(self.ctis)
        if low > self.out:
            self.out = low
            return low
        return None

    def __getstate__(self) -> tuple[list[int], int]:
        return (self.ctis, self.out)

    def __setstate__(self, s: tuple[list[int], int]) -> None:
        self.ctis, self.out = s
