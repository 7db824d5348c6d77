"""The join's keys as integer codes: a batch's join keys become one int64 column, equal codes for equal keys.

Keys compare as JSON values (SEMANTICS §10): numbers by value (``1 == 1.0``), never ``true == 1``, ``null``
only with ``null``, objects and arrays by their items (numbers in them by value too). `join_key` spells that rule for one payload;
`KeyCodes.encode` applies it to a batch: a numeric column (every row an int64, or every row a float64) is
made unique in numpy and only its distinct values go through the rule, any other column row by row. The codes
are dense ints shared by both inputs of one join; `KeyCodes.compact` renumbers the live ones when dead keys
pile up, so the dictionary stays as small as the state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from udm.host.temporal.strict import canonical_json

from ..payload import MISSING, Payload

__all__ = ["KeyCodes", "join_key"]


def _key_part(v: Any) -> Any:
    """A join-key value as a hashable value equal exactly where the JSON values are (SEMANTICS §10): a number
    or a text as itself (``1 == 1.0``; no number equals a text), ``null`` and booleans tagged (never
    ``true == 1``), an object by its items and an array by its elements, tagged, numbers in them by value."""
    if v is None or isinstance(v, bool):
        return (0, v)
    if isinstance(v, (int, float, str)):
        return v
    if isinstance(v, dict):
        return (3, tuple(sorted((str(k), _key_part(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):
        return (4, tuple(_key_part(x) for x in v))
    return (5, canonical_json(v))


def join_key(payload: dict[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...]:
    """The hashable join key of ``payload`` over ``fields`` (KeyError names a missing field)."""
    return tuple(_key_part(payload[f]) for f in fields)


class KeyCodes:
    """Join key -> dense code (int), for both inputs of one join. A key is its field's key part when the join
    has one field, else the tuple of its fields' parts (`join_key`)."""

    __slots__ = ("codes",)

    def __init__(self) -> None:
        self.codes: dict[tuple[Any, ...], int] = {}

    def __len__(self) -> int:
        return len(self.codes)

    def encode(self, payload: Payload, rows: np.ndarray, fields: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
        """The codes of ``rows``' keys over ``fields``, and the rows lacking a field (mask, None: none) with,
        for each such row, the first field it lacks (-1 codes there)."""
        n = len(rows)
        cols: list[Any] = []
        miss: np.ndarray | None = None
        for f in fields:
            vals, m = payload.column(f, rows)
            cols.append(vals)
            if m is not None:
                miss = m if miss is None else (miss | m)
        codes = self.codes
        sd = codes.setdefault
        if miss is None and len(cols) == 1 and isinstance(cols[0], np.ndarray):
            # one numeric column: only its distinct values through the rule (a number is its own key part)
            u, inv = np.unique(cols[0], return_inverse=True)
            uc = np.array([sd(v, len(codes)) for v in u.tolist()], dtype=np.int64)
            return uc[inv.reshape(-1)], None, []
        lists = [c.tolist() if isinstance(c, np.ndarray) else c for c in cols]
        one = len(fields) == 1  # (one field: its key part is the key, not a 1-tuple)
        out = np.full(n, -1, dtype=np.int64)
        lacking: list[str] = []
        for i, vs in enumerate(zip(*lists, strict=True)):
            if miss is not None and miss[i]:
                lacking.append(next(f for f, v in zip(fields, vs, strict=True) if v is MISSING))
                continue
            out[i] = sd(_key_part(vs[0]) if one else tuple(_key_part(v) for v in vs), len(codes))
        return out, miss, lacking

    def compact(self, live: list[np.ndarray]) -> np.ndarray:
        """Renumber: only the codes in ``live`` (arrays of codes) are kept. Returns the table old code -> new
        (-1: dropped; its last entry serves code -1)."""
        used = np.unique(np.concatenate(live)) if live else np.zeros(0, dtype=np.int64)
        keys: list[Any] = [None] * len(self.codes)
        for k, c in self.codes.items():
            keys[c] = k
        self.codes = {keys[c]: i for i, c in enumerate(used.tolist())}
        remap = np.full(len(keys) + 1, -1, dtype=np.int64)
        remap[used] = np.arange(len(used), dtype=np.int64)
        return remap
