"""The Spark batch path: the local engine (`QueryRunner`) run inside executors, one per bucket.

Algebraic UDAs on tumbling/hopping/cumulate windows first try the two-phase partial + final plan
(`udm.host.spark.algebraic`): one job, which validates its own input and, when the input is not simple
enough, says so instead of answering; only then does the engine path below run.

Engine path (one Spark job, never one Python call per window or per group; the input's small
partitions are coalesced first, `python_tasks`, since every task has a fixed cost):

1. every input element gets a ``_bucket``:
   - *key buckets* (the query has partition keys, `partition_keys`): an insert goes to the hash of its
     keys; a retraction goes to every bucket and the one holding its id's inserts keeps it (it need not
     carry the payload: `udm.host.spark.retract_route`). An id whose
     inserts hash to different buckets ("colliding": an id reused, live or not, under another key) cannot
     be judged by one bucket, so its elements, with every CTI, are first validated together by one
     engine running the query's first step (`_id_judge`); its rejections are final dead letters, and its
     accepted elements go to their key's bucket (a retraction to the bucket of the insert it applies to).
     That is SEMANTICS §1 "duplicate live id" across buckets;
   - *time ranges* (keyless query whose windows are fixed in time, `time_split`): the range of window
     starts is cut in ``buckets`` pieces; every element of an id goes to each range that needs any
     version of that id's lifetimes (all of them, so each range validates the id as the whole stream
     would), and each range keeps only the output of the windows starting in it and the dead letters
     of the elements it is the first range of;
   - otherwise one bucket;
   CTIs are copied into every bucket, so every engine sees the stream's punctuation; bad rows and
   retractions of unknown ids go to bucket 0, whose engine dead-letters them;
2. ``groupBy(_bucket).applyInArrow``: each Python call receives a whole bucket (many groups), sorts it
   by ``line`` (physical order), parses its payload texts in one call (`with_struct_payloads`) and walks
   it with one `QueryRunner`, then ends it with ``cti(T)`` (T =
   the largest finite time of the whole stream, so infinite lifetimes are cut where a single engine
   would cut them, semantics-notes 2) and `finish`;
3. output and dead letters come back as one DataFrame, split in two. Output ids are prefixed with the
   bucket (unique across buckets); per-bucket CTIs are dropped and one final ``cti(INF)`` is added,
   since bucket CTIs interleaved in one stream would not be non-decreasing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import reduce
from operator import add
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from udm.host.engine.common import NEG
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import QuerySpec, parse_query
from udm.host.query.runners import make_runner
from udm.host.spark.algebraic import INELIGIBLE, eligible_step, run_algebraic
from udm.host.spark.convert import ELEMENT_COLUMNS, normalize_elements
from udm.host.spark.graph import is_graph, run_graph_batch
from udm.host.spark.partition import bucket_groups, one_row, partition_keys, python_tasks, time_split
from udm.host.spark.results import DEAD_LETTER_DDL, OUTPUT_DDL, SparkRun, explain_failure
from udm.host.spark.retract_route import (
    everywhere,
    id_hash,
    ids_blob,
    ids_repeat,
    keep_own_retractions,
    orphans,
    spread,
)
from udm.host.spark.rows import dead_rows, output_rows, with_struct_payloads
from udm.host.spark.tables import table_inputs
from udm.host.temporal.elements import Insert, Retract
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from udm.host.spark.file_source import FileScan

__all__ = ["DEAD_LETTER_DDL", "OUTPUT_DDL", "SparkRun", "ids_repeat", "run_batch"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

_RESULT_DDL = f"stream string, {OUTPUT_DDL}, reason string, element string"
_FINAL_LINE = 1 << 62
_RESULT_ARROW = pa.schema([(name, pa.int64() if typ == "bigint" else pa.string())
                          for name, typ in (c.split(" ") for c in _RESULT_DDL.split(", "))])


def _result_table(cols: dict[str, list[Any]]) -> pa.Table:
    return pa.table(cols, schema=_RESULT_ARROW)


def _bucket_runner(spec_json: dict[str, Any], on_violation: str | None, t_end: int | None,
                   n_buckets: int, bounds: list[int] | None = None
                   ) -> Callable[[tuple[Any, ...], pa.Table], pa.Table]:
    """The function each bucket's Python call runs (a closure, pickled to the executors).

    ``bounds`` (time ranges): bucket ``b`` owns the windows with ``bounds[b-1] <= W.LE < bounds[b]``
    (open at both ends); rows carry ``_own``, true in the one bucket that reports their dead letters."""

    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        bucket = int(key[-1].as_py())  # (`bucket_groups`: _part, _bucket)
        table, unmatched = keep_own_retractions(table.sort_by("line"), report=bucket == 0)
        id_blob = None
        if "_idh" in table.column_names:  # the optimistic key routing's cross-bucket id check (run_batch)
            inserts = pc.fill_null(pc.equal(table.column("kind"), "insert"), False)
            h = pc.drop_null(pc.filter(table.column("_idh"), inserts)).to_numpy()
            id_blob = ids_blob(h)
        owned_lines: set[int] | None = None
        if "_own" in table.column_names:
            owned_lines = set(table.filter(pc.fill_null(table.column("_own"), False)).column("line").to_pylist())
        table = with_struct_payloads(table.select(list(ELEMENT_COLUMNS)))
        runner = make_runner(spec_json, on_violation)
        # T must be set before the stream's own cti(INF) (which truncates), so the batch is split there;
        # elements after a cti(INF) stay after it and are dead-lettered as violations.
        ends = pc.and_(pc.equal(table.column("kind"), "cti"), pc.greater_equal(table.column("t"), INF))
        hits = pc.indices_nonzero(pc.fill_null(ends, False))
        cut = hits[0].as_py() if len(hits) else table.num_rows
        out = list(runner.process_batch(ElementBatch.from_table(table.slice(0, cut))))
        reached = runner.ctx.reached  # T as this engine saw it, before the stream-wide T below
        if t_end is not None:
            # not as a cti(T): a step shifting lifetimes (alter_lifetime) would carry it past T, and a
            # window after it would materialize windows beyond T that one engine never makes
            runner.ctx.reached = max(reached, t_end)
        if cut < table.num_rows:
            out += runner.process_batch(ElementBatch.from_table(table.slice(cut)))
        out += runner.finish()
        lo = hi = None
        if bounds is not None:
            lo = bounds[bucket - 1] if bucket > 0 else None
            hi = bounds[bucket] if bucket < len(bounds) else None
        cols: dict[str, list[Any]] = {c: [] for c in _RESULT_ARROW.names}

        def row(**values: Any) -> None:
            for c, lst in cols.items():
                lst.append(values.get(c))

        def owned(el: Insert | Retract) -> bool:  # not a window another range owns (its output LE is W.LE)
            return (lo is None or el.le >= lo) and (hi is None or el.le < hi)

        for seq, r in enumerate(output_rows(bucket, out, owned if bounds is not None else None)):
            row(stream="out", line=seq * n_buckets + bucket, **r)
        keep = None if owned_lines is None else (
            lambda line: line in owned_lines if line is not None else bucket == 0)
        for r in dead_rows(runner.take_dead_letters(), keep):
            row(**r, stream="dead", kind=r["category"])
        if id_blob is not None:
            row(stream="ids", line=bucket, element=id_blob)
        if unmatched is not None:
            row(stream="unmatched", line=bucket, element=unmatched)
        if reached > NEG:  # (NEG: nothing seen)
            row(stream="T", line=bucket, t=reached, le=int(runner.stats.truncated_at is not None))
        return _result_table(cols)

    return run


def _id_judge(spec_json: dict[str, Any], on_violation: str | None) -> Callable[[tuple[Any, ...], pa.Table],
                                                                               pa.Table]:
    """Validate colliding ids (see the module doc) with the query's first step, which is where the
    engine validates input: its dead letters for those ids' elements are the engine's, since an id's
    validity depends only on that id's elements and the CTIs, all of which this call sees."""

    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        spec = parse_query(spec_json)
        first = spec.model_copy(update={"steps": spec.steps[:1]})
        table = table.sort_by("line")
        mine = set(table.filter(pc.not_equal(table.column("kind"), "cti")).column("line").to_pylist())
        runner = make_runner(first, on_violation)
        runner.process_batch(ElementBatch.from_table(table.select(list(ELEMENT_COLUMNS))))
        runner.finish()
        rows = [{**r, "stream": "dead", "kind": r["category"]}
                for r in dead_rows(runner.take_dead_letters(), lambda line: line in mine)]
        return _result_table({c: [r.get(c) for r in rows] for c in _RESULT_ARROW.names})

    return run


