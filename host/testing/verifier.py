"""The canonical verifier (seeds/002 §6.3): CHT(output) == expected CHT, with float tolerance and a diff.

Rows are matched exactly first; what is left is matched row by row on equal lifetimes with payloads
equal up to ``rel_tol``/``abs_tol`` on every number (recursively inside objects and arrays). The diff
lists missing rows (expected, not produced) and unexpected rows (produced, not expected), and pairs a
missing row with an unexpected one of the same lifetime to show which payload fields differ.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .cht import CHT, Row, apply_stream, format_row, format_time

__all__ = ["Verdict", "assert_equivalent", "payloads_close", "verify"]

_LIMIT = 25


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def payloads_close(a: Any, b: Any, *, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Structural equality with numbers compared by `math.isclose` (NaN equals NaN)."""
    if _num(a) and _num(b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(payloads_close(a[k], b[k], rel_tol=rel_tol, abs_tol=abs_tol)
                                            for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(payloads_close(x, y, rel_tol=rel_tol, abs_tol=abs_tol)
                                        for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _field_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two payloads differ, as ``path: expected != got`` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in b:
                out.append(f"{p}: missing in output (expected {a[k]!r})")
            elif k not in a:
                out.append(f"{p}: unexpected field (got {b[k]!r})")
            else:
                out.extend(_field_diff(a[k], b[k], p))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out.extend(_field_diff(x, y, f"{path}[{i}]"))
        return out
    if payloads_close(a, b, rel_tol=0.0, abs_tol=0.0):
        return []
    return [f"{path or '<payload>'}: expected {a!r}, got {b!r}"]


@dataclass
class Verdict:
    """The verifier's answer. ``ok`` is True when the CHTs match; ``diff`` says how they do not."""

    ok: bool
    diff: str = ""
    missing: list[Row] = field(default_factory=list)
    unexpected: list[Row] = field(default_factory=list)
    invalid_output: int = 0  # output elements ignored by the CHT because they were physically invalid

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return "CHT(output) == expected" if self.ok else self.diff


def _as_cht(x: CHT | Iterable[Any]) -> tuple[CHT, int]:
    if isinstance(x, CHT):
        return x, 0
    items = list(x)
    if items and all(isinstance(i, tuple) and len(i) == 3 for i in items):
        return CHT.from_events(items), 0
    st = apply_stream(items)
    return st.cht(), len(st.rejected)


def _match(missing: list[Row], unexpected: list[Row], rel_tol: float, abs_tol: float
           ) -> tuple[list[Row], list[Row]]:
    """Pair rows equal up to float tolerance; returns what is still unmatched."""
    if not missing or not unexpected:
        return missing, unexpected
    by_life: dict[tuple[int, int], list[tuple[Row, Any]]] = {}
    for r in unexpected:
        by_life.setdefault((r[0], r[1]), []).append((r, json.loads(r[2])))
    still_missing = []
    for r in missing:
        cands = by_life.get((r[0], r[1]), [])
        want = json.loads(r[2])
        for i, (_, got) in enumerate(cands):
            if payloads_close(want, got, rel_tol=rel_tol, abs_tol=abs_tol):
                del cands[i]
                break
        else:
            still_missing.append(r)
    still_unexpected = sorted(r for lst in by_life.values() for r, _ in lst)
    return still_missing, still_unexpected


def verify(output: CHT | Iterable[Any], expected: CHT | Iterable[Any], *, rel_tol: float = 1e-9,
           abs_tol: float = 1e-9) -> Verdict:
    """Compare ``CHT(output)`` with ``expected`` (a CHT, or a stream / ``(le, re, payload)`` triples).

    ``output`` is a physical stream (inserts, retractions, CTIs) or a CHT.
    """
    got, invalid = _as_cht(output)
    want, _ = _as_cht(expected)
    missing = sorted((want - got).elements())
    unexpected = sorted((got - want).elements())
    missing, unexpected = _match(missing, unexpected, rel_tol, abs_tol)
    ok = not missing and not unexpected
    if ok:
        return Verdict(True, "", [], [], invalid)
    lines = [f"CHT(output) != expected: {len(missing)} missing row(s), {len(unexpected)} unexpected row(s) "
             f"(expected {want.total()} rows, output has {got.total()})"]
    # pair rows of the same lifetime to show field-level differences
    unexp_by_life: dict[tuple[int, int], list[Row]] = {}
    for r in unexpected:
        unexp_by_life.setdefault((r[0], r[1]), []).append(r)
    paired: list[tuple[Row, Row]] = []
    lone_missing: list[Row] = []
    for r in missing:
        cands = unexp_by_life.get((r[0], r[1]))
        if cands:
            paired.append((r, cands.pop(0)))
        else:
            lone_missing.append(r)
    lone_unexpected = sorted(r for lst in unexp_by_life.values() for r in lst)
    if paired:
        lines.append("payload differs:")
        for exp, got_row in paired[:_LIMIT]:
            detail = "; ".join(_field_diff(json.loads(exp[2]), json.loads(got_row[2]))) or "(equal text?)"
            lines.append(f"  ~ [{format_time(exp[0])}, {format_time(exp[1])}) {detail}")
            lines.append(f"      expected {exp[2]}")
            lines.append(f"      got      {got_row[2]}")
        if len(paired) > _LIMIT:
            lines.append(f"  ... {len(paired) - _LIMIT} more")
    if lone_missing:
        lines.append("missing (expected, not in output):")
        lines += [f"  - {format_row(r)}" for r in lone_missing[:_LIMIT]]
        if len(lone_missing) > _LIMIT:
            lines.append(f"  ... {len(lone_missing) - _LIMIT} more")
    if lone_unexpected:
        lines.append("unexpected (in output, not expected):")
        lines += [f"  + {format_row(r)}" for r in lone_unexpected[:_LIMIT]]
        if len(lone_unexpected) > _LIMIT:
            lines.append(f"  ... {len(lone_unexpected) - _LIMIT} more")
    if invalid:
        lines.append(f"note: {invalid} output element(s) were physically invalid and ignored "
                     "(see check_properties)")
    return Verdict(False, "\n".join(lines), missing, unexpected, invalid)


def assert_equivalent(output: CHT | Iterable[Any], expected: CHT | Iterable[Any], **tol: float) -> None:
    """`verify`, raising AssertionError with the diff when the CHTs differ."""
    v = verify(output, expected, **tol)
    if not v.ok:
        raise AssertionError(v.diff)
