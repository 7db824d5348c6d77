"""Streaming sources a Spark user has, as element DataFrames ready for `run_stream(..., order=...)`.

- `event_files`: a directory that event files land in (element JSON Lines, or Parquet element files as
  `udm.host.spark.stream_files` stages them). Each file is one source partition; its order is the line
  (JSON Lines, counting blank lines as the local reader does) or the row (Parquet) within the file, so
  ``run_stream(q, df, order=FILE_ORDER)`` keeps each file's retractions after their inserts without a
  global sequence (semantics-notes 44). A file must land whole (write it aside, then rename it in); a
  JSON Lines file is read as one text value (Spark's ``wholetext``), so keep files well under 2 GB.
- `rate_elements`: Spark's ``rate`` source as point events for load tests: row ``value`` is the insert
  ``r<value>`` at the row's timestamp (µs ticks) with payload ``{"g": "g<value % groups>", "v": value}``;
  it has no CTIs, so run it with ``ctis_from_watermark=True`` (it carries a watermark on ``timestamp``)
  and ``order=RATE_ORDER``.

JSON Lines files are parsed by the local engine's own line parser (`udm.host.io.jsonl.parse_line`), so
a bad line gets the same reason as with ``udm run`` plus its file, and is dead-lettered at its line.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.errors import UdmError
from udm.host.io.jsonl import read_jsonl_batches
from udm.host.spark.convert import ELEMENT_DDL, batch_to_arrow

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FILE_ORDER", "RATE_ORDER", "SOURCE_FILE", "event_files", "rate_elements"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: The column naming a row's file (its source partition).
SOURCE_FILE = "source_file"
#: ``order=`` for `event_files`: (file, line within the file).
FILE_ORDER = (SOURCE_FILE, "line")
#: ``order=`` for `rate_elements`: the rate source's ``value`` counts up over all its partitions.
RATE_ORDER = "value"

_FORMATS = ("jsonl", "parquet")


def _parse_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """(file path, whole text) rows → element rows, read by `udm run`'s own JSON Lines reader (the same
    line numbers and dead-letter reasons; executor side)."""

    for rb in batches:
        for path, text in zip(rb.column(0).to_pylist(), rb.column(1).to_pylist(), strict=True):
            name = Path(str(path)).name
            for eb in read_jsonl_batches(io.BytesIO((text or "").encode("utf-8"))):
                tb = batch_to_arrow(eb)
                err = tb.column("error").to_pylist()
                if any(e is not None for e in err):  # name the file in a bad line's reason
                    tb = tb.set_column(tb.column_names.index("error"), "error",
                                       pa.array([None if e is None else f"{e} ({name})" for e in err], pa.string()))
                tb = tb.append_column(SOURCE_FILE, pa.array([str(path)] * tb.num_rows, pa.string()))
                yield from tb.to_batches()


def event_files(spark: SparkSession, path: str | Path, *, format: str = "jsonl",
                max_files_per_trigger: int | None = None) -> DataFrame:
    """A streaming element DataFrame over the event files that land in directory ``path``; run it with
    ``run_stream(q, df, order=FILE_ORDER)``. ``max_files_per_trigger``: at most that many new files per
    micro-batch (default: all that have landed)."""
    from pyspark.sql import functions as F


    if format not in _FORMATS:
        raise UdmError(f"event_files format={format!r}: expected one of {', '.join(_FORMATS)}")
    d = Path(path)
    if not d.is_dir():
        raise UdmError(f"event directory {d} does not exist (create it before starting the stream)")
    reader = spark.readStream
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
    if format == "jsonl":
        raw = reader.text(str(d), wholetext=True)  # (.text() resets an option set before it)
        files = raw.select(F.col("_metadata.file_path").alias("path"), F.col("value"))
        return files.mapInArrow(_parse_files, f"{ELEMENT_DDL}, {SOURCE_FILE} string")
    schema = _parquet_schema(spark, d)
    df = reader.schema(schema).parquet(str(d))
    df = df.withColumn(SOURCE_FILE, F.col("_metadata.file_path"))
    if "line" not in df.columns:  # the row within its file, 1-based
        df = df.withColumn("line", F.col("_metadata.row_index") + 1)
    return df


def _parquet_schema(spark: SparkSession, d: Path) -> Any:
    """The element schema of the Parquet files already in ``d`` (a stream needs it up front)."""
    from pyspark.sql.types import StructType


    if not any(d.glob("*.parquet")):
        return StructType.fromDDL(ELEMENT_DDL.replace(", error string, raw string", ""))
    schema = spark.read.parquet(str(d)).schema
    if "kind" not in schema.fieldNames():
        raise UdmError(f"Parquet event files in {d} need a 'kind' column (element rows); they have "
                       f"{', '.join(schema.fieldNames())}")
    return schema


def rate_elements(spark: SparkSession, rows_per_second: int, *, groups: int = 10, partitions: int | None = None,
                  watermark: str = "1 second") -> DataFrame:
    """Spark's ``rate`` source as point-event inserts (see the module doc), with a watermark of
    ``watermark`` on ``timestamp`` for ``ctis_from_watermark=True``."""
    from pyspark.sql import functions as F

    if rows_per_second < 1 or groups < 1:
        raise UdmError(f"rate_elements: rows_per_second and groups must be >= 1 (got {rows_per_second}, {groups})")
    reader = spark.readStream.format("rate").option("rowsPerSecond", int(rows_per_second))
    if partitions is not None:
        reader = reader.option("numPartitions", int(partitions))
    src = reader.load().withWatermark("timestamp", watermark)
    le = F.unix_micros("timestamp")
    payload = F.to_json(F.struct(F.concat(F.lit("g"), (F.col("value") % groups).cast("string")).alias("g"),
                                 F.col("value").cast("double").alias("v")))
    return src.select(F.lit("insert").alias("kind"), F.concat(F.lit("r"), F.col("value").cast("string")).alias("id"),
                      le.alias("le"), (le + 1).alias("re"), payload.alias("payload"), "value", "timestamp")
