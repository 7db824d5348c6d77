"""The Spark batch path: the local engine (`QueryRunner`) run inside executors, one per key bucket.

Plan (one Spark job, never one Python call per window or per group):

1. the input element DataFrame gets a ``_bucket``: a hash of the query's partition keys
   (`partition_keys`) for inserts; a retraction follows the latest insert of its id (it need not carry
   the payload); CTIs are copied into every bucket, so every engine sees the stream's punctuation;
   bad rows and retractions of unknown ids go to bucket 0, whose engine dead-letters them;
2. ``groupBy(_bucket).applyInArrow``: each Python call receives a whole bucket (many groups), sorts it
   by ``line`` (physical order) and walks it with one `QueryRunner`, then ends it with ``cti(T)`` (T =
   the largest finite time of the whole stream, so infinite lifetimes are cut where a single engine
   would cut them, semantics-notes 2) and `finish`;
3. output and dead letters come back as one DataFrame, split in two. Output ids are prefixed with the
   bucket (unique across buckets); per-bucket CTIs are dropped and one final ``cti(INF)`` is added,
   since bucket CTIs interleaved in one stream would not be non-decreasing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.errors import ContractViolation, QuerySpecError, UdmError, ViolationError
from udm.host.query.plan import BoundQuery, bind
from udm.host.query.spec import QuerySpec, load_query, parse_query
from udm.host.spark.algebraic import eligible_step, is_not_eligible, run_algebraic
from udm.host.spark.convert import ELEMENT_COLUMNS, normalize_elements
from udm.host.spark.partition import partition_keys
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["DEAD_LETTER_DDL", "OUTPUT_DDL", "SparkRun", "run_batch"]

#: Output element columns (`ELEMENT_DDL` without the bad-row columns).
OUTPUT_DDL = "kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, line bigint"
#: Dead letters: the input line, the reason, and the element as JSON text (INTERFACES §1 record).
DEAD_LETTER_DDL = "line bigint, reason string, element string"
_RESULT_DDL = f"stream string, {OUTPUT_DDL}, reason string, element string"
_FINAL_LINE = 1 << 62
_RESULT_ARROW = pa.schema([(name, pa.int64() if typ == "bigint" else pa.string())
                          for name, typ in (c.split(" ") for c in _RESULT_DDL.split(", "))])


@dataclass
class SparkRun:
    """The result of `run_batch`: physical output elements and dead letters, both DataFrames (backed by
    one persisted computation; call `unpersist` when done)."""

    output: DataFrame
    dead_letters: DataFrame
    buckets: int
    keys: list[str]
    _result: DataFrame
    #: ``"engine"`` (one QueryRunner per key bucket) or ``"algebraic"`` (partial + final aggregation).
    path: str = "engine"

    def unpersist(self) -> None:
        self._result.unpersist()


def _spec_of(query: QuerySpec | BoundQuery | dict[str, Any] | str | Path) -> QuerySpec:
    if isinstance(query, BoundQuery):
        return query.spec
    if isinstance(query, QuerySpec):
        return query
    if isinstance(query, dict):
        return parse_query(query)
    if isinstance(query, (str, Path)):
        return load_query(query)
    raise QuerySpecError(f"run_batch: a query spec, dict or path is needed, got {type(query).__name__}")


def _bucket_runner(spec_json: dict[str, Any], on_violation: str | None, t_end: int | None,
                   n_buckets: int) -> Callable[[tuple[Any, ...], pa.Table], pa.Table]:
    """The function each bucket's Python call runs (a closure, pickled to the executors)."""

    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        from udm.host.engine import QueryRunner
        from udm.host.io.batch import ElementBatch
        from udm.host.temporal.elements import Cti, Insert, Retract

        bucket = int(key[0].as_py())
        table = table.sort_by("line").select(list(ELEMENT_COLUMNS))
        runner = QueryRunner(bind(parse_query(spec_json)), on_violation=on_violation)
        # cti(T) must precede the stream's own cti(INF) (after which it would be ignored), so the batch is
        # split there; elements after a cti(INF) stay after it and are dead-lettered as violations.
        ends = pc.and_(pc.equal(table.column("kind"), "cti"), pc.greater_equal(table.column("t"), INF))
        hits = pc.indices_nonzero(pc.fill_null(ends, False))
        cut = hits[0].as_py() if len(hits) else table.num_rows
        out = list(runner.process_batch(ElementBatch.from_table(table.slice(0, cut))))
        if t_end is not None:
            out += runner.process(Cti(t_end))
        if cut < table.num_rows:
            out += runner.process_batch(ElementBatch.from_table(table.slice(cut)))
        out += runner.finish()
        cols: dict[str, list[Any]] = {c: [] for c in ("stream", "kind", "id", "le", "re", "re_new", "t",
                                                       "payload", "line", "reason", "element")}

        def row(**values: Any) -> None:
            for c, lst in cols.items():
                lst.append(values.get(c))

        seq = 0
        for el in out:
            if isinstance(el, Insert):
                row(stream="out", kind="insert", id=f"{bucket}.{el.id}", le=el.le, re=el.re,
                    payload=json.dumps(el.payload, separators=(",", ":")), line=seq * n_buckets + bucket)
            elif isinstance(el, Retract):
                row(stream="out", kind="retract", id=f"{bucket}.{el.id}", le=el.le, re=el.re, re_new=el.re_new,
                    line=seq * n_buckets + bucket)
            else:
                continue  # bucket CTIs: see the module doc
            seq += 1
        for dl in runner.take_dead_letters():
            rec = dl.to_json()
            row(stream="dead", line=rec["line"], reason=rec["reason"],
                element=None if rec["element"] is None else json.dumps(rec["element"], separators=(",", ":")))
        return pa.table(cols, schema=_RESULT_ARROW)

    return run