def _finish(spark: Any, result: DataFrame, n: int, keys: list[str], path: str, split: str) -> SparkRun | None:
    """Add the final ``cti(INF)``, run eagerly (persisted), split output from dead letters. None when the
    algebraic plan found its input not simple enough (its marker row is in the result)."""
    from pyspark.sql import functions as F

    final = one_row(spark, _RESULT_DDL, ("out", "cti", None, None, None, None, INF, None, _FINAL_LINE, None, None))
    result = result.unionByName(final).persist()
    try:
        # one job: materializes the persisted result and brings back its small rows (the plan's refusal,
        # the buckets' id hashes and T), which the checks after it read instead of running jobs of their own
        side = result.where(F.col("stream").isin("ids", "unmatched", "T") | (F.col("kind") == INELIGIBLE)).select(
            "stream", "kind", "line", "t", "le", "element").toArrow()
    except Exception:
        result.unpersist()
        raise
    if INELIGIBLE in side.column("kind").to_pylist():
        result.unpersist()
        return None
    out_cols = [c.split(" ")[0] for c in OUTPUT_DDL.split(", ")]
    output = result.where(F.col("stream") == "out").select(*out_cols)
    dead = result.where(F.col("stream") == "dead").select("line", "reason", "element",
                                                          F.col("kind").alias("category"))
    return SparkRun(output, dead, n, keys, result, path, split, side=side)


