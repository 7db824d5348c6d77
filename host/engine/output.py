"""A query's output `Batch` as JSON Lines, the bytes `udm.host.io.jsonl.JsonlWriter` writes for its elements.

Inserts with columnar payloads are encoded column-wise (`udm.host.io.encode.insert_lines`: no Python
object per row); retractions, CTIs and payloads held as dicts are formatted one by one.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from udm.host.io.encode import (
    ConstColumn,
    EncodedLines,
    cti_line,
    element_lines,
    element_text,
    insert_lines,
    merge_lines,
)
from udm.host.temporal.elements import Retract, element_to_json

from .batch import CTI, INSERT, Batch

__all__ = ["encode_batch"]


def encode_batch(b: Batch) -> EncodedLines:
    n = len(b)
    if n == 0:
        return EncodedLines((), 0)
    kind = b.kind
    p = b.payload
    ins = np.flatnonzero(kind == INSERT)
    fields = p.fields
    valid = p.valid
    if fields is None or len(ins) < 16 or (valid is not None and not valid[ins].all()):
        return element_lines(b.to_elements(), element_text)
    other = np.flatnonzero(kind != INSERT)
    idx = pa.array(ins, pa.int64())
    whole = len(ins) == n
    cols = []
    for name, col in fields.items():
        cols.append((name, col if whole or isinstance(col, ConstColumn) else col.take(idx)))
    lines = insert_lines(b.id[ins], b.le[ins], b.re[ins], cols)
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
