"""The Structured Streaming path: the local engine (`QueryRunner`) per key bucket, its state in Spark's
state store, driven by ``transformWithStateInPandas``.

Plan of `run_stream` (a streaming DataFrame in, a streaming DataFrame out):

1. every element gets a ``_bucket``: a hash of the query's partition keys (`partition_keys`) for
   inserts and for retractions that repeat the key fields (a streaming retraction cannot look up its
   insert's bucket: see below); ``-1`` means *every bucket* and is used for CTIs (and control rows),
   which are copied to each bucket so every engine sees the stream's punctuation;
2. ``groupBy(bucket, salt).transformWithStateInPandas(...)`` (the salt gives each bucket a shuffle
   partition, so a task, of its own: `udm.host.spark.stream_buckets`): for each bucket with input in a micro-batch,
   the processor feeds the micro-batch's elements in physical order (``line`` is the sequence number:
   Spark does not keep row order across the shuffle) and emits what they produced. A keyed linear query
   keeps its state per key value (`_keyed_processor_class`, `udm.host.spark.key_state`: engines of the keys
   first seen together, semantics-notes 78, in slabs of a MapState, an index of due times; a micro-batch
   loads only the engines of the keys it touches and the engines due, semantics-notes 41; a keyed query graph
   likewise, semantics-notes 52); keyless queries and other graphs
   keep the bucket's one engine in a `ValueState` (the pickled `QueryRunner.snapshot`). Either is in the
   RocksDB state store, checkpointed by Spark;
3. the result rows say which stream they belong to: ``out`` (an output element), ``dead`` (a dead
   letter: line, reason, element JSON), ``cti`` (the bucket's output CTI so far) or ``stats`` (a JSON
   payload: dead letters by category in this call; ``T``, the largest finite time the bucket's engine
   reached, and ``truncated_at``, both of semantics-notes 2). Output ids are
   prefixed with the bucket. The stream's output CTI is the minimum over all buckets' CTIs; every input
   CTI reaches every bucket, so a micro-batch holding one reports all of them (`combine_ctis`).

A query graph with no single valid partitioning is cut into stages (`udm.host.spark.stages`) and runs
as one operator per stage, chained in the same query (`udm.host.spark.stream_stages`, semantics-notes 39).

Retractions: the batch path routes a retraction after the latest insert of its id with a window over
the whole input; a stream cannot. ``udm run --engine spark-streaming`` routes on the driver, where the
file is read (`udm.host.spark.stream_files`), and passes ``_bucket`` in. A streaming DataFrame without
``_bucket`` routes retractions by the group-key fields of their payload; one that lacks them is
dead-lettered with that reason (never sent to a bucket where it would look like an unknown id).

Sources without CTIs: with ``ctis_from_watermark=True`` the input must carry an event-time watermark
(``withWatermark``); the processor runs in ``EventTime`` mode, feeds ``cti(watermark)`` (ms → µs ticks,
the `convert` convention) before each bucket's elements, and keeps an event-time timer per bucket so
buckets without new input still advance. Elements behind it follow ``on_violation`` and are counted.

Nulls: time columns travel as int64 with `NULL_TICK` for null, because Spark hands pandas nullable
int64 columns as float64 and ``INF`` (2**63-1) does not survive a float.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from udm.host.engine import QueryRunner
from udm.host.engine.common import DeadLetter
from udm.host.errors import UdmError
from udm.host.io.batch import ElementBatch
from udm.host.model.graph import resolve
from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import QuerySpec
from udm.host.query.runners import make_runner
from udm.host.spark.convert import ELEMENT_COLUMNS, normalize_elements
from udm.host.spark.graph import is_graph
from udm.host.spark.key_state import KeyedBucket
from udm.host.spark.key_store import SparkStore
from udm.host.spark.partition import graph_routing, partition_keys
from udm.host.spark.rows import dead_rows, output_rows, with_struct_payloads
from udm.host.spark.session import ROCKSDB_PROVIDER, require_spark
from udm.host.spark.stream_buckets import salt_column
from udm.host.spark.stream_order import partition_cti_order, with_source_order
from udm.host.spark.stream_stages import route_graph, run_staged, stream_stages
from udm.host.spark.stream_wire import (
    BROADCAST,
    END_KIND,
    NULL_TICK,
    STREAM_RESULT_DDL,
    TICK_KIND,
    UNROUTABLE,
    unroutable_reason,
)
from udm.host.spark.tables import table_inputs
from udm.host.temporal.elements import Cti

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = [
    "combine_ctis",
    "elements_in",
    "run_stream",
]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)


_TIME_COLUMNS = ("le", "re", "re_new", "t", "line")
_RESULT_FIELDS = [c.split(" ") for c in STREAM_RESULT_DDL.split(", ")]
_STATE_DDL = "snapshot binary, cti bigint"
#: What each bucket's call receives: the element columns, ``udm_seq`` (physical order), ``udm_route``
#: (the routing decision: a bucket, `BROADCAST` or `UNROUTABLE`) and the ``udm_bucket`` it was sent to.
_INPUT_ARROW = pa.schema([(c, pa.int64() if c in ("le", "re", "re_new", "t", "line") else pa.string())
                          for c in ELEMENT_COLUMNS]
                         + [("udm_seq", pa.int64()), ("udm_route", pa.int64()), ("udm_bucket", pa.int64())])
#: The same for a query graph: plus ``udm_input``, the input each element belongs to.
_GRAPH_INPUT_ARROW = _INPUT_ARROW.append(pa.field("udm_input", pa.string()))
#: The same for a keyed linear query fed by the `udm run` driver: plus ``udm_key``, each row's key.
_KEYED_INPUT_ARROW = _INPUT_ARROW.append(pa.field("udm_key", pa.string()))


_NO_LINE = ("a streaming element DataFrame needs a 'line' column (its sequence number: Spark keeps no row order "
            "across the shuffle) or order= naming its per-partition order columns (e.g. order=('file', 'line') "
            "or order=('partition', 'offset')); it has ")


def _emit_rows(bucket: int, out: list[Any], dead: list[Any], cti: int | None,
               stats: dict[str, Any] | None = None, keyed: list[tuple[str, Any]] | None = None) -> pd.DataFrame:
    """One pandas frame of result rows (nullable ints as pandas ``Int64``, so nothing becomes float).
    ``keyed``: output of per-key engines, ``(id prefix, element)`` each (`udm.host.spark.key_state`)."""
    import pandas as pd

    cols: dict[str, list[Any]] = {name: [] for name, _ in _RESULT_FIELDS}

    def row(**values: Any) -> None:
        for c, lst in cols.items():
            lst.append(values.get(c))

    seq = 0
    for r in output_rows(bucket, out):
        row(stream="out", bucket=bucket, seq=seq, **r)
        seq += 1
    for prefix, el in keyed or ():
        for r in output_rows(0, [el]):
            r["id"] = f"{prefix}.{el.id}"
            row(stream="out", bucket=bucket, seq=seq, **r)
            seq += 1
    for dl in dead:  # (a dead letter's input, in a multi-input query, travels in ``payload``)
        for r in dead_rows([dl]):
            row(stream="dead", bucket=bucket, seq=seq, **r, payload=getattr(dl, "input", None))
            seq += 1
    if cti is not None:
        row(stream="cti", kind="cti", t=cti, bucket=bucket, seq=seq)
    if stats:
        row(stream="stats", payload=json.dumps(stats), bucket=bucket, seq=seq + 1)
    frame = {name: (pd.array(cols[name], dtype="Int64") if typ == "bigint" else pd.array(cols[name], dtype=object))
             for name, typ in _RESULT_FIELDS}
    return pd.DataFrame(frame)


def _processor_class() -> type:
    """The `StatefulProcessor` subclass, built on first use so that importing this module does not
    import pyspark."""
    from pyspark.sql.streaming import StatefulProcessor

    class _EngineProcessor(StatefulProcessor):
        """One engine per bucket; its snapshot is the bucket's only state (keyless queries and graphs)."""

        #: whether handleInputRows turns the payload texts into a struct column before `_run`
        struct_payloads = True
        #: the columns handleInputRows hands `_run` (a linear query's)
        _input_arrow = _INPUT_ARROW

        def __init__(self, spec_json: dict[str, Any], on_violation: str | None, keys: list[str],
                     watermark_ctis: bool, graph: bool = False) -> None:
            self._graph = graph
            self._spec_json = spec_json
            self._on_violation = on_violation
            self._keys = keys
            self._watermark_ctis = watermark_ctis
            self._bound: BoundQuery | None = None
            #: input elements of the call under way (`elements_in`), for the stats row
            self._elements_in = 0

        def init(self, handle: Any) -> None:
            self._handle = handle
            self._state = handle.getValueState("engine", _STATE_DDL)

        def _bound_query(self) -> BoundQuery:
            if self._bound is None:  # binding discovers the catalog: once per processor, not per call
                self._bound = build_plan(self._spec_json)
            return self._bound

        def _load(self) -> tuple[Any, int | None]:
            if self._state.exists():
                snap, cti = self._state.get()
                return QueryRunner.restore(bytes(snap), self._bound_query()), (None if cti is None else int(cti))
            return make_runner(self._bound_query(), self._on_violation), None

        def _watermark(self, timer_values: Any) -> int | None:
            if not self._watermark_ctis:
                return None
            wm = int(timer_values.getCurrentWatermarkInMs())
            return wm * 1000 if wm > 0 else None

        def _rearm(self, timer_values: Any, fired: int | None) -> None:
            """One event-time timer just past the current watermark, so the bucket is called (and its
            CTI advanced) whenever the watermark moves, with or without new input. (A timer that just
            fired is already gone.)"""
            for ts in list(self._handle.listTimers()):
                if ts != fired:
                    self._handle.deleteTimer(ts)
            self._handle.registerTimer(max(int(timer_values.getCurrentWatermarkInMs()), 0) + 1)

        def _run(self, bucket: int, table: pa.Table | None, timer_values: Any, fired: int | None = None
                 ) -> Iterator[pd.DataFrame]:
            runner, cti = self._load()
            before = dict(runner.stats.reasons)
            out: list[Any] = []
            extra_dead: list[Any] = []
            wm = self._watermark(timer_values)
            if wm is not None:
                if self._graph:
                    for name in runner.inputs:
                        out += runner.process(Cti(wm), None, name)
                else:
                    out += runner.process(Cti(wm))
            if table is not None:
                kinds = table.column("kind").to_pylist()
                routes = table.column("udm_route").to_pylist()
                names = table.column("udm_input").to_pylist() if self._graph else [None] * len(kinds)

                def feed(lo: int, hi: int) -> list[Any]:
                    if not self._graph:
                        return list(runner.process_batch(ElementBatch.from_table(table.slice(lo, hi - lo))))
                    got: list[Any] = []
                    while lo < hi:  # runs of one input each
                        end = lo + 1
                        while end < hi and names[end] == names[lo]:
                            end += 1
                        part = with_struct_payloads(table.slice(lo, end - lo).select(list(ELEMENT_COLUMNS)))
                        got += runner.process_batch(ElementBatch.from_table(part), names[lo])
                        lo = end
                    return got

                start = 0
                for i, (kind, r) in enumerate(zip(kinds, routes, strict=True)):
                    if kind != END_KIND and kind != TICK_KIND and r != UNROUTABLE:
                        continue
                    if i > start:
                        out += feed(start, i)
                    if kind == END_KIND:
                        out += runner.finish()
                    elif kind == TICK_KIND:  # the feed's clock, not this executor's (semantics-notes 70)
                        now = table.column("t")[i].as_py()
                        runner.ctx.clock = lambda now=now: now
                        out += runner.tick()
                    else:
                        line = table.column("line")[i].as_py()
                        row = {c: table.column(c)[i].as_py() for c in ("kind", "id", "le", "re", "re_new")}
                        extra_dead.append(DeadLetter(line, unroutable_reason(self._keys), row,
                                                     input=names[i] if len(runner.inputs) > 1 else None))
                    start = i + 1
                if start < table.num_rows:
                    out += feed(start, table.num_rows)
            for el in out:
                if isinstance(el, Cti):
                    cti = el.t if cti is None else max(cti, el.t)
            dead = runner.take_dead_letters() + extra_dead
            reasons = {k: v - before.get(k, 0) for k, v in runner.stats.reasons.items() if v != before.get(k, 0)}
            if extra_dead:
                reasons["unroutable"] = len(extra_dead)
            stats: dict[str, Any] = {"reasons": reasons} if reasons else {}
            if runner.stats.truncated_at is not None:
                stats["truncated_at"] = runner.stats.truncated_at
            if runner.ctx.reached > NULL_TICK:  # the largest finite time this engine reached (semantics-notes 2)
                stats["T"] = runner.ctx.reached
            merges = runner.chattiness()
            if merges:  # lmerge's Theorem 1 counters so far (cumulative: the driver keeps each bucket's last)
                stats["lmerge"] = merges
            if self._elements_in:
                stats["in"] = self._elements_in
            self._state.update((runner.snapshot(), cti))
            if self._watermark_ctis:
                self._rearm(timer_values, fired)
            yield _emit_rows(bucket, out, dead, cti, stats)

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                            ) -> Iterator[pd.DataFrame]:
            import pandas as pd

            frames = list(rows)
            pdf = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
            schema = _GRAPH_INPUT_ARROW if self._graph else self._input_arrow
            parts = "udm_part" in pdf.columns  # a stream ordered per source partition (`stream_order`)
            if parts:
                schema = schema.append(pa.field("udm_part", pa.int64()))
            if "udm_blob" in pdf.columns:  # the bucket's rows as the `udm run` driver cut them (`_run_blobs`)
                table = pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in pdf["udm_blob"]])
                table = table.select(schema.names).cast(schema)
            else:
                table = pa.Table.from_pandas(pdf, schema=schema, preserve_index=False)
                for c in _TIME_COLUMNS:  # NULL_TICK back to null
                    col = table.column(c)
                    table = table.set_column(table.column_names.index(c), c,
                                             pc.if_else(pc.equal(col, NULL_TICK), None, col))
            table = table.sort_by("udm_seq")
            if parts:  # each CTI in place within its own partition (semantics-notes 44)
                table = partition_cti_order(table).drop_columns(["udm_part"])
            self._elements_in = elements_in(table, int(key[0]))
            # (a graph's inputs have payloads of their own shapes: per run, in _run)
            if not self._graph and self.struct_payloads:
                table = with_struct_payloads(table)
            yield from self._run(int(key[0]), table, timerValues)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any
                               ) -> Iterator[pd.DataFrame]:
            self._elements_in = 0
            yield from self._run(int(key[0]), None, timerValues, int(expiredTimerInfo.getExpiryTimeInMs()))

        def close(self) -> None:
            pass

    return _EngineProcessor


