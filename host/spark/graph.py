"""Query graphs (SEMANTICS §10: several named inputs, union/project/alter_lifetime/join/...) on Spark batch.

A linear query never comes here (`udm.host.spark.batch.run_batch` keeps its plans). A graph runs as one
or more *stages* (`udm.host.spark.stages`): one when a single partitioning is valid for the whole graph,
else one per stretch of the graph with a key of its own. Each stage is a Spark pass of `QueryRunner`s,
one per bucket, each running the stage's steps:

1. the inputs' elements are one DataFrame with an ``input`` column (the input's name; ``line`` stays the
   line in that input's file, as in its dead letters);
2. buckets (`udm.host.spark.partition.routing_of` the stage): each input's inserts go to the hash of *its*
   routing fields (the same slots on every input, e.g. the left input of a join by ``auction`` and the
   right by ``id``); a retraction goes to every bucket, and the one holding its (input, id)'s inserts keeps it
   (`udm.host.spark.retract_route`). Values are hashed as
   numbers when they read as numbers (a join matches ``1`` and ``1.0``). A stage whose steps never need
   rows of different ids together goes by (input, id); one with no valid partitioning (a keyless window)
   runs in one bucket. When an (input, id) turns out to have inserts in two buckets (each bucket reports
   the ids it saw), the whole graph runs again in one bucket; when a retraction's (input, id) has inserts in
   none, it runs again with that retraction in bucket 0. CTIs go to every bucket; bad rows to bucket 0;
3. each bucket feeds its inputs one after the other, each in its own order (the CHT does not depend on
   the interleaving, SEMANTICS §10), with T (over all inputs of the whole stream, semantics-notes 2) set
   before the inputs end, then `finish`;
4. a stage read by a later one hands it its output with its CTIs (an *exchange*: rows of every producing
   bucket, routed by the reading stage's key, CTIs to every bucket, merged there with the minimum CTI over
   the producers). The producing bucket writes the texts of the fields the reading stages route by in a
   column (``keys``; a retraction its insert's), so the exchange is routed without parsing a payload.
   The last stage's output ids are prefixed with the bucket, per-bucket CTIs are dropped and one
   ``cti(INF)`` ends the output; dead letters keep their input (column ``input``), a dead letter
   of a later stage the input its stream derives from (with no line: the element was an intermediate one).

The stages are one chain of Spark transformations (`_run`): a stage reads the query inputs it needs and the
result of the stage before it, whose rows it does not consume (dead letters, the buckets' small rows, the
exchanges a later stage reads) pass through its buckets unchanged. Only the last result is persisted; one
job runs every stage and brings back the small rows the checks below read (ids, T, lmerge counters).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.engine.batch import CTI, INSERT, RETRACT, Batch
from udm.host.engine.common import NEG
from udm.host.engine.feeding import CHUNK
from udm.host.engine.payload import Payload
from udm.host.errors import UdmError
from udm.host.io.batch import ElementBatch
from udm.host.io.encode import encode_value_column
from udm.host.io.interleave import interleave
from udm.host.io.table_columns import kind_text
from udm.host.model.graph import resolve
from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import QuerySpec
from udm.host.query.runners import make_runner
from udm.host.spark.convert import ELEMENT_COLUMNS, compact_json, normalize_elements
from udm.host.spark.partition import BY_ID, bucket_groups, one_row, python_tasks, whole_input
from udm.host.spark.results import OUTPUT_DDL, SparkRun, explain_failure
from udm.host.spark.retract_route import (
    everywhere,
    id_hash,
    ids_blob,
    ids_repeat,
    keep_own_retractions,
    orphans,
    spread,
)
from udm.host.spark.rows import (
    PayloadFields,
    dead_rows,
    id_prefix,
    payload_fields,
    payload_texts_at,
    with_struct_payloads,
)
from udm.host.spark.stage_cost import staging_pays
from udm.host.spark.stages import Stage, checked_before, merge_exchange, plan_stages, read_before
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from udm.host.spark.file_source import InputFacts

__all__ = ["GRAPH_RESULT_DDL", "bucket_rows", "graph_elements", "is_graph", "key_of_text", "key_text", "key_texts",
           "key_value", "run_graph_batch"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

_FINAL_LINE = 1 << 62
#: `udm.host.spark.batch` result rows plus the dead letter's input (an exchange row's: the stream it belongs
#: to), between stages the producing bucket and an exchange row's routing keys (``keys``: `key_text` of each
#: field the later stages route it by, `_carried`), and the stage that made the row (``part``).
GRAPH_RESULT_DDL = ("stream string, kind string, id string, le bigint, re bigint, re_new bigint, t bigint, "
                    "payload string, line bigint, reason string, element string, input string, bucket bigint, "
                    "keys array<string>, part bigint")
_ARROW_TYPES = {"bigint": pa.int64(), "string": pa.string(), "array<string>": pa.list_(pa.string())}
_RESULT_ARROW = pa.schema([(name, _ARROW_TYPES[typ])
                           for name, typ in (c.split(" ") for c in GRAPH_RESULT_DDL.split(", "))])


def is_graph(spec: QuerySpec) -> bool:
    """Whether ``spec`` needs the graph plans: anything but one input and a chain of steps, and a chain with
    a ``flat_map`` (the chain plans key a query by its windows' group fields, which a flat_map's UDO may
    rewrite, so they would run it in one bucket; the graph plans route it by id or cut it into stages)."""
    graph = resolve(spec)
    return not graph.is_linear or any(n.op == "flat_map" for n in graph.nodes)


def key_value(field: str) -> Column:
    """A routing field of the JSON payload as hashed: numbers by value (``1`` and ``1.0`` alike). Objects
    and arrays, which a join compares with numbers by value inside too, all hash alike (their text tells
    ``1`` from ``1.0``): they share a bucket, so the rows that must meet do."""
    from pyspark.sql import functions as F

    return key_of_text(F.get_json_object("payload", f"$.{field}"))


def key_text(payload: Any, field: str) -> str | None:
    """What ``get_json_object`` reads of ``field`` in ``payload``'s JSON text, for `key_of_text` (an exchange row
    carries it in ``keys``, so its reading stage routes it without parsing the payload): a string as it
    is, a number or a boolean as JSON text, an object or array as any text starting with ``{``."""
    v = payload.get(field) if isinstance(payload, dict) else None
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (dict, list)):
        return "{}"
    return compact_json(v)


def key_texts(payload: Payload, rows: np.ndarray, fields: PayloadFields | None, field: str) -> pa.Array:
    """`key_text` of ``field`` for the payloads of ``rows`` (``fields``: `payload_fields` of them), column
    by column when the field is a column of strings, or of numbers or booleans without nulls."""
    col = dict(fields).get(field) if fields is not None else None
    if fields is not None and col is None:
        return pa.nulls(len(rows), pa.string())
    if isinstance(col, pa.Array):
        typ = col.type
        if pa.types.is_string(typ):
            return col
        if col.null_count == 0 and (pa.types.is_int64(typ) or pa.types.is_float64(typ) or pa.types.is_boolean(typ)):
            return encode_value_column(col)[0]
    every = payload.rows()
    return pa.array([key_text(every[i], field) for i in rows.tolist()], pa.string())


def key_of_text(text: Column) -> Column:
    """`key_value`'s value of a field's ``get_json_object`` text."""
    from pyspark.sql import functions as F

    nested = text.startswith("{") | text.startswith("[")
    return F.when(nested, F.lit("{}")).otherwise(F.coalesce(text.try_cast("double").cast("string"), text))


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


def _stage_runner(stage: Stage, on_violation: str | None, t_end: int | None, query_inputs: tuple[str, ...],
                  last: bool, carried: tuple[str, ...] = (), read_before: frozenset[str] = frozenset(),
                  later: frozenset[str] = frozenset()) -> Callable[[tuple[Any, ...], pa.Table], pa.Table]:
    """What each bucket of ``stage`` runs: a `QueryRunner` over the stage's query.

    Query inputs are fed in their line order up to their first ``cti(INF)``; then T (the plan-wide value,
    semantics-notes 2) is set; then the rest (what follows a ``cti(INF)`` is refused). An exchange input
    (an earlier stage's sink) is merged from its producer's buckets (`merge_exchange`: its CTI is the
    minimum over them) and does not move T, which is the real inputs'. A stage that is not the last
    reports its CTIs too, with the bucket and the position of each element, so the next stage can merge
    them, and gives each row the ``keys`` of the ``carried`` fields (a retraction its insert's), so the
    later stages route it by column, a retraction like its insert.

    A query input an earlier stage also reads (``read_before``) was checked there already: its input-level
    dead letters (bad lines, CTI violations, id errors: reasons without a ``step`` prefix) are that
    stage's, so this stage drops its copies and one engine's single dead letter is reported once.

    Rows of the earlier stages' results that this stage does not consume (their dead letters, small rows,
    and the exchanges of streams a later stage reads, the ``later`` sinks) pass through it unchanged, so
    the last stage's result holds every stage's rows and no stage's result is read twice. An exchange
    this stage reads and a later one too passes through as well (its CTIs, which reach every bucket, from
    bucket 0 only)."""
    spec_json = stage.spec.to_json_dict()
    exchanges = stage.exchanges(query_inputs)
    ordered = whole_input(stage.spec)
    multi = len(query_inputs) > 1
    origins = {name: (next(iter(o)) if len(o) == 1 else None) for name, o in stage.origins.items()}

    def dead_input(dl: Any) -> str | None:
        """The query input a dead letter names (rule 11): through the exchange it came from."""
        name = dl.input if dl.input is not None else (stage.inputs[0] if len(stage.inputs) == 1 else None)
        return origins.get(name) if multi and name is not None else None

    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        bucket = int(key[-1].as_py())  # (`bucket_groups`: _part, _bucket)
        id_blob = None
        table, unmatched = keep_own_retractions(table, report=bucket == 0)
        if "_idh" in table.column_names:
            kind = table.column("kind")
            h = pc.drop_null(pc.filter(table.column("_idh"), pc.fill_null(pc.equal(kind, "insert"), False)))
            id_blob = ids_blob(h.to_numpy())
        runner = make_runner(spec_json, on_violation, derived_inputs=exchanges)
        stream, source = table.column("stream"), table.column("input")
        is_in = pc.fill_null(pc.equal(stream, "in"), False)
        out: list[Batch] = []
        tails = []
        heads = []
        for name in stage.inputs:
            if name in exchanges:
                continue
            part = table.filter(pc.and_(is_in, pc.equal(source, name)))
            part = with_struct_payloads(part.sort_by("line").select(list(ELEMENT_COLUMNS)))
            # T must be set before the input's own cti(INF) (which truncates): split there
            ends = pc.and_(pc.equal(part.column("kind"), "cti"), pc.greater_equal(part.column("t"), INF))
            hits = pc.indices_nonzero(pc.fill_null(ends, False))
            cut = hits[0].as_py() if len(hits) else part.num_rows
            if cut:
                heads.append((name, ElementBatch.from_table(part.slice(0, cut))))
            tails.append((name, part.slice(cut)))
        if ordered and len(heads) > 1:
            # the stage's result follows the inputs' physical interleaving (a finite finalize): the
            # documented order of `udm.host.io.interleave`, as the local engine reads them
            for name, batch, at, length in _interleaved_runs(heads):
                out.append(runner.run_batch(batch.slice(at, length), name))
        else:
            for name, batch in heads:
                out.append(runner.run_batch(batch, name))
        reached = runner.ctx.reached  # T as this bucket's real inputs gave it
        if t_end is not None:
            # the plan-wide T (semantics-notes 2, 10) for the truncation at cti(INF). Not as a cti(T) on the
            # inputs: an alter_lifetime shift would carry that CTI past T, and a window after it would
            # materialize windows beyond T that one engine never makes
            runner.ctx.reached = max(reached, t_end)
        for name in exchanges:
            part = table.filter(pc.and_(pc.equal(stream, "out"), pc.equal(source, name)))
            produced = part.select([*ELEMENT_COLUMNS, "bucket"]).rename_columns([*ELEMENT_COLUMNS, "_src"])
            merged = merge_exchange(produced)
            out.append(runner.run_batch(ElementBatch.from_table(with_struct_payloads(merged)), name))
        for name, tail in tails:
            if tail.num_rows:
                out.append(runner.run_batch(ElementBatch.from_table(tail), name))
        out.append(runner.finish_batch())
        elements = bucket_rows(bucket, Batch.concat(out), stage, last, carried)
        cols: dict[str, list[Any]] = {c: [] for c in _RESULT_ARROW.names}

        def row(**values: Any) -> None:
            for c, lst in cols.items():
                lst.append(values.get(c))

        for dl in runner.take_dead_letters():
            if read_before and checked_before(dl, stage, read_before):
                continue
            for r in dead_rows([dl]):
                row(**r, stream="dead", kind=r["category"], input=dead_input(dl))
        if id_blob is not None:
            row(stream="ids", line=bucket, element=id_blob)
        if unmatched is not None:
            row(stream="unmatched", line=bucket, element=unmatched)
        if reached > NEG or runner.stats.truncated_at is not None:
            row(stream="T", line=bucket, t=reached if reached > NEG else None,
                le=int(runner.stats.truncated_at is not None))
        merges = runner.chattiness()
        if merges:  # lmerge's Theorem 1 counters (RunResult.lmerge)
            row(stream="lmerge", line=bucket, element=json.dumps(merges))
        cols["part"] = [stage.index] * len(cols["stream"])
        made = pa.concat_tables([elements, pa.table(cols, schema=_RESULT_ARROW)])
        consumed = pc.and_(pc.equal(stream, "out"), pc.is_in(source, pa.array(exchanges, pa.string())))
        keep = pc.and_(pc.is_in(source, pa.array(sorted(later), pa.string())),
                       pc.or_(pc.not_equal(table.column("kind"), "cti"), pa.scalar(bucket == 0)))
        passing = table.filter(pc.invert(pc.or_(is_in, pc.and_(consumed, pc.invert(pc.fill_null(keep, False))))))
        if not passing.num_rows:
            return made
        return pa.concat_tables([made, passing.select(_RESULT_ARROW.names).cast(_RESULT_ARROW)])

    return run


def _interleaved_runs(heads: list[tuple[str, ElementBatch]]) -> Iterator[tuple[str, ElementBatch, int, int]]:
    """The inputs' rows in the documented interleaving (`udm.host.io.interleave`) as runs ``(input, its
    batch, first row, rows)`` of one input each, at most `CHUNK` rows long (as `QueryRunner.process_interleaved`
    feeds them)."""
    at = dict.fromkeys((name for name, _ in heads), 0)
    batches = dict(heads)
    name: str | None = None
    start = length = 0
    for nm, _, _ in interleave([(n, b.to_elements()) for n, b in heads]):
        if nm != name or length >= CHUNK:
            if name is not None:
                yield name, batches[name], start, length
            name, start, length = nm, at[nm], 0
        at[nm] += 1
        length += 1
    if name is not None:
        yield name, batches[name], start, length


def bucket_rows(bucket: int, b: Batch, stage: Stage, last: bool, carried: tuple[str, ...]) -> pa.Table:
    """The stage's output (one bucket's engine's output batch) as result rows, column by column from the
    batch's columns (a row per element cost more than the rest of the exchange: issue #31).

    The last stage's rows are output rows, by `udm.host.spark.rows.output_rows`' rule (`id_prefix`, the
    payload as compact JSON; no CTIs; ``line`` orders them within the bucket). An earlier stage's are its
    exchange (input: its sink; ``bucket`` and ``line``: the producing bucket and the row's position there,
    CTIs included, which `udm.host.spark.stages.merge_exchange` merges over the buckets); ``keys`` holds
    the `key_text` of the ``carried`` fields (what the later stages route by), a retraction's its
    insert's, so Spark routes it by key like its insert instead of looking its insert up, and no row's
    payload is parsed for it."""
    if last:
        b = b.take(np.flatnonzero(b.kind != CTI))
    kind = b.kind
    m = len(kind)
    is_ins = kind == INSERT
    is_cti = kind == CTI
    ins = np.flatnonzero(is_ins)
    fields = payload_fields(b.payload, ins) if len(ins) else None
    # each row's place among the inserts (a retraction: its insert's, the latest of its id before it)
    source = _insert_of(kind, b.id)
    at = pa.array(np.maximum(source, 0), pa.int64(), mask=source < 0)
    own = pa.array(np.cumsum(is_ins) - 1, pa.int64(), mask=~is_ins)
    payload = payload_texts_at(b.payload, ins, fields) if len(ins) else pa.array([], pa.string())
    if carried and len(ins):
        texts = [key_texts(b.payload, ins, fields, f).take(at) for f in carried]
        k = len(carried)
        flat = pa.concat_arrays(texts).take(pa.array((np.arange(m)[:, None] + np.arange(k)[None, :] * m).ravel()))
        keys = pa.ListArray.from_arrays(pa.array(np.arange(0, m * k + 1, k, dtype=np.int32)), flat,
                                        mask=pa.array(source < 0))
    else:
        keys = pa.nulls(m, pa.list_(pa.string()))
    line = (np.arange(m, dtype=np.int64) << 20) + bucket if last else np.arange(m, dtype=np.int64)
    none = pa.nulls(m, pa.string())
    cols = {"stream": pa.array(["out"] * m, pa.string()), "kind": kind_text().take(pa.array(kind.astype(np.int64))),
            "id": pc.utf8_replace_slice(pa.array(b.id, pa.int64(), mask=is_cti).cast(pa.string()), start=0, stop=0,
                                        replacement=f"{id_prefix(bucket)}o"),  # (`out_id`)
            "le": pa.array(b.le, pa.int64(), mask=is_cti), "re": pa.array(b.re, pa.int64(), mask=is_cti),
            "re_new": pa.array(b.rn, pa.int64(), mask=kind != RETRACT), "t": pa.array(b.le, pa.int64(), mask=~is_cti),
            "payload": payload.take(own), "line": pa.array(line), "reason": none, "element": none,
            "input": none if last else pa.array([stage.sink] * m, pa.string()),
            "bucket": pa.nulls(m, pa.int64()) if last else pa.array(np.full(m, bucket, dtype=np.int64)),
            "keys": keys, "part": pa.array(np.full(m, stage.index, dtype=np.int64))}
    return pa.table(cols, schema=_RESULT_ARROW)


def _insert_of(kind: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per row, its place among the batch's inserts: an insert's own, a retraction's that of the latest
    insert of its id before it (-1: none; a CTI: -1)."""
    m = len(kind)
    is_ins = kind == INSERT
    place = np.cumsum(is_ins) - 1
    order = np.lexsort((np.arange(m), ids))  # by id, then position
    sid = ids[order]
    group = np.concatenate(([0], np.cumsum(sid[1:] != sid[:-1]))) if m else np.zeros(0, np.int64)
    span = m + 1
    # within an id's rows, the latest insert so far: a running maximum of (group, insert position + 1)
    mark = group * span + np.where(is_ins[order], order + 1, 0)
    latest = np.maximum.accumulate(mark) - group * span - 1 if m else np.zeros(0, np.int64)
    found = np.full(m, -1, dtype=np.int64)
    found[order] = np.where(latest >= 0, place[np.maximum(latest, 0)], -1)
    found[kind == CTI] = -1
    return found


_SLOT = "_slot"


def _key_bucket(df: DataFrame, routing: dict[str, list[str]], n: int, rows: Column,
                text: Callable[[str, str], Column]) -> tuple[DataFrame, Column]:
    """``df`` with each routing slot's text (`key_value`'s ``get_json_object`` text, of the slot's field of
    the row's input: ``text(input, field)``) in a column ``_slot{i}`` of its own, and the bucket column of the
    ``rows`` routed by key (null for the others): the hash of the slots' values. The texts are columns so
    that each is computed once per row (inside the per-input branches, Spark would parse the payload
    once per use: a third of stage 0's task time in ``bench_stages``)."""
    from pyspark.sql import functions as F

    slots = max(len(fields) for fields in routing.values())
    cols: dict[str, Column] = {}
    for i in range(slots):
        got: Any = None
        for name, fields in routing.items():
            v = text(name, fields[i])
            got = F.when(F.col("input") == name, v) if got is None else got.when(F.col("input") == name, v)
        cols[f"{_SLOT}{i}"] = F.when(rows, got)
    bucket = F.when(rows, F.pmod(F.xxhash64(*[key_of_text(F.col(k)) for k in cols]), F.lit(n)))
    return df.withColumns(cols), bucket


def _route(df: DataFrame, routing: dict[str, list[str]] | str | None, n: int, lost: list[int]) -> DataFrame:
    """``_bucket`` for every row of query inputs (see the module doc); ``lost``: orphan retractions' id
    hashes (`udm.host.spark.retract_route`)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    if routing is None or n == 1:
        return df.withColumn("_bucket", F.lit(0).cast("bigint"))
    if routing == BY_ID:
        bucket = F.when(kind.isin("insert", "retract") & F.col("id").isNotNull(),
                        F.pmod(F.xxhash64("input", "id"), F.lit(n)))
        return spread(df, bucket, kind == "cti", n)
    assert isinstance(routing, dict)
    ided = df.withColumn("_idh", id_hash(("input", "id"), lost))
    keyed, bucket = _key_bucket(ided, routing, n, kind == "insert",
                                lambda _, f: F.get_json_object("payload", f"$.{f}"))
    return _without_keys(spread(keyed, bucket, (kind == "cti") | everywhere(), n))


def _without_keys(df: DataFrame) -> DataFrame:
    """``df`` without `_key_bucket`'s slot columns (the buckets' functions do not read them)."""
    return df.drop(*[c for c in df.columns if c.startswith(_SLOT)])


def _route_results(result: DataFrame, routing: dict[str, list[str]] | str | None, n: int,
                   carried: Mapping[str, tuple[str, ...]], later: frozenset[str]) -> DataFrame:
    """``_bucket`` for every row of an earlier stage's result: the rows of the exchanges this stage reads
    (``carried``: each one's fields in ``keys``) by key, retractions included (`bucket_rows` gives a
    retraction its insert's keys), CTIs to every bucket; the rows passing through (`_stage_runner`) to
    bucket 0. Once routed, only the rows of the streams a ``later`` stage reads keep their ``keys``: the
    others' are not shuffled (an array per row, most of an exchange row's bytes besides its payload)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    consumed = (F.col("stream") == "out") & F.col("input").isin(*carried)
    if routing is None or n == 1:
        routed = result.withColumn("_bucket", F.lit(0).cast("bigint"))
    else:
        every = consumed & (kind == "cti")
        rows = consumed & kind.isin("insert", "retract")
        if routing == BY_ID:
            routed = spread(result, F.when(rows, F.pmod(F.xxhash64("input", "id"), F.lit(n))), every, n)
        else:
            assert isinstance(routing, dict)
            mine = {x: fields for x, fields in routing.items() if x in carried}
            keyed, bucket = _key_bucket(result, mine, n, rows,
                                        lambda x, f: F.col("keys").getItem(carried[x].index(f)))
            routed = _without_keys(spread(keyed, bucket, every, n))
    return routed.withColumn("keys", F.when(F.col("input").isin(*later), F.col("keys")) if later
                             else F.lit(None).cast("array<string>"))


