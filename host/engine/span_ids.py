"""Are a batch's insert ids all different? The columnar span path's check (`udm.host.engine.span_columnar`)
that no id is used twice within a batch, done without hashing every id when the ids show it cheaply.

Why: a hash of every id string (``pyarrow.compute.count_distinct``) cost about 6 ms per 33 k-row batch,
0.18 µs an element, as much as the rest of a pass-through query's engine work. Ids are usually a
prefix and a counter (``b17``, ``e1042``) in input order; then the counter read as a number rises
strictly from row to row, which proves every id different: equal ids would give equal numbers. The
number is any fixed function of the id's text (here: the digits after the first id's prefix, in base
10, wrapping in int64), so no id has to be well formed for the proof to hold; when the numbers do not
rise strictly (ids out of order, other shapes) the exact check decides (``dictionary_encode``: one
dictionary entry per distinct id, twice as fast as ``count_distinct``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["MAX_WIDTH", "ids_distinct"]

#: longest id (bytes) the counter test reads; longer ones go to the exact check
MAX_WIDTH = 24

_DIGITS = b"0123456789"


def _counters(ids: pa.Array, rows: np.ndarray) -> np.ndarray | None:
    """Per row in ``rows`` (non-null ids of a plain string array), a number that is a function of the id's
    text alone: the bytes after the first id's non-digit prefix read as base-10 digits (int64, wrapping);
    None when an id is longer than `MAX_WIDTH`."""
    bufs = ids.buffers()
    if bufs[2] is None:
        return None
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[ids.offset: ids.offset + len(ids) + 1]
    starts = offsets[:-1][rows].astype(np.int64)
    lens = offsets[1:][rows].astype(np.int64) - starts
    width = int(lens.max())
    if width > MAX_WIDTH:
        return None
    first = ids[int(rows[0])].as_py().encode()
    skip = len(first.rstrip(_DIGITS))
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    data = np.concatenate((data, np.zeros(width, np.uint8)))  # reads past the last id land in zeros
    vals = np.zeros(len(rows), dtype=np.int64)
    with np.errstate(over="ignore"):
        for j in range(skip, width):
            digit = data[starts + j].astype(np.int64) - 48
            vals = np.where(j < lens, vals * 10 + digit, vals)
    return vals


def ids_distinct(ids: pa.Array, rows: np.ndarray) -> bool:
    """Whether the ids at ``rows`` (ascending row indexes; each a non-null string) are pairwise different."""
    m = len(rows)
    if m < 2:
        return True
    if pa.types.is_string(ids.type):
        vals = _counters(ids, rows)
        if vals is not None and bool(np.all(vals[1:] > vals[:-1])):
            return True
    sel = ids if m == len(ids) else ids.take(pa.array(rows))
    return len(sel.dictionary_encode().dictionary) == m