def _run_algebraic_path(spark: Any, spec: QuerySpec, df: DataFrame, n: int, scan: FileScan | None = None
                        ) -> SparkRun | None:
    from pyspark.sql import functions as F

    out = run_algebraic(spec, df, n, strict=False, scan=scan)
    result = out.select(F.lit("out").alias("stream"), "*", F.lit(None).cast("string").alias("reason"),
                        F.lit(None).cast("string").alias("element"))
    try:
        return _finish(spark, result, n, partition_keys(spec), "algebraic", "keys" if n > 1 else "single")
    except Exception as exc:
        raise explain_failure(exc) from None


def _key_routing(spec: QuerySpec, df: DataFrame, keys: list[str], n: int,
                 violation: str | None) -> tuple[DataFrame, DataFrame]:
    """(routed elements with ``_bucket``, the final dead letters of colliding ids' elements)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.col("kind")
    is_event = kind.isin("insert", "retract")
    key_hash = F.pmod(F.xxhash64(*[F.get_json_object("payload", f"$.{k}") for k in keys]), F.lit(n))
    by_id = Window.partitionBy("id")
    keyed = df.withColumn("_kb", F.when(kind == "insert", key_hash))
    keyed = keyed.withColumn("_coll", F.coalesce(is_event & (F.min("_kb").over(by_id) != F.max("_kb").over(by_id)),
                                                 F.lit(False)))
    judge_in = keyed.where(F.col("_coll") | (kind == "cti")).select(*ELEMENT_COLUMNS)
    judged = judge_in.groupBy(F.lit(0).alias("_g")).applyInArrow(_id_judge(spec.to_json_dict(), violation),
                                                                 _RESULT_DDL)
    rejected = judged.select(F.col("line").alias("_rline"), F.lit(True).alias("_rej"))
    kept = (keyed.join(F.broadcast(rejected), keyed["line"] == rejected["_rline"], "left")
            .where(~(F.col("_coll") & F.coalesce(F.col("_rej"), F.lit(False))))
            .drop("_rline", "_rej"))
    w = by_id.orderBy("line").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    follow = F.last(F.when(kind == "insert", F.col("_kb")), ignorenulls=True).over(w)
    routed = kept.withColumn("_bucket", F.when(kind == "insert", F.col("_kb"))
                             .when(kind == "retract", follow)).drop("_kb", "_coll")
    is_cti = kind == "cti"
    ctis = routed.where(is_cti).withColumn("_bucket", F.explode(F.sequence(F.lit(0), F.lit(n - 1))))
    routed = routed.where(~is_cti | kind.isNull()).withColumn(
        "_bucket", F.coalesce(F.col("_bucket"), F.lit(0))).unionByName(ctis)
    return routed, judged


def _optimistic_key_routing(df: DataFrame, keys: list[str], n: int, lost: list[int]) -> DataFrame:
    """Key buckets assuming no id has inserts in two buckets; each bucket reports the hashes of its insert
    ids (``_idh``), which `run_batch` checks afterwards: cheaper than shuffling every element by id first.
    A retraction goes to every bucket, the one holding its id's inserts keeps it; one of ``lost`` (an id
    no bucket holds) to bucket 0 (`udm.host.spark.retract_route`)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    key_hash = F.pmod(F.xxhash64(*[F.get_json_object("payload", f"$.{k}") for k in keys]), F.lit(n))
    ided = df.withColumn("_idh", id_hash(("id",), lost))
    return spread(ided, F.when(kind == "insert", key_hash), (kind == "cti") | everywhere(), n)


