"""Shared pieces of the local engine: dead-letter records, live events as window steps hold them (`Ev`), and
the canonical JSON they are ordered by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from udm.host.temporal.strict import canonical_json
from udm.sdk import INF

__all__ = [
    "INF",
    "NEG",
    "DeadLetter",
    "Ev",
]

#: Below every int64 tick: "no CTI yet" / "no time seen yet".
NEG: int = -(2**64)


@dataclass
class DeadLetter:
    """One refused element: the input line (if known), why, and the element as JSON (if known)."""

    line: int | None
    reason: str
    element: dict[str, Any] | None
    #: the counter it went to (``cti_violation``, ``duplicate_id``, ...): `RunResult.reasons` keys
    #: (`udm.host.run_result`), so an engine split across Spark tasks can sum them; not part of the
    #: dead-letter record (INTERFACES §1)
    category: str = ""
    #: the query input the element came from (set in a multi-input query; INTERFACES §1)
    input: str | None = None

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"line": self.line, "reason": self.reason, "element": self.element}
        if self.input is not None:
            rec["input"] = self.input
        return rec




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
            cj = self.cj = canonical_json(self.val)
        return cj

    def __getstate__(self) -> tuple:
        return (self.id, self.le, self.re, self.val, self.cj)

    def __setstate__(self, s: tuple) -> None:
        self.id, self.le, self.re, self.val, self.cj = s

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Ev({self.id}, [{self.le}, {self.re}), {self.val!r})"