def _explain(exc: Exception) -> UdmError:
    """A failed Spark job as the engine's one-line error (the Python traceback is in the message)."""
    text = str(exc)
    for cls in (ViolationError, ContractViolation, UdmError):
        marker = f"{cls.__name__}: "
        for line in text.splitlines():
            if marker in line:
                return cls(line.split(marker, 1)[1].strip())
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return UdmError(f"Spark job failed: {first}")


def _finish(spark: Any, result: DataFrame, n: int, keys: list[str], path: str) -> SparkRun:
    """Add the final ``cti(INF)``, run eagerly (persisted), split output from dead letters."""
    from pyspark.sql import functions as F

    final = spark.createDataFrame([("out", "cti", None, None, None, None, INF, None, _FINAL_LINE, None, None)],
                                  _RESULT_DDL)
    result = result.unionByName(final).persist()
    try:
        result.count()
    except Exception:
        result.unpersist()
        raise
    out_cols = [c.split(" ")[0] for c in OUTPUT_DDL.split(", ")]
    output = result.where(F.col("stream") == "out").select(*out_cols)
    dead = result.where(F.col("stream") == "dead").select("line", "reason", "element")
    return SparkRun(output, dead, n, keys, result, path)


def _run_algebraic_path(spark: Any, spec: QuerySpec, inserts: DataFrame, n: int) -> SparkRun | None:
    from pyspark.sql import functions as F

    out = run_algebraic(spec, inserts, n)
    result = out.select(F.lit("out").alias("stream"), "*", F.lit(None).cast("string").alias("reason"),
                        F.lit(None).cast("string").alias("element"))
    try:
        return _finish(spark, result, n, partition_keys(spec), "algebraic")
    except Exception as exc:
        if is_not_eligible(exc):
            return None
        raise _explain(exc) from None


