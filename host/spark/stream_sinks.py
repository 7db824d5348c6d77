"""Sinks for `run_stream`'s result rows: a directory of Parquet or JSON files, read back in output order.

`write_result_files` writes each micro-batch's rows (`STREAM_RESULT_DDL` plus ``batch``) under
``PATH/batch=NNNNNNNN/`` through ``foreachBatch``, replacing that folder: a micro-batch Spark replays after
a failure (same id, same input, same state) rewrites the same folder, so the directory holds each batch
exactly once. Spark's own file sink would also do (its ``_spark_metadata`` log is exactly-once), but it
keeps no batch id, and the retraction encoding needs the order of application.

The retraction encoding for a downstream reader (semantics-notes 46):

- ``stream = 'out'`` rows are the output stream's elements; apply them in ``(batch, bucket, seq)`` order.
  ``kind = 'insert'``: event ``id`` (``"{bucket}.{id}"``, unique over buckets) holds ``payload`` over
  ``[le, re)``. ``kind = 'retract'``: the event ``id`` with lifetime ``[le, re)`` now ends at ``re_new``
  (``re_new <= le`` deletes it). ``re = 2**63-1`` is an open end.
- ``stream = 'cti'``: one bucket's output CTI (``t``): its rows before ``t`` are final. The stream's CTI is
  the minimum over all buckets' latest (`udm.host.spark.streaming.combine_ctis`).
- ``stream = 'dead'``: dead letters (``line``, ``reason``, ``element`` JSON); ``stream = 'stats'``: counters.

`read_result_files` returns the rows in application order; `result_elements` turns them into elements
(the output CHT is `udm.host.testing.cht.cht` of them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from udm.host.errors import UdmError
from udm.host.spark.stream_wire import STREAM_RESULT_DDL
from udm.host.temporal.elements import Insert, Retract

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["read_result_files", "result_elements", "write_result_files"]

_FORMATS = ("parquet", "json")


def _folder(path: Path, batch_id: int) -> Path:
    return path / f"batch={batch_id:08d}"


def write_result_files(result: DataFrame, path: str | Path, *, checkpoint: str | Path, format: str = "parquet",
                       trigger: str | None = None) -> StreamingQuery:
    """Start the query writing ``result`` (from `run_stream`) to directory ``path``, one folder per
    micro-batch; ``trigger``: a processing-time interval (``"2 seconds"``), default as fast as it goes."""
    if format not in _FORMATS:
        raise UdmError(f"write_result_files format={format!r}: expected one of {', '.join(_FORMATS)}")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    def write(df: DataFrame, batch_id: int) -> None:
        target = _folder(out, batch_id)
        tmp = out / f".batch-{batch_id:08d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        df.coalesce(1).write.format(format).save(str(tmp))  # (``batch`` comes from the folder name)
        shutil.rmtree(target, ignore_errors=True)  # a replayed batch: replace what its first run wrote
        tmp.rename(target)

    writer = result.writeStream.foreachBatch(write).option("checkpointLocation", str(checkpoint))
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def read_result_files(spark: SparkSession, path: str | Path, *, format: str = "parquet") -> DataFrame:
    """Every result row written by `write_result_files`, with its ``batch``, in application order."""
    p = Path(path)
    if not any(p.glob("batch=*")):
        raise UdmError(f"{p} holds no result batches (batch=NNNNNNNN folders) yet")
    reader = spark.read.format(format)
    if format == "json":
        reader = reader.schema(f"{STREAM_RESULT_DDL}, batch bigint")
    return reader.load(str(p)).orderBy("batch", "bucket", "seq")


def result_elements(rows: list[dict[str, Any]] | DataFrame) -> list[Any]:
    """The output stream's elements from result rows (``stream = 'out'``), in application order."""
    items = [r if isinstance(r, dict) else r.asDict()
             for r in (rows if isinstance(rows, list) else rows.where("stream = 'out'").collect())]
    items.sort(key=lambda r: (r["batch"], r["bucket"], r["seq"]))
    return [Insert(r["id"], r["le"], r["re"], json.loads(r["payload"])) if r["kind"] == "insert"
            else Retract(r["id"], r["le"], r["re"], r["re_new"])
            for r in items if r["stream"] == "out"]
