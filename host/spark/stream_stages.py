"""A query graph cut into stages (`udm.host.spark.stages`) on Structured Streaming: one chained
``transformWithStateInPandas`` operator per stage, all in one streaming query.

Why: a graph with no single valid partitioning (joined by one key, then counted per another) would
otherwise run in one bucket. Cut into stages, each stage runs in its own key buckets, as on Spark batch.

Every operator reads and writes the same *wire* rows (`WIRE_DDL`): an element on its way (``stream``
``el``) or a result on its way to the sink (``out``, ``cti``, ``dead``, ``stats``, the `STREAM_RESULT_DDL`
streams). An element row says which stage consumes it (``udm_stage``; `ALL_STAGES` for the control rows
every stage needs) and its bucket there (``udm_route``: a bucket, `BROADCAST`, `UNROUTABLE`, or
`ROUTE_LATER`). Before operator *k*, rows for stage *k* are grouped by their bucket (a `BROADCAST` row is
copied to each of the stage's buckets); every other row passes through some bucket of operator *k*
unchanged, keeping its ``udm_seq``.

Exchange (a stage's sink read by a later stage), computed in Python on the executor by the producing
bucket: an insert goes to the hash of the consumer's routing fields (`key_bucket`, the same hash the
driver uses for query inputs, so a join's two sides meet), a retraction to the bucket its insert went
to (kept per id in the producer's state until the producer's CTI passes the element's end), a CTI to
every consumer bucket. A consumer bucket keeps, per exchange stream, the latest CTI of every producer
bucket in its state and feeds the minimum over them when it rises (what `merge_exchange` does on batch).

T (the largest finite time of the real inputs, semantics-notes 2): ``udm run`` sends a `T_KIND` control
row to every bucket of every stage before the inputs' tails; each engine takes it as its ``ctx.reached``
(not as a CTI: an ``alter_lifetime`` shift would carry that CTI past T), so a later stage truncates at the
inputs' T, not at what its own input reached. A DataFrame-API stream has no end, hence no T row.

Exactly once: every operator's state (engine snapshot, exchange routes and merge state) is in the state
store and checkpointed with the query, so a restarted query replays an uncommitted micro-batch from the
same state through every stage.

State: what a stage bucket does with its rows is `udm.host.spark.stage_bucket.StageBucket` (Spark-free); a
stage whose routing keys every stream it reads keeps one engine per key value there (semantics-notes 59),
any other stage one engine per bucket. This module plans the stages, routes, and adapts Spark's state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import UdmError
from udm.host.model.spec import QuerySpec
from udm.host.spark.convert import ELEMENT_COLUMNS
from udm.host.spark.graph import key_value
from udm.host.spark.key_store import SparkStore
from udm.host.spark.partition import BY_ID
from udm.host.spark.stage_bucket import StageBucket
from udm.host.spark.stages import Stage, plan_stages
from udm.host.spark.stream_buckets import salt_column
from udm.host.spark.stream_wire import (
    ALL_STAGES,
    BROADCAST,
    END_KIND,
    IN_ARROW,
    NULL_TICK,
    ROUTE_LATER,
    STREAM_RESULT_DDL,
    UNROUTABLE,
    WIRE_DDL,
    WIRE_FIELDS,
    WIRE_INTS,
    stage_width,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = ["route_graph", "run_staged", "stream_stages"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)


def stream_stages(spec: QuerySpec, n: int) -> list[Stage] | None:
    """The stages of a graph on streaming, or None when it runs as one operator (one partitioning valid
    for the whole graph, one bucket asked for, or a plan that is one stage anyway)."""
    if n <= 1:
        return None
    stages = plan_stages(spec, split=True)
    return stages if len(stages) > 1 else None


def _processor_class() -> type:
    """The per-stage `StatefulProcessor`, built on first use (importing this module imports no pyspark)."""
    from pyspark.sql.streaming import StatefulProcessor

    class _StageProcessor(StatefulProcessor):
        """One bucket of one stage: Spark's side of `udm.host.spark.stage_bucket.StageBucket` (its state
        in Spark's state store, the rows passing through to later operators)."""

        def __init__(self, stages: list[Stage], index: int, n: int, query_inputs: tuple[str, ...],
                     on_violation: str | None, per_key: bool = True, driver_keys: bool = False) -> None:
            self._logic = StageBucket(stages, index, n, query_inputs, on_violation, per_key=per_key,
                                      driver_keys=driver_keys)

        def init(self, handle: Any) -> None:
            self._store = _StageSparkStore(handle)

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                            ) -> Iterator[pd.DataFrame]:
            import pandas as pd


            frames = list(rows)
            pdf = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
            table = pa.Table.from_pandas(pdf, schema=IN_ARROW, preserve_index=False)

            for c in WIRE_INTS:  # NULL_TICK back to null
                col = table.column(c)
                table = table.set_column(table.column_names.index(c), c,
                                         pc.if_else(pc.equal(col, NULL_TICK), None, col))
            try:
                out = self._logic.call(int(key[0]), table, self._store)
            except ValueError as e:  # a checkpoint of another layout (semantics-notes 60)
                raise UdmError(str(e)) from None
            yield out.frame()

        def close(self) -> None:
            pass

    return _StageProcessor


