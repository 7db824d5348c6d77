"""`ElementBatch`: a columnar chunk of input elements (INTERFACES §1) backed by a pyarrow Table.

Columns (every batch has all of them, in this order):

=========  ==========================  =====================================================================
column     type                        meaning
=========  ==========================  =====================================================================
kind       string                      ``"insert"``, ``"retract"``, ``"cti"``, ``"ecti"``; **null for a bad row**
id         string                      event id (insert/retract), else null
le         int64                       insert/retract/ecti, else null
re         int64                       insert/retract/ecti, else null; ``INF`` (= ``udm.sdk.INF`` = 2**63-1) for "inf"
re_new     int64                       retract only, else null
t          int64                       cti: its time; ecti: its count; else null
payload    struct<...> **or** string   see below; null when absent (a retraction without payload, a bad row)
line       int64                       1-based line number in the source file (null when unknown)
error      string                      null for a valid row; the `BadElement` reason for a bad row
raw        string                      bad rows only: the JSON text of what was read (for the dead-letter file)
=========  ==========================  =====================================================================

``payload`` has one of two physical forms, chosen per batch:

* a **struct** column, when the batch came from the fast pyarrow.json reader and every payload in it had
  the same shape (same keys, plain JSON types). Then `payload_field` hands out zero-copy typed columns.
* a **string** column holding each payload's JSON text, otherwise (batches built by `from_elements`, and
  chunks the fast reader could not take whole).

Code outside this module should not look at the raw ``payload`` column: use `payloads()`,
`payload_field(name)` or `to_elements()`, which give the same values for both forms — same types too:
the reader takes a struct only when no float column came from integer literals. (One difference: in a
struct batch every payload dict has the struct's key order, not necessarily the line's.)

Bad rows (``kind`` null, ``error`` set) are kept in line order among the good ones, so a consumer sees every
line exactly once and can dead-letter the bad ones at their place in the stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import BadElement
from udm.host.temporal.elements import Cti, Ecti, Element, Insert, Retract
from udm.host.temporal.strict import echo_dumps
from udm.sdk import INF

__all__ = [
    "COLUMNS",
    "INF",
    "KIND_BAD",
    "KIND_CTI",
    "KIND_ECTI",
    "KIND_INSERT",
    "KIND_RETRACT",
    "SCHEMA_BASE",
    "ElementBatch",
    "dict_builder",
    "ints_filled",
    "raw_json",
]

#: Codes of `ElementBatch.kind_codes`.
KIND_INSERT, KIND_RETRACT, KIND_CTI, KIND_ECTI, KIND_BAD = 0, 1, 2, 3, -1
#: the element kinds in code order (`ElementBatch.kind_codes`)
_KINDS = pa.array(["insert", "retract", "cti", "ecti"])

_I64 = pa.int64()
_STR = pa.string()

#: The schema of every column but ``payload`` (whose type varies, see the module doc).
SCHEMA_BASE = pa.schema(
    [
        ("kind", _STR),
        ("id", _STR),
        ("le", _I64),
        ("re", _I64),
        ("re_new", _I64),
        ("t", _I64),
        ("line", _I64),
        ("error", _STR),
        ("raw", _STR),
    ]
)

COLUMNS = ("kind", "id", "le", "re", "re_new", "t", "payload", "line", "error", "raw")


def ints_filled(arr: pa.Array | pa.ChunkedArray, fill: int) -> np.ndarray:
    """An integer column as int64 numpy, ``fill`` where null; no fill pass when it has no null (most time
    and line columns: the fast reader's have none)."""
    if arr.null_count == 0:
        return arr.to_numpy().astype(np.int64, copy=False)
    if arr.null_count == len(arr):
        return np.full(len(arr), fill, dtype=np.int64)
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    if all(pa.types.is_int64(c.type) for c in chunks):
        # (numpy over the buffers: a fill_null kernel costs ~12 µs a call, which small batches feel)
        parts = [_int64_filled(c, fill) for c in chunks]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return arr.fill_null(fill).to_numpy().astype(np.int64, copy=False)


def _int64_filled(a: pa.Array, fill: int) -> np.ndarray:
    """One int64 chunk as numpy, ``fill`` where null: its values buffer, masked by its validity bitmap."""
    n, at = len(a), a.offset
    validity, values = a.buffers()[:2]
    vals = np.frombuffer(values, dtype=np.int64, count=at + n)[at:] if n else np.zeros(0, np.int64)
    if a.null_count == 0 or validity is None:
        return vals.copy()
    bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little", count=at + n)[at:]
    return np.where(bits.astype(bool), vals, np.int64(fill))


def raw_json(raw: Any) -> str:
    """JSON text for a bad element's raw value: strict JSON (a non-finite number read becomes the string
    ``"NaN"``, ``"Infinity"``: `udm.host.temporal.strict.echo`); anything else json cannot encode becomes its
    repr string."""
    try:
        return echo_dumps(raw, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(repr(raw))


_BUILDERS: dict[tuple[str, ...], Any] = {}


def dict_builder(names: tuple[str, ...]) -> Any:
    """A compiled ``zip(*cols) -> [{name0: c0, ...}, ...]`` for these field names (much faster than
    ``dict(zip(names, row))`` per row)."""
    fn = _BUILDERS.get(names)
    if fn is None:
        args = ", ".join(f"c{i}" for i in range(len(names)))
        body = ", ".join(f"{name!r}: c{i}" for i, name in enumerate(names))
        src = f"def build(cols):\n    return [{{{body}}} for {args}, in zip(*cols)]\n"
        ns: dict[str, Any] = {}
        exec(compile(src, "<udm.host.io.batch>", "exec"), ns)
        fn = _BUILDERS[names] = ns["build"]
    return fn


def _column_to_py(arr: pa.Array) -> list[Any]:
    if pa.types.is_struct(arr.type):
        return _struct_to_dicts(arr)
    return arr.to_pylist()


def _struct_to_dicts(arr: pa.Array) -> list[Any]:
    """A struct array as a list of dicts (None where the struct is null)."""
    typ = arr.type
    names = tuple(typ.field(k).name for k in range(typ.num_fields))
    if not names:
        out: list[Any] = [{} for _ in range(len(arr))]
    else:
        cols = [_column_to_py(arr.field(k)) for k in range(typ.num_fields)]
        out = dict_builder(names)(cols)
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(~valid).tolist():
            out[i] = None
    return out


def _payload_text(p: dict[str, Any] | None) -> str | None:
    return None if p is None else json.dumps(p, separators=(",", ":"))


class ElementBatch:
    """A columnar chunk of elements. Build with `from_elements` or `from_table`; read with `to_elements`."""

    __slots__ = ("_elements", "_ints", "_kind_codes", "_lines", "_payloads", "table")

    def __init__(self, table: pa.Table, *, _elements: list[tuple[int | None, Element | BadElement]] | None = None):
        names = table.column_names  # (a new list per access: the streaming path builds ~10^4 batches a second)
        missing = [c for c in COLUMNS if c not in names]
        if missing:
            raise ValueError(f"ElementBatch table lacks columns {missing}")
        if names != list(COLUMNS):
            table = table.select(list(COLUMNS))
        self.table: pa.Table = table
        self._elements = _elements
        self._lines: np.ndarray | None = None
        self._kind_codes: np.ndarray | None = None
        self._payloads: list[Any] | None = None
        self._ints: dict[str, np.ndarray] = {}

    @classmethod
    def _with_columns(cls, table: pa.Table, *, kind_codes: np.ndarray, ints: dict[str, np.ndarray]) -> ElementBatch:
        """A batch with `kind_codes` and int64 `column`s the reader already has in numpy form (it computes
        them in its worker thread anyway; the engine's thread then need not). They are made read-only,
        since every caller gets the same arrays."""
        b = cls(table)
        for arr in (kind_codes, *ints.values()):
            arr.flags.writeable = False
        b._kind_codes = kind_codes
        b._ints = dict(ints)
        return b

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_table(cls, table: pa.Table) -> ElementBatch:
        return cls(table)

    @classmethod
    def from_elements(
        cls,
        elements: Iterable[Element | BadElement],
        lines: Sequence[int | None] | np.ndarray | None = None,
    ) -> ElementBatch:
        """Pack elements (and `BadElement`s, kept as bad rows) into a batch with a JSON-text payload column.

        ``lines`` gives each element's line number; by default a `BadElement` keeps its own ``line`` and
        a good element gets null.
        """
        els = list(elements)
        n = len(els)
        if lines is None:
            line_list: list[int | None] = [e.line if isinstance(e, BadElement) else None for e in els]
        else:
            line_list = [None if x is None else int(x) for x in lines]
            if len(line_list) != n:
                raise ValueError(f"{n} elements but {len(line_list)} line numbers")
        kind: list[str | None] = [None] * n
        ids: list[str | None] = [None] * n
        le: list[int | None] = [None] * n
        re: list[int | None] = [None] * n
        re_new: list[int | None] = [None] * n
        t: list[int | None] = [None] * n
        payload: list[str | None] = [None] * n
        error: list[str | None] = [None] * n
        raw: list[str | None] = [None] * n
        for i, e in enumerate(els):
            if isinstance(e, Insert):
                kind[i], ids[i], le[i], re[i] = "insert", e.id, e.le, e.re
                payload[i] = _payload_text(e.payload)
            elif isinstance(e, Retract):
                kind[i], ids[i], le[i], re[i], re_new[i] = "retract", e.id, e.le, e.re, e.re_new
                payload[i] = _payload_text(e.payload)
            elif isinstance(e, Cti):
                kind[i], t[i] = "cti", e.t
            elif isinstance(e, Ecti):
                kind[i], le[i], re[i], t[i] = "ecti", e.le, e.re, e.count
            elif isinstance(e, BadElement):
                error[i], raw[i] = e.reason, raw_json(e.raw)
            else:
                raise TypeError(f"not an element: {e!r}")
        table = pa.table(
            {
                "kind": pa.array(kind, _STR),
                "id": pa.array(ids, _STR),
                "le": pa.array(le, _I64),
                "re": pa.array(re, _I64),
                "re_new": pa.array(re_new, _I64),
                "t": pa.array(t, _I64),
                "payload": pa.array(payload, _STR),
                "line": pa.array(line_list, _I64),
                "error": pa.array(error, _STR),
                "raw": pa.array(raw, _STR),
            }
        )
        cached: list[tuple[int | None, Element | BadElement]] = []
        for ln, e in zip(line_list, els, strict=True):
            if isinstance(e, BadElement) and e.line != ln:
                e = BadElement(e.reason, line=ln, raw=e.raw)
            cached.append((ln, e))
        return cls(table, _elements=cached)

    @classmethod
    def empty(cls) -> ElementBatch:
        return cls.from_elements([])

    # ------------------------------------------------------------------ basic views
    def __len__(self) -> int:
        return self.table.num_rows

    def __repr__(self) -> str:
        return f"ElementBatch({len(self)} rows, payload={self.payload_type})"

    @property
    def payload_type(self) -> pa.DataType:
        return self.table.schema.field("payload").type

    @property
    def payload_is_struct(self) -> bool:
        return pa.types.is_struct(self.payload_type)

    @property
    def lines(self) -> np.ndarray:
        """Line numbers as numpy int64 (-1 where unknown)."""
        if self._lines is None:
            self._lines = ints_filled(self.table.column("line"), -1)
        return self._lines

    def column(self, name: str) -> np.ndarray:
        """An int64 time column (``le``, ``re``, ``re_new``, ``t``) as numpy, nulls as 0."""
        got = self._ints.get(name)
        if got is None:  # (kept: the gate, the ECTI ledger and the window intake each ask; treat as read-only)
            got = self._ints[name] = ints_filled(self.table.column(name), 0)
        return got

    def kind_codes(self) -> np.ndarray:
        """int8 numpy array: `KIND_INSERT`, `KIND_RETRACT`, `KIND_CTI`, `KIND_ECTI` or `KIND_BAD` per row."""
        if self._kind_codes is None:
            if len(self):  # (one kernel: a kind's code is its place in `_KINDS`; every batch pays this)
                found = pc.index_in(self.table.column("kind"), value_set=_KINDS)
                codes = pc.fill_null(found, KIND_BAD).to_numpy().astype(np.int8)
            else:
                codes = np.full(0, KIND_BAD, dtype=np.int8)
            self._kind_codes = codes
        return self._kind_codes

    @property
    def bad_count(self) -> int:
        """How many rows are bad (carry an ``error``)."""
        return len(self) - self.table.column("error").null_count

    def sync_times(self) -> np.ndarray:
        """Each row's sync time (SEMANTICS §1): insert ``le``, retract ``min(re, re_new)``, cti ``t``.

        Bad rows and ECTIs get the smallest int64 (they never move time)."""
        codes = self.kind_codes()
        le, re, re_new, t = (self.column(c) for c in ("le", "re", "re_new", "t"))
        out = np.where(codes == KIND_INSERT, le, np.iinfo(np.int64).min)
        out = np.where(codes == KIND_RETRACT, np.minimum(re, re_new), out)
        return np.where(codes == KIND_CTI, t, out)

    def is_in_order_inserts(self, after: int, *, allow_cti: bool = True) -> bool:
        """True when every row is a valid insert (or, with ``allow_cti``, a CTI), no sync time is below
        ``after``, and sync times never decrease — so nothing in the batch can violate a CTI or need
        a retraction: the engine's fast path."""
        n = len(self)
        if n == 0:
            return True
        codes = self.kind_codes()
        if allow_cti:
            if not np.all((codes == KIND_INSERT) | (codes == KIND_CTI)):
                return False
        elif not np.all(codes == KIND_INSERT):
            return False
        st = self.sync_times()
        if st[0] < after:
            return False
        return bool(np.all(st[1:] >= st[:-1]))

    # ------------------------------------------------------------------ payloads
    def payloads(self) -> list[dict[str, Any] | None]:
        """Each row's payload as a dict (None when absent)."""
        if self._payloads is None:
            col = self.table.column("payload")
            if self.payload_is_struct:
                self._payloads = _struct_to_dicts(col.combine_chunks()) if len(col) else []
            else:
                loads = json.loads
                self._payloads = [None if s is None else loads(s) for s in col.to_pylist()]
        return self._payloads

    def payload_field(self, name: str) -> pa.ChunkedArray | None:
        """A typed column of one top-level payload field, or None when this batch has no such uniform
        column (a JSON-text batch, or a struct batch without that field). Rows without a payload are null.

        Use it for vectorized work; fall back to `payloads()` when it returns None."""
        if not self.payload_is_struct:
            return None
        typ = self.payload_type
        if typ.get_field_index(name) < 0:
            return None
        col = self.table.column("payload")
        return pa.chunked_array([pc.struct_field(ch, name) for ch in col.chunks], type=typ.field(name).type)

    # ------------------------------------------------------------------ back to elements
    def to_elements(self) -> list[tuple[int | None, Element | BadElement]]:
        """``(line, element)`` per row in order; bad rows come back as `BadElement` (reason, line, raw)."""
        if self._elements is not None:
            return self._elements
        n = len(self)
        tb = self.table
        lines = tb.column("line").to_pylist()
        payloads = self.payloads()
        codes = self.kind_codes()
        ids = tb.column("id").to_pylist()
        les = tb.column("le").to_pylist()
        res = tb.column("re").to_pylist()
        if n and bool(np.all(codes == KIND_INSERT)):
            out = [
                (ln, Insert(i, le, re, {} if p is None else p))
                for ln, i, le, re, p in zip(lines, ids, les, res, payloads, strict=True)
            ]
            self._elements = out
            return out
        re_news = tb.column("re_new").to_pylist()
        ts = tb.column("t").to_pylist()
        has_bad = tb.column("error").null_count != n
        errs = tb.column("error").to_pylist() if has_bad else None
        raws = tb.column("raw").to_pylist() if has_bad else None
        out = []
        append = out.append
        for i, code in enumerate(codes.tolist()):
            if code == KIND_INSERT:
                p = payloads[i]
                append((lines[i], Insert(ids[i], les[i], res[i], {} if p is None else p)))
            elif code == KIND_CTI:
                append((lines[i], Cti(ts[i])))
            elif code == KIND_RETRACT:
                append((lines[i], Retract(ids[i], les[i], res[i], re_news[i], payloads[i])))
            elif code == KIND_ECTI:
                append((lines[i], Ecti(les[i], res[i], ts[i])))
            else:
                assert errs is not None and raws is not None
                r = raws[i]
                append((lines[i], BadElement(errs[i] or "bad element", line=lines[i],
                                             raw=None if r is None else json.loads(r))))
        self._elements = out
        return out

    def elements(self) -> list[Element | BadElement]:
        return [e for _, e in self.to_elements()]

    def slice(self, offset: int, length: int | None = None) -> ElementBatch:
        sub = self.table.slice(offset, length)
        end = None if length is None else offset + length
        cached = None
        if self._elements is not None:
            cached = self._elements[offset:end]
        out = ElementBatch(sub, _elements=cached)
        if self._kind_codes is not None:
            out._kind_codes = self._kind_codes[offset:end]
        out._ints = {k: v[offset:end] for k, v in self._ints.items()}
        return out

