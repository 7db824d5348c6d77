"""A query's output `Batch` as JSON Lines, the bytes `udm.host.io.jsonl.JsonlWriter` writes for its elements.

Inserts are encoded column-wise (`udm.host.io.encode.insert_lines`): their payload columns as they are, or
payloads held as dicts read field by field when every insert has the same fields (a window's, a join's);
no element object is made per row. Retractions and CTIs, and inserts of mixed shapes, are formatted one by
one.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from udm.host.io.arrow_numpy import arrow_of
from udm.host.io.encode import (
    MIN_RUN,
    ConstColumn,
    EncodedLines,
    cti_line,
    element_lines,
    element_text,
    insert_lines,
    merge_lines,
    value_column,
)
from udm.host.temporal.elements import Retract, element_to_json

from .batch import CTI, INSERT, Batch
from .payload import Payload

__all__ = ["encode_batch"]


def encode_batch(b: Batch) -> EncodedLines:
    n = len(b)
    if n == 0:
        return EncodedLines((), 0)
    kind = b.kind
    ins = np.flatnonzero(kind == INSERT)
    cols = _insert_columns(b.payload, ins, n) if len(ins) >= MIN_RUN else None
    if cols is None:
        return element_lines(b.to_elements(), element_text)
    lines = insert_lines(b.id[ins], b.le[ins], b.re[ins], cols)
    other = np.flatnonzero(kind != INSERT)
    if not len(other):
        return merge_lines(np.arange(len(ins)), lines, [], [])
    texts = []
    for i in other.tolist():
        if kind[i] == CTI:
            texts.append(cti_line(int(b.le[i])))
        else:
            texts.append(json.dumps(element_to_json(Retract(f"o{int(b.id[i])}", int(b.le[i]), int(b.re[i]),
                                                            int(b.rn[i])))))
    return merge_lines(ins, lines, other.tolist(), texts)


def _insert_columns(p: Payload, ins: np.ndarray, n: int) -> list[tuple[str, pa.Array | ConstColumn]] | None:
    """The inserts' payload fields as columns, in payload order, when every insert has the same fields in
    the same order (else None: encoded one by one). Payloads held as dicts (a window's or a join's rows)
    are read field by field, with no element made per row."""
    fields = p.fields
    if fields is not None:
        valid = p.valid
        if valid is not None and not valid[ins].all():
            return None
        if len(ins) == n:
            return list(fields.items())
        # the inserts' rows by a mask (``filter`` copies runs: ~1-3 ns a row, where a ``take`` by index cost 3-10)
        keep = np.zeros(n, dtype=bool)
        keep[ins] = True
        mask = arrow_of(keep)
        return [(name, col if isinstance(col, ConstColumn) else col.filter(mask)) for name, col in fields.items()]
    rows = p.rows()
    sel = [rows[i] for i in ins.tolist()]
    first = sel[0]
    if type(first) is not dict:
        return None
    keys = tuple(first)
    for r in sel:
        if type(r) is not dict or tuple(r) != keys:
            return None
    return [(k, value_column([r[k] for r in sel])) for k in keys]
