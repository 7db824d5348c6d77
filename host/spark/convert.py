"""Physical elements as Spark DataFrames, and back.

An *element DataFrame* has the columns of `udm.host.io.batch.ElementBatch` with a JSON-text payload:
``kind, id, le, re, re_new, t, payload, line, error, raw`` (`ELEMENT_DDL`; an ``ecti`` row holds its range in
``le``/``re`` and its count in ``t``). ``line`` is the element's
position in the physical stream (its line number in a file): Spark rows have no order, so every
consumer that needs arrival order sorts by it. ``INF`` is ``2**63-1`` in the LongType time columns.
A bad input row has ``kind`` null and ``error`` set (it is dead-lettered at its place in the stream).

Timestamps: ``TimestampType`` ↔ microsecond ticks (``unix_micros`` / ``timestamp_micros``); ``INF``
becomes a null timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import UdmError
from udm.host.io.batch import ElementBatch
from udm.host.io.encode import ConstColumn, EncodedLines, encode_value_column
from udm.host.temporal.elements import Cti, Ecti, Element, Insert, Retract
from udm.host.temporal.strict import dumps as strict_dumps
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "ELEMENT_COLUMNS",
    "ELEMENT_DDL",
    "batch_to_arrow",
    "cht_df",
    "collect_elements",
    "compact_json",
    "element_lines_of",
    "elements_df",
    "elements_of",
    "events_from_df",
    "normalize_elements",
    "object_texts",
    "payload_texts",
    "ticks_to_timestamp",
]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

ELEMENT_COLUMNS = ("kind", "id", "le", "re", "re_new", "t", "payload", "line", "error", "raw")
ELEMENT_DDL = ("kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, "
               "line bigint, error string, raw string")

Shape = Literal["point", "interval", "edge"]


def batch_to_arrow(batch: ElementBatch) -> pa.Table:
    """An `ElementBatch` as an Arrow table with a JSON-text payload (a struct payload is re-encoded,
    column by column: `payload_texts`)."""
    tb = batch.table
    if batch.payload_is_struct:
        tb = tb.set_column(tb.column_names.index("payload"), "payload", payload_texts(batch))
    return tb.select(list(ELEMENT_COLUMNS))


def payload_texts(batch: ElementBatch) -> pa.Array:
    """The payload column as compact JSON text (null where absent), built column by column for the
    reader's struct payloads (`object_texts`): ``json.dumps`` per row costs ~3 s per million."""
    col = batch.table.column("payload").combine_chunks()
    typ = col.type
    if not pa.types.is_struct(typ):
        return col.cast(pa.string())
    n = len(col)
    valid = col.is_valid()
    sub = col.filter(valid) if col.null_count else col  # (CTIs and bare retractions have none)
    if len(sub) == 0:
        return pa.nulls(n, pa.string())
    text = object_texts([(typ.field(k).name, field) for k, field in enumerate(sub.flatten())], len(sub))
    if col.null_count:
        text = pc.replace_with_mask(pa.nulls(n, pa.string()), valid, text)
    return text


_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def compact_json(value: Any) -> str:
    """A value's compact JSON text (what ``json.dumps`` with these separators gives), strict like the local
    writer (`udm.host.temporal.strict.dumps`): a NaN or an infinity is the `UdmError` naming its field, never
    ``NaN`` text, on every Spark path that writes a payload (output rows, a stage's exchange rows). (The
    encoder is built once: a Spark bucket calls this once per output payload.)"""
    try:
        return _COMPACT.encode(value)
    except ValueError:
        return strict_dumps(value, separators=(",", ":"))  # raises the rule's error


