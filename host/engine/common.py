"""Shared pieces of the local engine: run records (dead letters, run statistics) and canonical JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from udm.host.temporal.strict import canonical_json
from udm.sdk import INF

__all__ = [
    "INF",
    "NEG",
    "DeadLetter",
    "Ev",
    "RunStats",
    "cjson",
]

#: Below every int64 tick: "no CTI yet" / "no time seen yet".
NEG: int = -(2**64)


@dataclass
class DeadLetter:
    """One refused element: the input line (if known), why, and the element as JSON (if known)."""

    line: int | None
    reason: str
    element: dict[str, Any] | None
    #: the counter it went to (``cti_violation``, ``duplicate_id``, ...): `RunStats.reasons` keys, so an engine
    #: split across Spark tasks can sum them; not part of the dead-letter record (INTERFACES §1)
    category: str = ""
    #: the query input the element came from (set in a multi-input query; INTERFACES §1)
    input: str | None = None

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"line": self.line, "reason": self.reason, "element": self.element}
        if self.input is not None:
            rec["input"] = self.input
        return rec


@dataclass
class RunStats:
    """What a run did. ``reasons`` counts dead letters by category (``cti_violation``, ``unknown_id``, ...)."""

    elements_in: int = 0
    elements_out: int = 0
    dead_lettered: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    truncated_at: int | None = None
    #: output retractions (the price of speculation and progressive output)
    retractions_out: int = 0
    #: windows first emitted before the end of input, and the sum over them of (watermark at first
    #: emission - W.RE): how late (> 0) or early (< 0, progressive output) windows come out
    windows_emitted: int = 0
    emission_delay: int = 0
    #: per input of a multi-input query: {"elements_in": n, "dead_lettered": n}
    inputs: dict[str, Counter[str]] = field(default_factory=dict)

    def count_input(self, name: str, what: str, n: int = 1) -> None:
        per = self.inputs.get(name)
        if per is None:
            per = self.inputs[name] = Counter()
        per[what] += n

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "elements_in": self.elements_in,
            "elements_out": self.elements_out,
            "dead_lettered": self.dead_lettered,
            "reasons": dict(self.reasons),
            "truncated_at": self.truncated_at,
            "retractions_out": self.retractions_out,
            "windows_emitted": self.windows_emitted,
            "emission_delay": self.emission_delay,
        }
        if self.inputs:
            data["inputs"] = {k: dict(v) for k, v in self.inputs.items()}
        return data


#: canonical JSON text (SEMANTICS §5), the one function (`udm.host.temporal.strict.canonical_json`)
cjson = canonical_json


class Ev:
    """A live event as a window step holds it: engine id, lifetime, the value its UDM receives.

    ``cj`` caches the canonical JSON of ``val`` (made on first need: ordering ties)."""

    __slots__ = ("cj", "id", "le", "re", "val")

    def __init__(self, id: int, le: int, re: int, val: Any) -> None:
        self.id = id
        self.le = le
        self.re = re
        self.val = val
        self.cj: str | None = None

    def canon(self) -> str:
        cj = self.cj
        if cj is None:
            cj = self.cj = cjson(self.val)
        return cj

    def __getstate__(self) -> tuple:
        return (self.id, self.le, self.re, self.val, self.cj)

    def __setstate__(self, s: tuple) -> None:
        self.id, self.le, self.re, self.val, self.cj = s

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Ev({self.id}, [{self.le}, {self.re}), {self.val!r})"