def _carried(stages: list[Stage], producer: Stage) -> tuple[str, ...]:
    """The payload fields the later stages route ``producer``'s output by (its rows' ``keys``)."""
    fields: dict[str, None] = {}
    for stage in stages:
        routing = stage.routing
        if isinstance(routing, dict) and producer.sink in routing:
            fields.update(dict.fromkeys(routing[producer.sink]))
    return tuple(fields)


def _run(df: DataFrame, stages: list[Stage], inputs: tuple[str, ...], violation: str, t_end: int | None,
         n: int, lost: list[int]) -> SparkRun:
    """Run ``stages`` in order, each over its query inputs (rows of ``df``) and the result of the stage
    before it (the exchanges it reads, and what passes through it), routed by its own partitioning into up
    to ``n`` buckets. The stages are one chain of transformations: only the last result is persisted, and
    one job runs them all and brings back the small rows; nothing goes to the driver between stages."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    none = {"stream": "string", "reason": "string", "element": "string", "bucket": "bigint",
            "keys": "array<string>", "part": "bigint"}
    sinks = {s.sink: s for s in stages}
    result: DataFrame | None = None
    for stage in stages:
        last = stage is stages[-1]
        exchanges = stage.exchanges(inputs)
        later = frozenset(x for s in stages if s.index > stage.index for x in s.exchanges(inputs))
        width = n if stage.routing is not None else 1
        parts = []
        own = [x for x in stage.inputs if x in inputs]
        if own:
            rows = df.where(F.col("input").isin(own)).select(
                *ELEMENT_COLUMNS, "input", *[(F.lit("in") if c == "stream" else F.lit(None)).cast(t).alias(c)
                                             for c, t in none.items()])
            parts.append(_route(rows, stage.routing, width, lost))
        if result is not None:
            produced = result.select(*[F.col(c) for c in ELEMENT_COLUMNS if c not in ("error", "raw")],
                                     F.lit(None).cast("string").alias("error"), F.lit(None).cast("string").alias("raw"),
                                     "input", *none)
            carried = {x: _carried(stages, sinks[x]) for x in exchanges}
            parts.append(_route_results(produced, stage.routing, width, carried, later))
        stage_df = parts[0]
        for p in parts[1:]:
            stage_df = stage_df.unionByName(p, allowMissingColumns=True)
        fn = _stage_runner(stage, violation, t_end, inputs, last, _carried(stages, stage),
                           read_before(stages, stage, inputs), later)
        result = bucket_groups(stage_df, width).applyInArrow(fn, GRAPH_RESULT_DDL)
    assert result is not None
    final = one_row(spark, GRAPH_RESULT_DDL, ("out", "cti", None, None, None, None, INF, None, _FINAL_LINE, None,
                                              None, None, None, None, len(stages) - 1))
    result = result.unionByName(final).persist()
    try:
        side_rows = result.where(F.col("stream").isin("ids", "unmatched", "T", "lmerge")).select(
            "stream", "line", "t", "le", "element", "part").toArrow()
    except Exception as exc:
        result.unpersist()
        raise explain_failure(exc) from None
    out_cols = [c.split(" ")[0] for c in OUTPUT_DDL.split(", ")]
    output = result.where(F.col("stream") == "out").select(*out_cols)
    dead = result.where(F.col("stream") == "dead").select("line", "reason", "element",
                                                          F.col("kind").alias("category"), "input")
    first = stages[0].routing
    keys = first[inputs[0]] if isinstance(first, dict) and inputs[0] in first else []
    if n == 1:
        split = "single"
    elif len(stages) > 1:
        split = "staged"
    else:
        split = "ids" if first == BY_ID else ("keys" if first is not None else "single")
    return SparkRun(output, dead, n if split != "single" else 1, keys, result, "engine", split, side=side_rows)


def _side(run: SparkRun, stream: str, part: int | None = None) -> pa.Table:
    """The run's collected small rows of ``stream`` (of one part, or all)."""
    mask = pc.equal(run.side.column("stream"), stream)
    if part is not None:
        mask = pc.and_(mask, pc.equal(run.side.column("part"), part))
    return run.side.filter(mask)


