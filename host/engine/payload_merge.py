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
    """The rows of ``parts``, in order, as one `Payload`: columns when the parts with a payload share a shape,
    whatever rows without one (CTIs: absent parts, or rows a part's ``valid`` mask leaves out) lie between."""
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
    if not shaped:
        return Payload.absent(n)
    names = shaped[0].names
    if names is not None and all(p.names == names for p in shaped):
        got = _concat_columns(parts, names, n)
        if got is not None:
            return got
    return Payload(n, rows=_all_rows(parts))


def _concat_columns(parts: Sequence[Payload], names: tuple[str, ...], n: int) -> Payload | None:
    """Columnar parts whose payloads have fields ``names`` (absent parts between them: nulls there, and not
    valid), or None when a field's column types differ."""
    try:
        cols: dict[str, pa.Array | ConstColumn] = {}
        for k in names:
            cs = [None if p.is_absent else p.fields[k] for p in parts]  # type: ignore[index]
            present = [c for c in cs if c is not None]
            if all(isinstance(c, ConstColumn) for c in present) and len({json.dumps(c.value) for c in present}) == 1:
                cols[k] = present[0]  # (an absent row reads no value: one constant still holds)
                continue
            arrs = [None if c is None else pa.array([c.value] * len(p)) if isinstance(c, ConstColumn) else c
                    for c, p in zip(cs, parts, strict=True)]
            types = {a.type for a in arrs if a is not None}
            if len(types) != 1:
                return None
            typ = types.pop()
            cols[k] = pa.concat_arrays([pa.nulls(len(p), typ) if a is None else a
                                        for a, p in zip(arrs, parts, strict=True)])
    except (TypeError, pa.ArrowException):
        return None
    valid = None
    if any(p.valid is not None for p in parts):
        valid = np.concatenate([np.ones(len(p), dtype=bool) if p.valid is None else p.valid for p in parts])
    return Payload(n, fields=cols, valid=valid)


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
