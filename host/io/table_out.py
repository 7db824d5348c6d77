"""Writing a run's output as a table (Parquet, CSV or JSON Lines) instead of element JSON Lines.

Two views (semantics note 34):

- ``final``: the output's canonical history table (SEMANTICS §2) — one row per output event with its
  final lifetime, retractions applied, nothing retracted shown. Rows are written as output CTIs make
  them final (an event whose ``re`` is at or before the CTI can no longer change), so memory holds only
  the events still open; at the end of input (``cti(INF)``) the rest follow. Within one flush rows are
  in ``(le, re)`` order.
- ``physical``: every output element as it came, retractions and CTIs included (columns ``kind, id, le,
  re, re_new, t``), for those who replay or audit the stream.

Payload fields become columns of their own (typed; a field named like a time column gets a ``p_``
prefix). ``le``/``re`` (and ``re_new``/``t``) are ticks, or timestamps (microsecond ticks, UTC, ``INF``
as null) with ``times="timestamps"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from udm.host.errors import UdmError
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.temporal.strict import dumps as strict_dumps
from udm.sdk import INF

from .table_columns import OutputBatch, field_name, physical_table, rows_table
from .table_options import FORMATS

__all__ = ["TableSink", "TableWriter", "open_writer", "output_format", "output_sink"]

# lazy imports: pyarrow.parquet, pyarrow.csv — each writer only for its format

View = Literal["final", "physical"]
_FLUSH_ROWS = 65536


@dataclass(frozen=True)
class TableSink:
    """Where and how a run writes its output as a table."""

    path: Path
    format: str
    view: View = "final"
    times: Literal["ticks", "timestamps"] = "ticks"
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return str(self.path)


def output_format(path: str, given: str | None) -> str | None:
    """The table format for an output path (``None``: element JSON Lines, the default for ``.jsonl``)."""
    if given is not None:
        if given == "elements":
            return None
        if given not in FORMATS:
            raise UdmError(f"unknown --output-format {given!r}; formats: elements, {', '.join(FORMATS)}")
        return given
    low = path.lower()
    if low.endswith(FORMATS["parquet"]):
        return "parquet"
    if low.endswith(FORMATS["csv"]):
        return "csv"
    return None  # .jsonl / .json / stdout: element JSON Lines unless --output-format json


class TableWriter:
    """Collects output and writes it as table rows (`TableSink` says which view and format).

    Output comes as elements (`write`) or as the engine's columnar batches (`write_batch`). A Parquet or
    CSV physical view takes a batch column by column (`udm.host.io.table_columns`); the final view follows
    each event by its id, and JSON rows keep each value's own type (``49`` stays an int in a column that
    also holds floats), so both take the batch's elements."""

    def __init__(self, sink: TableSink) -> None:
        if sink.view not in ("final", "physical"):
            raise UdmError(f"unknown output view {sink.view!r} (final, physical)")
        self.sink = sink
        self.rows_written = 0
        self._open: dict[str, list[Any]] = {}  # final view: id -> [le, re, payload] of a live output event
        self._rows: list[dict[str, Any]] = []  # rows not yet in `_parts`
        self._parts: list[pa.Table | list[dict[str, Any]]] = []  # what the next flush writes, in order
        self._pending = 0
        self._schema: pa.Schema | None = None
        self._writer: Any = None
        self._text: Any = None
        try:
            if sink.format == "json":
                self._text = Path(sink.path).open("w", encoding="utf-8")  # noqa: SIM115 (closed in close())
        except OSError as exc:
            raise UdmError(f"cannot write {sink.path}: {exc.strerror or exc}") from None

    # ------------------------------------------------------------------ output in
    def write(self, elements: Iterable[Element]) -> None:
        for e in elements:
            self.write_one(e)
        self._take_rows()

    def write_batch(self, batch: OutputBatch) -> None:
        """The engine's output batch (`udm.host.engine.batch.Batch`)."""
        if self.sink.view == "physical" and self._text is None:
            self._take_rows()
            self._add(physical_table(batch, self.sink.times == "timestamps"))
        else:
            self.write(batch.to_elements())

    def write_one(self, e: Element) -> None:
        if self.sink.view == "physical":
            self._rows.append(self._physical_row(e))
            return
        if isinstance(e, Insert):
            self._open[e.id] = [e.le, e.re, e.payload]
        elif isinstance(e, Retract):
            ev = self._open.get(e.id)
            if ev is not None:
                if e.re_new <= ev[0]:
                    del self._open[e.id]
                else:
                    ev[1] = e.re_new
        elif isinstance(e, Cti):
            self._finalize(e.t)

    def _finalize(self, t: int) -> None:
        """Events whose end is at or before CTI ``t`` are final (a later retraction would violate it)."""
        done = [(ev[0], ev[1], i) for i, ev in self._open.items() if ev[1] <= t or t >= INF]
        for le, re, i in sorted(done):
            ev = self._open.pop(i)
            self._rows.append(self._final_row(le, re, ev[2]))
        self._take_rows()

    def _take_rows(self) -> None:
        if self._rows:
            self._add(self._rows)
            self._rows = []

    def _add(self, part: pa.Table | list[dict[str, Any]]) -> None:
        self._parts.append(part)
        self._pending += len(part) if isinstance(part, list) else part.num_rows
        if self._pending >= _FLUSH_ROWS:
            self._flush()

    # ------------------------------------------------------------------ rows
    def _time(self, v: int | None) -> Any:
        if v is None or self.sink.times == "ticks":
            return v
        return None if v >= INF else v  # converted to a timestamp column when the table is built

    def _payload_fields(self, payload: dict[str, Any] | None) -> dict[str, Any]:
        if not payload:
            return {}
        return {field_name(k): v for k, v in payload.items()}

    def _final_row(self, le: int, re: int, payload: dict[str, Any] | None) -> dict[str, Any]:
        return {"le": self._time(le), "re": self._time(re), **self._payload_fields(payload)}

    def _physical_row(self, e: Element) -> dict[str, Any]:
        if isinstance(e, Cti):
            return {"kind": "cti", "id": None, "le": None, "re": None, "re_new": None, "t": self._time(e.t)}
        row = {"kind": "insert" if isinstance(e, Insert) else "retract", "id": e.id, "le": self._time(e.le),
               "re": self._time(e.re), "re_new": self._time(e.re_new) if isinstance(e, Retract) else None,
               "t": None}
        return {**row, **self._payload_fields(e.payload)}

    # ------------------------------------------------------------------ files out
    def _flush(self) -> None:
        parts, self._parts = self._parts, []
        count, self._pending = self._pending, 0
        if not count:
            return
        if self._text is not None:
            rows = [r for p in parts for r in p]  # (JSON rows stay rows: see the class docstring)
            self._text.write("".join(strict_dumps(self._json_ready(r), separators=(",", ":")) + "\n" for r in rows))
            self._text.flush()
            self.rows_written += count
            return
        table = self._table(parts)
        self.rows_written += count
        try:
            if self._writer is None:
                self._writer = self._open_writer(table.schema)
            self._writer.write_table(table)
        except (pa.ArrowInvalid, OSError) as exc:
            raise UdmError(f"cannot write {self.sink.path}: {exc}") from None

    def _json_ready(self, row: dict[str, Any]) -> dict[str, Any]:
        if self.sink.times != "timestamps":
            return row
        return {k: (_iso(v) if k in ("le", "re", "re_new", "t") and v is not None else v) for k, v in row.items()}

    def _table(self, parts: list[pa.Table | list[dict[str, Any]]]) -> pa.Table:
        """The parts as one table; the first flush fixes the columns (every field of its rows, in order of
        appearance) and their types, later ones are cast to them."""
        try:
            tables = [self._stamped(rows_table(p) if isinstance(p, list) else p) for p in parts]
            if self._schema is None:
                table = pa.concat_tables(tables, promote_options="permissive")
                table = table.cast(_widen(table.schema))
                self._schema = table.schema
                return table
            return pa.concat_tables([self._conform(t) for t in tables])
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise UdmError(f"cannot write output rows to {self.sink.path}: {exc}") from None

    def _stamped(self, table: pa.Table) -> pa.Table:
        """The time columns as ticks (int64, also where the first rows left one empty: a physical view's
        ``re_new`` before any retraction), or with ``times="timestamps"`` as timestamps (µs ticks, UTC;
        ``INF`` is null)."""
        typ = pa.timestamp("us", tz="UTC") if self.sink.times == "timestamps" else pa.int64()
        for name in ("le", "re", "re_new", "t"):
            if name in table.column_names:
                i = table.column_names.index(name)
                col = table.column(i)
                if col.type != typ:
                    table = table.set_column(i, name, col.cast(pa.int64()).cast(typ))
        return table

    def _conform(self, table: pa.Table) -> pa.Table:
        schema = self._schema
        assert schema is not None
        new = [n for n in table.column_names if n not in schema.names]
        if new:
            raise UdmError(f"output field {new[0]!r} appears after the first {self.rows_written:,} "
                           f"rows fixed the {self.sink.format} columns ({', '.join(schema.names)}); "
                           f"write --output-format json for payloads of varying shape")
        n = table.num_rows
        have = set(table.column_names)
        return pa.table([table.column(f.name).cast(f.type) if f.name in have else pa.nulls(n, f.type)
                         for f in schema], schema=schema)

    def _open_writer(self, schema: pa.Schema) -> Any:
        if self.sink.format == "parquet":
            import pyarrow.parquet as pq

            # dictionary pages for payload text only: trying them on numbers (times, prices: mostly distinct)
            # and on the output ids (all different) cost more than the rest of the write (~0.5 CPU-s per
            # 1 M rows of Nexmark bids) for no gain; no min/max statistics for the ids either (text order
            # of "o<number>" ids prunes nothing; ~13 ms per 1 M rows, 5 % of the write)
            text = [f.name for f in schema if f.name != "id"
                    and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))]
            stats = [f.name for f in schema if f.name != "id"]
            return pq.ParquetWriter(str(self.sink.path), schema, use_dictionary=text, write_statistics=stats)
        import pyarrow.csv as pcsv

        return pcsv.CSVWriter(str(self.sink.path), schema)

    def close(self) -> None:
        """Write what is left: in the final view, events still open at the end are written as they are."""
        if self.sink.view == "final" and self._open:
            self._finalize(INF)
        self._take_rows()
        self._flush()
        if self._writer is None and self._text is None:  # no rows at all: still leave a (header-only) file
            self._schema = pa.schema([("le", pa.int64()), ("re", pa.int64())])
            self._writer = self._open_writer(self._schema)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._text is not None:
            self._text.close()
            self._text = None

    def sync(self) -> int:
        raise UdmError("table output cannot be checkpointed (--checkpoint writes element JSON Lines)")

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _widen(schema: pa.Schema) -> pa.Schema:
    """Columns pyarrow typed as null (no value in the first rows) become strings, ints that may later
    hold floats stay ints (a clash is a clear error, not a silent cast)."""
    return pa.schema([pa.field(f.name, pa.string() if pa.types.is_null(f.type) else f.type) for f in schema])