def object_texts(fields: Sequence[tuple[str, pa.Array | ConstColumn | list[Any]]], n: int) -> pa.Array:
    """``n`` compact JSON objects from their fields in order, built column by column (`udm.host.io.encode`):
    a field is a typed column of the ``n`` rows, a `ConstColumn` (one value for all) or a list of Python
    values (encoded one by one, as is a column holding objects or lists). A non-finite number is the local
    writer's error naming its field (`compact_json`)."""
    parts: list[Any] = []
    for k, (name, col) in enumerate(fields):
        parts.append(("{" if k == 0 else ",") + json.dumps(name) + ":")
        try:
            parts.extend(_field_texts(col))
        except UdmError:
            values = [col.value] if isinstance(col, ConstColumn) else col if isinstance(col, list) else col.to_pylist()
            for v in values:
                strict_dumps({name: v})  # the first non-finite value raises, named as the local writer names it
            raise
    parts.append("}" if parts else "{}")
    if not any(isinstance(p, pa.Array) for p in parts):
        return pa.array(["".join(parts)] * n, pa.string())
    return pc.binary_join_element_wise(*parts, "")


def _field_texts(col: pa.Array | ConstColumn | list[Any]) -> list[Any]:
    """The pieces of one field's JSON text for every row: a constant, or a string column (between quotes
    when it still needs them)."""
    if isinstance(col, ConstColumn):
        return [compact_json(col.value)]
    if isinstance(col, list):
        return [pa.array([compact_json(v) for v in col], pa.string())]
    if pa.types.is_nested(col.type):
        return [pa.array([compact_json(v) for v in col.to_pylist()], pa.string())]
    value, quote = encode_value_column(col)
    return ['"', value, '"'] if quote else [value]


def elements_df(spark: SparkSession, source: Iterable[Element] | Iterable[ElementBatch],
                lines: Sequence[int] | None = None) -> DataFrame:
    """An element DataFrame from Python elements (``line`` = 1, 2, ... unless given) or from batches
    read by `udm.host.io` (their line numbers and bad rows kept)."""
    items = list(source)
    if items and all(isinstance(b, ElementBatch) for b in items):
        batches: list[ElementBatch] = items
        struct = _shared_struct(batches)
        if struct is not None:
            # one payload shape throughout (the usual file): Spark writes the JSON text, in parallel,
            # instead of one json.dumps per row here (3 s per million rows)
            from pyspark.sql import functions as F

            table = pa.concat_tables([b.table.select(list(ELEMENT_COLUMNS)) for b in batches])
            df = spark.createDataFrame(table)
            return df.select(*[F.to_json("payload").alias(c) if c == "payload" else F.col(c).cast(t).alias(c)
                               for c, t in (x.split(" ") for x in ELEMENT_DDL.split(", "))])
        tables = [batch_to_arrow(b) for b in batches]
    else:
        els: list[Any] = items
        ln = list(lines) if lines is not None else list(range(1, len(els) + 1))
        tables = [batch_to_arrow(ElementBatch.from_elements(els, ln))]
    table = pa.concat_tables(tables) if tables else batch_to_arrow(ElementBatch.empty())
    return spark.createDataFrame(table, schema=ELEMENT_DDL)


def _shared_struct(batches: Sequence[ElementBatch]) -> pa.DataType | None:
    """The payload struct type every batch has, if they all have the same one. Such a batch is
    *faithful* (`udm.host.io.jsonl`): no field missing or null where its object is present, floats only
    where the text had float literals, so ``to_json`` of the struct means what ``json.dumps`` of the
    parsed payload means; a null struct (no payload) stays a null text."""
    types = {b.payload_type for b in batches}
    if len(types) != 1:
        return None
    typ = types.pop()
    return typ if pa.types.is_struct(typ) and typ.num_fields else None


