"""Vectorized JSON Lines encoding of a batch of output inserts and CTIs: the exact bytes `JsonlWriter`
writes for them one by one (``json.dumps(element_to_json(e))``: ``", "`` / ``": "`` separators, ASCII
escapes, Python's float repr), built column by column with pyarrow compute instead of one Python string
per element.

Why: on a span query (filter / map / project) encoding each output element costs more than everything
else the engine does for it; built column-wise it is a handful of array operations per batch.

A payload is a list of ``(field, column)`` pairs in payload order; a column is a pyarrow array of the
output rows, or a `ConstColumn` (one JSON value for every row, e.g. a ``project`` ``set``). Values of a type
this module does not format directly (lists, nested objects) go through ``json`` one by one, so the bytes
stay the same as the row path's in every case; a non-finite float is an error on both paths (output is
strict JSON, SEMANTICS §1: `udm.host.temporal.strict`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import UdmError
from udm.host.temporal.elements import Insert, element_to_json
from udm.host.temporal.strict import canonical_json
from udm.host.temporal.strict import dumps as strict_dumps
from udm.host.temporal.strict import encode as _encode
from udm.sdk import INF

from .arrow_numpy import arrow_of

__all__ = ["MIN_RUN", "ConstColumn", "DeferredLines", "EncodedLines", "cti_line", "element_lines", "element_text",
           "encode_value_column", "insert_lines", "merge_lines", "plain_column", "value_column"]

# `_encode` (`udm.host.temporal.strict.encode`): what json.dumps gives with default arguments, but a NaN or an
# infinity is an error, not a line that is not JSON (SEMANTICS §1)
_quote = json.encoder.encode_basestring_ascii
_STR = pa.string()


class ConstColumn:
    """One JSON value for every row of a payload column (``project``'s ``set``): the engine's payload
    columns hold it, and the encoder writes it once for all rows."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstColumn) and type(other.value) is type(self.value) and other.value == self.value

    def __hash__(self) -> int:
        return hash(canonical_json(self.value))

    def __getstate__(self) -> Any:
        return self.value

    def __setstate__(self, v: Any) -> None:
        self.value = v


@dataclass(frozen=True)
class EncodedLines:
    """Encoded output lines (each ending in a newline) and how many elements they are."""

    #: the lines' bytes, in pieces (written one after the other)
    data: tuple[Any, ...]
    count: int

    def to_bytes(self) -> bytes:
        return b"".join(bytes(p) for p in self.data)


@dataclass(frozen=True)
class DeferredLines:
    """Output lines not encoded yet: ``make()`` builds them from values that no longer change (the
    columnar span path's output columns). A write-behind writer (`udm.host.io.write_behind`) calls it in
    its own thread, where pyarrow's compute runs beside the engine's next batch."""

    #: how many elements the lines will be
    count: int
    make: Callable[[], EncodedLines]


def element_text(e: Any) -> str:
    """``json.dumps(element_to_json(e))``, byte for byte (`JsonlWriter`'s line, without the newline); an
    insert (most of any output) is formatted directly, its payload the only part encoded (a third of the
    cost of encoding the whole record)."""
    if type(e) is Insert and type(e.id) is str and type(e.le) is int and type(e.re) is int:
        re = e.re
        return (f'{{"kind": "insert", "id": {_quote(e.id)}, "le": {e.le}, "re": {re if re < INF else _INF_JSON}, '
                f'"payload": {_encode(e.payload)}}}')
    return strict_dumps(element_to_json(e))


_INF_JSON = '"inf"'


def cti_line(t: int) -> str:
    """A CTI's line, as ``json.dumps(element_to_json(Cti(t)))`` spells it."""
    return f'{{"kind": "cti", "t": {t if t < INF else _INF_JSON}}}'


def _plain_ascii(arr: pa.Array) -> bool:
    """No character of the string column needs an escape: its text bytes are all printable ASCII other
    than a quote or a backslash (checked on the data buffer with numpy, no per-value work)."""
    if len(arr) == 0:
        return True
    bufs = arr.buffers()
    if bufs[2] is None:  # (every value empty)
        return True
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset: arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8)[int(offsets[0]): int(offsets[-1])]
    return not bool(np.any((data < 0x20) | (data > 0x7E) | (data == 0x22) | (data == 0x5C)))


