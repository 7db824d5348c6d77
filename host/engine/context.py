"""`Context`: what the operators of one running query share — the violation policy and name of the input
being read, the current input line, dead letters and counters, and T (semantics-notes 2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from udm.host.run_result import RunResult

from .common import INF, NEG, DeadLetter
from .dead_letters import DeadLetters, RefusedRows

__all__ = ["Context"]


class Context:
    """What operators share: the violation policy and name of the input being read, the current input line,
    dead letters and counters."""

    def __init__(self, on_violation: str, multi_input: bool = False) -> None:
        self.on_violation = on_violation
        #: the input whose element is being processed (dead letters name it in a multi-input query)
        self.input = "main"
        self.multi_input = multi_input
        self.line: int | None = None
        self.dead_letters = DeadLetters()
        self.stats = RunResult(engine="local")
        self.reached = NEG  # largest finite time the (valid) input reached, over all inputs (semantics-notes 2)
        #: the wall clock (microseconds since the Unix epoch) of ``align``'s ``max_wait``; None: the real one.
        #: Not part of a snapshot (a test's clock is its own).
        self.clock: Callable[[], int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("clock", None)
        return d

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.clock = None
        self.__dict__.update(state)
        if isinstance(self.dead_letters, list):  # (a snapshot of an earlier version)
            self.dead_letters = DeadLetters(self.dead_letters)

    def dead(self, dl: DeadLetter, category: str) -> None:
        dl.category = category
        if not self.multi_input:
            dl.input = None
        elif dl.input is None:
            dl.input = self.input
        self.dead_letters.append(dl)
        st = self.stats
        st.dead_lettered += 1
        st.reasons[category] += 1
        if self.multi_input:
            st.count_input(dl.input or self.input, "dead_lettered")

    def dead_rows(self, block: RefusedRows) -> None:
        """`dead` for the refused rows of a column-wise batch, at once (their input named by the block)."""
        if not self.multi_input:
            block.input = None
        self.dead_letters.add_rows(block)
        st = self.stats
        n = len(block)
        st.dead_lettered += n
        st.reasons.update(block.categories.tolist())
        if self.multi_input:
            st.count_input(block.input or self.input, "dead_lettered", n)

    def seen(self, *times: int) -> None:
        T = self.reached
        for t in times:
            if T < t < INF:
                T = t
        self.reached = T

    def truncated(self, t: int) -> None:
        self.stats.truncated_at = t