def normalize_elements(df: DataFrame, keep: Sequence[str] = ()) -> DataFrame:
    """Accept a user's element DataFrame with at least ``kind`` and the columns its kinds need: missing
    optional columns become null, a missing ``line`` is numbered in the DataFrame's current order, and a
    struct/map ``payload`` becomes JSON text. Columns named in ``keep`` that exist are kept as they are."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    if "kind" not in df.columns:
        raise UdmError(f"an element DataFrame needs a 'kind' column; it has {', '.join(df.columns)}")
    cols = []
    for name, ddl in (c.split(" ") for c in ELEMENT_DDL.split(", ")):
        if name in df.columns:
            col = F.col(name)
            if name == "payload" and not isinstance(df.schema["payload"].dataType, StringType):
                col = F.to_json(col)
            cols.append(col.cast(ddl).alias(name))
        elif name == "line" and not df.isStreaming:  # (streams cannot number rows; they bring ``_seq``)
            cols.append((F.monotonically_increasing_id() + 1).alias("line"))
        else:
            cols.append(F.lit(None).cast(ddl).alias(name))
    cols += [F.col(c) for c in keep if c in df.columns]
    return df.select(*cols)


def _micros(col: Column) -> Column:
    from pyspark.sql import functions as F

    return F.unix_micros(col)


def ticks_to_timestamp(col: str | Column) -> Column:
    """A tick column as TimestampType (µs); ``INF`` → null."""
    from pyspark.sql import functions as F

    c = F.col(col) if isinstance(col, str) else col
    return F.when(c >= F.lit(INF), F.lit(None)).otherwise(F.timestamp_micros(c))


def events_from_df(df: DataFrame, start: str, *, end: str | None = None, shape: Shape = "point",
                   partition_by: Sequence[str] = (), id_col: str | None = None) -> DataFrame:
    """Insert elements from a DataFrame of timestamped rows (every other column becomes a payload field).

    - ``point``: ``[start, start + 1µs)``;
    - ``interval``: ``[start, end)``, a null ``end`` meaning ``INF``;
    - ``edge``: ``[start, next start)`` within ``partition_by`` (ordered by ``start``), the last one open
      (``INF``): a sampled signal whose value holds until the next sample.
    Ids come from ``id_col`` or are generated; ``line`` numbers follow ``start`` order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    for c in (start, end, id_col, *partition_by):
        if c is not None and c not in df.columns:
            raise UdmError(f"events_from_df: no column {c!r}; columns: {', '.join(df.columns)}")
    if shape == "interval" and end is None:
        raise UdmError("events_from_df: shape 'interval' needs end=<column>")
    if shape not in ("point", "interval", "edge"):
        raise UdmError(f"events_from_df: unknown shape {shape!r} (point, interval, edge)")
    le = _micros(F.col(start))
    if shape == "point":
        re = le + 1
    elif shape == "interval" and end is not None:
        re = F.coalesce(_micros(F.col(end)), F.lit(INF))
    else:
        w = Window.partitionBy(*partition_by).orderBy(F.col(start))
        re = F.coalesce(F.lead(le).over(w), F.lit(INF))
    fields = [c for c in df.columns if c not in {start, end, id_col}]
    payload = F.to_json(F.struct(*[F.col(c) for c in fields])) if fields else F.lit("{}")
    staged = df.select(le.alias("le"), re.alias("re"), payload.alias("payload"),
                       (F.col(id_col).cast("string") if id_col else F.lit(None).cast("string")).alias("_id"))
    line = F.row_number().over(Window.orderBy("le", "payload"))
    out = staged.withColumn("line", line).select(
        F.lit("insert").alias("kind"),
        F.coalesce(F.col("_id"), F.concat(F.lit("r"), F.col("line").cast("string"))).alias("id"),
        "le", "re", F.lit(None).cast("bigint").alias("re_new"), F.lit(None).cast("bigint").alias("t"),
        "payload", "line", F.lit(None).cast("string").alias("error"), F.lit(None).cast("string").alias("raw"))
    if shape == "edge":
        out = out.where(F.col("le") < F.col("re"))  # two samples at one instant: the later one holds
    return out


