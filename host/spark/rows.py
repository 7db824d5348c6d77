"""Rows in and out of the engines on Spark's Python workers, shared by the batch bucket runner
(`udm.host.spark.batch`) and the streaming processor (`udm.host.spark.streaming`).

In: element rows reach Python with JSON-text payloads; `with_struct_payloads` turns them into the
typed struct column the fast file reader makes, so the engine reads fields as columns.

Out: each bucket runs its own engine, whose ids are unique only within it; an output id is therefore
``"{bucket}.{id}"``, unique across buckets and stable between runs (the streaming restart test compares
output bytes). Payloads travel as compact JSON text, as in every element DataFrame (`convert`). Bucket
CTIs are not output rows: each path reports them its own way (the batch path ends with one ``cti(INF)``,
streaming combines them over the buckets).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.engine.common import DeadLetter
from udm.host.engine.payload import Payload
from udm.host.io.batch import ElementBatch
from udm.host.io.encode import ConstColumn, plain_column
from udm.host.io.jsonl import struct_payloads
from udm.host.spark.convert import ELEMENT_COLUMNS, compact_json, object_texts
from udm.host.temporal.elements import Element, Insert, Retract

__all__ = ["PayloadFields", "dead_rows", "feed_by_input", "id_prefix", "input_runs", "output_rows",
           "payload_fields", "payload_texts_at", "with_struct_payloads"]

#: payloads as fields in payload order, each a typed column, a `ConstColumn` or a list of Python values
PayloadFields = list[tuple[str, pa.Array | ConstColumn | list[Any]]]


def with_struct_payloads(table: pa.Table) -> pa.Table:
    """``table`` with its ``payload`` text column as a struct when the texts make a faithful one
    (`udm.host.io.jsonl.struct_payloads`), else as it is."""
    struct = struct_payloads(table.column("payload"))
    return table if struct is None else table.set_column(table.column_names.index("payload"), "payload", struct)


def input_runs(names: list[Any], lo: int = 0, hi: int | None = None) -> Iterator[tuple[int, int]]:
    """The runs ``[a, b)`` of equal ``names[a:b]`` within ``[lo, hi)``: a graph's engine takes each
    input's elements as batches of that input, in the order they came."""
    hi = len(names) if hi is None else hi
    while lo < hi:
        end = lo + 1
        while end < hi and names[end] == names[lo]:
            end += 1
        yield lo, end
        lo = end


def feed_by_input(runner: Any, table: pa.Table, names: list[Any], lo: int = 0, hi: int | None = None) -> list[Element]:
    """Rows ``[lo, hi)`` of ``table`` (element columns, JSON-text payloads) through a graph's ``runner``,
    in runs of one input each (``names``: each row's input), payloads made structs per run."""
    out: list[Element] = []
    for a, b in input_runs(names, lo, hi):
        part = with_struct_payloads(table.slice(a, b - a).select(list(ELEMENT_COLUMNS)))
        out += runner.process_batch(ElementBatch.from_table(part), names[a])
    return out


def id_prefix(bucket: int) -> str:
    """What a bucket's output ids start with: ids are unique per engine, so the bucket makes them unique in
    the stream."""
    return f"{bucket}."


def output_rows(bucket: int, out: Iterable[Element],
                keep: Callable[[Insert | Retract], bool] | None = None) -> Iterator[dict[str, Any]]:
    """``kind, id, le, re, re_new, payload`` of each insert and retraction in ``out`` (in order) that
    ``keep`` accepts. (A staged graph writes the same rows by column from the engine's output batches:
    `udm.host.spark.graph`, with `payload_texts_at`.)"""
    prefix = id_prefix(bucket)
    for el in out:
        if isinstance(el, Insert):
            if keep is None or keep(el):
                yield {"kind": "insert", "id": prefix + el.id, "le": el.le, "re": el.re,
                       "payload": compact_json(el.payload)}
        elif isinstance(el, Retract) and (keep is None or keep(el)):
            yield {"kind": "retract", "id": prefix + el.id, "le": el.le, "re": el.re, "re_new": el.re_new}


def dead_rows(dead: Iterable[DeadLetter],
              keep: Callable[[int | None], bool] | None = None) -> Iterator[dict[str, Any]]:
    """``line, reason, element`` (JSON text, or None) and ``category`` of each dead letter whose line
    ``keep`` accepts."""
    for dl in dead:
        rec = dl.to_json()
        if keep is not None and not keep(rec["line"]):
            continue
        yield {"line": rec["line"], "reason": rec["reason"], "category": dl.category,
               "element": None if rec["element"] is None else json.dumps(rec["element"], separators=(",", ":"))}


def payload_fields(payload: Payload, rows: np.ndarray) -> PayloadFields | None:
    """The payloads of ``rows`` as fields, when they all have the same fields in the same order (payloads
    held as columns, or as dicts of one shape: a join's, a window's), else None."""
    fields = payload.fields
    if fields is not None and (payload.valid is None or bool(payload.valid[rows].all())):
        idx = pa.array(rows, pa.int64())
        return [(k, c if isinstance(c, ConstColumn) else c.take(idx)) for k, c in fields.items()]
    every = payload.rows()
    sel = [every[i] for i in rows.tolist()]
    if not sel or type(sel[0]) is not dict:
        return None
    names = tuple(sel[0])
    if any(type(r) is not dict or tuple(r) != names for r in sel):
        return None
    out: PayloadFields = []
    for k in names:
        values = [r[k] for r in sel]
        col = plain_column(values)
        out.append((k, values if col is None else col))
    return out


def payload_texts_at(payload: Payload, rows: np.ndarray, fields: PayloadFields | None) -> pa.Array:
    """The compact JSON text of the payloads of ``rows`` (`payload_fields`: column by column when they
    share one shape; a dict per row cost more than the rest of an exchange row's making)."""
    if fields is not None:
        return object_texts(fields, len(rows))
    every = payload.rows()
    return pa.array([compact_json(every[i]) for i in rows.tolist()], pa.string())
