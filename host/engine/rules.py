"""The engine's rules, each written once, in a scalar form and a vector form side by side.

Every operator calls these; nothing else in the engine restates them. The scalar form takes one element's
values, the vector form numpy columns of a batch, and the two are tested equal (tests/test_engine_rules.py).

* validity of inserts, retractions and CTIs (SEMANTICS §1) and the reasons a dead letter gives;
* sync time, and the CTI in force before each row of a batch;
* T, the largest finite time the valid input reached (semantics-notes 2);
* when a CTI closes an event (it can no longer be retracted);
* the effective CTI under ``max_memory_time`` (semantics-notes 8) and a window's release point (§7), with
  what strong consistency (``max_delay`` INF) waits for: member ends that can still move;
* external CTIs (SEMANTICS §11): which range a sync time falls in, and the dead-letter reasons;
* the payload fields a step reads and their declared types (semantics-notes 3, 17);
* not here: tumbling/hopping/cumulate window assignment (§3) is `window.geometry`, in panes (its arithmetic
  takes an int or a column alike; tests/test_grid_geometry.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from udm.host.input_types import InputType, type_reason
from udm.sdk import INF

from .payload import MISSING, Payload

__all__ = [
    "BAD_LIFETIME",
    "CTI_VIOLATION",
    "DUPLICATE_ID",
    "ECTI",
    "I64_MIN",
    "INF",
    "MALFORMED",
    "MISMATCH",
    "MISSING_FIELD",
    "NEG",
    "SURPLUS",
    "UNKNOWN_ID",
    "FieldCheck",
    "closed",
    "cti_before",
    "ecti_range",
    "ecti_ranges",
    "effective_cti",
    "final",
    "final_end",
    "final_ends",
    "format_time",
    "insert_lifetime_bad",
    "insert_lifetime_reason",
    "mismatch_reason",
    "missing_field_reason",
    "not_object_reason",
    "reach",
    "reach_batch",
    "release_point",
    "retract_lifetime_bad",
    "retract_lifetime_reason",
    "speculation_point",
    "strong",
    "sync_time",
    "sync_times",
    "unknown_id_reason",
]

#: Below every int64 tick: "no CTI yet" / "no time seen yet".
NEG: int = -(2**64)
I64_MIN: int = -(2**63)

# dead-letter categories (RunResult.reasons)
CTI_VIOLATION = "cti_violation"
DUPLICATE_ID = "duplicate_id"
UNKNOWN_ID = "unknown_id"
MISMATCH = "lifetime_mismatch"
BAD_LIFETIME = "invalid_lifetime"
MALFORMED = "malformed"
MISSING_FIELD = "missing_field"
#: an ``ecti`` that overlaps an earlier one, starts below the effective CTI, or counts fewer elements than
#: have arrived in its range; a data element in a range already complete (SEMANTICS §11)
ECTI = "ecti"
SURPLUS = "ecti_surplus"


def format_time(t: int) -> str:
    """A tick as messages show it (``inf`` for +infinity)."""
    return "inf" if t >= INF else str(t)


# -- sync time and CTIs -----------------------------------------------------------------------------
def sync_time(kind: int, le: int, re: int, rn: int) -> int:
    """SEMANTICS §1: insert -> LE, retract -> min(RE, RE_new), CTI -> t (held in ``le``)."""
    if kind == 1:
        return re if re < rn else rn
    return le


def sync_times(kind: np.ndarray, le: np.ndarray, re: np.ndarray, rn: np.ndarray) -> np.ndarray:
    return np.where(kind == 1, np.minimum(re, rn), le)


def cti_before(is_cti: np.ndarray, t: np.ndarray, current: int) -> np.ndarray:
    """The CTI in force before each row: ``current`` raised by every CTI row above it (a lower CTI is
    ignored: SEMANTICS §1). int64; ``current`` below int64 reads as its minimum."""
    base = current if current > I64_MIN else I64_MIN
    n = len(t)
    out = np.full(n, base, dtype=np.int64)
    if n > 1 and is_cti.any():
        ts = np.where(is_cti, t, I64_MIN)
        np.maximum.accumulate(ts, out=ts)
        out[1:] = np.maximum(ts[:-1], base)
    return out


# -- lifetimes -----------------------------------------------------------------------------------------
def insert_lifetime_bad(le: Any, re: Any) -> Any:
    """An insert needs a finite LE below its RE (scalar or vector)."""
    return (re <= le) | (le >= INF)


def insert_lifetime_reason(le: int, re: int) -> str:
    return f"insert needs a finite le < re, got [{format_time(le)}, {format_time(re)})"


def retract_lifetime_bad(le: Any, re: Any, rn: Any) -> Any:
    """A retraction needs LE < RE, RE_new >= LE and a finite LE (scalar or vector)."""
    return (re <= le) | (rn < le) | (le >= INF)


def retract_lifetime_reason(le: int, re: int, rn: int) -> str:
    return (f"retract needs le < re and re_new >= le, got le={format_time(le)}, re={format_time(re)}, "
            f"re_new={format_time(rn)}")


def cti_reason(sync: int, c: int) -> str:
    return f"CTI violation: sync time {sync} < CTI {format_time(c)}"


# -- retractions: the dead-letter reasons (the gate's row and column paths, the repair, the steps) ------------
def unknown_id_reason(id: object) -> str:
    """A retraction naming no live event (never inserted, closed by a CTI, or its insert refused).
    ``id`` as the input spelled it; its repr, so a quote or an odd character shows."""
    return f"retraction of unknown id {id!r}"


def mismatch_reason(id: object, le: int, re: int, live_le: int, live_re: int) -> str:
    """A retraction whose ``[le, re)`` is not the live event's ``[live_le, live_re)`` (SEMANTICS §1)."""
    return (f"retraction of {id!r} says [{format_time(le)}, {format_time(re)}) but the live event is "
            f"[{format_time(live_le)}, {format_time(live_re)})")


