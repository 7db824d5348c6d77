"""Users' DataFrames in and out of Spark batch runs: column options instead of the element schema, and
typed payload columns instead of one JSON string.

`table_elements_df` turns a DataFrame of rows (``ts``, ``sym``, ``price``, ...) into an element DataFrame
with the same column options as ``udm run`` (`udm.host.io.table_options.TableOptions`): point events at
``time``, intervals ``[start, end)``, edge samples holding until their key's next sample. A row whose
time is null or cannot be read is a bad row (dead-lettered with its row number and the row as JSON).
Row numbers follow the DataFrame's order (``monotonically_increasing_id``), 1-based.

A *streaming* DataFrame (`udm.host.spark.streaming.run_stream` with ``table=``) has no row order and no
end: its rows carry no row number (a bad row's dead letter has ``line`` null and the row as ``raw``), a
row without an ``id`` column gets a random unique id (ids of table rows are never seen in a window's
output; a micro-batch replayed after a failure draws new ones, which changes no result), rows of one
micro-batch are fed in time order (``_seq`` = the event time: inserts only, so any order is a valid
physical order), and edge samples are refused: a sample's end is its key's *next* sample, which a stream
has not seen yet. CTIs come from the source's watermark (``ctis_from_watermark=True``).

Edge events here are computed from the whole table (``lead`` over each key ordered by time), not as the
insert-then-retract stream a file read gives (`udm.host.io.tables`); the CHT is the same (semantics
note 32), and a sample out of time order is simply placed where it belongs.

`typed_output` gives a run's final result (its CHT) with one typed column per payload field when the
query's last step is a window step of UDAs: the group-by keys (typed like the input's columns) and each
UDA's output field (typed from its manifest's ``output_type``, `udm.host.spark.types`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from udm.host.errors import UdmError
from udm.host.io.table_options import UNITS, TableOptions
from udm.host.model.plan import build_plan
from udm.host.model.spec import WindowStep
from udm.host.spark.convert import cht_df
from udm.host.spark.types import JSON_TYPES, spark_type_for
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["output_schema", "table_elements_df", "table_inputs", "typed_output"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)


def _options(options: TableOptions | Mapping[str, Any]) -> TableOptions:
    if isinstance(options, TableOptions):
        return options.check()
    opts = dict(options)
    if isinstance(opts.get("key"), str):
        opts["key"] = (opts["key"],)
    if "key" in opts:
        opts["key"] = tuple(opts["key"])
    return TableOptions(**opts).check()


def _ticks(df: DataFrame, name: str, unit: str) -> Column:
    """A time column as long ticks (µs for timestamps and dates; numbers in ``unit``); null if unreadable."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        TimestampNTZType,
        TimestampType,
    )

    typ = df.schema[name].dataType
    col = F.col(name)
    scale = UNITS[unit]
    if isinstance(typ, (TimestampType, TimestampNTZType)):
        return F.unix_micros(col.cast("timestamp"))
    if isinstance(typ, DateType):
        return F.unix_micros(col.cast("timestamp"))
    if isinstance(typ, (LongType, IntegerType, ShortType)):
        return col.cast("long") if scale == 1 else F.floor(col.cast("double") * F.lit(scale)).cast("long")
    if isinstance(typ, (DoubleType, FloatType, DecimalType)):
        d = col.cast("double")
        ok = ~F.isnan(d) & (F.abs(d) < F.lit(9.2e18 / max(scale, 1)))
        return F.when(ok, F.floor(d * F.lit(scale)).cast("long"))
    if isinstance(typ, StringType):
        as_num = F.expr(f"try_cast(`{name}` as double)")
        as_ts = F.unix_micros(F.expr(f"try_to_timestamp(`{name}`)"))
        return F.coalesce(F.floor(as_num * F.lit(scale)).cast("long"), as_ts)
    raise UdmError(f"column {name!r} has type {typ.simpleString()}, which is not a time (timestamp, date, number "
                   f"or text)")


