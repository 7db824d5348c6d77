"""`RunResult`: what a run did, from the engine's counters to the summary ``udm run`` prints.

One record for every engine: the local engine counts into it as it runs (`udm.host.engine.context`), the
local driver (`udm.host.query.runners.run_local`) and the Spark engines fill in the rest, and the CLI prints
its `summary` or its JSON form (INTERFACES §3).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """What a run did. The local engine counts into one as it runs (``reasons``: dead letters by category,
    ``cti_violation``, ``unknown_id``, ...); the driver that ran it adds the rest (time, warnings, lmerge
    counts); a Spark engine fills one from its buckets' rows."""

    engine: str = "local"
    elements_in: int = 0
    elements_out: int = 0
    dead_lettered: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    truncated_at: int | None = None
    seconds: float = 0.0
    #: per input: {"elements_in": n, "dead_lettered": n}
    inputs: dict[str, dict[str, int]] = field(default_factory=dict)
    #: things the user should know though the run succeeded (an input that never sent a CTI, ...)
    warnings: list[str] = field(default_factory=list)
    #: per lmerge step: inserts/retractions/CTIs in and out (seeds/001 Theorem 1); empty without lmerge
    lmerge: dict[str, dict[str, int]] = field(default_factory=dict)
    #: output retractions; windows first emitted before the end of input and the sum of their emission
    #: delays (watermark at first emission - W.RE) — what speculation / progressive output cost (local engine)
    retractions_out: int = 0
    windows_emitted: int = 0
    emission_delay: int = 0
    #: the input's ticks are microseconds (timestamp columns, or numbers read with a unit): delays print as
    #: durations (set by the caller that knows the inputs, `udm run`)
    tick_us: bool = False
    #: False when the bad elements went nowhere (no dead-letter file): the summary then says so
    dead_letters_kept: bool = True

    def count_input(self, name: str, what: str, n: int = 1) -> None:
        """Count ``n`` of ``what`` (``elements_in``, ``dead_lettered``) for input ``name``."""
        per = self.inputs.setdefault(name, {})
        per[what] = per.get(what, 0) + n

    def summary(self) -> str:
        """The summary ``udm run`` prints: one line, then a line per warning."""
        rate = f", {_rate(self.elements_in / self.seconds)} el/s" if self.seconds > 0 and self.elements_in else ""
        bad = "dead-lettered" if self.dead_letters_kept or not self.dead_lettered else "bad and dropped"
        line = (f"{self.elements_in:,} elements in, {self.elements_out:,} out, "
                f"{self.dead_lettered:,} {bad} ({self.engine}, {self.seconds:.2f}s{rate})")
        if self.reasons:
            top = ", ".join(f"{r!r} ×{c}" for r, c in self.reasons.most_common(3))
            more = len(self.reasons) - 3
            line += f"; reasons: {top}" + (f" and {more} more" if more > 0 else "")
        if self.truncated_at is not None:
            line += f"; windows past t={self.truncated_at} were cut at end of input"
        for name, c in self.lmerge.items():
            retractions = c.get("partial_retractions_out", 0) + c.get("full_retractions_out", 0)
            line += (f"; lmerge {name}: {c.get('inserts_out', 0):,} inserts + {retractions:,} retractions out "
                     f"for {c.get('inserts_in', 0):,} inserts in, {c.get('ctis_out', 0):,} CTIs out for "
                     f"{c.get('ctis_in', 0):,} in")
        if self.retractions_out or self.emission_delay:
            line += f"; {self.retractions_out:,} retractions out"
            if self.windows_emitted:
                delay = self.emission_delay / self.windows_emitted
                line += f", mean emission delay {_span(delay, self.tick_us)} past the window's end"
        warnings = list(self.warnings)
        if not self.dead_letters_kept and self.dead_lettered:
            warnings.append(f"{self.dead_lettered:,} bad input element{'s were' if self.dead_lettered > 1 else ' was'} "
                            f"dropped: add --dead-letter FILE to keep each with its line and reason")
        return "\n".join([line, *(f"warning: {w}" for w in warnings)])

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "elements_in": self.elements_in,
            "elements_out": self.elements_out,
            "dead_lettered": self.dead_lettered,
            "reasons": dict(self.reasons),
            "truncated_at": self.truncated_at,
            "seconds": self.seconds,
            "inputs": {name: dict(counts) for name, counts in self.inputs.items()},
            "warnings": self.warnings,
            **({"lmerge": self.lmerge} if self.lmerge else {}),
            "retractions_out": self.retractions_out,
            "windows_emitted": self.windows_emitted,
            "emission_delay": self.emission_delay,
        }


def _rate(per_second: float) -> str:
    """Elements per second, readable at any size: ``12,345``, ``84``, ``0.33`` (a Spark run of a few elements
    spends seconds starting up)."""
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:.2g}"


#: (unit, microseconds) from the largest: a span of microsecond ticks as a duration
_UNITS = (("d", 86_400_000_000), ("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000), ("ms", 1_000))


def _span(ticks: float, microseconds: bool) -> str:
    """A signed span of ticks in the input's units: ``+12.5 ticks``, or for microsecond ticks a duration
    (``+3 d 4 h``, ``-2.5 s``, ``+250 ms``) in its two largest units."""
    if not microseconds:
        return f"{ticks:+,.1f} ticks"
    sign = "-" if ticks < 0 else "+"
    us = abs(ticks)
    for i, (name, size) in enumerate(_UNITS):
        if us >= size:
            if name in ("s", "ms") or i + 1 == len(_UNITS):
                return f"{sign}{us / size:.3g} {name}"
            whole, rest = divmod(round(us / _UNITS[i + 1][1]), size // _UNITS[i + 1][1])
            return f"{sign}{whole} {name}" + (f" {rest} {_UNITS[i + 1][0]}" if rest else "")
    return f"{sign}{us:.3g} µs"