def closed(re: Any, c: Any) -> Any:
    """Whether CTI ``c`` closes an event ending at ``re`` (scalar or vector): no valid retraction can
    follow, since its sync time ``min(RE, RE_new) <= RE`` would be below ``c``. An event ending exactly at
    ``c`` is still open (it can be extended); at ``c = INF`` every event is closed."""
    return (re < c) | (c >= INF)


# -- T (semantics-notes 2) ------------------------------------------------------------------------------
def reach(T: int, *times: int) -> int:
    """T after an element with these times: the largest finite one."""
    for t in times:
        if T < t < INF:
            T = t
    return T


def reach_batch(T: int, *cols: np.ndarray) -> int:
    """`reach` over whole columns (rows already restricted to the valid ones)."""
    for c in cols:
        if len(c):
            fin = c[c < INF]
            if len(fin):
                m = int(fin.max())
                if m > T:
                    T = m
    return T


# -- external CTIs (SEMANTICS §11) ------------------------------------------------------------------------
def ecti_range(sync: int, starts: Any, ends: Any) -> int:
    """The index of the range ``[starts[i], ends[i])`` holding ``sync`` (ranges sorted and disjoint), or -1."""
    i = bisect.bisect_right(starts, sync) - 1
    return i if i >= 0 and sync < ends[i] else -1


