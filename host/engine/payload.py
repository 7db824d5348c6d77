"""`Payload`: the payloads of a batch's rows, as columns or as dicts.

A batch read by the fast JSON reader carries its payloads as one pyarrow column per field (every row has
every field; a null is a JSON ``null``): span steps then work on whole columns (a filter's batch form, a
projection, the output encoder) and no payload ever becomes a Python dict. Anything that cannot stay
columnar (payloads of different shapes, a UDF that returns objects, rows built one by one) holds a list of
dicts instead. Both forms give the same values through `column` and `rows`; an operator asks for what it
needs and the conversion happens once, lazily.

Rows that carry no payload (CTIs) hold an empty dict / nulls: nobody reads them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.io.arrow_numpy import arrow_of
from udm.host.io.batch import dict_builder
from udm.host.io.encode import ConstColumn, plain_column

__all__ = ["MISSING", "Payload", "as_column", "value_array"]

#: what `Payload.column` puts where a row lacks the field (rows form only)
MISSING: Any = object()


def _to_py(col: pa.Array | ConstColumn, n: int) -> list[Any]:
    if isinstance(col, ConstColumn):
        return [col.value] * n
    if pa.types.is_struct(col.type) or pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        return col.to_pylist()
    return col.to_pylist()


def _numeric(col: pa.Array) -> np.ndarray | None:
    """An int64/float64 column without nulls as numpy (zero copy), else None."""
    t = col.type
    if col.null_count == 0 and (pa.types.is_int64(t) or pa.types.is_float64(t)):
        return col.to_numpy(zero_copy_only=False)
    return None


class Payload:
    """Row-aligned payloads: ``fields`` (name -> pyarrow array or `ConstColumn`, in payload order) or ``rows``."""

    __slots__ = ("_fields", "_n", "_rows", "_valid")

    def __init__(self, n: int, fields: dict[str, pa.Array | ConstColumn] | None = None,
                 rows: list[Any] | None = None, valid: np.ndarray | None = None) -> None:
        self._n = n
        self._fields = fields
        self._rows = rows
        #: columns form: rows whose payload is present (None: all); an absent payload reads as ``{}``
        self._valid = valid

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: list[Any]) -> Payload:
        return cls(len(rows), rows=rows)

    @classmethod
    def empty(cls, n: int) -> Payload:
        return cls(n, fields={})

    @classmethod
    def absent(cls, n: int) -> Payload:
        """``n`` rows without a payload (CTIs): they take any shape in a concatenation."""
        return cls(n, fields={}, valid=np.zeros(n, dtype=bool))

    @classmethod
    def from_struct(cls, arr: pa.Array | pa.ChunkedArray) -> Payload:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        typ = arr.type
        fields = {typ.field(k).name: arr.field(k) for k in range(typ.num_fields)}
        valid = None
        if arr.null_count:
            valid = arr.is_valid().to_numpy(zero_copy_only=False)
        return cls(len(arr), fields=fields, valid=valid)

    @classmethod
    def from_json(cls, texts: Sequence[str | None]) -> Payload:
        loads = json.loads
        return cls(len(texts), rows=[{} if s is None else loads(s) for s in texts])

    # -- views ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    @property
    def columnar(self) -> bool:
        """True when the payloads are held as columns (every data row has the same fields)."""
        return self._fields is not None

    @property
    def fields(self) -> dict[str, pa.Array | ConstColumn] | None:
        return self._fields

    @property
    def valid(self) -> np.ndarray | None:
        """Columns form: the rows that carry a payload (None: all)."""
        return self._valid

    @property
    def is_absent(self) -> bool:
        """Every row without a payload (CTIs only)."""
        return self._fields == {} and self._valid is not None and not self._valid.any()

    @property
    def names(self) -> tuple[str, ...] | None:
        return tuple(self._fields) if self._fields is not None else None

    def rows(self) -> list[Any]:
        """Every row's payload as a dict (built once)."""
        r = self._rows
        if r is None:
            f = self._fields
            assert f is not None
            n = self._n
            if not f:
                r = [{} for _ in range(n)]
            else:
                names = tuple(f)
                r = dict_builder(names)([_to_py(c, n) for c in f.values()])
            if self._valid is not None:
                for i in np.flatnonzero(~self._valid).tolist():
                    r[i] = {}
            self._rows = r
        return r

    def row(self, i: int) -> dict[str, Any]:
        r = self._rows
        if r is not None:
            row: dict[str, Any] = r[i]
            return row
        f = self._fields
        assert f is not None
        if self._valid is not None and not self._valid[i]:
            return {}
        return {k: (c.value if isinstance(c, ConstColumn) else c[i].as_py()) for k, c in f.items()}

    def column(self, name: str, rows: np.ndarray | None = None) -> tuple[Any, np.ndarray | None]:
        """Field ``name`` of every row (of ``rows`` only, when given): (values, mask of rows lacking it or
        None). Values are an int64 / float64 numpy array when the field is uniformly so, else a list
        (`MISSING` where absent)."""
        f = self._fields
        n = self._n if rows is None else len(rows)
        if f is not None:
            col = f.get(name)
            if col is None:
                return [MISSING] * n, np.ones(n, dtype=bool)
            valid = self._valid
            if rows is not None and valid is not None:
                valid = valid[rows]
            miss = None if valid is None or valid.all() else ~valid
            if isinstance(col, ConstColumn):
                vals: Any = [col.value] * n
            else:
                if rows is not None and (len(rows) != self._n or col.null_count):
                    col = col.take(arrow_of(rows, np.int64))
                num = _numeric(col)
                vals = num if num is not None else col.to_pylist()
            return vals, miss
        allrows = self._rows
        assert allrows is not None
        src = allrows if rows is None else [allrows[i] for i in rows.tolist()]
        vals = [p.get(name, MISSING) if type(p) is dict else MISSING for p in src]
        if MISSING in vals:
            return vals, np.fromiter((v is MISSING for v in vals), dtype=bool, count=len(vals))
        kinds = set(map(type, vals))
        if kinds == {int}:
            try:
                return np.array(vals, dtype=np.int64), None
            except OverflowError:
                return vals, None
        if kinds == {float}:
            return np.array(vals, dtype=np.float64), None
        return vals, None

    def missing(self, name: str, rows: np.ndarray | None = None) -> np.ndarray | None:
        """The rows (of ``rows`` only, when given) lacking field ``name``, as a mask; None when none lacks
        it. `column`'s mask, without making the values."""
        f = self._fields
        if f is None:
            return self.column(name, rows)[1]
        n = self._n if rows is None else len(rows)
        if name not in f:
            return np.ones(n, dtype=bool)
        valid = self._valid
        if valid is None:
            return None
        if rows is not None:
            valid = valid[rows]
        return None if valid.all() else ~valid

    def arrow(self, name: str) -> pa.Array | ConstColumn | None:
        """The columns form's field ``name`` (None: rows form, or no such field)."""
        f = self._fields
        return None if f is None else f.get(name)

    # -- reshaping -----------------------------------------------------------------------------------
    def take(self, idx: np.ndarray) -> Payload:
        if len(idx) == self._n and (self._n == 0 or (idx[0] == 0 and bool(np.all(np.diff(idx) == 1)))):
            return self
        f = self._fields
        if f is not None:
            ia = arrow_of(idx, np.int64)
            nf = {k: (c if isinstance(c, ConstColumn) else c.take(ia)) for k, c in f.items()}
            valid = None if self._valid is None else self._valid[idx]
            out = Payload(len(idx), fields=nf, valid=valid)
            if self._rows is not None:
                r = self._rows
                out._rows = [r[i] for i in idx.tolist()]
            return out
        rs = self._rows
        assert rs is not None
        return Payload(len(idx), rows=[rs[i] for i in idx.tolist()])

    def with_field(self, name: str, values: Any) -> Payload:
        """Every row's payload plus ``name: values[i]`` (an existing field of that name is replaced)."""
        f = self._fields
        if f is not None:
            # (rows without a payload, CTIs, stay without one: their value in the new column is not read)
            col = as_column(values)
            if col is not None:
                nf = dict(f)
                nf[name] = col  # (a field replaced keeps its place, as in a dict)
                return Payload(self._n, fields=nf, valid=self._valid)
        vals = values.tolist() if isinstance(values, np.ndarray) else list(values)
        return Payload(self._n, rows=[{**p, name: v} for p, v in zip(self.rows(), vals, strict=True)])

    def reshape(self, keep: tuple[str, ...] | None, drop: frozenset[str], rename: dict[str, str],
                set_values: dict[str, Any]) -> Payload:
        """``project`` (semantics-notes 12): keep, drop, rename, then set. Columns stay columns."""
        f = self._fields
        if f is not None:
            cols: dict[str, pa.Array | ConstColumn] = {k: f[k] for k in keep} if keep is not None else dict(f)
            if drop:
                cols = {k: v for k, v in cols.items() if k not in drop}
            if rename:
                moved = {rename[k]: v for k, v in cols.items() if k in rename}
                cols = {k: v for k, v in cols.items() if k not in rename and k not in moved}
                cols.update(moved)
            for k, v in set_values.items():
                cols.pop(k, None)
                cols[k] = ConstColumn(v)
            return Payload(self._n, fields=cols, valid=self._valid)
        out = []
        for p in self.rows():
            if keep is not None:
                p = {k: p[k] for k in keep}
            if drop:
                p = {k: v for k, v in p.items() if k not in drop}
            if rename:
                moved = {rename[k]: v for k, v in p.items() if k in rename}
                p = {k: v for k, v in p.items() if k not in rename and k not in moved}
                p.update(moved)
            if set_values:
                p = {**p, **set_values}
            out.append(p)
        return Payload(self._n, rows=out)

    def __getstate__(self) -> Any:
        return self.rows()

    def __setstate__(self, rows: Any) -> None:
        self._n = len(rows)
        self._rows = rows
        self._fields = None
        self._valid = None