def _ts(v: int) -> Any:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=v)


def _iso(v: int) -> str:
    return _ts(v).isoformat().replace("+00:00", "Z")


def open_writer(output: Any, *, append: bool = False) -> Any:
    """The writer for a run's output: a `TableWriter` for a `TableSink`, else element JSON Lines."""
    if isinstance(output, TableSink):
        if append:
            raise UdmError("table output cannot be appended to (resumed runs write element JSON Lines)")
        return TableWriter(output)
    from .jsonl import JsonlWriter  # lazy: the readers and writers load with a run (cli.table_args imports this)

    return JsonlWriter(output, append=append)


def output_sink(output: str, fmt: str | None = None, *, final: bool = False, times: str | None = None,
                inputs: Iterable[Any] = ()) -> str | TableSink:
    """Where a run writes: the path itself (element JSON Lines) or a `TableSink` — chosen by ``fmt``
    (``elements``/``parquet``/``csv``/``json``), else by the name ending (``.parquet``, ``.csv``); ``final``
    asks for the CHT view (JSON Lines rows when the name says nothing else). ``times`` None: a table output
    keeps the input's time type — timestamps when every table input among ``inputs`` has a timestamp (or
    date) time column (`udm.host.io.tables.time_kind`), else ticks."""
    if times is not None and times not in ("ticks", "timestamps"):
        raise UdmError(f"--times {times}: choose ticks or timestamps")
    table = output_format(output, fmt)
    if table is None and final:
        table = "json"  # a final view is a table: JSON Lines rows of le, re and the payload fields
    if table is None:
        if times == "timestamps":
            raise UdmError("--times timestamps needs a table output (--output-format parquet|csv|json)")
        return output
    if output == "-":
        raise UdmError("table output must go to a file, not stdout")
    if times is None:
        from .tables import timestamp_inputs  # lazy: as `JsonlWriter` above

        times = "timestamps" if timestamp_inputs(inputs) else "ticks"
    return TableSink(Path(output), table, view="final" if final else "physical", times=times)  # type: ignore[arg-type]
