"""Columnar pieces the fast path and the window families share: per-batch column access (`Cols`), group
codes of a batch, the columnar store of fast-path events (`ColumnarEvents`), and group keys.

Pure data and array functions: nothing here drives an operator or touches its state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .common import cjson

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["Cols", "ColumnarEvents", "FastIds", "group_codes", "group_key", "id_array", "stable_order"]

#: ids (payloads) a batch reads one by one (`Cols.id_at`, `Cols.payload_at`) before it converts the whole
#: column to Python
_ID_SCALARS = 64

_MISSING = object()


class Cols:
    """Per-batch column access, materialized lazily."""

    def __init__(self, batch: Any) -> None:
        self.batch = batch
        self.n = len(batch)
        self._ids: list[Any] | None = None
        self._id_arr: Any = None
        self._id_hits = 0
        self._payload_hits = 0
        self._payloads: list[Any] | None = None
        self.le = batch.column("le")
        self.re = batch.column("re")
        self._lists: dict[str, list[int]] = {}
        self._cache: dict[Any, Any] = {}

    def ints_np(self, name: str) -> np.ndarray:
        if name == "le":
            return self.le
        if name == "re":
            return self.re
        key = ("np", name)
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = self.batch.column(name)
        return v

    @property
    def id_array(self) -> Any:
        """The id column as one pyarrow array (the fast path works on it without Python strings)."""
        if self._id_arr is None:
            self._id_arr = id_array(self.batch.table.column("id"))
        return self._id_arr

    def id_at(self, i: int) -> Any:
        """Row ``i``'s id. The first few come one by one from the column (on the in-order path only a
        handful of rows per batch take the general path); after that the whole column is converted."""
        ids = self._ids
        if ids is not None:
            return ids[i]
        self._id_hits += 1
        if self._id_hits > _ID_SCALARS:
            return self.ids[i]
        return self.id_array[i].as_py()

    def ints(self, name: str) -> list[int]:
        """A time column as a Python list (for row-by-row work)."""
        v = self._lists.get(name)
        if v is None:
            src = self.le if name == "le" else self.re if name == "re" else self.batch.column(name)
            v = self._lists[name] = src.tolist()
        return v

    @property
    def ids(self) -> list[Any]:
        if self._ids is None:
            self._ids = self.batch.table.column("id").to_pylist()
        return self._ids

    def payload_at(self, i: int) -> Any:
        """Row ``i``'s payload: one by one for the first few rows (as `id_at`), then the whole batch."""
        if self._payloads is None:
            self._payload_hits += 1
            if self._payload_hits <= _ID_SCALARS:
                return self.batch.payload_at(i)
        return self.payloads[i]

    @property
    def payloads(self) -> list[Any]:
        if self._payloads is None:
            self._payloads = self.batch.payloads()
        return self._payloads

    def field(self, name: str, a: int, b: int) -> tuple[Any, np.ndarray | None]:
        """Values of payload field ``name`` for rows [a, b) and a mask of rows lacking it (None: none
        lack it). Values are a numpy int64/float64 array when the field is uniformly numeric, else a
        list of Python values (what the general path would read from the payload dicts)."""
        key = ("f", name)
        whole = self._cache.get(key)
        if whole is None:
            whole = self._cache[key] = self._field(name, 0, self.n)
        vals, miss = whole
        if a == 0 and b == self.n:
            return whole
        return vals[a:b], (None if miss is None else miss[a:b])

    def _field(self, name: str, a: int, b: int) -> tuple[Any, np.ndarray | None]:
        col = self.batch.payload_field(name)
        if col is not None:
            import pyarrow as pa

            part = col.slice(a, b - a)
            missing = None
            if part.null_count:
                missing = part.is_null().to_numpy(zero_copy_only=False)
                if not missing.any():
                    missing = None
            t = part.type
            if pa.types.is_int64(t) or pa.types.is_float64(t):
                arr = (part.fill_null(0) if missing is not None else part).to_numpy()
                return arr, missing
            return part.to_pylist(), missing
        pls = self.payloads
        vals = [p.get(name, _MISSING) if type(p) is dict else _MISSING for p in pls[a:b]]
        missing = None
        if _MISSING in vals:
            missing = np.fromiter((v is _MISSING for v in vals), dtype=bool, count=len(vals))
            return vals, missing
        kinds = set(map(type, vals))
        if kinds == {int}:
            try:
                return np.array(vals, dtype=np.int64), None
            except OverflowError:
                return vals, None
        if kinds == {float}:
            return np.array(vals, dtype=np.float64), None
        return vals, None