def as_column(values: Any) -> pa.Array | None:
    """A map result as a column, when it is one plain JSON kind (else None: the payloads become dicts)."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "if" and values.dtype.itemsize == 8:
            if values.dtype.kind == "f" and not np.isfinite(values).all():
                return None
            return arrow_of(values)
        if values.dtype.kind == "b":
            return arrow_of(values)
        values = values.tolist()
    arr = plain_column(values)
    if arr is not None and pa.types.is_floating(arr.type) and not np.isfinite(arr.to_numpy(zero_copy_only=False)).all():
        return None  # (NaN and infinities are no JSON value: the payloads become dicts, which the writer refuses)
    return arr
    return None


_NUMERIC = (np.dtype(np.int64), np.dtype(np.float64))


def value_array(vals: Any) -> np.ndarray:
    """UDM input values as one numpy column: int64 / float64 when every value is an int, or every value a
    float; anything else (an int among floats, text, payloads) as Python objects, so an int stays an int
    and a window of ints gives an int (``np.asarray`` would make ``[5, 1.5]`` floats, and a max of 5 ``5.0``)."""
    if isinstance(vals, np.ndarray) and vals.dtype in _NUMERIC and vals.ndim == 1:
        return vals
    lst = vals.tolist() if isinstance(vals, np.ndarray) else list(vals)
    kinds = set(map(type, lst))
    if kinds == {float}:
        return np.array(lst, dtype=np.float64)
    if kinds == {int}:
        try:
            return np.array(lst, dtype=np.int64)
        except OverflowError:
            pass
    out = np.empty(len(lst), dtype=object)
    out[:] = lst
    return out
