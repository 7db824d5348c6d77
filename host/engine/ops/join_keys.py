"""The join's keys as integer codes: a batch's join keys become one int64 column, equal codes for equal keys.

Keys compare as JSON values (SEMANTICS §10): numbers by value (``1 == 1.0``), never ``true == 1``, ``null``
only with ``null``, objects and arrays by their items (numbers in them by value too). `key_part` spells that
rule for one value; `KeyCodes.encode` applies it to a batch: a numeric column is looked up in sorted number
columns (no Python step per value), any other column row by row through a dict. The codes are dense ints
shared by both inputs of one join; `KeyCodes.compact` renumbers the live ones when dead keys pile up, so the
tables stay as small as the state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from udm.host.temporal.strict import canonical_json

from ..payload import MISSING, Payload

__all__ = ["KeyCodes", "key_part"]


def key_part(v: Any) -> Any:
    """A join-key value as a hashable value equal exactly where the JSON values are (SEMANTICS §10): a number
    or a text as itself (``1 == 1.0``; no number equals a text), ``null`` and booleans tagged (never
    ``true == 1``), an object by its items and an array by its elements, tagged, numbers in them by value."""
    if v is None or isinstance(v, bool):
        return (0, v)
    if isinstance(v, (int, float, str)):
        return v
    if isinstance(v, dict):
        return (3, tuple(sorted((str(k), key_part(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):
        return (4, tuple(key_part(x) for x in v))
    return (5, canonical_json(v))


class _Numbers:
    """Numbers of one kind (int64 values, or non-integral float64 values) -> code: a sorted column and its
    codes, looked up and extended a column at a time."""

    __slots__ = ("code", "vals")

    def __init__(self, dtype: Any) -> None:
        self.vals = np.zeros(0, dtype=dtype)
        self.code = np.zeros(0, dtype=np.int64)

    def encode(self, x: np.ndarray, owner: KeyCodes) -> np.ndarray:
        u, inv = np.unique(x, return_inverse=True)
        pos = np.searchsorted(self.vals, u)
        hit = pos < len(self.vals)
        hit[hit] = self.vals[pos[hit]] == u[hit]
        uc = np.empty(len(u), dtype=np.int64)
        uc[hit] = self.code[pos[hit]]
        new = ~hit
        k = int(new.sum())
        if k:
            fresh = np.arange(owner.next, owner.next + k, dtype=np.int64)
            owner.next += k
            uc[new] = fresh
            self.vals = np.insert(self.vals, pos[new], u[new])
            self.code = np.insert(self.code, pos[new], fresh)
        return uc[inv.reshape(-1)]

    def recode(self, remap: np.ndarray) -> None:
        c = remap[self.code]
        keep = c >= 0
        self.vals, self.code = self.vals[keep], c[keep]


#: below this magnitude an integral float is an int64 exactly
_I64_BOUND = float(2**63)


class KeyCodes:
    """Join key -> dense code (int), for both inputs of one join. A key is its field's key part when the join
    has one field, else the tuple of its fields' parts (`key_part`). With one field, the numbers are held as
    sorted columns instead (`_Numbers`: integers in the int64 range, integral floats among them as the
    integers they equal, and the other finite floats), so a numeric column is encoded without a Python step
    per value; any other key (a text, ``null``, a boolean, an object, a number beyond int64) in a dict."""

    __slots__ = ("codes", "fracs", "ints", "next")

    def __init__(self) -> None:
        self.codes: dict[Any, int] = {}
        self.ints = _Numbers(np.int64)
        self.fracs = _Numbers(np.float64)
        #: the next fresh code
        self.next = 0

    def __len__(self) -> int:
        return self.next

    def _code(self, key: Any) -> int:
        c = self.codes.get(key)
        if c is None:
            c = self.codes[key] = self.next
            self.next += 1
        return c

    def encode(self, payload: Payload, rows: np.ndarray, fields: tuple[str, ...]
               ) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
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
        if miss is None and len(cols) == 1 and isinstance(cols[0], np.ndarray):
            return self._numbers(cols[0]), None, []
        out = np.full(n, -1, dtype=np.int64)
        lacking: list[str] = []
        code = self._code
        if len(fields) == 1:
            ints: list[int] = []
            iat: list[int] = []
            fls: list[float] = []
            fat: list[int] = []
            for i, v in enumerate(cols[0].tolist() if isinstance(cols[0], np.ndarray) else cols[0]):
                t = type(v)
                if t is int and -(2**63) <= v < 2**63:
                    ints.append(v)
                    iat.append(i)
                elif t is float:
                    fls.append(v)
                    fat.append(i)
                elif miss is not None and miss[i]:
                    lacking.append(fields[0])
                else:
                    out[i] = code(key_part(v))
            if ints:
                out[iat] = self.ints.encode(np.array(ints, dtype=np.int64), self)
            if fls:
                out[fat] = self._numbers(np.array(fls, dtype=np.float64))
            return out, miss, lacking
        lists = [c.tolist() if isinstance(c, np.ndarray) else c for c in cols]
        for i, vs in enumerate(zip(*lists, strict=True)):
            if miss is not None and miss[i]:
                lacking.append(next(f for f, v in zip(fields, vs, strict=True) if v is MISSING))
                continue
            out[i] = code(tuple(key_part(v) for v in vs))
        return out, miss, lacking

    def _numbers(self, x: np.ndarray) -> np.ndarray:
        """The codes of a numeric column (int64 or float64)."""
        if x.dtype.kind != "f":
            return self.ints.encode(x.astype(np.int64, copy=False), self)
        out = np.empty(len(x), dtype=np.int64)
        fin = np.isfinite(x)
        whole = fin & (np.floor(x) == x) & (x >= -_I64_BOUND) & (x < _I64_BOUND)
        if whole.any():
            out[whole] = self.ints.encode(x[whole].astype(np.int64), self)
        frac = fin & ~whole
        if frac.any():
            out[frac] = self.fracs.encode(x[frac], self)
        rest = np.flatnonzero(~fin)
        if len(rest):  # (not a JSON number: as itself, in the dict)
            out[rest] = [self._code(v) for v in x[rest].tolist()]
        return out

    def compact(self, live: list[np.ndarray]) -> np.ndarray:
        """Renumber: only the codes in ``live`` (arrays of codes) are kept. Returns the table old code -> new
        (-1: dropped; its last entry serves code -1)."""
        used = np.unique(np.concatenate(live)) if live else np.zeros(0, dtype=np.int64)
        remap = np.full(self.next + 1, -1, dtype=np.int64)
        remap[used] = np.arange(len(used), dtype=np.int64)
        rl = remap.tolist()
        self.codes = {k: rl[c] for k, c in self.codes.items() if rl[c] >= 0}
        self.ints.recode(remap)
        self.fracs.recode(remap)
        self.next = len(used)
        return remap