def encode_value_column(arr: pa.Array) -> tuple[pa.Array, bool]:
    """The JSON text of every value of a column (no nulls: the fast reader admits none in a payload), and
    whether the text still needs its quotes around it (a plain ASCII string column is used as it is)."""
    typ = arr.type
    if arr.null_count:
        return pa.array(list(map(_encode, arr.to_pylist())), _STR), False
    if pa.types.is_int64(typ) or pa.types.is_int32(typ):
        return pc.cast(arr, _STR), False
    if pa.types.is_boolean(typ):
        return pc.if_else(arr, pa.scalar("true"), pa.scalar("false")), False
    if pa.types.is_string(typ):
        if arr.null_count == 0 and _plain_ascii(arr):
            return arr, True
        return pa.array(list(map(_quote, arr.to_pylist())), _STR), False
    if pa.types.is_float64(typ) and arr.null_count == 0:
        return _float_text(arr), False
    return pa.array(list(map(_encode, arr.to_pylist())), _STR), False


#: magnitudes where pyarrow's shortest float text, with ``.0`` added to integral values, is Python's
#: ``repr`` (both are the shortest round-trip digits, in positional notation here; checked on millions of
#: values in tests/test_io_encode.py); anything else is formatted by ``repr`` (``json``) itself
_POSITIONAL = (1e-4, 1e9)


def _float_text(arr: pa.Array) -> pa.Array:
    """``json.dumps`` of each float: pyarrow's cast inside `_POSITIONAL` (``.0`` added to the integral
    ones, found and fixed on the text buffer with numpy: two compute passes over every row cost twice the
    cast), ``json`` for the rest."""
    vals = arr.to_numpy(zero_copy_only=False)
    mag = np.abs(vals)
    ours = (vals == 0) | ((mag >= _POSITIONAL[0]) & (mag < _POSITIONAL[1]))
    text = pc.cast(arr, _STR)
    if ours.any():
        ours &= ~_rows_with(text, ord("e"))
        # positional shortest digits have a "." exactly when the value has a fraction: the integral ones
        # lack it (a search of the text for "." costs half the cast: nearly every row has one)
        add = ours & (vals == np.floor(vals))
        if add.any():
            text = _append_dot_zero(text, add)
    if not ours.all():
        rest = np.flatnonzero(~ours)
        fixed = pa.array([_encode(v) for v in vals[rest].tolist()], _STR)
        idx = np.arange(len(vals))
        idx[rest] = len(vals) + np.arange(len(rest))  # rows taken from ``fixed`` instead
        text = pa.concat_arrays([text, fixed]).take(pa.array(idx))
    return text


def _text_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string column's offsets (from 0) and its bytes."""
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[text.offset: text.offset + len(text) + 1]
    base = int(offsets[0])
    buf = text.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8)[base: int(offsets[-1])] if buf is not None else np.zeros(0, np.uint8)
    return offsets - base, data


def _rows_with(text: pa.Array, byte: int) -> np.ndarray:
    """Per row of a string column: does its text hold ``byte``?"""
    offsets, data = _text_buffers(text)
    found = np.zeros(len(text), dtype=bool)
    at = np.flatnonzero(data == byte)
    if len(at):
        found[np.searchsorted(offsets, at, side="right") - 1] = True
    return found


_DOT_ZERO = np.frombuffer(b".0", dtype=np.uint8)


def _append_dot_zero(text: pa.Array, add: np.ndarray) -> pa.Array:
    """The string column with ``.0`` after the rows marked in ``add``."""
    offsets, data = _text_buffers(text)
    ends = np.repeat(offsets[1:][add], 2)
    new_data = np.insert(data, ends, np.tile(_DOT_ZERO, int(add.sum())))  # (equal positions: in order)
    grown = np.concatenate(([0], np.cumsum(add, dtype=np.int64) * 2))
    new_offsets = (offsets.astype(np.int64) + grown).astype(np.int32)
    return pa.StringArray.from_buffers(len(text), pa.py_buffer(new_offsets), pa.py_buffer(new_data))