def table_elements_df(df: DataFrame, options: TableOptions | Mapping[str, Any] | None = None,
                      **kw: Any) -> DataFrame:
    """An element DataFrame (`udm.host.spark.convert.ELEMENT_DDL`) from a user's rows: ``time=COL`` (points),
    ``start=COL, end=COL`` (intervals), ``edge=COL, key=[COLS]`` (edge samples), optional ``id=COL`` and
    ``unit=`` for numeric times. Every other column is a payload field; bad rows stay as bad rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    o = _options({**dict(options or {}), **kw} if not isinstance(options, TableOptions) else options)
    wanted = [*o.time_columns, *o.key, *([o.id] if o.id else [])]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise UdmError(f"no column {missing[0]!r}; the DataFrame's columns: {', '.join(df.columns)}")
    tcol = o.time or o.start or o.edge
    assert tcol is not None
    streaming = df.isStreaming
    if streaming and o.shape == "edge":
        raise UdmError(f"edge events (--edge {o.edge}) need each key's next sample, which a stream has not seen "
                       "yet; give the stream point (time) or interval (start, end) events")
    fields = [c for c in df.columns if c not in o.reserved]
    payload = F.to_json(F.struct(*[F.col(f"`{c}`") for c in fields])) if fields else F.lit("{}")
    staged = df.select(
        _ticks(df, tcol, o.unit).alias("_le"),
        (_ticks(df, o.end, o.unit) if o.end else F.lit(None).cast("long")).alias("_end"),
        (F.col(o.end).isNull() if o.end else F.lit(False)).alias("_end_null"),
        (F.col(f"`{o.id}`").cast("string") if o.id else F.lit(None).cast("string")).alias("_id"),
        payload.alias("payload"),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"}).alias("_raw"),
        *[F.col(f"`{k}`").alias(f"_k{i}") for i, k in enumerate(o.key)],
    )
    if streaming:  # no row order on a stream (module doc)
        staged = staged.withColumn("line", F.lit(None).cast("long"))
    else:
        staged = staged.withColumn("line", F.row_number().over(Window.orderBy(F.monotonically_increasing_id()))
                                   .cast("long"))
    le = F.col("_le")
    if o.shape == "point":
        re = le + 1
    elif o.shape == "interval":
        re = F.when(F.col("_end_null"), F.lit(INF)).otherwise(F.col("_end"))
    else:
        w = Window.partitionBy(*[f"_k{i}" for i in range(len(o.key))]).orderBy("_le", "line")
        re = F.coalesce(F.lead(le).over(w), F.lit(INF))
    reason = F.when(le.isNull(), F.lit(f"column {tcol!r}: no time (null or not a time)"))
    if o.shape == "interval":
        reason = (reason.when(~F.col("_end_null") & F.col("_end").isNull(), F.lit(f"column {o.end!r}: not a time"))
                  .when(F.col("_end") <= le, F.lit(f"column {o.end!r}: end is not after start")))
    if o.id:
        reason = reason.when(F.col("_id").isNull(), F.lit(f"column {o.id!r}: no id (null)"))
    good = staged.where(F.col("_le").isNotNull()) if o.shape == "edge" else staged
    bad_edge = staged.where(F.col("_le").isNull()) if o.shape == "edge" else None
    rows = good.withColumn("_re", re).withColumn("error", reason)
    if bad_edge is not None:
        rows = rows.unionByName(bad_edge.withColumn("_re", F.lit(None).cast("long")).withColumn("error", reason))
    ok = F.col("error").isNull()
    out = rows.select(
        F.when(ok, F.lit("insert")).alias("kind"),
        F.when(ok, F.coalesce(F.col("_id"), F.expr("uuid()") if streaming else
                              F.concat(F.lit("r"), F.col("line").cast("string")))).alias("id"),
        F.when(ok, le).alias("le"), F.when(ok, F.col("_re")).alias("re"),
        F.lit(None).cast("long").alias("re_new"), F.lit(None).cast("long").alias("t"),
        F.when(ok, F.col("payload")).alias("payload"), F.col("line"), F.col("error"),
        F.when(~ok, F.col("_raw")).alias("raw"))
    if streaming:
        out = out.withColumn("_seq", F.coalesce(F.col("le"), F.lit(0)))
    if o.shape == "edge":
        out = out.where(F.col("kind").isNull() | (F.col("le") < F.col("re")))  # same-instant samples: the later holds
    return out


def table_inputs(elements: DataFrame | Mapping[str, DataFrame], table: Any
                 ) -> DataFrame | Mapping[str, DataFrame]:
    """The element DataFrames of ``run_batch``/``run_stream``'s ``table=``: one set of options for every
    DataFrame, or (a graph) a mapping of input name to options, an input without options being elements
    already."""
    if not isinstance(elements, Mapping):
        return table_elements_df(elements, table)
    per = table if all(x in table for x in elements) else dict.fromkeys(elements, table)
    return {x: table_elements_df(df, per[x]) if per.get(x) is not None else df for x, df in elements.items()}


def output_schema(query: Any, input_schema: Any = None) -> list[tuple[str, str]] | None:
    """``[(field, Spark DDL type)]`` of the query's output payload, when its last step is a window step of
    UDAs (keys typed from ``input_schema``, a Spark StructType, else string); None when not known."""
    bound = build_plan(query)
    if not bound.graph.is_linear or not bound.steps:
        return None
    last = bound.steps[-1]
    step = last.step
    if not isinstance(step, WindowStep):
        return None
    parts = last.parts or (last,)
    out: list[tuple[str, str]] = []
    for key in step.group_by:
        typ = "string"
        if input_schema is not None and key in input_schema.fieldNames():
            typ = input_schema[key].dataType.simpleString()
        out.append((key, typ))
    aliases = [a.as_ for a in step.aggregates] if step.aggregates else [step.alias]
    for part, alias in zip(parts, aliases, strict=False):
        if part.entry is None or part.entry.manifest.kind != "uda":
            return None
        mtype = part.entry.manifest.output_type
        if mtype.lower() in JSON_TYPES:
            return None
        out.append((alias, spark_type_for(mtype)))
    return out


def typed_output(run: Any, query: Any, input_schema: Any = None, *, timestamps: bool = False) -> DataFrame:
    """The final result of a `udm.host.spark.batch.run_batch` run: its CHT (``le, re``; plus ``start``,
    ``end`` timestamps if asked) with one typed column per payload field when `output_schema` knows
    them, else the ``payload`` JSON text."""
    from pyspark.sql import functions as F


    schema = output_schema(query, input_schema)
    df = cht_df(run.output if hasattr(run, "output") else run, timestamps=timestamps)
    if schema is None:
        return df
    ddl = ", ".join(f"`{n}` {t}" for n, t in schema)
    parsed = df.withColumn("_p", F.from_json("payload", ddl))
    return parsed.select(*[c for c in df.columns if c != "payload"], *[F.col("_p").getField(n).alias(n)
                                                                      for n, _ in schema])
