"""What a sketch is fed for a member value, so that equal JSON values are one value.

JSON has one number type: ``1`` and ``1.0`` are the same number, and a column the host reads as float64
hands ``1.0`` where the row path hands ``1``. Both sketches that hash or count values therefore see an
integral float as the integer it equals; a string is never a number (``"1"`` and ``1`` are two values),
and the empty string is a value like any other.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["canonical", "canonical_numbers", "hash_value", "item_key", "item_value"]

_INT64 = 2**63


def canonical(v: Any) -> int | float | str:
    """One representative per JSON value: an int for an integral number in int64 range, else the float or
    the string itself. (An integer beyond 64 bits stands for its float value.)"""
    t = type(v)
    if t is int:
        return v if -_INT64 <= v < _INT64 else float(v)
    if t is float:
        return int(v) if v.is_integer() and -_INT64 <= v < _INT64 else v
    if t is str:
        return v
    raise TypeError(f"expects a number or a string, got {type(v).__name__} {v!r}")


def canonical_numbers(values: np.ndarray) -> list[int | float]:
    """`canonical` of each entry of an int64 / float64 column (what the engine's fast path hands)."""
    if values.dtype.kind in "iu":
        return values.tolist()  # type: ignore[no-any-return]
    return [canonical(v) for v in values.tolist()]


def hash_value(v: Any) -> int | float | str:
    """What an HLL sketch is updated with: `canonical`, a string prefixed with ``s:`` (DataSketches' HLL
    skips an empty string, and ``""`` is a value like any other; the prefix keeps strings apart)."""
    c = canonical(v)
    return "s:" + c if type(c) is str else c


def item_key(v: Any) -> str:
    """The text a frequent-items sketch counts a value under: the value's canonical JSON, an integral
    float written as the integer it equals. `item_value` turns it back into the value."""
    c = canonical(v)
    return json.dumps(c) if type(c) is str else repr(c)


def item_value(key: str) -> Any:
    return json.loads(key)
