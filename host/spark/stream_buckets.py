"""Which shuffle partition (task) runs each key bucket of a streaming query, and how to make it one
bucket per partition.

``groupBy(grouping columns).transformWithStateInPandas`` shuffles by Spark's ``HashPartitioning``: a row
goes to partition ``pmod(murmur3(grouping columns, seed 42), spark.sql.shuffle.partitions)``. Grouping by
the bucket number alone puts buckets where that hash sends the integers 0..n-1, and it sends them
unevenly: with 2 partitions, 0 and 1 both land in partition 1, so one task runs both buckets and a second
core has nothing to do (the finding of issue 14; with 4 partitions, 0 and 1 share one and partition 2
stays empty). The stream therefore groups by ``(udm_bucket, udm_salt)``: the bucket keeps its number
(it is what the processor and the output rows see), and `bucket_salts` picks for each bucket ``b`` the
smallest salt whose hash together with ``b`` falls in partition ``b``, so with ``n`` buckets over ``n``
shuffle partitions (the default: buckets = ``spark.sql.shuffle.partitions``) every bucket has a
partition of its own, and over a number of partitions dividing ``n`` they are spread evenly.

The salts depend on ``n`` only (never on the session's partition count, which a restart may change while
Spark keeps the checkpoint's), so a bucket's state key is the same on every run: semantics-notes 50.

`murmur3_long` is Spark's ``Murmur3_x86_32.hashLong`` (Spark's ``hash`` function and its shuffle
partitioner use it for ``bigint`` columns); the test checks it against Spark's ``F.hash``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

__all__ = ["SPARK_HASH_SEED", "bucket_salts", "murmur3_long", "partition_of", "salt_column"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: The seed of Spark's ``HashPartitioning`` and of its SQL ``hash`` function.
SPARK_HASH_SEED = 42
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _mix(h: int, k: int) -> int:
    k = _rotl((k * 0xCC9E2D51) & _M, 15)
    h ^= (k * 0x1B873593) & _M
    return (_rotl(h, 13) * 5 + 0xE6546B64) & _M


def murmur3_long(value: int, seed: int = SPARK_HASH_SEED) -> int:
    """Spark's hash of a ``bigint`` (a signed 32-bit int, as Spark returns it)."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h = _mix(_mix(seed & _M, v & _M), v >> 32) ^ 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_of(bucket: int, salt: int, partitions: int) -> int:
    """The shuffle partition of grouping key ``(bucket, salt)`` (both ``bigint``) among ``partitions``:
    Spark hashes the columns in order, each with the previous hash as its seed."""
    return murmur3_long(salt, murmur3_long(bucket)) % partitions


@lru_cache(maxsize=64)
def bucket_salts(n: int) -> tuple[int, ...]:
    """For each bucket ``b`` of ``n``, the smallest salt ``s >= 0`` with ``partition_of(b, s, n) == b``.
    (About ``n`` tries per bucket: a hash falls in a given one of ``n`` partitions once in ``n``.)"""
    if n < 1:
        raise ValueError(f"a stream needs at least 1 key bucket, got {n}")
    salts = []
    for b in range(n):
        s = 0
        while partition_of(b, s, n) != b:
            s += 1
        salts.append(s)
    return tuple(salts)


def salt_column(n: int, bucket: str = "udm_bucket") -> Column:
    """The salt of each row's bucket (column ``bucket``, one of ``n``) as a ``bigint`` column: what the
    streaming operators group by beside the bucket (`udm.host.spark.streaming`, `stream_stages`)."""
    from pyspark.sql import functions as F

    salts = F.array(*[F.lit(s).cast("bigint") for s in bucket_salts(n)])
    return F.element_at(salts, F.col(bucket).cast("int") + 1)