def _side_ids(run: SparkRun, stream: str, part: int) -> list[str]:
    """The id blobs (``ids`` or ``unmatched``, `udm.host.spark.retract_route`) of stage ``part``'s buckets."""
    return _side(run, stream, part).column("element").to_pylist()


def lmerge_counts(run: SparkRun) -> dict[str, dict[str, int]]:
    """The lmerge counters of a graph run (`RunResult.lmerge`), summed over its buckets (of every stage)."""
    total: dict[str, dict[str, int]] = {}
    if run.side is None:  # (not a graph plan's run)
        return total
    for element in _side(run, "lmerge").column("element").to_pylist():
        for step, counts in json.loads(element).items():
            acc = total.setdefault(step, {})
            for k, v in counts.items():
                acc[k] = acc.get(k, 0) + int(v)
    return total


def run_graph_batch(query: QuerySpec | BoundQuery | dict[str, Any] | str | Path,
                    elements: DataFrame | Mapping[str, DataFrame], *, on_violation: str | None = None,
                    buckets: int | None = None, staged: bool | None = None,
                    facts: Mapping[str, InputFacts] | None = None) -> SparkRun:
    """Run a query graph over ``{input name: element DataFrame}`` (or one DataFrame with an ``input``
    column); output CHT equals the local engine's. ``staged=False`` keeps a graph with no single
    partitioning in one bucket instead of cutting it into stages, ``staged=True`` cuts it; None (the
    default) leaves it to the session (`udm.host.spark.stage_cost.staging_pays`: on two task slots, one
    bucket). ``SparkRun.dead_letters`` has an ``input`` column;
    ``SparkRun.split`` is ``"keys"`` (one partitioning for the whole graph), ``"staged"`` (stages with
    partitionings of their own, `udm.host.spark.stages`), ``"ids"`` or ``"single"``; ``SparkRun.keys``
    are the routing fields of the first input in the first stage. ``facts``: what a pass over each input's
    file proved (`udm.host.spark.file_source.InputFacts`, ``udm run`` knows them); with every input's, the
    pre-pass over the inputs (the stream's T, retractions) is skipped where they answer it."""
    from pyspark.sql import functions as F


    spec = build_plan(query).spec
    inputs = tuple(resolve(spec).inputs)
    df = graph_elements(elements, inputs)
    spark = df.sparkSession
    df = df.coalesce(python_tasks(spark))
    n = max(1, int(buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or 1)))
    known = [facts.get(x) for x in inputs] if facts is not None else []
    if known and all(f is not None and f.infinite is False for f in known):
        # nothing to ask Spark: no lifetime to cut at T (the T rows below run it again if a step made one)
        t_end = None
    else:
        finite = [F.when(F.col(c) < F.lit(INF), F.col(c)) for c in ("le", "re", "re_new", "t")]
        kind = F.col("kind")
        stats = df.agg(F.max(F.when(kind.isin("insert", "retract", "cti"), F.greatest(*finite))).alias("t_end")).first()
        assert stats is not None
        t_end = stats["t_end"]
    violation = on_violation or spec.on_violation
    split = n > 1 and (staging_pays(spark) if staged is None else staged)
    stages = plan_stages(spec, split=split)
    lost: list[int] = []
    run = _run(df, stages, inputs, violation, t_end, n, lost)
    parts = range(len(stages))
    if run.split in ("keys", "staged") and any(ids_repeat(_side_ids(run, "ids", k)) for k in parts):
        run.unpersist()  # an (input, id) reused under another key: one bucket sees them all
        stages = plan_stages(spec, split=False)
        n = 1
        run = _run(df, stages, inputs, violation, t_end, n, lost)
    elif run.split in ("keys", "staged") and (lost := sorted({h for k in parts for h in orphans(
            _side_ids(run, "unmatched", k), _side_ids(run, "ids", k))})):
        run.unpersist()  # retractions of an (input, id) no bucket has inserts of: to bucket 0 (module doc)
        run = _run(df, stages, inputs, violation, t_end, n, lost)
    reached = _side(run, "T")
    ts = [t for t in reached.column("t").to_pylist() if t is not None]
    cut = any(reached.column("le").to_pylist())
    if ts and cut and max(ts) != t_end:
        run.unpersist()  # cut at a T that only an invalid element reached: once more with the true T
        run = _run(df, stages, inputs, violation, max(ts), n, lost)
    return run