class ColumnarEvents:
    """Events inserted by the vectorized fast path, kept columnar (sorted by RE, so a CTI closes a
    prefix) until something needs them one by one (`WindowStep.pull`, `WindowStep.materialize`) or a
    CTI closes them.

    Their ids stay a pyarrow string array: on the in-order path nobody asks for them one by one, so
    building per-id Python objects (a set of live fast-path ids, updated per batch and trimmed per CTI)
    would be pure overhead. Closing a prefix only moves ``lo``; a pulled row is only marked in ``gone``;
    the id -> row map ``pos`` is built the first time the general path looks an id up (a retraction, or
    an insert the fast path did not vouch for) and stays valid because rows never move.
    """

    __slots__ = ("gcodes", "gone", "ids", "keys", "le", "lo", "ngone", "order", "pos", "re", "vals")

    def __init__(self, ids: Any, le: np.ndarray, re: np.ndarray, vals: Any, gcodes: np.ndarray,
                 keys: list[Any], sel: np.ndarray | None = None) -> None:
        """Events ``i``: ``ids[sel[i]]`` (``sel`` None: ``ids[i]``), ``le[i]``, ... (a batch's id column
        is kept whole rather than copied for the rows taken)."""
        order = np.argsort(re, kind="stable")
        self.order = order if sel is None else sel[order]  # row (RE order) -> position in ``ids``
        self.ids: pa.Array = id_array(ids)  # as inserted: reordering strings costs, and is seldom needed
        self.le = le[order]
        self.re = re[order]
        self.vals = (vals if isinstance(vals, np.ndarray) else np.asarray(vals, dtype=object))[order]
        self.gcodes = gcodes[order]
        self.keys = keys
        self.lo = 0  # rows before it are closed (forgotten)
        self.gone: np.ndarray | None = None  # rows pulled into the registry
        self.ngone = 0
        self.pos: dict[str, int] | None = None  # id -> row

    def __getstate__(self) -> tuple:
        # plain data in snapshots: ids as a list, the lookup map is rebuilt on demand
        return tuple(self.ids.to_pylist() if s == "ids" else None if s == "pos" else getattr(self, s)
                     for s in ColumnarEvents.__slots__)

    def __setstate__(self, st: tuple) -> None:
        for k, v in zip(ColumnarEvents.__slots__, st, strict=True):
            setattr(self, k, id_array(v) if k == "ids" else v)

    def __len__(self) -> int:
        """Events still held (not closed, not pulled)."""
        return len(self.re) - self.lo - self.ngone

    def closed(self, c: int) -> int:
        """Row index up to which RE < c (never below ``lo``: RE is sorted and earlier CTIs were lower)."""
        return int(np.searchsorted(self.re, c, side="left"))

    def find(self, id: str) -> int:
        """The row holding event ``id``, or -1."""
        pos = self.pos
        if pos is None:
            ids = self.ids.take(self.order).to_pylist()
            pos = self.pos = dict(zip(ids, range(len(ids)), strict=True))
        i = pos.get(id, -1)
        if i < self.lo or (self.gone is not None and self.gone[i]):
            return -1
        return i

    def take_out(self, i: int) -> None:
        """Row ``i`` moves to the registry (`WindowStep.pull`)."""
        if self.gone is None:
            self.gone = np.zeros(len(self.re), dtype=bool)
        self.gone[i] = True
        self.ngone += 1

    def close(self, p: int) -> np.ndarray:
        """Forget rows [lo, p) (closed by a CTI); their group codes (pulled rows left out)."""
        a = self.lo
        codes = self.gcodes[a:p]
        if self.gone is not None:
            g = self.gone[a:p]
            n = int(g.sum())
            if n:
                codes = codes[~g]
                self.ngone -= n
        self.lo = p
        return codes

    def held(self) -> np.ndarray:
        """Rows still held, in RE order."""
        r = np.arange(self.lo, len(self.re))
        return r if self.gone is None else r[~self.gone[self.lo:]]

    def held_id_array(self) -> pa.Array:
        """Ids of the events still held (pyarrow)."""
        return self.ids.take(self.order[self.held()])

    def held_ids(self) -> list[str]:
        """Ids of the events still held."""
        return self.held_id_array().to_pylist()


def id_array(ids: Any) -> pa.Array:
    """An id column as one pyarrow array (a chunked column combined; a list converted). pyarrow is
    imported here, not at module level: the engine without batches does not need it."""
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray):
        return ids.combine_chunks() if ids.num_chunks != 1 else ids.chunk(0)
    if isinstance(ids, pa.Array):
        return ids
    return pa.array(ids, type=pa.string())