def insert_lines(oids: np.ndarray | pa.Array, le: np.ndarray, re: np.ndarray,
                 payload: Sequence[tuple[str, pa.Array | ConstColumn]]) -> pa.Array:
    """One line (with its newline) per output insert: id ``o<oid>`` (``oids`` numbers) or the id itself
    (``oids`` a string array), lifetime ``[le, re)``, the payload fields in order. All columns hold the
    output rows only."""
    n = len(oids)
    if n == 0:
        return pa.array([], _STR)
    if isinstance(oids, np.ndarray):
        parts: list[Any] = ['{"kind": "insert", "id": "o', pc.cast(arrow_of(oids), _STR), '"']
    else:
        text, quote = encode_value_column(oids)
        parts = ['{"kind": "insert", "id": ', *(['"', text, '"'] if quote else [text])]
    parts += [', "le": ', pc.cast(arrow_of(le), _STR), ', "re": ']
    inf = re >= INF
    re_txt = pc.cast(arrow_of(re), _STR)
    if inf.any():
        re_txt = pc.if_else(pa.array(inf), pa.scalar('"inf"'), re_txt)
    parts.append(re_txt)
    parts.append(', "payload": {')
    for k, (name, col) in enumerate(payload):
        parts.append(("" if k == 0 else ", ") + _quote(name) + ": ")
        if isinstance(col, _Encoded):
            parts.append(pa.array(list(map(_encode, col.value)), _STR))
            continue
        if isinstance(col, ConstColumn):
            parts.append(_encode(col.value))
            continue
        try:
            text, quote = encode_value_column(col)
        except UdmError:
            raise UdmError(f"output field {name!r} holds a number that is not finite, which JSON cannot carry "
                           f"(SEMANTICS §1: a UDM or a UDF returned NaN or an infinity)") from None
        if quote:
            parts.extend(['"', text, '"'])
        else:
            parts.append(text)
    parts.append("}}\n")
    # adjacent constant pieces as one, so the join touches fewer arguments
    merged: list[Any] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    # constant pieces as columns: pyarrow's join takes a string column per row at about half the cost of
    # a scalar (measured: 15 pieces of a Nexmark bid line, 0.19 -> 0.15 s per 1 M rows)
    return pc.binary_join_element_wise(*(_const_column(p, n) if isinstance(p, str) else p for p in merged), "")


#: bytes the constant columns of `_const_column` may hold together (the least recently used go first)
_CONST_BYTES = 16 << 20
_consts: OrderedDict[str, pa.Array] = OrderedDict()
_consts_lock = threading.Lock()