class _StageSparkStore:
    """`udm.host.spark.stage_bucket.StageStore` over a stage bucket's ``transformWithStateInPandas`` state:
    the whole-bucket ``engine`` and ``exchange`` ValueStates (the names of streaming layout 4, so that an
    older checkpoint is recognised) and the per-key MapStates and index."""

    def __init__(self, handle: Any) -> None:
        self._whole = handle.getValueState("engine", "snapshot binary, cti bigint")
        self._aux = handle.getValueState("exchange", "blob binary")
        self._keys = SparkStore(handle.getMapState("engines", "key string", "snapshot binary"),
                                handle.getMapState("ids", "id string", "key string, re bigint"),
                                handle.getValueState("index", "blob binary"))

    def get_whole(self) -> tuple[bytes, int | None] | None:
        if not self._whole.exists():
            return None
        snap, cti = self._whole.get()
        return bytes(snap), (None if cti is None else int(cti))

    def put_whole(self, snapshot: bytes, cti: int | None) -> None:
        self._whole.update((snapshot, cti))

    def get_aux(self) -> bytes | None:
        return bytes(self._aux.get()[0]) if self._aux.exists() else None

    def put_aux(self, blob: bytes) -> None:
        self._aux.update((blob,))

    def get_slab(self, n: int) -> bytes | None:
        return self._keys.get_slab(n)

    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        return self._keys.all_slabs()

    def put_slab(self, n: int, blob: bytes) -> None:
        self._keys.put_slab(n, blob)

    def drop_slab(self, n: int) -> None:
        self._keys.drop_slab(n)

    def get_id(self, id: str) -> tuple[str, int] | None:
        return self._keys.get_id(id)

    def put_id(self, id: str, key: str, re: int) -> None:
        self._keys.put_id(id, key, re)

    def drop_id(self, id: str) -> None:
        self._keys.drop_id(id)

    def get_index(self) -> bytes | None:
        return self._keys.get_index()

    def put_index(self, blob: bytes) -> None:
        self._keys.put_index(blob)