def cht_df(elements: DataFrame, *, timestamps: bool = False, payload_schema: str | None = None) -> DataFrame:
    """The canonical history table of a valid physical stream (SEMANTICS §2), computed natively.

    Each retraction applies to the latest insert of its id before it (by ``line``); the last retraction of
    that event sets its end. Rows with ``re <= le`` are dropped. Columns ``le, re, payload`` (plus
    ``start``/``end`` timestamps, and ``p`` = the payload parsed with ``payload_schema``, if asked).
    Meant for engine output, which is valid by construction; validate raw input with the engine.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ev = elements.where(F.col("kind").isin("insert", "retract"))
    w = Window.partitionBy("id").orderBy("line").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ev = ev.withColumn("_inc", F.last(F.when(F.col("kind") == "insert", F.col("line")), ignorenulls=True).over(w))
    inserts = ev.where(F.col("kind") == "insert").select("id", "_inc", "le", "re", "payload")
    last_end = (ev.where((F.col("kind") == "retract") & F.col("_inc").isNotNull())
                .groupBy("id", "_inc").agg(F.max_by("re_new", "line").alias("_re_new")))
    out = (inserts.join(last_end, ["id", "_inc"], "left")
           .select("le", F.coalesce("_re_new", "re").alias("re"), "payload")
           .where(F.col("re") > F.col("le")))
    if timestamps:
        out = out.withColumn("start", ticks_to_timestamp("le")).withColumn("end", ticks_to_timestamp("re"))
    if payload_schema is not None:
        out = out.withColumn("p", F.from_json("payload", payload_schema))
    return out


def collect_elements(df: DataFrame) -> list[Element]:
    """Bring an element DataFrame to the driver as elements, in ``line`` order (for output files and
    tests; large outputs should be written by Spark instead)."""
    return elements_of(df.select("kind", "id", "le", "re", "re_new", "t", "payload", "line").orderBy("line").toArrow())


def elements_of(table: pa.Table) -> list[Element]:
    """Element rows (``kind, id, le, re, re_new, t, payload`` text), in their order, as elements."""
    out: list[Element] = []
    loads = json.loads
    for kind, id_, le, re, re_new, t, text in zip(*(table.column(c).to_pylist() for c in (
            "kind", "id", "le", "re", "re_new", "t", "payload")), strict=True):
        payload = None if text is None else loads(text)
        if kind == "insert":
            out.append(Insert(id_, le, re, payload or {}))
        elif kind == "retract":
            out.append(Retract(id_, le, re, re_new, payload))
        elif kind == "cti":
            out.append(Cti(t))
        elif kind == "ecti":
            out.append(Ecti(le, re, t))
    return out


def _time_text(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A time column as JSON text: the number, ``"inf"`` for `INF`, ``""`` where null."""
    text = pc.cast(col, pa.string())
    text = pc.if_else(pc.fill_null(pc.greater_equal(col, INF), False), pa.scalar('"inf"'), text)
    return pc.fill_null(text, "")


def element_lines_of(table: pa.Table) -> Any:
    """Element rows (``kind, id, le, re, re_new, t, payload`` JSON text), in their order, as the JSON
    Lines `udm.host.io.jsonl.JsonlWriter` writes for them (`udm.host.io.encode.EncodedLines`), built column
    by column: the rows of a Spark result go straight to the output file without an element object or a
    ``json.loads`` each. A payload's text is written as it came (compact, from the engine's rows)."""
    n = table.num_rows
    if n == 0:
        return EncodedLines((), 0)
    kind = pc.fill_null(table.column("kind"), "").combine_chunks()
    ids = pc.fill_null(table.column("id"), "").combine_chunks()
    id_text, quote = encode_value_column(ids)
    if quote:
        id_text = pc.binary_join_element_wise('"', id_text, '"', "")
    le, re, re_new, t = (_time_text(table.column(c)) for c in ("le", "re", "re_new", "t"))
    payload = pc.fill_null(table.column("payload"), "{}")
    insert = pc.binary_join_element_wise('{"kind": "insert", "id": ', id_text, ', "le": ', le, ', "re": ', re,
                                         ', "payload": ', payload, "}\n", "")
    retract = pc.binary_join_element_wise('{"kind": "retract", "id": ', id_text, ', "le": ', le, ', "re": ', re,
                                          ', "re_new": ', re_new, "}\n", "")
    cti = pc.binary_join_element_wise('{"kind": "cti", "t": ', t, "}\n", "")
    lines = pc.if_else(pc.equal(kind, "insert"), insert, pc.if_else(pc.equal(kind, "retract"), retract, cti))
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset: lines.offset + n + 1]
    data = memoryview(lines.buffers()[2])[int(offsets[0]): int(offsets[-1])]
    return EncodedLines((data,), n)
