"""Physical order of a streaming element DataFrame without a global sequence number (semantics-notes 44).

Spark keeps no row order across the shuffle that brings a key bucket its rows, so `run_stream` sorts each
bucket's micro-batch by a sequence number (``_seq``). Real sources have no global one, but they do have an
order *per source partition*: a file and the line (or row) within it, a Kafka topic partition and the
offset. That is enough, because what must stay in order is a retraction after its insert, and a source
keeps those in one partition:

- ``order="offset"`` (one column): the stream has one partition (a one-partition topic, a single file);
  ``_seq`` is the offset, and CTI rows stay where they are.
- ``order=("partition", "offset")``: several partitions, each in its own order. ``_seq`` is
  ``offset * 4096 + hash(partition) % 4096``: each partition's rows keep their order, partitions
  interleave by offset, and ties fall the same way on every replay. Rows of different partitions in one
  micro-batch have no order between them, so an explicit CTI row is applied at the end of the
  micro-batch that reads it (``_seq`` = `CTI_SEQ`): it promises that nothing *read in a later
  micro-batch* (from any partition) is earlier than it.

Where a row has no ``line``, its offset is its ``line`` (a dead letter's ``line`` is then its offset in
its own partition: the line in its file, the Kafka offset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from udm.host.errors import UdmError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["CTI_SEQ", "MAX_OFFSET", "PARTITION_SLOTS", "with_source_order"]

#: How many partition slots an offset is spread over (partitions hashing alike tie, harmlessly).
PARTITION_SLOTS = 4096
#: ``_seq`` of an explicit CTI in a multi-partition stream: after every element of its micro-batch.
CTI_SEQ = 1 << 62
#: The largest offset that keeps ``offset * PARTITION_SLOTS`` below `CTI_SEQ`.
MAX_OFFSET = CTI_SEQ // PARTITION_SLOTS - 1


def with_source_order(df: DataFrame, order: str | Sequence[str]) -> DataFrame:
    """``df`` with ``_seq`` (and ``line`` where it has none) from its per-partition order columns."""
    from pyspark.sql import functions as F

    cols = [order] if isinstance(order, str) else list(order)
    if not 1 <= len(cols) <= 2:
        raise UdmError(f"order={order!r}: give an offset column, or (partition column, offset column)")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise UdmError(f"order names column {missing[0]!r}, which the streaming DataFrame lacks "
                       f"(it has {', '.join(df.columns)})")
    offset = F.col(cols[-1]).cast("bigint")
    if "line" not in df.columns:
        df = df.withColumn("line", offset)
    if len(cols) == 1:
        return df.withColumn("_seq", offset)
    slot = F.pmod(F.xxhash64(F.col(cols[0]).cast("string")), F.lit(PARTITION_SLOTS))
    seq = F.least(offset, F.lit(MAX_OFFSET)) * F.lit(PARTITION_SLOTS) + slot
    return df.withColumn("_seq", F.when(F.col("kind") == "cti", F.lit(CTI_SEQ)).otherwise(seq))
