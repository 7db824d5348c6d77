"""`arrow_of`: a numpy column as a pyarrow array without pyarrow's masked-array probe.

``pa.array(ndarray)`` first asks ``isinstance(x, np.ma.MaskedArray)``, and numpy loads ``numpy.ma`` lazily:
that first question imports it (~5-7 ms of CPU, 2-3 % of a small ``udm run``'s start-up), though the engine
never holds a masked array. Its numeric and bool columns go to arrow over their buffers instead (the same
array pyarrow would build: the values as they are, NaN a value, no nulls); anything else still goes through
``pa.array``. (numpy's own ``unique``/``union1d`` ask ``np.ma.is_masked`` too: `sorted_unique` is the
engine's sorted set of an int column.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["arrow_of", "sorted_unique"]


def arrow_of(x: np.ndarray, dtype: type | None = None) -> pa.Array:
    """``pa.array(x)`` for a 1-d numpy array (as ``dtype``, when given), over its buffer when it is numeric
    or bool (no copy then, unless ``x`` is strided or of another dtype; the array keeps ``x`` alive)."""
    if dtype is not None:
        x = np.asarray(x, dtype=dtype)
    kind = x.dtype.kind
    if x.ndim == 1 and x.dtype.isnative:
        if kind == "b":
            bits = np.packbits(x, bitorder="little")  # (arrow's bit order)
            return pa.Array.from_buffers(pa.bool_(), len(x), [None, pa.py_buffer(bits)])
        if kind in "iuf":
            x = np.ascontiguousarray(x)
            return pa.Array.from_buffers(pa.from_numpy_dtype(x.dtype), len(x), [None, pa.py_buffer(x)])
    return pa.array(x)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """The distinct values of int column ``x``, ascending (``np.unique`` without its masked-array question;
    not for floats: each NaN would stay)."""
    s = np.sort(x)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
