"""Payloads put together: the payloads of several batches as one (`concat_payloads`), and a batch's payloads
with some rows replaced (`patched`), kept as columns whenever the parts have one shape.

Why columns: a window's column blocks and the few rows it made one by one, or a gate's batch and the
payloads of older events its retractions name, would otherwise turn the whole batch into one dict per
row, and every step after it (and the output encoder) would pay per row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.io.encode import ConstColumn

from .payload import Payload, as_column

__all__ = ["concat_payloads", "patched"]


def concat_payloads(parts: Sequence[Payload]) -> Payload:
    """The rows of ``parts``, in order, as one `Payload` (columns when they share a shape)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return Payload.empty(0)
    if len(parts) == 1:
        return parts[0]
    n = sum(len(p) for p in parts)
    if any(p.fields for p in parts):
        # a few rows made one by one beside column blocks: as columns too when they have the same shape
        parts = [p if p.columnar else _columnized(p) for p in parts]
    shaped = [p for p in parts if not p.is_absent]
    if shaped and len(shaped) < len(parts) and shaped[0].names is not None \
            and all(p.names == shaped[0].names for p in shaped):
        return _with_absent(parts, shaped[0], n)
    names = parts[0].names
    if names is not None and all(p.names == names and p.valid is None for p in parts):
        try:
            cols: dict[str, pa.Array | ConstColumn] = {}
            for k in names:
                cs = [p.fields[k] for p in parts]  # type: ignore[index]
                if all(isinstance(c, ConstColumn) for c in cs) and len({json.dumps(c.value) for c in cs}) == 1:
                    cols[k] = cs[0]
                    continue
                arrs = [pa.array([c.value] * len(p)) if isinstance(c, ConstColumn) else c
                        for c, p in zip(cs, parts, strict=True)]
                if len({a.type for a in arrs}) != 1:
                    raise TypeError
                cols[k] = pa.concat_arrays(arrs)
            return Payload(n, fields=cols)
        except (TypeError, pa.ArrowException):
            pass
    return Payload(n, rows=_all_rows(parts))


def patched(payload: Payload, at: np.ndarray, rows: list[Any]) -> Payload:
    """``payload`` with rows ``at`` (ascending) replaced by ``rows`` (dicts): still columns when the dicts
    have its fields, in order, with values of the same column types."""
    f = payload.fields
    n = len(payload)
    if f and all(type(p) is dict and tuple(p) == tuple(f) for p in rows):
        idx = np.arange(n, dtype=np.int64)
        idx[at] = n + np.arange(len(at), dtype=np.int64)
        take = pa.array(idx)
        cols: dict[str, pa.Array | ConstColumn] = {}
        for k, c in f.items():
            vals = [p[k] for p in rows]
            if isinstance(c, ConstColumn):
                if all(type(v) is type(c.value) and v == c.value for v in vals):
                    cols[k] = c
                    continue
                break
            add = as_column(vals)
            if add is None or add.type != c.type:
                break
            cols[k] = pa.concat_arrays([c, add]).take(take)
        else:
            valid = None
            if payload.valid is not None:
                valid = payload.valid.copy()
                valid[at] = True
            return Payload(n, fields=cols, valid=valid)
    out = list(payload.rows())
    for i, p in zip(at.tolist(), rows, strict=True):
        out[i] = p
    return Payload(n, rows=out)


def _all_rows(parts: Sequence[Payload]) -> list[Any]:
    rows: list[Any] = []
    for p in parts:
        rows.extend(p.rows())
    return rows


def _columnized(p: Payload) -> Payload:
    """A rows-form payload as columns when every row has the same keys, in order, of plain kinds (else
    ``p``). Rows without a payload (CTIs: empty dicts) become absent rows."""
    rows = p.rows()
    keys = None
    present = []
    for r in rows:
        if type(r) is not dict:
            return p
        if not r:
            present.append(False)
            continue
        present.append(True)
        k = tuple(r)
        if keys is None:
            keys = k
        elif k != keys:
            return p
    if keys is None:
        return Payload.absent(len(p))
    sel = [r for r, ok in zip(rows, present, strict=True) if ok]
    cols: dict[str, pa.Array | ConstColumn] = {}
    full = len(sel) == len(rows)
    for k in keys:
        col = as_column([r[k] for r in sel])
        if col is None:
            return p
        if not full:
            col = _spread(col, present)
        cols[k] = col
    return Payload(len(p), fields=cols, valid=None if full else np.array(present, dtype=bool))


def _with_absent(parts: Sequence[Payload], shape: Payload, n: int) -> Payload:
    """Columnar parts of one shape with rows of no payload between them: nulls there."""
    names = shape.names or ()
    try:
        cols: dict[str, pa.Array | ConstColumn] = {}
        for k in names:
            arrs = []
            typ = None
            for p in parts:
                if not p.is_absent:
                    c = p.fields[k]  # type: ignore[index]
                    a = pa.array([c.value] * len(p)) if isinstance(c, ConstColumn) else c
                    typ = a.type
                    arrs.append(a)
                else:
                    arrs.append(None)
            cols[k] = pa.concat_arrays([a if a is not None else pa.nulls(len(p), typ)
                                        for a, p in zip(arrs, parts, strict=True)])
    except (TypeError, pa.ArrowException):
        return Payload(n, rows=_all_rows(parts))
    valid = np.concatenate([np.zeros(len(p), dtype=bool) if p.is_absent else
                            (np.ones(len(p), dtype=bool) if p.valid is None else p.valid) for p in parts])
    return Payload(n, fields=cols, valid=valid)


def _spread(col: pa.Array, present: list[bool]) -> pa.Array:
    """``col`` (one value per present row) with nulls at the absent rows."""
    idx: list[int | None] = []
    j = 0
    for ok in present:
        if ok:
            idx.append(j)
            j += 1
        else:
            idx.append(None)
    return col.take(pa.array(idx, pa.int64()))