#: the state of the per-key layout (`udm.host.spark.key_state`); the whole-bucket layout's ``engine``
#: ValueState is looked for only to refuse an old checkpoint
_OLD_LAYOUT = ("a checkpoint of the whole-bucket state layout (udmkit before streaming layout 3): "
               "state is now kept per key; start from a new checkpoint directory")
#: the same for a query graph, kept per key since streaming layout 4 (semantics-notes 53)
_OLD_GRAPH_LAYOUT = ("a checkpoint of a query graph's whole-bucket state layout (udmkit before streaming layout 4): "
                     "a graph's state is now kept per key; start from a new checkpoint directory")


def _keyed_processor_class() -> type:
    """The processor of a keyed linear query or a keyed query graph: per-key engines in MapState slabs
    (`udm.host.spark.key_state`; a graph's ``routing`` gives each input's key fields, semantics-notes 52)."""
    base = _processor_class()

    class _KeyedProcessor(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, track_ids: bool = False, buckets: int = 0,
                     routing: dict[str, list[str]] | None = None, driver_keys: bool = False) -> None:
            super().__init__(*args)
            self._track_ids = track_ids
            if driver_keys:
                self._input_arrow = _KEYED_INPUT_ARROW
            self._buckets = buckets
            self._routing = routing

        def init(self, handle: Any) -> None:
            self._handle = handle
            self._old = handle.getValueState("engine", _STATE_DDL)
            self._store = SparkStore(handle.getMapState("engines", "key string", "snapshot binary"),
                                     handle.getMapState("ids", "id string", "key string, re bigint"),
                                     handle.getValueState("index", "blob binary"))

        def _run(self, bucket: int, table: pa.Table | None, timer_values: Any, fired: int | None = None
                 ) -> Iterator[pd.DataFrame]:
            def prepare(t: pa.Table) -> pa.Table:
                return with_struct_payloads(t.select(list(ELEMENT_COLUMNS)))

            def feed(runner: Any, part: pa.Table) -> list[Any]:
                return list(runner.process_batch(ElementBatch.from_table(part)))

            def unroutable(i: int) -> DeadLetter:
                assert table is not None
                row = {c: table.column(c)[i].as_py() for c in ("kind", "id", "le", "re", "re_new")}
                name = table.column("udm_input")[i].as_py() if graph else None
                keys = self._routing.get(str(name), []) if graph and self._routing else self._keys
                return DeadLetter(table.column("line")[i].as_py(), unroutable_reason(keys), row,
                                  input=name if graph and len(self._routing or ()) > 1 else None)

            graph = self._routing is not None
            if self._old.exists():
                raise UdmError(_OLD_GRAPH_LAYOUT if graph else _OLD_LAYOUT)
            try:
                kb = KeyedBucket(self._bound_query(), self._on_violation, self._routing or self._keys, self._store,
                                 bucket, track_ids=self._track_ids, buckets=self._buckets)
            except ValueError as e:
                raise UdmError(str(e)) from None
            # (a graph's rows are prepared per input by the bucket: `KeyedBucket.run`)
            res = kb.run(table, feed, self._watermark(timer_values), unroutable, END_KIND, UNROUTABLE, prepare)
            if self._elements_in:
                res.stats["in"] = self._elements_in
            if self._watermark_ctis:
                self._rearm(timer_values, fired)
            yield _emit_rows(bucket, [], res.dead, res.cti, res.stats, keyed=res.out)

    _KeyedProcessor.struct_payloads = False  # key_state reads the payload texts; it converts per key
    return _KeyedProcessor


