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

import json
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.query.spec import QuerySpec
from udm.host.spark.partition import BY_ID
from udm.host.spark.stages import Stage, plan_stages
from udm.host.spark.stream_buckets import salt_column
from udm.host.temporal.strict import canonical_json

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = ["ALL_STAGES", "ROUTE_LATER", "SINK_STAGE", "T_KIND", "WIRE_DDL", "id_bucket", "key_bucket",
           "run_staged", "stage_width", "stream_stages"]

#: ``udm_stage`` of control rows (end of input, T) that every stage consumes.
ALL_STAGES = -1
#: ``udm_stage`` of result rows on their way to the sink.
SINK_STAGE = 1 << 30
#: ``udm_route`` of a query-input row the first operator routes (a DataFrame-API row for a later stage).
ROUTE_LATER = -3
#: ``kind`` of the control row carrying T (semantics-notes 2) to every engine.
T_KIND = "_t_end"

#: The rows between operators: the result columns of `STREAM_RESULT_DDL` (``udm_src`` is its ``bucket``,
#: ``udm_seq`` its ``seq``) plus what an element on its way needs (``udm_key``: its key in a keyed stage,
#: named by the ``udm run`` driver or the producing stage, semantics-notes 59).
WIRE_DDL = ("stream string, kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, "
            "line bigint, error string, raw string, reason string, element string, udm_seq bigint, "
            "udm_input string, udm_stage bigint, udm_route bigint, udm_src bigint, udm_key string")
_WIRE_FIELDS = [c.split(" ") for c in WIRE_DDL.split(", ")]
_INTS = [name for name, typ in _WIRE_FIELDS if typ == "bigint"]
_IN_ARROW = pa.schema([(name, pa.int64() if typ == "bigint" else pa.string()) for name, typ in _WIRE_FIELDS]
                      + [("udm_bucket", pa.int64())])
_NEG = -(2**63)


def stream_stages(spec: QuerySpec, n: int) -> list[Stage] | None:
    """The stages of a graph on streaming, or None when it runs as one operator (one partitioning valid
    for the whole graph, one bucket asked for, or a plan that is one stage anyway)."""
    if n <= 1:
        return None
    stages = plan_stages(spec, split=True)
    return stages if len(stages) > 1 else None


def stage_width(stage: Stage, n: int) -> int:
    """How many buckets ``stage`` runs in: ``n``, or one when it has no partitioning."""
    return n if stage.routing is not None else 1


def key_bucket(payload: Any, fields: list[str], n: int) -> int:
    """A keyed row's bucket: its fields' JSON values, numbers by value (a join matches 1 and 1.0). The
    driver (`udm.host.spark.stream_files`) and the producing stages use this one hash, so rows that must
    meet do, whichever side they come from."""
    values = [payload.get(k) if isinstance(payload, dict) else None for k in fields]
    values = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in values]
    return zlib.crc32(canonical_json(values).encode()) % n


def id_bucket(name: str, id: str, n: int) -> int:
    """A row's bucket in a stage that goes by (input, id)."""
    return zlib.crc32(json.dumps([name, id]).encode()) % n


def _route_of(routing: Any, name: str, n: int, kind: str | None, id: str | None, payload: Any) -> int:
    """The bucket of an element of stream ``name`` in a stage with ``routing`` (no state: a retraction
    goes by the key fields it repeats, or is `UNROUTABLE`)."""
    from udm.host.spark.streaming import BROADCAST, UNROUTABLE

    if kind == "cti":
        return BROADCAST
    if routing is None or n == 1 or kind not in ("insert", "retract"):
        return 0
    if routing == BY_ID:
        return id_bucket(name, id, n) if id is not None else 0
    fields = routing[name]
    if kind == "retract" and not (isinstance(payload, dict) and all(f in payload for f in fields)):
        return UNROUTABLE
    return key_bucket(payload, fields, n)