def _side_rows(run: SparkRun, stream: str) -> list[dict[str, Any]]:
    """The run's small rows of ``stream``, collected when the run was materialized (`_finish`)."""
    return [r for r in run.side.to_pylist() if r["stream"] == stream]


def _ids_cross_buckets(run: SparkRun) -> bool:
    """Whether some insert id hash was seen by two buckets of one run (its ``ids`` rows) — a reused id, or
    a 64-bit hash collision."""
    return ids_repeat([r["element"] for r in _side_rows(run, "ids")])


def _range_bounds(t_lo: int | None, t_end: int | None, size: int, n: int) -> list[int]:
    """Inner boundaries of the window-start ranges: equal slices of the stream's finite time span, each at
    least one window wide (a range narrower than its overlap would mostly recompute its neighbours)."""
    if t_lo is None or t_end is None or t_end <= t_lo:
        return []
    span = t_end - t_lo + 1
    m = max(1, min(n, span // size))
    width = -(-span // m)
    return [t_lo + r * width for r in range(1, m)]


def _time_routing(df: DataFrame, bounds: list[int], size: int) -> DataFrame:
    """Elements with ``_bucket`` (exploded: one row per range that needs it) and ``_own``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.col("kind")
    le, re, rn = F.col("le"), F.col("re"), F.col("re_new")
    hi = F.when(kind == "insert", re).when(kind == "retract", F.greatest(re, F.coalesce(rn, re)))
    ok = kind.isin("insert", "retract") & (le < F.lit(INF)) & (hi > le)
    by_id = Window.partitionBy("id")
    id_lo = F.min(F.when(ok, le)).over(by_id)
    id_hi = F.max(F.when(ok, hi)).over(by_id)

    def count(conds: list[Column]) -> Column:
        return reduce(add, [F.when(c, 1).otherwise(0) for c in conds], F.lit(0))

    # range r owns W.LE in [b_r, b_{r+1}) and needs the events overlapping [b_r, b_{r+1} - 1 + size)
    first = count([F.col("_lo") >= F.lit(b + size - 1) for b in bounds])
    last = count([F.col("_hi") > F.lit(b) for b in bounds])
    staged = (df.withColumn("_lo", F.when(kind.isin("insert", "retract"), id_lo))
              .withColumn("_hi", F.when(kind.isin("insert", "retract"), id_hi)))
    staged = staged.withColumn("_first", F.when(F.col("_lo").isNotNull(), first).otherwise(F.lit(0))) \
        .withColumn("_last", F.when(F.col("_lo").isNotNull(), last).otherwise(F.lit(0)))
    m = len(bounds) + 1
    staged = staged.withColumn("_last", F.when(kind == "cti", F.lit(m - 1)).otherwise(F.col("_last")))
    routed = staged.withColumn("_bucket", F.explode(F.sequence(F.col("_first"), F.col("_last"))))
    return routed.withColumn("_own", F.col("_bucket") == F.col("_first")).drop("_lo", "_hi", "_first", "_last")


def _true_end(run: SparkRun, t_end: int | None) -> int | None:
    """The T a single engine would have used, when it differs from ``t_end`` where it matters.

    ``t_end`` comes from a cheap pre-pass over every element, valid or not; semantics-notes 2 counts
    valid elements only. Each bucket reports the T its engine reached (valid elements and every CTI);
    their maximum is the single engine's T. Only a run that cut infinite lifetimes depends on it."""
    rows = _side_rows(run, "T")
    ts = [r["t"] for r in rows if r["t"] is not None]
    if not ts or not any(r["le"] for r in rows) or max(ts) == t_end:
        return None
    return max(ts)


def run_batch(query: QuerySpec | BoundQuery | dict[str, Any] | str | Path,
              elements: DataFrame | Mapping[str, DataFrame], *,
              on_violation: str | None = None, buckets: int | None = None,
              algebraic: bool | None = None, table: Any = None, scan: FileScan | None = None) -> SparkRun:
    """Run ``query`` over an element DataFrame on Spark; output CHT equals the local engine's.

    ``table``: the DataFrame is a user's table, not elements — column options as for ``udm run``
    (``{"time": "ts"}``, ``{"start": "a", "end": "b"}``, ``{"edge": "t", "key": ["k"]}``, ``id``, ``unit``;
    a `udm.host.io.table_options.TableOptions`, or a mapping of input name to options for a graph), read by
    `udm.host.spark.tables.table_elements_df`. `udm.host.spark.tables.typed_output` then gives the result
    with typed payload columns.

    ``buckets``: how many key buckets or time ranges (default: ``spark.sql.shuffle.partitions``); a
    keyless query that cannot be split by time (`time_split`) uses one.
    The query is bound on the driver first, so unknown UDMs or bad parameters fail before any job runs.
    The computation runs eagerly (and is persisted): engine failures (``on_violation: error``, a UDM
    breaking its contract) surface here as the engine's `UdmError`.

    ``algebraic``: ``None`` (default) takes the two-phase partial + final plan (`udm.host.spark.algebraic`)
    when the query and the input allow it, ``False`` never does.

    A query graph (several inputs, or steps that are not one chain: SEMANTICS §10) takes
    ``{input name: DataFrame}`` (or one DataFrame with an ``input`` column) and runs by
    `udm.host.spark.graph.run_graph_batch`; its dead letters have an ``input`` column.

    ``scan``: ``elements`` is that file read by `udm.host.spark.file_source.file_elements_df` (what
    ``udm run --engine spark`` does). The algebraic plan then reads the file's ranges inside its first
    phase, and the pre-pass over the input (the stream's T, whether it has retractions) is skipped
    where the scan's `InputFacts` answer it.
    """
    from pyspark.sql import functions as F

    spec = build_plan(query).spec  # bound on the driver: a bad query fails here, with the catalog's message
    if table is not None:
        elements = table_inputs(elements, table)
    if isinstance(elements, Mapping) or is_graph(spec):
        return run_graph_batch(spec, elements, on_violation=on_violation, buckets=buckets)
    spark = elements.sparkSession
    df = normalize_elements(elements).coalesce(python_tasks(spark))
    keys = partition_keys(spec)
    n = max(1, int(buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or 1)))

    if algebraic is not False and eligible_step(spec, holistic=True) is not None:
        alg = _run_algebraic_path(spark, spec, df, n if keys else 1, scan)
        if alg is not None:
            return alg

    size = None if keys or n == 1 else time_split(spec)
    facts = scan.facts if scan is not None else None
    if size is None and facts is not None and facts.infinite is False:
        # nothing to ask Spark: no lifetime to cut at T (`_true_end` runs again if a step made one)
        stats: Any = {"t_end": None}
    else:
        finite = [F.when(F.col(c) < F.lit(INF), F.col(c)) for c in ("le", "re", "re_new", "t")]
        kind = F.col("kind")
        aggs = [F.max(F.when(kind.isin("insert", "retract", "cti"), F.greatest(*finite))).alias("t_end")]
        if size is not None:
            aggs.append(F.min(F.when((kind == "insert") & (F.col("le") < F.lit(INF)), F.col("le"))).alias("t_lo"))
        stats = df.agg(*aggs).first()
        assert stats is not None
    t_end = stats["t_end"]
    violation = on_violation or spec.on_violation
    bounds: list[int] | None = None
    extra: DataFrame | None = None
    if keys and n > 1:
        fn = _bucket_runner(spec.to_json_dict(), violation, t_end, n)
        routed = _optimistic_key_routing(df, keys, n, [])
        try:
            run = _finish(spark, bucket_groups(routed, n).applyInArrow(fn, _RESULT_DDL), n, keys, "engine", "keys")
        except Exception as exc:
            raise explain_failure(exc) from None
        assert run is not None
        if not _ids_cross_buckets(run):
            lost = orphans([r["element"] for r in _side_rows(run, "unmatched")],
                           [r["element"] for r in _side_rows(run, "ids")])
            if lost:  # retractions of ids no bucket has inserts of: to bucket 0 (`udm.host.spark.retract_route`)
                run.unpersist()
                routed = _optimistic_key_routing(df, keys, n, lost)
                run = _finish_engine(spark, routed, None, spec, violation, t_end, n, keys, None, "keys")
            if (exact := _true_end(run, t_end)) is None:
                return run
            run.unpersist()  # cut at a T that only an invalid element reached: once more with the true T
            t_end = exact
            return _finish_engine(spark, routed, None, spec, violation, t_end, n, keys, None, "keys")
        run.unpersist()  # an id reused under another key: judge those ids together (module doc)
        routed, extra = _key_routing(spec, df, keys, n, violation)
        split = "keys"
    elif size is not None and (b := _range_bounds(stats["t_lo"], t_end, size, n)):
        bounds = b
        n = len(bounds) + 1
        routed = _time_routing(df, bounds, size)
        split = "time"
    else:
        n = 1
        routed = df.withColumn("_bucket", F.lit(0))
        split = "single"

    run = _finish_engine(spark, routed, extra, spec, violation, t_end, n, keys, bounds, split)
    if (exact := _true_end(run, t_end)) is not None:
        run.unpersist()  # cut at a T that only an invalid element reached: once more with the true T
        run = _finish_engine(spark, routed, extra, spec, violation, exact, n, keys, bounds, split)
    return run


def _finish_engine(spark: Any, routed: DataFrame, extra: DataFrame | None, spec: QuerySpec, violation: str,
                   t_end: int | None, n: int, keys: list[str], bounds: list[int] | None, split: str) -> SparkRun:
    fn = _bucket_runner(spec.to_json_dict(), violation, t_end, n, bounds)
    result = bucket_groups(routed, n).applyInArrow(fn, _RESULT_DDL)
    if extra is not None:
        result = result.unionByName(extra)
    try:
        run = _finish(spark, result, n, keys, "engine", split)
    except Exception as exc:
        raise explain_failure(exc) from None
    assert run is not None
    return run
