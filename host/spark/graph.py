"""Query graphs (SEMANTICS §10: several named inputs, union/project/alter_lifetime/join/...) on Spark batch.

A linear query never comes here (`udm.host.spark.batch.run_batch` keeps its plans). A graph runs as one
Spark job of `QueryRunner`s, one per bucket, each running the *whole* graph:

1. the inputs' elements are one DataFrame with an ``input`` column (the input's name; ``line`` stays the
   line in that input's file, as in its dead letters);
2. buckets (`udm.host.spark.partition.graph_routing`): when one partitioning is valid for the whole graph,
   each input's inserts go to the hash of *its* routing fields (the same slots on every input, e.g. the
   left input of a join by ``auction`` and the right by ``id``); a retraction follows the latest insert of
   its (input, id). Values are hashed as numbers when they read as numbers (a join matches ``1`` and
   ``1.0``). A graph whose steps never need rows of different ids together goes by (input, id). Else, or
   when an (input, id) turns out to have inserts in two buckets (each bucket reports the ids it saw),
   the graph runs in one bucket. CTIs go to every bucket; bad rows and unknown retractions to bucket 0;
3. each bucket feeds its inputs one after the other, each in its own order (the CHT does not depend on
   the interleaving, SEMANTICS §10), each input cut by ``cti(T)`` just before its first ``cti(INF)`` (T
   over all inputs of the whole stream, semantics-notes 2), then `finish`;
4. output ids are prefixed with the bucket, per-bucket CTIs are dropped and one ``cti(INF)`` ends the
   output; dead letters keep their input (column ``input``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.errors import UdmError
from udm.host.query.graph import resolve
from udm.host.query.plan import BoundQuery, bind
from udm.host.query.spec import QuerySpec, parse_query
from udm.host.spark.convert import ELEMENT_COLUMNS, normalize_elements
from udm.host.spark.partition import BY_ID, graph_routing, python_tasks
from udm.host.spark.rows import dead_rows, output_rows, with_struct_payloads
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from udm.host.spark.batch import SparkRun

__all__ = ["GRAPH_RESULT_DDL", "graph_elements", "is_graph", "key_value", "run_graph_batch"]

_FINAL_LINE = 1 << 62
#: `udm.host.spark.batch` result rows plus the dead letter's input.
GRAPH_RESULT_DDL = ("stream string, kind string, id string, le bigint, re bigint, re_new bigint, t bigint, "
                    "payload string, line bigint, reason string, element string, input string")
_RESULT_ARROW = pa.schema([(name, pa.int64() if typ == "bigint" else pa.string())
                           for name, typ in (c.split(" ") for c in GRAPH_RESULT_DDL.split(", "))])


def is_graph(spec: QuerySpec) -> bool:
    """Whether ``spec`` needs the graph plans (anything but one input and a chain of steps)."""
    return not resolve(spec).is_linear


def key_value(field: str) -> Column:
    """A routing field of the JSON payload as hashed: numbers by value (``1`` and ``1.0`` alike)."""
    from pyspark.sql import functions as F

    text = F.get_json_object("payload", f"$.{field}")
    return F.coalesce(text.try_cast("double").cast("string"), text)


def graph_elements(elements: DataFrame | Mapping[str, DataFrame], inputs: tuple[str, ...]) -> DataFrame:
    """One element DataFrame with an ``input`` column from ``{name: DataFrame}`` (or a DataFrame that has
    one already); every declared input must be there, and no other."""
    from pyspark.sql import functions as F

    if isinstance(elements, Mapping):
        unknown = [n for n in elements if n not in inputs]
        missing = [n for n in inputs if n not in elements]
        if unknown or missing:
            raise UdmError(f"the query reads inputs {', '.join(inputs)}; got DataFrames for "
                           f"{', '.join(elements) or 'none'}")
        parts = [normalize_elements(elements[n]).withColumn("input", F.lit(n)) for n in inputs]
        df = parts[0]
        for p in parts[1:]:
            df = df.unionByName(p)
        return df
    if "input" not in elements.columns:
        if len(inputs) == 1:
            return normalize_elements(elements).withColumn("input", F.lit(inputs[0]))
        raise UdmError(f"the query reads inputs {', '.join(inputs)}: pass {{name: DataFrame}} or one DataFrame "
                       "with an 'input' column")
    return normalize_elements(elements, keep=("input",))


def _bucket_runner(spec_json: dict[str, Any], on_violation: str | None, t_end: int | None,
                   inputs: tuple[str, ...]) -> Callable[[tuple[Any, ...], pa.Table], pa.Table]:
    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        from udm.host.engine import QueryRunner
        from udm.host.engine.common import NEG
        from udm.host.io.batch import ElementBatch
        from udm.host.temporal.elements import Cti

        bucket = int(key[0].as_py())
        id_blob = None
        if "_idh" in table.column_names:
            import base64

            import numpy as np

            h = pc.drop_null(table.column("_idh")).to_numpy()
            id_blob = base64.b64encode(np.unique(h).astype(np.int64).tobytes()).decode()
        runner = QueryRunner(bind(parse_query(spec_json)), on_violation=on_violation)
        out: list[Any] = []
        for name in inputs:
            part = table.filter(pc.equal(table.column("input"), name)).sort_by("line")
            part = with_struct_payloads(part.select(list(ELEMENT_COLUMNS)))
            ends = pc.and_(pc.equal(part.column("kind"), "cti"), pc.greater_equal(part.column("t"), INF))
            hits = pc.indices_nonzero(pc.fill_null(ends, False))
            cut = hits[0].as_py() if len(hits) else part.num_rows
            if cut:
                out += runner.process_batch(ElementBatch.from_table(part.slice(0, cut)), name)
            if t_end is not None:
                out += runner.process(Cti(t_end), None, name)
            if cut < part.num_rows:
                out += runner.process_batch(ElementBatch.from_table(part.slice(cut)), name)
        reached = runner.ctx.reached
        out += runner.finish()
        cols: dict[str, list[Any]] = {c: [] for c in _RESULT_ARROW.names}

        def row(**values: Any) -> None:
            for c, lst in cols.items():
                lst.append(values.get(c))

        n = 1 << 20
        for seq, r in enumerate(output_rows(bucket, out)):
            row(stream="out", line=seq * n + bucket, **r)
        for dl in runner.take_dead_letters():
            for r in dead_rows([dl]):
                row(**r, stream="dead", kind=r["category"], input=dl.input)
        if id_blob is not None:
            row(stream="ids", line=bucket, element=id_blob)
        if reached > NEG:
            row(stream="T", line=bucket, t=reached, le=int(runner.stats.truncated_at is not None))
        merges = runner.chattiness()
        if merges:  # lmerge's Theorem 1 counters (RunResult.lmerge)
            row(stream="lmerge", line=bucket, element=json.dumps(merges))
        return pa.table(cols, schema=_RESULT_ARROW)

    return run


def _route(df: DataFrame, routing: dict[str, list[str]] | str | None, n: int, has_retracts: bool) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.col("kind")
    if routing is None or n == 1:
        return df.withColumn("_bucket", F.lit(0))
    if routing == BY_ID:
        routed = df.withColumn("_bucket", F.when(kind.isin("insert", "retract") & F.col("id").isNotNull(),
                                                 F.pmod(F.xxhash64("input", "id"), F.lit(n))))
    else:
        assert isinstance(routing, dict)
        key_hash: Any = None
        for name, fields in routing.items():
            h = F.pmod(F.xxhash64(*[key_value(f) for f in fields]), F.lit(n))
            key_hash = (F.when(F.col("input") == name, h) if key_hash is None
                        else key_hash.when(F.col("input") == name, h))
        routed = (df.withColumn("_bucket", F.when(kind == "insert", key_hash))
                  .withColumn("_idh", F.when((kind == "insert") & F.col("id").isNotNull(),
                                             F.xxhash64("input", "id"))))
        if has_retracts:
            w = (Window.partitionBy("input", "id").orderBy("line")
                 .rowsBetween(Window.unboundedPreceding, Window.currentRow))
            follow = F.last(F.when(kind == "insert", F.col("_bucket")), ignorenulls=True).over(w)
            routed = routed.withColumn("_bucket", F.when(kind == "retract", follow).otherwise(F.col("_bucket")))
    is_cti = kind == "cti"
    ctis = routed.where(is_cti).withColumn("_bucket", F.explode(F.sequence(F.lit(0), F.lit(n - 1))))
    return routed.where(~is_cti | kind.isNull()).withColumn(
        "_bucket", F.coalesce(F.col("_bucket"), F.lit(0))).unionByName(ctis)


def _run(spark: Any, routed: DataFrame, spec: QuerySpec, violation: str, t_end: int | None, n: int,
         keys: list[str], split: str) -> SparkRun:
    from pyspark.sql import functions as F

    from udm.host.spark.batch import OUTPUT_DDL, SparkRun, _explain

    fn = _bucket_runner(spec.to_json_dict(), violation, t_end, tuple(resolve(spec).inputs))
    result = routed.groupBy("_bucket").applyInArrow(fn, GRAPH_RESULT_DDL)
    final = spark.createDataFrame([("out", "cti", None, None, None, None, INF, None, _FINAL_LINE, None, None, None)],
                                  GRAPH_RESULT_DDL)
    result = result.unionByName(final).persist()
    try:
        result.count()
    except Exception as exc:
        result.unpersist()
        raise _explain(exc) from None
    out_cols = [c.split(" ")[0] for c in OUTPUT_DDL.split(", ")]
    output = result.where(F.col("stream") == "out").select(*out_cols)
    dead = result.where(F.col("stream") == "dead").select("line", "reason", "element",
                                                          F.col("kind").alias("category"), "input")
    return SparkRun(output, dead, n, keys, result, "engine", split)


def lmerge_counts(run: SparkRun) -> dict[str, dict[str, int]]:
    """The lmerge counters of a graph run (`RunResult.lmerge`), summed over its buckets."""
    from pyspark.sql import functions as F

    total: dict[str, dict[str, int]] = {}
    for r in run._result.where(F.col("stream") == "lmerge").select("element").collect():
        for step, counts in json.loads(r["element"]).items():
            acc = total.setdefault(step, {})
            for k, v in counts.items():
                acc[k] = acc.get(k, 0) + int(v)
    return total


def run_graph_batch(query: QuerySpec | BoundQuery | dict[str, Any] | str | Path,
                    elements: DataFrame | Mapping[str, DataFrame], *, on_violation: str | None = None,
                    buckets: int | None = None) -> SparkRun:
    """Run a query graph over ``{input name: element DataFrame}`` (or one DataFrame with an ``input``
    column); output CHT equals the local engine's. ``SparkRun.dead_letters`` has an ``input`` column;
    ``SparkRun.split`` is ``"keys"``, ``"ids"`` or ``"single"`` and ``SparkRun.keys`` the routing fields
    of the first input."""
    from pyspark.sql import functions as F

    from udm.host.spark.batch import _ids_cross_buckets, _spec_of

    spec = _spec_of(query)
    bind(spec)
    inputs = tuple(resolve(spec).inputs)
    df = graph_elements(elements, inputs)
    spark = df.sparkSession
    df = df.coalesce(python_tasks(spark))
    n = max(1, int(buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or 1)))
    routing = graph_routing(spec) if n > 1 else None
    finite = [F.when(F.col(c) < F.lit(INF), F.col(c)) for c in ("le", "re", "re_new", "t")]
    kind = F.col("kind")
    stats = df.agg(F.max(F.when(kind.isNotNull(), F.greatest(*finite))).alias("t_end"),
                   F.count(F.when(kind == "retract", 1)).alias("retracts")).first()
    assert stats is not None
    t_end = stats["t_end"]
    violation = on_violation or spec.on_violation
    if routing is None:
        n = 1
    keys = routing[inputs[0]] if isinstance(routing, dict) else []
    split = "single" if n == 1 else ("ids" if routing == BY_ID else "keys")
    routed = _route(df, routing, n, bool(stats["retracts"]))
    run = _run(spark, routed, spec, violation, t_end, n, keys, split)
    if split == "keys" and _ids_cross_buckets(run):
        run.unpersist()  # an (input, id) reused under another key: one bucket sees them all
        n, keys, split = 1, [], "single"
        routed = _route(df, None, 1, False)
        run = _run(spark, routed, spec, violation, t_end, n, keys, split)
    rows = run._result.where(F.col("stream") == "T").agg(F.max("t").alias("T"), F.max("le").alias("cut")).first()
    if rows is not None and rows["T"] is not None and rows["cut"] and rows["T"] != t_end:
        run.unpersist()  # cut at a T that only an invalid element reached: once more with the true T
        run = _run(spark, routed, spec, violation, int(rows["T"]), n, keys, split)
    return run