def _const_column(text: str, n: int) -> pa.Array | str:
    """A string column of ``n`` rows, each ``text``: a slice of one kept per text (a little longer than
    the batch that made it, so the batches after it, of about its size, share it), built again only when
    a batch needs more rows."""
    with _consts_lock:
        col = _consts.get(text)
        if col is not None and len(col) >= n:
            _consts.move_to_end(text)
            return col.slice(0, n)
    b = text.encode()
    rows = -(-(n + n // 8) // 4096) * 4096  # (an eighth more than this batch: the next ones are about as big)
    if len(b) * rows > _CONST_BYTES // 4:
        return text  # (as a scalar: a column this big would crowd out the others)
    col = pa.StringArray.from_buffers(
        rows, pa.py_buffer(np.arange(0, (rows + 1) * len(b), len(b) or 1, dtype=np.int32)[: rows + 1]
                           if b else np.zeros(rows + 1, np.int32)), pa.py_buffer(b * rows))
    with _consts_lock:
        _consts[text] = col
        _consts.move_to_end(text)
        held = sum(len(k.encode()) * len(v) for k, v in _consts.items())
        while held > _CONST_BYTES and len(_consts) > 1:
            k, v = _consts.popitem(last=False)
            held -= len(k.encode()) * len(v)
    return col.slice(0, n)


def merge_lines(ins_pos: np.ndarray, ins_lines: pa.Array, cti_pos: Sequence[int],
                cti_texts: Sequence[str]) -> EncodedLines:
    """The output lines in input-row order: inserts at rows ``ins_pos``, CTIs at ``cti_pos`` (both
    ascending), as pieces of bytes: slices of the inserts' text buffer with the CTI lines between them."""
    count = len(ins_pos) + len(cti_pos)
    if count == 0:
        return EncodedLines((), 0)
    if isinstance(ins_lines, pa.ChunkedArray):
        ins_lines = ins_lines.combine_chunks()
    if len(ins_lines) == 0:
        return EncodedLines(tuple(t.encode() + b"\n" for t in cti_texts), count)
    offsets = np.frombuffer(ins_lines.buffers()[1], dtype=np.int32)[ins_lines.offset:
                                                                    ins_lines.offset + len(ins_lines) + 1]
    data = memoryview(ins_lines.buffers()[2])
    # the inserts before each CTI, as a byte offset into the text
    cut = offsets[np.searchsorted(ins_pos, np.asarray(cti_pos, dtype=np.int64))].tolist()
    pieces: list[Any] = []
    at = int(offsets[0])
    for c, text in zip(cut, cti_texts, strict=True):
        if c > at:
            pieces.append(data[at:c])
            at = c
        pieces.append(text.encode() + b"\n")
    end = int(offsets[-1])
    if end > at:
        pieces.append(data[at:end])
    return EncodedLines(tuple(pieces), count)


#: shortest run of like inserts `element_lines` encodes column-wise (shorter runs: one by one)
MIN_RUN = 16


def plain_column(values: list[Any], string_type: pa.DataType = pa.string()) -> pa.Array | None:
    """Values as a typed column, when they are all of one plain JSON type (else None: they stay Python
    values). The engine's map results and the writer's payload fields both read it."""
    kinds = set(map(type, values))
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    try:
        if kind is int:
            return pa.array(values, pa.int64())
        if kind is float:
            return pa.array(values, pa.float64())
        if kind is str:
            return pa.array(values, string_type)
        if kind is bool:
            return pa.array(values, pa.bool_())
    except (OverflowError, pa.ArrowException):
        return None
    return None


def _column(values: list[Any]) -> pa.Array | None:
    """A payload field's values as a typed column (`plain_column`; else None: encoded value by value)."""
    return plain_column(values, _STR)


def value_column(values: list[Any]) -> pa.Array | ConstColumn:
    """A payload field's values (one per output row) as `insert_lines` takes them: a typed column when
    they are all of one plain JSON type, else the values encoded one by one."""
    col = _column(values)
    return col if col is not None else _Encoded(values)


def _key(e: Any) -> tuple[str, ...] | None:
    """The payload's field names of a plainly typed insert (runs of equal keys are encoded together)."""
    if type(e) is Insert and type(e.id) is str and type(e.le) is int and type(e.re) is int \
            and type(e.payload) is dict:
        return tuple(e.payload)
    return None


def element_lines(elements: Sequence[Any], line: Any) -> EncodedLines:
    """Output elements as lines: runs of at least `MIN_RUN` inserts with the same payload fields are built
    column-wise (`insert_lines`), everything else by ``line`` (one element's text, without newline)."""
    pieces: list[Any] = []
    n = len(elements)
    keys = [_key(e) for e in elements]
    i = 0
    while i < n:
        k = keys[i]
        j = i + 1
        if k is not None:
            while j < n and keys[j] == k:
                j += 1
        if k is None or j - i < MIN_RUN or not _run(elements[i:j], k, pieces):
            pieces.append("".join(line(e) + "\n" for e in elements[i:j]).encode())
        i = j
    return EncodedLines(tuple(pieces), n)


def _run(run: Sequence[Any], fields: tuple[str, ...], pieces: list[Any]) -> bool:
    """A run of like inserts, column-wise, onto ``pieces``; False (nothing added) when a value does not
    fit a column (an integer beyond int64, a time outside int64)."""
    try:
        le = np.array([e.le for e in run], dtype=np.int64)
        re = np.array([e.re for e in run], dtype=np.int64)
    except OverflowError:
        return False
    payload = [(f, value_column([e.payload[f] for e in run])) for f in fields]
    ids = pa.array([e.id for e in run], _STR)
    lines = insert_lines(ids, le, re, payload)
    pieces.append(merge_lines(np.arange(len(run)), lines, [], []).data[0])
    return True


class _Encoded(ConstColumn):
    """Values encoded one by one (a column of mixed or nested values)."""

    __slots__ = ()
