"""Dead-letter lines (INTERFACES §1) built column-wise: ``{"line": n, "reason": "...", "element": {...}}`` with
``, "input": "name"`` in a multi-input query, byte for byte what ``echo_dumps(record)`` gives for each.

Why: a dead letter used to cost one Python record, one element dict and one ``json.dumps`` each (~11 µs);
a batch whose rows are refused for one reason (a missing field, an unknown id) is now a handful of array
operations, as the output writer's inserts are (`encode.insert_lines`). Records that exist only one by
one (the gate's row path, the engine's operators, Spark's collected dead letters) have only their element
encoded one by one (`record_columns`); every line is put together by `DeadLetterColumns.text`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import BadElement
from udm.host.temporal.strict import echo_dumps

from .batch import KIND_RETRACT, ElementBatch, raw_json
from .encode import encode_value_column

__all__ = ["DeadLetterColumns", "DeadLetterSource", "dead_letter_record", "element_parts", "record_columns"]

_STR = pa.string()
_I64 = pa.int64()
_INF = np.iinfo(np.int64).max
_quote = json.encoder.encode_basestring_ascii


@dataclass(frozen=True)
class DeadLetterColumns:
    """Dead letters as columns: line numbers (-1: unknown, written ``null``), reasons, each element's JSON
    text as the pieces it is joined from (`element_parts`; a null: no element, written ``null``), and each
    record's input (None: no ``input`` key)."""

    lines: np.ndarray
    reasons: Sequence[str] | np.ndarray
    elements: list[Any]
    inputs: Sequence[str | None] | None = None

    def __len__(self) -> int:
        return len(self.lines)

    def text(self) -> pa.Array:
        """One line per dead letter, each ending in a newline: one join of every piece, so each byte is
        copied once."""
        n = len(self.lines)
        if n == 0:
            return pa.array([], _STR)
        lines = pc.cast(pa.array(self.lines, _I64), _STR)
        unknown = self.lines < 0
        if unknown.any():
            lines = pc.if_else(pa.array(unknown), pa.scalar("null"), lines)
        rtext, plain = encode_value_column(pa.array(self.reasons, _STR))
        elements = [e.fill_null("null") if isinstance(e, pa.Array) and e.null_count else e for e in self.elements]
        parts: list[Any] = ['{"line": ', lines, ', "reason": ', *(['"', rtext, '"'] if plain else [rtext]),
                            ', "element": ', *elements]
        inputs = self.inputs
        if inputs is not None and any(i is not None for i in inputs):
            parts.append(pa.array(["" if i is None else ', "input": ' + _quote(i) for i in inputs], _STR))
        parts.append("}\n")
        merged: list[Any] = []
        for p in parts:  # (adjacent constant pieces as one: the join touches fewer arguments)
            if isinstance(p, str) and merged and isinstance(merged[-1], str):
                merged[-1] += p
            else:
                merged.append(p)
        return pc.binary_join_element_wise(*merged, "")


class DeadLetterSource(ABC):
    """Dead letters that can give their columns (the engine's collection of a run's dead letters)."""

    @abstractmethod
    def columns(self) -> list[DeadLetterColumns]: ...


def dead_letter_record(item: Any) -> dict[str, Any]:
    """``{"line": n, "reason": "...", "element": <raw>}`` for a `BadElement`, an engine ``DeadLetter``
    (anything with ``to_json()``), or an already-built dict."""
    if isinstance(item, dict):
        return item
    to_json = getattr(item, "to_json", None)
    if callable(to_json):
        rec = to_json()
        return rec if isinstance(rec, dict) else json.loads(rec)
    if isinstance(item, BadElement):
        return {"line": item.line, "reason": item.reason, "element": item.raw}
    raise TypeError(f"cannot make a dead-letter record from {item!r}")


def _element_text(element: Any) -> str | None:
    """A record's element as its line quotes it (strict JSON: a non-finite number read is quoted as a
    string; a value json cannot encode, by `raw_json`)."""
    if element is None:
        return None
    try:
        return echo_dumps(element)
    except (TypeError, ValueError):
        return echo_dumps(json.loads(raw_json(element)))