def _processor_class() -> type:
    """The per-stage `StatefulProcessor`, built on first use (importing this module imports no pyspark)."""
    from pyspark.sql.streaming import StatefulProcessor

    class _StageProcessor(StatefulProcessor):
        """One bucket of one stage: Spark's side of `udm.host.spark.stage_bucket.StageBucket` (its state
        in Spark's state store, the rows passing through to later operators)."""

        def __init__(self, stages: list[Stage], index: int, n: int, query_inputs: tuple[str, ...],
                     on_violation: str | None, per_key: bool = True, driver_keys: bool = False) -> None:
            from udm.host.spark.stage_bucket import StageBucket

            self._logic = StageBucket(stages, index, n, query_inputs, on_violation, per_key=per_key,
                                      driver_keys=driver_keys)

        def init(self, handle: Any) -> None:
            self._store = _StageSparkStore(handle)

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                            ) -> Iterator[pd.DataFrame]:
            import pandas as pd
            import pyarrow.compute as pc

            from udm.host.errors import UdmError

            frames = list(rows)
            pdf = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
            table = pa.Table.from_pandas(pdf, schema=_IN_ARROW, preserve_index=False)
            from udm.host.spark.streaming import NULL_TICK

            for c in _INTS:  # NULL_TICK back to null
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
        from udm.host.spark.streaming import _SparkStore

        self._whole = handle.getValueState("engine", "snapshot binary, cti bigint")
        self._aux = handle.getValueState("exchange", "blob binary")
        self._keys = _SparkStore(handle.getMapState("engines", "key string", "snapshot binary"),
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

    def get_engine(self, key: str) -> bytes | None:
        return self._keys.get_engine(key)

    def put_engine(self, key: str, snapshot: bytes) -> None:
        self._keys.put_engine(key, snapshot)

    def drop_engine(self, key: str) -> None:
        self._keys.drop_engine(key)

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


class _Rows:
    """Output wire rows, built column by column (ints as pandas ``Int64``: nothing becomes a float)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {name: [] for name, _ in _WIRE_FIELDS}

    def add(self, **values: Any) -> None:
        for c, lst in self.cols.items():
            lst.append(values.get(c))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: (pd.array(self.cols[name], dtype="Int64") if typ == "bigint"
                                    else pd.array(self.cols[name], dtype=object)) for name, typ in _WIRE_FIELDS})


def _merge(part: pa.Table, latest: dict[int, int], producers: int, keep: tuple[str, ...] = ()) -> pa.Table:
    """One micro-batch of an exchange stream as the consumer feeds it (module doc): ``latest`` (the CTI of
    each producing bucket so far, and ``-1``: the minimum fed so far) is updated in place. Rows are taken
    in each producer's order, interleaved by the CTI that producer had reached (as `merge_exchange`).
    Returns the element columns and ``keep``."""
    from udm.host.spark.convert import ELEMENT_COLUMNS

    src = part.column("udm_src").to_pylist()
    seqs = part.column("udm_seq").to_pylist()
    kinds = part.column("kind").to_pylist()
    ts = part.column("t").to_pylist()
    epoch: dict[int, int] = {}
    keyed = []
    for i in sorted(range(part.num_rows), key=lambda i: (src[i], seqs[i])):
        b = src[i]
        e = max(epoch.get(b, latest.get(b, _NEG)), ts[i] if kinds[i] == "cti" and ts[i] is not None else _NEG)
        epoch[b] = e
        keyed.append((e, b, seqs[i], i))
    keyed.sort()
    low = latest.get(-1, _NEG)
    take: list[int] = []
    new_t: list[int | None] = []
    for _, b, _, i in keyed:
        if kinds[i] != "cti":
            take.append(i)
            new_t.append(ts[i])
            continue
        if ts[i] is not None and ts[i] > latest.get(b, _NEG):
            latest[b] = ts[i]
        now = min(latest.get(p, _NEG) for p in range(producers))
        if now > low:
            low = now
            take.append(i)
            new_t.append(now)
    latest[-1] = low
    merged = part.take(pa.array(take, pa.int64())).select([*ELEMENT_COLUMNS, *keep])
    return merged.set_column(merged.column_names.index("t"), "t", pa.array(new_t, pa.int64()))


def run_staged(df: DataFrame, stages: list[Stage], n: int, query_inputs: tuple[str, ...],
               on_violation: str | None, per_key: bool = True) -> DataFrame:
    """The staged plan over ``df`` (normalized element rows with ``input``, ``_seq`` and, from ``udm run``,
    ``_bucket`` and ``_stage`` already set); returns `STREAM_RESULT_DDL` rows. ``per_key``: a keyed stage
    keeps one engine per key value (`udm.host.spark.stage_bucket`, semantics-notes 59); False keeps one per
    stage bucket (the benchmark's comparison)."""
    from pyspark.sql import functions as F

    from udm.host.spark.convert import ELEMENT_COLUMNS
    from udm.host.spark.streaming import BROADCAST, END_KIND, NULL_TICK, STREAM_RESULT_DDL

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
            from udm.host.spark.streaming import _route_graph

            first = stages[0]
            df = _route_graph(df, first.routing, stage_width(first, n))
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
        df = df.select(*[F.coalesce(F.col(c), F.lit(NULL_TICK)).alias(c) if c in _INTS else F.col(c)
                         for c, _ in _WIRE_FIELDS], F.explode(targets).alias("udm_bucket"))
        # one shuffle partition per stage bucket (`udm.host.spark.stream_buckets`, semantics-notes 50)
        df = df.withColumn("udm_salt", salt_column(w))
        processor = _processor_class()(stages, stage.index, n, query_inputs, on_violation, per_key, driver_keys)
        df = df.groupBy("udm_bucket", "udm_salt").transformWithStateInPandas(
            statefulProcessor=processor, outputStructType=WIRE_DDL, outputMode="Append", timeMode="None")
    cols = [c.split(" ")[0] for c in STREAM_RESULT_DDL.split(", ")]
    return df.where(F.col("stream") != "el").select(
        *[F.col("udm_src").alias("bucket") if c == "bucket" else F.col("udm_seq").alias("seq") if c == "seq"
          else F.col(c) for c in cols])