def run_batch(query: QuerySpec | BoundQuery | dict[str, Any] | str | Path, elements: DataFrame, *,
              on_violation: str | None = None, buckets: int | None = None,
              algebraic: bool | None = None) -> SparkRun:
    """Run ``query`` over an element DataFrame on Spark; output CHT equals the local engine's.

    ``buckets``: how many key buckets (default: ``spark.sql.shuffle.partitions``); keyless queries use one.
    The query is bound on the driver first, so unknown UDMs or bad parameters fail before any job runs.
    The computation runs eagerly (and is persisted): engine failures (``on_violation: error``, a UDM
    breaking its contract) surface here as the engine's `UdmError`.

    ``algebraic``: ``None`` (default) takes the two-phase partial + final plan (`udm.host.spark.algebraic`)
    when the query and the input allow it, ``False`` never does.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spec = _spec_of(query)
    bind(spec)  # fail fast on the driver, with the catalog's message
    spark = elements.sparkSession
    df = normalize_elements(elements)
    keys = partition_keys(spec)
    n = 1 if not keys else int(buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or 1))

    finite = [F.when(F.col(c) < F.lit(INF), F.col(c)) for c in ("le", "re", "re_new", "t")]
    kind = F.col("kind")
    stats = df.agg(
        F.max(F.when(kind.isNotNull(), F.greatest(*finite))).alias("t_end"),
        F.count(F.when(kind == "retract", 1)).alias("retracts"),
        F.count(F.when(kind.isNull() | F.col("error").isNotNull(), 1)).alias("bad"),
        F.count(F.when((kind == "insert") & ((F.col("re") >= F.lit(INF)) | (F.col("re") <= F.col("le"))), 1))
        .alias("odd_inserts"),
        F.max(F.when(kind == "insert", F.col("line"))).alias("last_insert"),
        F.min(F.when(kind == "cti", F.col("line"))).alias("first_cti")).first()
    assert stats is not None
    t_end = stats["t_end"]
    has_retracts = bool(stats["retracts"])

    step = None if algebraic is False else eligible_step(spec)
    simple = (step is not None and not has_retracts and not stats["bad"] and not stats["odd_inserts"]
              and (stats["first_cti"] is None or stats["last_insert"] is None
                   or stats["first_cti"] > stats["last_insert"]))
    if simple:
        inserts = df.where(kind == "insert")
        n_ins = inserts.count()
        if inserts.select("id").distinct().count() == n_ins:
            alg = _run_algebraic_path(spark, spec, inserts, n)
            if alg is not None:
                return alg

    if n == 1:
        routed = df.withColumn("_bucket", F.lit(0))
    else:
        key_hash = F.pmod(F.xxhash64(*[F.get_json_object("payload", f"$.{k}") for k in keys]), F.lit(n))
        routed = df.withColumn("_bucket", F.when(F.col("kind") == "insert", key_hash))
        if has_retracts:
            w = (Window.partitionBy("id").orderBy("line")
                 .rowsBetween(Window.unboundedPreceding, Window.currentRow))
            follow = F.last(F.when(F.col("kind") == "insert", F.col("_bucket")), ignorenulls=True).over(w)
            routed = routed.withColumn("_bucket", F.when(F.col("kind") == "retract", follow)
                                       .otherwise(F.col("_bucket")))
        is_cti = F.col("kind") == "cti"
        ctis = routed.where(is_cti).withColumn("_bucket", F.explode(F.sequence(F.lit(0), F.lit(n - 1))))
        routed = routed.where(~is_cti | F.col("kind").isNull()).withColumn(
            "_bucket", F.coalesce(F.col("_bucket"), F.lit(0))).unionByName(ctis)

    violation = on_violation or spec.on_violation
    fn = _bucket_runner(spec.to_json_dict(), violation, t_end, n)
    result = routed.groupBy("_bucket").applyInArrow(fn, _RESULT_DDL)
    try:
        return _finish(spark, result, n, keys, "engine")
    except Exception as exc:
        raise _explain(exc) from None
