"""Where a retraction of a query input goes when the plan routes inserts by key: to every key bucket,
and each bucket keeps it only when it holds an insert of its id. The batch plans (`udm.host.spark.batch`,
`udm.host.spark.graph`) share this rule.

A retraction need not carry its insert's payload (INTERFACES §1), so it cannot be hashed by key; it must
go where its id's inserts went. Looking that bucket up in Spark took a join of the retracted ids against
the inserts (two broadcasts: two more jobs re-reading the input, collected to the driver, and seconds of
planning for the self-joins: most of the staged plan's extra cost in issue #31). Instead, Spark copies each
retraction to every bucket, as it does a CTI (`spread`), and each bucket, which holds all of its ids'
inserts, keeps the retractions of those ids only (`keep_own_retractions`), before its engine sees anything:
the retraction then meets the engine of its insert exactly as before, in line order (one before its insert
is an unknown id there, as for one engine).

Plans that route by key check afterwards that each id's inserts stayed in one bucket (the ``ids`` rows);
a retraction then lands in exactly one bucket, or none: an *orphan*, whose id no bucket holds an insert of
(an unknown id for one engine too). Bucket 0 reports the ids of the retractions it dropped
(``unmatched``); those in no bucket's ``ids`` are the orphans (`orphans`), and the plan runs again with
them sent to bucket 0 alone (`id_hash`), whose engine dead-letters them as one engine does. An orphan is
invalid input: only such input pays for the second run.

Rows copied to every bucket are those with an id hash ``_idh`` (``xxhash64`` of the id columns, set for
inserts and for retractions with an id that are not known orphans) and kind ``retract``; the ``_idh`` of
inserts is what the ``ids`` rows report.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.io.arrow_numpy import sorted_unique

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["everywhere", "id_hash", "ids_blob", "ids_of", "ids_repeat", "keep_own_retractions", "orphans", "spread"]

# lazy imports: pyspark — importing udm.host.spark never loads Spark (its Spark-free parts run without it)


def id_hash(id_cols: Sequence[str], lost: Sequence[int] = ()) -> Column:
    """The ``_idh`` column: the hash of ``id_cols`` for inserts and retractions with an id, but not for the
    retractions of ``lost`` (orphans found by a first run: they go to bucket 0 alone, `spread`)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    h = F.xxhash64(*id_cols)
    event = F.col("id").isNotNull() & ((kind == "insert") | (kind == "retract"))
    if lost:
        event = event & ~((kind == "retract") & h.isin([int(x) for x in lost]))
    return F.when(event, h)


def everywhere() -> Column:
    """The rows `spread` copies to every bucket beside CTIs: retractions with an id hash (``_idh``)."""
    from pyspark.sql import functions as F

    return (F.col("kind") == "retract") & F.col("_idh").isNotNull()


def spread(df: DataFrame, bucket: Column, every: Column, n: int) -> DataFrame:
    """``df`` with ``_bucket``: ``bucket`` (0 when null), and every bucket for a row where ``every`` holds
    (one copy per bucket). One generator over the rows: no branch reads ``df`` twice (an earlier stage's
    result is not persisted, a second read would run it again)."""
    from pyspark.sql import functions as F

    all_buckets = F.sequence(F.lit(0).cast("bigint"), F.lit(n - 1).cast("bigint"))
    one = F.array(F.coalesce(bucket.cast("bigint"), F.lit(0).cast("bigint")))
    return df.withColumn("_bucket", F.explode(F.when(F.coalesce(every, F.lit(False)), all_buckets).otherwise(one)))


def ids_blob(hashes: np.ndarray) -> str:
    """Id hashes as a bucket reports them (``ids`` and ``unmatched`` rows): base64 of the sorted unique
    int64 values, which `orphans` and `ids_repeat` rely on."""
    return base64.b64encode(sorted_unique(np.asarray(hashes, dtype=np.int64)).tobytes()).decode()


def ids_of(blob: str) -> np.ndarray:
    """The sorted unique id hashes of an `ids_blob`."""
    return np.frombuffer(base64.b64decode(blob), dtype=np.int64)


def ids_repeat(blobs: list[str]) -> bool:
    """Whether a hash occurs in two of the buckets' ``ids`` blobs (an id's inserts in two buckets)."""
    parts = [ids_of(b) for b in blobs]
    if len(parts) < 2:
        return False
    allh = np.sort(np.concatenate(parts))  # each part is unique within its bucket
    return bool(len(allh) > 1 and (allh[1:] == allh[:-1]).any())


def keep_own_retractions(table: pa.Table, report: bool) -> tuple[pa.Table, str | None]:
    """A bucket's rows without the copied retractions (see the module doc) of ids it has no insert of;
    with ``report``, also the id hashes of those it dropped (base64 int64, `orphans`), else None."""
    if "_idh" not in table.column_names:
        return table, None
    idh = table.column("_idh")
    kind = table.column("kind")
    copied = pc.fill_null(pc.and_(pc.equal(kind, "retract"), pc.is_valid(idh)), False)
    if not pc.any(copied).as_py():
        return table, ids_blob(np.empty(0, np.int64)) if report else None
    inserted = pc.drop_null(pc.filter(idh, pc.fill_null(pc.equal(kind, "insert"), False)))
    known = pc.is_in(idh, value_set=inserted)
    drop = pc.and_(copied, pc.invert(pc.fill_null(known, False)))
    unmatched = None
    if report:
        unmatched = ids_blob(pc.filter(idh, drop).to_numpy(zero_copy_only=False))
    return table.filter(pc.invert(drop)), unmatched


def orphans(unmatched: list[str], ids: list[str]) -> list[int]:
    """The id hashes of the retractions a bucket dropped (``unmatched`` blobs) whose id no bucket holds an
    insert of (``ids`` blobs: each bucket's insert id hashes)."""
    dropped = [ids_of(b) for b in unmatched]
    if not dropped or not any(len(d) for d in dropped):
        return []
    every = sorted_unique(np.concatenate(dropped))
    found = np.zeros(len(every), dtype=bool)
    for b in ids:  # each blob is sorted (`ids_blob`): a search per dropped hash, not a pass over every held id
        held = ids_of(b)
        if len(held):
            at = np.minimum(np.searchsorted(held, every), len(held) - 1)
            found |= held[at] == every
    return [int(x) for x in every[~found]]