class FastIds:
    """Read-only view of the ids the fast path holds in `WindowStep.chunks` (not yet in ``live``)."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[ColumnarEvents]) -> None:
        self.chunks = chunks

    def __len__(self) -> int:
        return sum(len(ch) for ch in self.chunks)

    def __bool__(self) -> bool:
        return any(len(ch) for ch in self.chunks)

    def __contains__(self, id: object) -> bool:
        return type(id) is str and any(ch.find(id) >= 0 for ch in self.chunks)

    def __iter__(self) -> Iterator[str]:
        for ch in self.chunks:
            yield from ch.held_ids()

    def overlaps(self, ids: set[str]) -> bool:
        """Does any held id appear in ``ids``? (Costs one pass over the held ids, not over ``ids``.)"""
        return any(not ids.isdisjoint(ch.held_ids()) for ch in self.chunks if len(ch))


def group_key(v: Any) -> Any:
    """A group key part: strings as they are; other values tagged by type so that 1, 1.0 and True
    (equal in Python, different in JSON) are different groups; unhashable values by canonical JSON."""
    if type(v) is str:
        return v
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return ("\x00json", cjson(v))



def group_codes(cols: Cols, fields: tuple[str, ...], a: int, b: int
                ) -> tuple[np.ndarray, list[Any], list[dict[str, Any] | None], np.ndarray | None]:
    """Per-row group codes for rows [a, b): (codes, group keys by code, key fields by code, missing)."""
    key = ("g", fields)
    whole = cols._cache.get(key)
    if whole is None:
        whole = cols._cache[key] = _group_codes(cols, fields, 0, cols.n)
    codes, keys, gfields, miss = whole
    if a == 0 and b == cols.n:
        return whole
    return codes[a:b], keys, gfields, (None if miss is None else miss[a:b])


def _group_codes(cols: Cols, fields: tuple[str, ...], a: int, b: int
                 ) -> tuple[np.ndarray, list[Any], list[dict[str, Any] | None], np.ndarray | None]:
    n = b - a
    if not fields:
        return np.zeros(n, dtype=np.int64), [()], [None], None
    per_codes = []
    per_vals = []
    missing: np.ndarray | None = None
    for f in fields:
        codes, vals, miss = _codes_one(cols, f, a, b)
        per_codes.append(codes)
        per_vals.append(vals)
        if miss is not None:
            missing = miss if missing is None else (missing | miss)
    if len(fields) == 1:
        vals = per_vals[0]
        f = fields[0]
        return per_codes[0], [group_key(v) for v in vals], [{f: v} for v in vals], missing
    combo = np.zeros(n, dtype=np.int64)
    for codes, vals in zip(per_codes, per_vals, strict=True):
        combo = combo * max(len(vals), 1) + codes
    uniq, inv = np.unique(combo, return_inverse=True)
    keys: list[Any] = []
    gfields: list[dict[str, Any] | None] = []
    first_row = np.zeros(len(uniq), dtype=np.int64)
    first_row[inv[::-1]] = np.arange(n - 1, -1, -1)
    for r in first_row.tolist():
        vs = [vals[codes[r]] for codes, vals in zip(per_codes, per_vals, strict=True)]
        keys.append(tuple(group_key(v) for v in vs))
        gfields.append(dict(zip(fields, vs, strict=True)))
    return inv.astype(np.int64), keys, gfields, missing


def _codes_one(cols: Cols, f: str, a: int, b: int) -> tuple[np.ndarray, list[Any], np.ndarray | None]:
    col = cols.batch.payload_field(f)
    if col is not None:
        import pyarrow as pa
        import pyarrow.compute as pc

        part = col.slice(a, b - a)
        missing = part.is_null().to_numpy(zero_copy_only=False) if part.null_count else None
        t = part.type
        if pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_large_string(t):
            enc = pc.dictionary_encode(part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part)
            idx = enc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            return idx, enc.dictionary.to_pylist(), missing
        vals_list = part.to_pylist()
    else:
        vals_list = [p.get(f, _MISSING) if type(p) is dict else _MISSING for p in cols.payloads[a:b]]
        missing = None
        if _MISSING in vals_list:
            missing = np.fromiter((v is _MISSING for v in vals_list), dtype=bool, count=len(vals_list))
    table: dict[Any, int] = {}
    values: list[Any] = []
    codes = np.empty(len(vals_list), dtype=np.int64)
    for i, v in enumerate(vals_list):
        k = group_key(v) if v is not _MISSING else None  # missing rows never take this path
        c = table.get(k)
        if c is None:
            c = table[k] = len(values)
            values.append(v if v is not _MISSING else None)
        codes[i] = c
    return codes, values, missing



def stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for non-negative keys; as int16 when they fit, where numpy's
    stable sort is a radix sort (several times faster than on int64; (group, window) keys of a batch
    mostly fit)."""
    if len(key) and int(key.max()) < 32768:
        return np.argsort(key.astype(np.int16), kind="stable")
    return np.argsort(key, kind="stable")
