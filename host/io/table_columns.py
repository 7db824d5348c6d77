"""A query's output as table columns, column by column: the physical view of `udm.host.io.table_out`.

Why: the table writer used to turn every output element into a Python dict row (~7 µs an element, 90 % of
a pass-through query over Parquet). The engine hands its output as a columnar batch (numpy ``kind``, ``id``,
``le``, ``re``, ``rn`` and a payload of pyarrow columns, `udm.host.engine.batch.Batch`); its columns become
the table's with pyarrow kernels, and only payloads the engine holds as dicts (a window's, a join's rows)
are read row by row. The rows the two routes make are the same (`tests/test_io_table_columns.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.temporal.elements import Cti, Insert, Retract
from udm.sdk import INF

from .encode import ConstColumn

__all__ = ["TIME_COLUMNS", "OutputBatch", "OutputPayload", "field_name", "kind_text", "physical_elements",
           "physical_table", "rows_table"]

#: the physical view's own columns; a payload field of the same name gets a ``p_`` prefix
TIME_COLUMNS = ("kind", "id", "le", "re", "re_new", "t")

_INSERT, _RETRACT, _CTI = 0, 1, 2  # `udm.host.engine.batch`'s kind codes
_I64 = pa.int64()
_STR = pa.string()


class OutputPayload(Protocol):
    """What `physical_table` reads of a batch's payload (`udm.host.engine.payload.Payload`)."""

    @property
    def fields(self) -> Mapping[str, pa.Array | ConstColumn] | None: ...

    @property
    def valid(self) -> np.ndarray | None: ...

    def rows(self) -> list[Any]: ...


class OutputBatch(Protocol):
    """What `physical_table` reads of the engine's output batch (`udm.host.engine.batch.Batch`)."""

    kind: np.ndarray
    id: np.ndarray
    le: np.ndarray
    re: np.ndarray
    rn: np.ndarray

    @property
    def payload(self) -> OutputPayload: ...

    def __len__(self) -> int: ...

    def to_elements(self) -> list[Any]: ...


@cache
def kind_text() -> pa.Array:
    """The kinds' names by code (made on first use: a module-level ``pa.array`` would run pyarrow's first
    pandas probe when the CLI starts, before `udm.host.io.arrow_probe` can hide pandas: +0.2 CPU-s)."""
    return pa.array(["insert", "retract", "cti"], _STR)


def field_name(name: str) -> str:
    """A payload field's column name: ``p_`` before a name the view's own columns use."""
    return f"p_{name}" if name in TIME_COLUMNS else name


def rows_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Row dicts as a table: every field any row has, in order of appearance, typed by pyarrow."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({k: [r.get(k) for r in rows] for k in names})


def physical_table(b: OutputBatch, timestamps: bool = False) -> pa.Table:
    """Every row of ``b`` as a physical-view row: ``kind, id, le, re, re_new, t`` and the inserts' payload
    fields (retractions and CTIs carry none, as their elements do not). With ``timestamps``, ``INF`` times
    are null (the caller casts the time columns)."""
    kind = np.asarray(b.kind)
    is_cti = kind == _CTI
    is_ins = kind == _INSERT
    n = len(kind)
    cti_any = bool(is_cti.any())
    no_time = is_cti if cti_any else None

    def times(values: np.ndarray, absent: np.ndarray | None) -> pa.Array:
        if timestamps:
            inf = values >= INF
            if inf.any():
                absent = inf if absent is None else absent | inf
        return pa.array(values, _I64, mask=absent)

    ids = pc.utf8_replace_slice(pa.array(b.id, _I64, mask=no_time).cast(_STR), start=0, stop=0, replacement="o")
    cols: dict[str, pa.Array] = {
        "kind": kind_text().take(pa.array(kind.astype(np.int64, copy=False))),
        "id": ids,
        "le": times(b.le, no_time),
        "re": times(b.re, no_time),
        "re_new": times(b.rn, kind != _RETRACT),
        "t": times(b.le, ~is_cti) if cti_any else pa.nulls(n, _I64),
    }
    for name, col in _payload_columns(b.payload, is_ins, n).items():
        cols[field_name(name)] = col
    return pa.table(cols)


def _payload_columns(p: OutputPayload, is_ins: np.ndarray, n: int) -> dict[str, pa.Array]:
    """The inserts' payload fields as columns, null on other rows (and where an insert has no payload)."""
    fields = p.fields
    keep = is_ins if p.valid is None else is_ins & p.valid
    every = bool(keep.all())
    if fields is None:
        rows = p.rows()
        table = rows_table([rows[i] for i in np.flatnonzero(keep).tolist()])
        if every:
            return dict(zip(table.column_names, table.columns, strict=True))
        at = np.cumsum(keep) - 1  # row -> its place among the kept rows
        idx = pa.array(at, _I64, mask=~keep)
        return {k: table.column(k).take(idx) for k in table.column_names}
    # the other rows nulled in place by a mask (``if_else``: ~0.4 ns a row, where a ``take`` through an index
    # with nulls cost 3-10, ~20 ns a row over a Nexmark bid's four fields)
    mask = None if every else pa.array(keep)
    out: dict[str, pa.Array] = {}
    for name, col in fields.items():
        arr = pa.repeat(pa.scalar(col.value), n) if isinstance(col, ConstColumn) else col
        out[name] = arr if mask is None else pc.if_else(mask, arr, pa.scalar(None, arr.type))
    return out


def physical_elements(rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    """A physical view's rows (as ``pyarrow``'s ``to_pylist`` gives them, times in ticks) back as the
    elements they spell, payload fields without their ``p_`` prefix (tests and the benchmark compare
    CHTs with them)."""
    out: list[Any] = []
    for r in rows:
        if r["kind"] == "cti":
            out.append(Cti(INF if r["t"] is None else r["t"]))
        elif r["kind"] == "retract":
            out.append(Retract(r["id"], r["le"], INF if r["re"] is None else r["re"], r["re_new"]))
        else:
            out.append(Insert(r["id"], r["le"], INF if r["re"] is None else r["re"],
                              {_field(k): v for k, v in r.items() if k not in TIME_COLUMNS}))
    return out


def _field(column: str) -> str:
    """A payload column's field name (`field_name` undone)."""
    return column[2:] if column.startswith("p_") and column[2:] in TIME_COLUMNS else column
