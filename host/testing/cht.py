"""The canonical history table (SEMANTICS §2): the logical meaning of a physical stream.

Written from SEMANTICS §1/§2 directly; shares no code with the engine. A `CHT` is a multiset of rows
``(le, re, payload_json)`` where ``payload_json`` is the canonical JSON text of the payload, so two CHTs
compare with ``==`` and a diff is a multiset difference.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from udm.host.errors import ViolationError
from udm.host.temporal.elements import Cti, Ecti, Element, Insert, Retract, canonical_json, element_to_json
from udm.sdk import INF

__all__ = [
    "CHT",
    "Rejected",
    "Row",
    "StreamState",
    "apply_stream",
    "cht",
    "element_text",
    "format_row",
    "stream_text",
    "to_elements",
]

#: One CHT row: ``(le, re, canonical payload JSON)``.
Row = tuple[int, int, str]

Violation = Literal["dead_letter", "adjust", "error"]


def _payload_text(payload: Any) -> str:
    return canonical_json(payload)


def format_time(t: int) -> str:
    return "inf" if t >= INF else str(t)


def format_row(row: Row) -> str:
    return f"[{format_time(row[0])}, {format_time(row[1])}) {row[2]}"


class CHT(Counter[Row]):
    """A multiset of ``(le, re, payload_json)`` rows (a `collections.Counter`).

    Build one with `cht` (from a physical stream) or `CHT.from_events` (from ``(le, re, payload)``
    triples). Equality is multiset equality; use `udm.host.testing.verify` for float tolerance.
    """

    @classmethod
    def from_events(cls, events: Iterable[tuple[int, int, Any]]) -> CHT:
        """From ``(le, re, payload)`` triples; the payload is any JSON value (usually a dict)."""
        out = cls()
        for le, re, payload in events:
            out[(int(le), int(re), payload if isinstance(payload, str) and _is_json(payload)
                 else _payload_text(payload))] += 1
        return out

    @classmethod
    def from_rows(cls, rows: Iterable[Row]) -> CHT:
        out = cls()
        for r in rows:
            out[(int(r[0]), int(r[1]), str(r[2]))] += 1
        return out

    def rows(self) -> list[Row]:
        """Every row (repeated by multiplicity), sorted by ``(le, re, payload_json)``."""
        return sorted(self.elements())

    def events(self) -> list[tuple[int, int, Any]]:
        """Every row as ``(le, re, payload)`` with the payload decoded, sorted canonically."""
        return [(le, re, json.loads(p)) for le, re, p in self.rows()]

    def total(self) -> int:  # Counter.total exists from 3.10; keep explicit for readers
        return sum(n for n in self.values() if n > 0)

    def to_text(self, limit: int | None = None) -> str:
        rows = self.rows()
        lines = [format_row(r) for r in (rows if limit is None else rows[:limit])]
        if limit is not None and len(rows) > limit:
            lines.append(f"... {len(rows) - limit} more")
        return "\n".join(lines) if lines else "(empty)"

    def __repr__(self) -> str:
        return f"CHT({self.rows()!r})"


def _is_json(text: str) -> bool:
    # A string payload that is already canonical JSON text of an object is taken as such.
    if not (text.startswith("{") and text.endswith("}")):
        return False
    try:
        return canonical_json(json.loads(text)) == text
    except ValueError:
        return False


@dataclass(frozen=True)
class Rejected:
    """An element the CHT construction refused (it would be dead-lettered), with the reason."""

    index: int
    element: Any
    reason: str


@dataclass
class _Live:
    le: int  # the le the source knows (retractions name it)
    re: int
    payload: Any
    eff_le: int  # the le actually applied (differs from `le` only after an `adjust`)


@dataclass
class StreamState:
    """Applies a physical stream element by element, exactly as SEMANTICS §1/§2 define validity.

    ``max_memory_time`` (semantics-notes 8) raises the effective CTI to ``m - max_memory_time`` with
    ``m = max(latest CTI, max LE seen)``. ``on_violation`` decides what a CTI violation does.

    External CTIs (SEMANTICS §11), by brute force: every accepted ``ecti`` and the sync time of every data
    element that counted are kept; after each element the effective CTI is recomputed from scratch (complete,
    contiguous ranges from ``max(CTI, smallest ECTI LE)``) and, when it rose, goes into ``accepted`` as a
    plain ``cti`` right after that element.
    """

    on_violation: Violation = "dead_letter"
    max_memory_time: int = INF
    live: dict[str, _Live] = field(default_factory=dict)
    closed: list[_Live] = field(default_factory=list)  # events whose id was reused after a CTI closed them
    cti: int | None = None
    max_le: int | None = None
    max_finite: int | None = None  # largest finite time reached (semantics-notes 2)
    rejected: list[Rejected] = field(default_factory=list)
    accepted: list[Element] = field(default_factory=list)  # valid elements as applied (after adjust)
    count: int = 0
    ectis: list[tuple[int, int, int]] = field(default_factory=list)  # accepted ECTIs (le, re, count)
    counted: list[int] = field(default_factory=list)  # sync times of the data elements ECTIs count

    # -- helpers ------------------------------------------------------------------------------
    def watermark(self) -> int | None:
        vals = [v for v in (self.cti, self.max_le) if v is not None]
        return max(vals) if vals else None

    def effective_cti(self) -> int | None:
        c = self.cti
        if self.max_memory_time < INF:
            m = self.watermark()
            if m is not None:
                bound = m - self.max_memory_time
                c = bound if c is None else max(c, bound)
        return c

    def _reach(self, *times: int) -> None:
        for t in times:
            if t < INF:
                self.max_finite = t if self.max_finite is None else max(self.max_finite, t)

    def _reject(self, el: Any, reason: str) -> None:
        if self.on_violation == "error":
            raise ViolationError(f"element #{self.count} {el!r}: {reason}")
        self.rejected.append(Rejected(self.count, el, reason))

    # -- applying -----------------------------------------------------------------------------
    def apply(self, el: Any) -> bool:
        """Apply one element; False (and a `Rejected` entry) when it is invalid."""
        try:
            if isinstance(el, Ecti):
                ok = self._ecti(el)
            elif not self._counts(el):
                return False
            else:
                ok = self._apply(el)
            self._ecti_cti()
            return ok
        finally:
            self.count += 1

    # -- external CTIs (SEMANTICS §11) -------------------------------------------------------------------
    def _in(self, le: int, re: int) -> int:
        return sum(1 for x in self.counted if le <= x < re)

    def _ecti(self, e: Ecti) -> bool:
        if self.cti is not None and e.le < self.cti:
            self._reject(e, f"ECTI [{e.le}, {format_time(e.re)}) starts below the effective CTI "
                            f"{format_time(self.cti)}")
            return False
        if any(le < e.re and e.le < re for le, re, _ in self.ectis):
            self._reject(e, f"ECTI [{e.le}, {format_time(e.re)}) overlaps an earlier ECTI")
            return False
        if self._in(e.le, e.re) > e.count:
            self._reject(e, f"ECTI [{e.le}, {format_time(e.re)}) counts fewer elements than have arrived")
            return False
        self.ectis.append((e.le, e.re, e.count))
        return True

    def _counts(self, el: Any) -> bool:
        """Count a data element for the ECTI holding its sync time; False (rejected) when that range has all
        its elements already. Elements below the CTI count for nothing (they are CTI violations)."""
        if not isinstance(el, (Insert, Retract)) or not self._times_ok(el.le, el.re) or (
                isinstance(el, Retract) and not self._times_ok(el.re_new)):
            return True
        if el.le >= INF or el.re <= el.le or (isinstance(el, Retract) and el.re_new < el.le):
            return True  # not a data element (no file could hold it: its line is a bad line)
        sync = el.le if isinstance(el, Insert) else min(el.re, el.re_new)
        if self.cti is not None and sync < self.cti:
            return True
        for le, re, n in self.ectis:
            if le <= sync < re:
                if self._in(le, re) >= n:
                    self._reject(el, f"surplus for the ECTI [{le}, {format_time(re)})")
                    return False
                break
        self.counted.append(sync)
        return True

    def _ecti_cti(self) -> None:
        if not self.ectis:
            return
        start = min(le for le, _, _ in self.ectis)
        base = start if self.cti is None or self.cti < start else self.cti
        t = base
        while True:
            nxt = [re for le, re, n in self.ectis if le <= t < re and self._in(le, re) >= n]
            if not nxt:
                break
            t = nxt[0]
        if t > base:
            self.cti = t
            self._reach(t)
            self.accepted.append(Cti(t))

    def _apply(self, el: Any) -> bool:
        if isinstance(el, Cti):
            t = el.t
            if not isinstance(t, int) or isinstance(t, bool):
                self._reject(el, f"malformed cti time {t!r}")
                return False
            if self.cti is None or t > self.cti:
                self.cti = t
            self._reach(t)
            self.accepted.append(el)
            return True
        if isinstance(el, Insert):
            return self._insert(el)
        if isinstance(el, Retract):
            return self._retract(el)
        self._reject(el, f"not a stream element: {type(el).__name__}")
        return False

    def _times_ok(self, *times: Any) -> bool:
        return all(isinstance(t, int) and not isinstance(t, bool) for t in times)

    def _insert(self, el: Insert) -> bool:
        if not self._times_ok(el.le, el.re):
            self._reject(el, "malformed times")
            return False
        if el.le >= INF:
            self._reject(el, "insert needs a finite le")
            return False
        if el.re <= el.le:
            self._reject(el, f"insert needs le < re, got [{el.le}, {format_time(el.re)})")
            return False
        if not isinstance(el.payload, Mapping):
            self._reject(el, f"malformed payload: a payload must be an object, got {type(el.payload).__name__}")
            return False
        try:
            _payload_text(el.payload)
        except (TypeError, ValueError) as exc:
            self._reject(el, f"malformed payload: {exc}")
            return False
        le = el.le
        c = self.effective_cti()
        old = self.live.get(el.id)
        # An event ending before the CTI is closed: no retraction can name it any more (its sync time would
        # be < CTI), so its id is free again, as the engines forget it (semantics-notes 63).
        if old is not None and (c is None or old.re >= c):
            self._reject(el, f"duplicate live id {el.id!r}")
            return False
        if c is not None and le < c:
            if self.on_violation == "adjust" and el.re > c:
                le = c
            else:
                self._reject(el, f"CTI violation: insert sync time {le} < CTI {format_time(c)}")
                return False
        if old is not None:
            self.closed.append(old)
        self.live[el.id] = _Live(el.le, el.re, dict(el.payload), le)
        self.max_le = el.le if self.max_le is None else max(self.max_le, el.le)
        self._reach(el.le, el.re)
        self.accepted.append(el if le == el.le else Insert(el.id, le, el.re, dict(el.payload)))
        return True

    def _retract(self, el: Retract) -> bool:
        if not self._times_ok(el.le, el.re, el.re_new):
            self._reject(el, "malformed times")
            return False
        ev = self.live.get(el.id)
        if ev is None:
            self._reject(el, f"retraction of unknown id {el.id!r}")
            return False
        if ev.le != el.le or ev.re != el.re:
            self._reject(el, f"retraction does not match the live event {el.id!r}: it names "
                             f"[{el.le}, {format_time(el.re)}), the event is [{ev.le}, {format_time(ev.re)})")
            return False
        if el.re_new < el.le:
            self._reject(el, f"retraction needs re_new >= le, got le={el.le}, re_new={el.re_new}")
            return False
        sync = min(el.re, el.re_new)
        c = self.effective_cti()
        if c is not None and sync < c:
            self._reject(el, f"CTI violation: retraction sync time {sync} < CTI {format_time(c)}")
            return False
        if el.re_new <= ev.eff_le:
            del self.live[el.id]
        else:
            ev.re = el.re_new
        self._reach(el.re_new)
        self.accepted.append(el if ev.eff_le == el.le else Retract(el.id, ev.eff_le, el.re, el.re_new, el.payload))
        return True

    # -- result -------------------------------------------------------------------------------
    def events(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        for ev in itertools.chain(self.closed, self.live.values()):
            if ev.re > ev.eff_le:
                yield ev.eff_le, ev.re, ev.payload

    def cht(self) -> CHT:
        return CHT.from_events(self.events())


def apply_stream(elements: Iterable[Any], *, on_violation: Violation = "dead_letter",
                 max_memory_time: int = INF) -> StreamState:
    """Apply a whole physical stream; the state holds the CHT, the rejected elements and their reasons."""
    st = StreamState(on_violation=on_violation, max_memory_time=max_memory_time)
    for el in elements:
        st.apply(el)
    return st


def cht(elements: Iterable[Any], *, on_violation: Violation = "dead_letter") -> CHT:
    """CHT of a physical stream (SEMANTICS §2): every valid element applied in arrival order.

    Invalid elements (SEMANTICS §1) and CTI violations are ignored, as the engine would dead-letter them;
    ``on_violation="adjust"`` moves a CTI-violating insert to ``[cti, re)`` instead, ``"error"`` raises
    `ViolationError`.
    """
    return apply_stream(elements, on_violation=on_violation).cht()


def to_elements(c: CHT | Iterable[tuple[int, int, Any]], *, prefix: str = "c", final_cti: bool = False
                ) -> list[Element]:
    """A physical stream (inserts in canonical order) whose CHT is ``c``; for composing queries."""
    rows = c.events() if isinstance(c, CHT) else sorted(
        ((le, re, p) for le, re, p in c), key=lambda r: (r[0], r[1], canonical_json(r[2])))
    out: list[Element] = [Insert(f"{prefix}{i}", le, re, dict(p) if isinstance(p, Mapping) else p)
                          for i, (le, re, p) in enumerate(rows)]
    if final_cti:
        out.append(Cti(INF))
    return out


def element_text(el: Any) -> str:
    """One element as a JSON line (INTERFACES §1), or its repr when it is not an element."""
    try:
        return json.dumps(element_to_json(el), sort_keys=False, default=str)
    except Exception:
        return repr(el)


def stream_text(elements: Iterable[Any]) -> str:
    return "\n".join(element_text(e) for e in elements)

