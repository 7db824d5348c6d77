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
  interleave by offset, and ties fall the same way on every replay; ``_part`` is a 64-bit hash of the
  partition. Rows of different partitions in one micro-batch have no order between them, so an explicit
  CTI row applies *in place within its own partition* (a later element of that partition that violates
  it is a CTI violation, as with ``udm run`` on the file) and to the other partitions at the end of the
  micro-batch that reads it: it promises that nothing read in a later micro-batch, from any partition,
  is earlier than it. Each bucket puts its micro-batch in that order itself (`partition_cti_order`).

Where a row has no ``line``, its offset is its ``line`` (a dead letter's ``line`` is then its offset in
its own partition: the line in its file, the Kafka offset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import UdmError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["MAX_OFFSET", "PARTITION_SLOTS", "partition_cti_order", "with_source_order"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: How many partition slots an offset is spread over (partitions hashing alike tie, harmlessly).
PARTITION_SLOTS = 4096
#: The largest offset that keeps ``offset * PARTITION_SLOTS`` below ``2**62``.
MAX_OFFSET = (1 << 62) // PARTITION_SLOTS - 1


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
    part = F.xxhash64(F.col(cols[0]).cast("string"))
    seq = F.least(offset, F.lit(MAX_OFFSET)) * F.lit(PARTITION_SLOTS) + F.pmod(part, F.lit(PARTITION_SLOTS))
    return df.withColumn("_seq", seq).withColumn("_part", part)


def partition_cti_order(table: pa.Table) -> pa.Table:
    """A bucket's micro-batch (rows sorted by ``udm_seq``, ``udm_part`` naming each row's partition) in
    the order that applies each CTI in place within its own partition only (module doc).

    Each row gets its partition's *guard*: the largest CTI before it in that partition (a CTI row: up to
    itself; none: the least int64). Rows are then taken by (guard, the CTI that raised the guard first,
    ``udm_seq``): an element comes after its own partition's CTIs, so the engine checks it against them,
    and before every larger CTI of another partition, so no other partition's CTI of this micro-batch
    judges it. Within a partition the order is unchanged (its guard never decreases along it, and a row
    raising it is the first of its guard there)."""
    n = table.num_rows
    if n == 0:
        return table
    part = table.column("udm_part").to_numpy(zero_copy_only=False)
    is_cti = pc.fill_null(pc.equal(table.column("kind"), "cti"), False).to_numpy(zero_copy_only=False)
    if not is_cti.any():
        return table
    t = pc.fill_null(table.column("t"), np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)
    least = np.iinfo(np.int64).min
    guard = np.full(n, least, dtype=np.int64)
    raises = np.zeros(n, dtype=bool)  # a CTI that moves its partition's guard (a lower or equal one does not)
    latest: dict[int, int] = {}
    for i in range(n):  # (one pass; CTIs are few, elements only read their partition's latest guard)
        p = int(part[i])
        g = latest.get(p, least)
        if is_cti[i] and int(t[i]) > g:
            g = latest[p] = int(t[i])
            raises[i] = True
        guard[i] = g
    order = np.lexsort((np.arange(n), ~raises, guard))
    return table.take(pa.array(order))