def _route(df: DataFrame, keys: list[str], n: int) -> DataFrame:
    """Add ``_bucket`` where the caller did not (see the module doc)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    broadcast = (kind == "cti") | (kind == END_KIND)
    if n == 1:
        return df.withColumn("_bucket", F.when(broadcast, F.lit(BROADCAST)).otherwise(F.lit(0)))
    fields = [F.get_json_object("payload", f"$.{k}") for k in keys]
    key_hash = F.pmod(F.xxhash64(*fields), F.lit(n))
    has_keys = F.lit(True)
    for f in fields:
        has_keys = has_keys & f.isNotNull()
    return df.withColumn(
        "_bucket",
        F.when(broadcast, F.lit(BROADCAST))
        .when(kind == "insert", key_hash)
        .when((kind == "retract") & has_keys, key_hash)
        .when(kind == "retract", F.lit(UNROUTABLE))
        .otherwise(F.lit(0)))  # bad rows: bucket 0's engine dead-letters them


def run_stream(query: QuerySpec | BoundQuery | dict[str, Any] | str | Path,
               elements: DataFrame | Mapping[str, DataFrame], *,
               on_violation: str | None = None, buckets: int | None = None,
               ctis_from_watermark: bool = False, table: Any = None, per_key: bool = True,
               order: str | tuple[str, ...] | None = None) -> DataFrame:
    """Run ``query`` over a streaming element DataFrame; returns a streaming DataFrame of result rows
    (`STREAM_RESULT_DDL`: ``stream`` is ``out``, ``dead`` or ``cti``) to write with any sink.

    ``buckets``: how many key buckets (default ``spark.sql.shuffle.partitions``; keyless queries use
    one). It is part of the state's layout: a query restarted from its checkpoint must keep it (Spark keeps
    the checkpoint's partition count, semantics-notes 43).
    ``elements`` may carry ``_bucket`` (already routed, `BROADCAST` for CTIs). The query is bound on
    the driver first, so unknown UDMs or bad parameters fail before the stream starts.

    A query graph (SEMANTICS §10) takes ``{input name: streaming DataFrame}`` (or one with an ``input``
    column); its buckets follow `udm.host.spark.partition.graph_routing`, and a dead-letter row of a
    multi-input query carries its input's name in ``payload``. A graph with no single partitioning runs
    in stages (`udm.host.spark.stream_stages`; with ``ctis_from_watermark`` in one bucket): a later stage's
    input rows are routed on the executor, a retraction by the key fields it repeats.

    ``per_key``: a keyed linear query keeps its state per key value in Spark's state (a micro-batch
    reads only the engines of the keys it touches and the engines due, `udm.host.spark.key_state`; keys
    first seen together share an engine, semantics-notes 78); ``False`` keeps the
    whole-bucket layout of streaming layout 2 (one engine per bucket: the benchmark's comparison). A query
    graph whose routing gives every input key fields keeps one graph engine per key too (semantics-notes
    52); so does each keyed stage of a staged graph (semantics-notes 59); keyless queries, graphs routed by id
    or to one bucket and unkeyed stages keep one engine per bucket (per stage bucket).

    ``table``: the stream is a user's table, not elements — column options as for ``udm run`` and
    `udm.host.spark.batch.run_batch` (``{"time": "ts"}`` or ``{"start": .., "end": ..}``; a mapping of input
    name to options for a graph), read by `udm.host.spark.tables.table_elements_df` (its streaming rules:
    no row numbers, generated ids, no edge events). Such a stream has no CTIs: pass
    ``ctis_from_watermark=True`` over a source with ``withWatermark``.

    ``order``: a stream without a global ``line`` gives its order per source partition instead: an
    offset column, or (partition column, offset column) — file and line, Kafka partition and offset
    (`udm.host.spark.stream_order`, semantics-notes 44). `udm.host.spark.stream_sources` builds such
    streams from a directory of event files and from the rate source.
    """
    from pyspark.sql import functions as F


    require_spark(connect=True)  # transformWithStateInPandas talks to the state server over gRPC/protobuf
    spec = build_plan(query).spec
    if table is not None:
        elements = table_inputs(elements, table)
    if order is not None:
        elements = ({k: with_source_order(v, order) for k, v in elements.items()} if isinstance(elements, Mapping)
                    else with_source_order(elements, order))
    frame: DataFrame = next(iter(elements.values())) if isinstance(elements, Mapping) else elements
    spark = frame.sparkSession
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    if provider is None or "RocksDB" not in provider:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)

    graph = isinstance(elements, Mapping) or is_graph(spec)
    if "_blob" in frame.columns and not graph:
        return _run_blobs(frame, spec, on_violation, buckets, per_key)
    routing: dict[str, list[str]] | str | None = None
    if graph:
        names = tuple(resolve(spec).inputs)
        if isinstance(elements, Mapping):
            if sorted(elements) != sorted(names):
                raise UdmError(f"the query reads inputs {', '.join(names)}; got DataFrames for "
                               f"{', '.join(elements) or 'none'}")
            frames = [normalize_elements(elements[x], keep=("_bucket", "_seq", "_stage", "_part"))
                      .withColumn("input", F.lit(x))
                      for x in names]
            frame = frames[0]
            for fr in frames[1:]:
                frame = frame.unionByName(fr, allowMissingColumns=True)
        elif "input" not in frame.columns:
            if len(names) > 1:
                raise UdmError(f"the query reads inputs {', '.join(names)}: pass {{name: DataFrame}} or one "
                               "DataFrame with an 'input' column")
            frame = frame.withColumn("input", F.lit(names[0]))
        routing = graph_routing(spec)
        keys = routing[names[0]] if isinstance(routing, dict) else []
        wanted = int(buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
        n = 1 if routing is None else wanted
        if routing is None and not ctis_from_watermark:
            stages = stream_stages(spec, wanted)
            if stages is not None:  # no one partitioning: a stage per key (`udm.host.spark.stream_stages`)
                if "line" not in frame.columns and "_seq" not in frame.columns:
                    raise UdmError(_NO_LINE + ", ".join(frame.columns))
                df = normalize_elements(frame, keep=("_bucket", "_seq", "_stage", "input", "_key"))
                if "_seq" not in frame.columns:
                    df = df.withColumn("_seq", F.col("line"))
                return run_staged(df, stages, wanted, names, on_violation or spec.on_violation, per_key)
    else:
        keys = partition_keys(spec)
        n = 1 if not keys else int(buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    if "line" not in frame.columns and "_seq" not in frame.columns:
        raise UdmError(_NO_LINE + ", ".join(frame.columns))
    df = normalize_elements(frame, keep=("_bucket", "_seq", "_part", "input") if graph
                            else ("_bucket", "_seq", "_part", "_key"))
    if "_bucket" not in frame.columns:
        df = route_graph(df, routing, n) if graph else _route(df, keys, n)
    if "_seq" not in frame.columns:
        df = df.withColumn("_seq", F.col("line"))
    # the key of each row in its bucket, as the `udm run` driver decided it (`stream_files._routes`)
    driver_keys = not graph and "_key" in frame.columns and "_bucket" in frame.columns
    # inside the operator no column name may start with "_": Spark hands pandas those as _1, _2, ...
    route = F.col("_route")
    df = df.withColumnRenamed("_bucket", "_route").withColumn("udm_bucket", F.explode(
        F.when(route == F.lit(BROADCAST), F.sequence(F.lit(0), F.lit(n - 1)))
        .when(route == F.lit(UNROUTABLE), F.array(F.lit(0)))  # bucket 0 dead-letters it with the reason
        .otherwise(F.array(route))))
    # one shuffle partition per bucket: group by (bucket, salt) (`udm.host.spark.stream_buckets`)
    df = df.select(*[F.coalesce(F.col(c), F.lit(NULL_TICK)).alias(c) if c in _TIME_COLUMNS else F.col(c)
                     for c in ELEMENT_COLUMNS],
                   F.col("_seq").cast("bigint").alias("udm_seq"), route.cast("bigint").alias("udm_route"),
                   F.col("udm_bucket").cast("bigint").alias("udm_bucket"),
                   *([F.col("input").alias("udm_input")] if graph else []),
                   *([F.col("_key").alias("udm_key")] if driver_keys else []),
                   *([F.col("_part").alias("udm_part")] if "_part" in df.columns else []),
                   salt_column(n).alias("udm_salt"))
    args = (spec.to_json_dict(), on_violation or spec.on_violation, keys, ctis_from_watermark, graph)
    # the id map (a state write per insert) only where a retraction may come without its key fields:
    # the `udm run` driver routes them by id, and one bucket takes them all; with several buckets a
    # DataFrame stream routes a retraction by its key fields (one without them is unroutable)
    # (the `udm run` driver names each row's key itself, ``_key``: no id map either)
    track_ids = not driver_keys and ("_bucket" in frame.columns or n == 1)
    if keys and not graph and per_key:  # state per key (`udm.host.spark.key_state`, semantics-notes 41)
        processor = _keyed_processor_class()(*args, track_ids=track_ids, buckets=n, driver_keys=driver_keys)
    elif graph and per_key and isinstance(routing, dict):  # a keyed graph: per key too (semantics-notes 52)
        processor = _keyed_processor_class()(*args, track_ids=track_ids, buckets=n, routing=routing)
    else:
        processor = _processor_class()(*args)
    return df.groupBy("udm_bucket", "udm_salt").transformWithStateInPandas(
        statefulProcessor=processor, outputStructType=STREAM_RESULT_DDL, outputMode="Append",
        timeMode="EventTime" if ctis_from_watermark else "None")


def _run_blobs(frame: DataFrame, spec: QuerySpec, on_violation: str | None, buckets: int | None,
               per_key: bool) -> DataFrame:
    """`run_stream` of a linear query's micro-batches already cut per bucket by the ``udm run`` driver
    (`udm.host.spark.stream_parts.bucket_blobs`: ``_bucket`` and ``_blob``, a bucket's rows as Arrow IPC).
    The buckets' calls get the same rows, in the same order, as from element rows routed by the driver
    (``_bucket`` and ``_key``), and keep the same state."""
    from pyspark.sql import functions as F

    keys = partition_keys(spec)
    n = 1 if not keys else int(buckets or int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions") or 1))
    df = frame.select(F.col("_bucket").cast("bigint").alias("udm_bucket"), F.col("_blob").alias("udm_blob"),
                      salt_column(n, "_bucket").alias("udm_salt"))
    args = (spec.to_json_dict(), on_violation or spec.on_violation, keys, False, False)
    processor = (_keyed_processor_class()(*args, track_ids=False, buckets=n, driver_keys=True) if keys and per_key
                 else _processor_class()(*args))
    return df.groupBy("udm_bucket", "udm_salt").transformWithStateInPandas(
        statefulProcessor=processor, outputStructType=STREAM_RESULT_DDL, outputMode="Append", timeMode="None")


def elements_in(table: pa.Table, bucket: int) -> int:
    """How many input elements of a micro-batch a bucket's rows stand for: its own rows, and the CTIs
    every bucket receives counted once (by bucket 0); control rows (`END_KIND`) are not elements. The
    stats rows carry it (``"in"``), so that a source read as whole files still counts its elements."""
    route = table.column("udm_route")
    own = pc.sum(pc.not_equal(route, BROADCAST)).as_py() or 0
    if bucket == 0:
        shared = pc.and_(pc.equal(route, BROADCAST), pc.fill_null(pc.equal(table.column("kind"), "cti"), False))
        own += pc.sum(shared).as_py() or 0
    return int(own)


def combine_ctis(ctis: dict[int, int], n: int) -> int | None:
    """The stream's output CTI from the buckets' CTIs reported in one micro-batch: their minimum, once
    all ``n`` buckets have reported (a bucket that did not report may still emit anything after its own
    last CTI)."""
    if len(ctis) < n:
        return None
    return min(ctis.values())