def record_columns(items: Iterable[Any]) -> DeadLetterColumns:
    """Dead-letter records (see `dead_letter_record`) as columns: each element encoded by itself."""
    recs = [dead_letter_record(it) for it in items]
    lines = np.array([-1 if r.get("line") is None else r["line"] for r in recs], dtype=np.int64)
    inputs = [r.get("input") for r in recs]
    return DeadLetterColumns(lines, [r["reason"] for r in recs],
                             [pa.array([_element_text(r.get("element")) for r in recs], _STR)],
                             inputs if any(i is not None for i in inputs) else None)


def element_parts(raw: ElementBatch, rows: np.ndarray) -> list[Any]:
    """The pieces (constant texts and string columns) whose join is the JSON text of the insert or retract
    at each of ``rows`` of ``raw``, as its dead letter quotes it (``echo_dumps(element_to_json(el))`` of
    `ElementBatch.to_elements`' element), column by column."""
    n = len(rows)
    if n == 0:
        return [pa.array([], _STR)]
    idx = pa.array(rows, _I64)
    tb = raw.table
    ret = raw.kind_codes()[rows] == KIND_RETRACT
    some_ret = bool(ret.any())
    every_ret = some_ret and bool(ret.all())
    ids = tb.column("id").take(idx).combine_chunks()
    id_text, plain = encode_value_column(ids)
    parts: list[Any] = [_either(ret, some_ret, every_ret, '{"kind": "retract", "id": ', '{"kind": "insert", "id": '),
                        *(['"', id_text, '"'] if plain else [id_text]),
                        ', "le": ', pc.cast(pa.array(raw.column("le")[rows]), _STR),
                        ', "re": ', _time_text(raw.column("re")[rows])]
    if some_ret:
        rn = _time_text(raw.column("re_new")[rows])
        parts += [', "re_new": ', rn] if every_ret else \
            [pc.if_else(pa.array(ret), pc.binary_join_element_wise(', "re_new": ', rn, ""), pa.scalar(""))]
    payload, present = _payload_parts(raw, rows)
    # an insert's payload is always written ({} when absent), a retraction's only when it has one
    written = ~(ret & ~present)
    if written.all():
        parts += [', "payload": ', *payload]
    elif written.any():
        parts.append(pc.if_else(pa.array(written), pc.binary_join_element_wise(', "payload": ', *payload, ""),
                                pa.scalar("")))
    parts.append("}")
    return parts


def _either(mask: np.ndarray, some: bool, every: bool, yes: str, no: str) -> Any:
    if every:
        return yes
    if not some:
        return no
    return pc.if_else(pa.array(mask), pa.scalar(yes), pa.scalar(no))


def _time_text(t: np.ndarray) -> pa.Array:
    text = pc.cast(pa.array(t), _STR)
    inf = t >= _INF
    return pc.if_else(pa.array(inf), pa.scalar('"inf"'), text) if inf.any() else text


def _payload_parts(raw: ElementBatch, rows: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The pieces of each row's payload as JSON text (``{}`` where it has none), and which rows have one."""
    n = len(rows)
    col = raw.table.column("payload").take(pa.array(rows, _I64)).combine_chunks()
    present = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool) if col.null_count \
        else np.ones(n, dtype=bool)
    if not raw.payload_is_struct:  # (JSON text: each payload decoded and encoded as its dead letter spells it)
        loads = json.loads
        return [pa.array(["{}" if s is None else echo_dumps(loads(s)) for s in col.to_pylist()], _STR)], present
    at = np.flatnonzero(present)
    if len(at) == 0:
        return ["{}"], present
    struct = col if len(at) == n else col.take(pa.array(at, _I64))
    typ = struct.type
    if typ.num_fields == 0:
        return ["{}"], present
    parts: list[Any] = []
    for k in range(typ.num_fields):
        vals, plain = encode_value_column(struct.field(k))
        parts.append(("{" if k == 0 else ", ") + _quote(typ.field(k).name) + ": ")
        parts.extend(['"', vals, '"'] if plain else [vals])
    parts.append("}")
    if len(at) == n:
        return parts, present
    text = pc.binary_join_element_wise(*parts, "")  # (the rows with a payload, then spread over all rows)
    full = np.full(n, len(at), dtype=np.int64)
    full[at] = np.arange(len(at))
    return [pa.concat_arrays([text, pa.array(["{}"], _STR)]).take(pa.array(full, _I64))], present