def route_graph(df: DataFrame, routing: dict[str, list[str]] | str | None, n: int) -> DataFrame:
    """`_route` for a query graph (`udm.host.spark.partition.graph_routing`): each input by its own fields
    (or by (input, id)); a retraction without its input's fields is unroutable."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    broadcast = (kind == "cti") | (kind == END_KIND)
    if n == 1 or routing is None:
        return df.withColumn("_bucket", F.when(broadcast, F.lit(BROADCAST)).otherwise(F.lit(0)))
    if routing == BY_ID:
        h = F.pmod(F.xxhash64("input", "id"), F.lit(n))
        return df.withColumn("_bucket", F.when(broadcast, F.lit(BROADCAST))
                             .when(kind.isin("insert", "retract") & F.col("id").isNotNull(), h).otherwise(F.lit(0)))
    assert isinstance(routing, dict)
    key_hash: Any = None
    has_keys: Any = None
    for name, fields in routing.items():
        is_name = F.col("input") == name
        h = F.pmod(F.xxhash64(*[key_value(f) for f in fields]), F.lit(n))
        ok = F.lit(True)
        for f in fields:
            ok = ok & F.get_json_object("payload", f"$.{f}").isNotNull()
        key_hash = F.when(is_name, h) if key_hash is None else key_hash.when(is_name, h)
        has_keys = F.when(is_name, ok) if has_keys is None else has_keys.when(is_name, ok)
    return df.withColumn(
        "_bucket",
        F.when(broadcast, F.lit(BROADCAST))
        .when(kind == "insert", F.coalesce(key_hash, F.lit(0)))
        .when((kind == "retract") & F.coalesce(has_keys, F.lit(False)), key_hash)
        .when(kind == "retract", F.lit(UNROUTABLE))
        .otherwise(F.lit(0)))


def run_staged(df: DataFrame, stages: list[Stage], n: int, query_inputs: tuple[str, ...],
               on_violation: str | None, per_key: bool = True) -> DataFrame:
    """The staged plan over ``df`` (normalized element rows with ``input``, ``_seq`` and, from ``udm run``,
    ``_bucket`` and ``_stage`` already set); returns `STREAM_RESULT_DDL` rows. ``per_key``: a keyed stage
    keeps one engine per key value (`udm.host.spark.stage_bucket`, semantics-notes 59); False keeps one per
    stage bucket (the benchmark's comparison)."""
    from pyspark.sql import functions as F


    # each query-input row's key in its stage, as the `udm run` driver named it (`stream_files.graph_routes`)
    driver_keys = "_key" in df.columns
    if "_stage" not in df.columns:  # a DataFrame-API stream: each row to every stage reading its input
        readers: dict[str, list[int]] = {}
        for s in stages:
            for x in s.inputs:
                if x in query_inputs:
                    readers.setdefault(x, []).append(s.index)
        which: Any = None
        for x, idx in readers.items():
            arr = F.array(*[F.lit(i) for i in idx])
            which = F.when(F.col("input") == x, arr) if which is None else which.when(F.col("input") == x, arr)
        kind = F.col("kind")
        df = df.withColumn("_stage", F.when(kind == END_KIND, F.array(F.lit(ALL_STAGES))).otherwise(
            F.coalesce(which, F.array(F.lit(0))))).withColumn("_stage", F.explode("_stage"))
        if "_bucket" not in df.columns:
            first = stages[0]
            df = route_graph(df, first.routing, stage_width(first, n))
            df = df.withColumn("_bucket", F.when((F.col("_stage") > 0) & ~kind.isin("cti", END_KIND),
                                                 F.lit(ROUTE_LATER)).otherwise(F.col("_bucket")))
    df = df.select(F.lit("el").alias("stream"), *[F.col(c) for c in ELEMENT_COLUMNS],
                   *[F.lit(None).cast("string").alias(c) for c in ("reason", "element")],
                   F.col("_seq").cast("bigint").alias("udm_seq"), F.col("input").alias("udm_input"),
                   F.col("_stage").cast("bigint").alias("udm_stage"),
                   F.col("_bucket").cast("bigint").alias("udm_route"), F.lit(None).cast("bigint").alias("udm_src"),
                   (F.col("_key") if driver_keys else F.lit(None)).cast("string").alias("udm_key"))
    for stage in stages:
        w = stage_width(stage, n)
        route = F.col("udm_route")
        mine = (F.col("stream") == "el") & F.col("udm_stage").isin(stage.index, ALL_STAGES)
        targets = (F.when(mine & (route == BROADCAST), F.sequence(F.lit(0), F.lit(w - 1)))
                   .when(mine & (route >= 0), F.array(F.pmod(route, F.lit(w))))
                   .when(mine, F.array(F.lit(0)))  # UNROUTABLE: dead-lettered by bucket 0
                   .otherwise(F.array(F.pmod(F.xxhash64("udm_input", "udm_seq", "udm_src"), F.lit(w)))))
        df = df.select(*[F.coalesce(F.col(c), F.lit(NULL_TICK)).alias(c) if c in WIRE_INTS else F.col(c)
                         for c, _ in WIRE_FIELDS], F.explode(targets).alias("udm_bucket"))
        # one shuffle partition per stage bucket (`udm.host.spark.stream_buckets`, semantics-notes 50)
        df = df.withColumn("udm_salt", salt_column(w))
        processor = _processor_class()(stages, stage.index, n, query_inputs, on_violation, per_key, driver_keys)
        df = df.groupBy("udm_bucket", "udm_salt").transformWithStateInPandas(
            statefulProcessor=processor, outputStructType=WIRE_DDL, outputMode="Append", timeMode="None")
    cols = [c.split(" ")[0] for c in STREAM_RESULT_DDL.split(", ")]
    return df.where(F.col("stream") != "el").select(
        *[F.col("udm_src").alias("bucket") if c == "bucket" else F.col("udm_seq").alias("seq") if c == "seq"
          else F.col(c) for c in cols])