def ecti_ranges(sync: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """`ecti_range` over a column."""
    i = np.searchsorted(starts, sync, side="right") - 1
    ok = i >= 0
    ok[ok] = sync[ok] < ends[i[ok]]
    return np.where(ok, i, -1)


# -- effective CTI, release ------------------------------------------------------------------------------
def effective_cti(cti: int, watermark: int, max_memory_time: int) -> int:
    """Finalize (semantics-notes 8): the CTI validity is judged against."""
    if max_memory_time < INF and watermark - max_memory_time > cti:
        return watermark - max_memory_time
    return cti


def speculation_point(watermark: int, max_delay: int) -> int:
    """SEMANTICS §7 Align: ``max_delay`` ticks behind the watermark (``NEG`` for ``max_delay`` INF: never)."""
    return watermark - max_delay if max_delay < INF else NEG


def release_point(ceff: int, watermark: int, max_delay: int) -> int:
    """SEMANTICS §7: a window is output once its end is at or below this (the CTI, or ``max_delay`` ticks
    behind the watermark, whichever is later). Under `strong` consistency the CTI releases only windows
    that are final there (`final_end`, and each family's own conditions)."""
    rp = speculation_point(watermark, max_delay)
    return rp if rp > ceff else ceff


def final(re: Any, c: Any) -> Any:
    """SEMANTICS §7 prefix finality: an event ending before CTI ``c`` can no longer change (scalar or vector;
    ``c`` INF: the input ended, everything is final)."""
    return (re < c) | (c >= INF)


def strong(max_delay: int) -> bool:
    """SEMANTICS §7: ``max_delay`` INF is strong consistency — no output retraction for in-order input, so a
    window comes out only once no valid element can change its output (semantics-notes 72)."""
    return max_delay >= INF


def final_end(c: int, le: int, re: int) -> int:
    """Strong consistency, for a UDM that sees member ends (time-sensitive without right clipping): the
    largest ``W.RE`` a window may have and be final at CTI ``c`` as far as member ``[le, re)`` goes. An end at
    or after ``c`` can still move (a retraction's sync time ``min(RE, RE_new)`` may be ``c``, and any
    ``RE_new >= c`` is valid), so every window the event overlaps — those ending after ``le`` — waits."""
    return le if re >= c and le < c else c


def final_ends(c: int, le: np.ndarray, re: np.ndarray) -> np.ndarray:
    """`final_end` of each row; a group's windows are final up to the least (``c`` for no row)."""
    return np.where((re >= c) & (le < c), le, c)


# -- payload fields ----------------------------------------------------------------------------------
def not_object_reason(payload: Any) -> str:
    """A payload that is not a JSON object (a step reading fields, or a gate refusing it outright)."""
    return f"payload must be a JSON object, got {type(payload).__name__}"


def missing_field_reason(field: str) -> str:
    """A payload lacking a field a step reads (semantics-notes 3)."""
    return f"missing field {field!r}"


@dataclass(frozen=True)
class FieldCheck:
    """The payload fields a step reads (semantics-notes 3) and the declared types of what its UDM
    receives (note 17): a failing row is a malformed payload of that step."""

    fields: tuple[str, ...] = ()
    typed: tuple[tuple[str | None, InputType], ...] = ()
    label: str = ""

    @property
    def empty(self) -> bool:
        return not self.fields and not self.typed

    def reason(self, payload: Any) -> tuple[str, str] | None:
        """(category, reason) for a payload this step refuses, else None."""
        if type(payload) is not dict:
            return MALFORMED, not_object_reason(payload)
        for f in self.fields:
            if f not in payload:
                return MISSING_FIELD, missing_field_reason(f)
        for tf, tp in self.typed:
            v = payload if tf is None else payload[tf]
            if not tp.accepts(v):
                return MALFORMED, type_reason(tf, self.label, tp, v)
        return None

    def reasons(self, payload: Payload, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`reason` of each of ``rows`` (all refused: `bad_rows`), the vector form, as (categories, reasons)
        object arrays: a row lacking a field gets the first missing field's reason from the columns' masks;
        the rest, `reason` of its payload."""
        n = len(rows)
        cats = np.empty(n, dtype=object)
        texts = np.empty(n, dtype=object)
        left = np.ones(n, dtype=bool)
        for f in self.fields:
            miss = payload.missing(f, rows)
            if miss is not None and (hit := miss & left).any():
                cats[hit] = MISSING_FIELD
                texts[hit] = missing_field_reason(f)
                left &= ~hit
        rest = np.flatnonzero(left)
        if len(rest):
            every = payload.rows()
            for k, i in zip(rest.tolist(), rows[rest].tolist(), strict=True):
                got = self.reason(every[i])
                assert got is not None
                cats[k], texts[k] = got
        return cats, texts

    def bad_rows(self, payload: Payload, rows: np.ndarray) -> np.ndarray | None:
        """The rows among ``rows`` this step refuses (a bool mask over ``rows``), or None for none; the
        reason of each is `reason` of its payload."""
        if self.empty or len(rows) == 0:
            return None
        bad: np.ndarray | None = None
        for f in self.fields:
            miss = payload.missing(f, rows)
            if miss is not None and miss.any():
                bad = miss if bad is None else (bad | miss)
        for tf, tp in self.typed:
            if tf is None:
                allrows = payload.rows()
                m = tp.bad_mask([allrows[i] for i in rows.tolist()])
            else:
                vals, miss = payload.column(tf, rows)
                if isinstance(vals, np.ndarray):
                    m = tp.bad_mask(vals)
                else:
                    m = tp.bad_mask([0 if v is MISSING else v for v in vals])
                if m is not None and miss is not None:
                    m = m & ~miss
            if m is not None:
                bad = m if bad is None else (bad | m)
        if bad is not None and not bad.any():
            return None
        return bad
