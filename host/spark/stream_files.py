"""``udm run --engine spark-streaming``: an event file fed through Structured Streaming in micro-batches of
``--batch-size`` elements (default `DEFAULT_BATCH_SIZE`, 10,000: semantics-notes 45), engine state in the
state store, resumable with ``--checkpoint``. ``--trigger "2 seconds"`` starts a micro-batch at most every
interval (a processing-time trigger) instead of as soon as the last one is done. A user's table (``--time``,
``--start/--end``, ``--edge``) is read by the same reader as ``--engine local`` (`udm.host.io.tables`).

Layout of the run directory (``--checkpoint DIR``, else a temporary one removed at the end)::

    run.json          what was staged: input fingerprint, query, batch size, buckets (checked on resume)
    input/            one Parquet file per micro-batch, in order (file source, maxFilesPerTrigger=1; a linear
                      query's: one row per key bucket, `stream_parts.bucket_blobs`)
    spark/            Spark's checkpoint: offsets, commits, and the RocksDB state of every bucket's engine
    out/NNNNNNNN.*    each micro-batch's output elements (.jsonl) and output CTI (.cti), by batch id
    dead/NNNNNNNN.jsonl   each micro-batch's dead letters

Staging happens on the driver, where the file is read by `udm.host.io` (same parser, same bad-row
reasons and line numbers as the local engine): each element gets its bucket (a retraction follows the
latest insert of its id, exactly as one engine would see it), CTIs go to every bucket, and two control
rows are added: ``cti(T)`` just before the stream's first ``cti(INF)`` (T = the largest finite time of the
whole stream, where one engine would cut infinite lifetimes; a bucket alone only knows its own) and an
end-of-input row that makes each bucket's engine `finish`.

A graph cut into stages (`udm.host.spark.stream_stages`): each input row is staged once per stage
reading the input (``_stage``), routed by that stage's key, and T goes to every stage as one control row
instead of ``cti(T)`` on each input.

Exactly once: a micro-batch's files are written under its batch id, replaced atomically, and only then
does Spark commit the batch. A run stopped before the commit replays that batch with the same id, the
same input (Spark's offset log) and the same engine state (the state store's last committed version),
so it rewrites the same files. Each committed micro-batch is appended to the user's output and dead-letter
files as soon as the driver sees its commit (`udm.host.spark.stream_output.LiveOutput`), so the output
grows while the run goes on.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import shutil
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from udm.host.errors import UdmError
from udm.host.io.arrival import ArrivalSource
from udm.host.io.encode import encode_value_column
from udm.host.io.table_options import TableSource
from udm.host.io.tables import open_reader
from udm.host.query.runners import ENGINES, RunRequest
from udm.host.run_result import RunResult
from udm.host.spark.convert import ELEMENT_COLUMNS, ELEMENT_DDL, batch_to_arrow
from udm.host.spark.file_source import may_hold_ecti
from udm.host.spark.graph import is_graph
from udm.host.spark.key_state import graph_payload_key, payload_key
from udm.host.spark.partition import BY_ID, graph_routing
from udm.host.spark.results import explain_failure
from udm.host.spark.session import STREAMING_JAVA_OPTIONS, get_spark, local_checkpoint_files, require_spark
from udm.host.spark.stream_arrival import run_arrival_stream
from udm.host.spark.stream_dir import run_directory_stream
from udm.host.spark.stream_lock import checkpoint_held
from udm.host.spark.stream_output import (
    LiveOutput,
    batch_writer,
    committed_batches,
    progress_text,
    resumed_meta,
    shared_run_dir,
    write_atomic,
)
from udm.host.spark.stream_parts import BLOB_DDL, DEFAULT_BATCH_SIZE, bucket_blobs, bucket_count, key_buckets, recorded
from udm.host.spark.stream_parts import control_part as _control
from udm.host.spark.stream_parts import driver_routes as _routes
from udm.host.spark.stream_parts import part_schema as _schema
from udm.host.spark.stream_parts import reached_in as _reached
from udm.host.spark.stream_parts import write_parts as _write_parts
from udm.host.spark.stream_stages import stream_stages
from udm.host.spark.stream_stop import stop_between_batches
from udm.host.spark.stream_wire import BROADCAST, END_KIND, T_KIND, id_bucket, key_bucket, stage_width
from udm.host.spark.streaming import run_stream
from udm.sdk import INF

__all__ = ["DEFAULT_BATCH_SIZE", "StreamStopped", "graph_routes", "progress_text", "run_spark_streaming",
           "shared_run_dir"]

#: 2: graphs with no one partitioning run in stages; 3: state per key (semantics-notes 42); 4: a keyed query
#: graph's state per key too (semantics-notes 53), and key buckets grouped with a salt, one shuffle partition
#: each (semantics-notes 50); 5: a keyed stage of a staged graph keeps its state per key (semantics-notes 60);
#: 6: a linear query's micro-batch files hold one row per bucket (`stream_parts.bucket_blobs`); 7: per-key
#: engines kept in slabs (`key_state`, semantics-notes 74); 8: the index's keys as columns (semantics-notes 75);
#: 9: slabs compressed (semantics-notes 77); 10: keys first seen in one micro-batch share an engine
#: (semantics-notes 78)
_LAYOUT_VERSION = 10


class StreamStopped(UdmError):
    """The run stopped before the end of its input; the checkpoint (if any) resumes it."""


@dataclass
class _Staged:
    elements: int
    #: micro-batches before the first ``cti(INF)`` (staged up front) and in all (the tail comes later)
    head_batches: int
    batches: int
    buckets: int
    #: a query graph's inputs (its rows carry an ``input`` column); None for a linear query
    inputs: list[str] | None = None
    #: a graph cut into stages (`udm.host.spark.stream_stages`): each input's first stage reading it
    #: (rows carry ``_stage``; an input read by two stages is staged once for each); None: one operator
    first_stage: dict[str, int] | None = None
    #: how many buckets the last stage reports a CTI from (None: ``buckets``)
    sink_width: int | None = None


def _fingerprint(path: Any) -> str:
    """The input's digest: a file's bytes; a table's files (a directory: all of them) and its options."""
    if isinstance(path, TableSource):
        files = sorted(p for p in path.path.rglob("*") if p.is_file()) if path.path.is_dir() else [path.path]
        parts = [repr(path.options)] + [f"{p.relative_to(path.path) if path.path.is_dir() else p.name}:"
                                        f"{_fingerprint(p)}" for p in files]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()
    with Path(path).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _chunks(tb: pa.Table, size: int) -> list[pa.Table]:
    return [tb.slice(i, size) for i in range(0, tb.num_rows, size)]


def _as_array(values: Any, typ: pa.DataType) -> pa.Array:
    return values.cast(typ) if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, typ)


def _key_routes(batches: list[Any], table: pa.Table, keys: list[str], n: int) -> tuple[Any, Any] | None:
    """`_routes` column by column, for the usual file: no retraction and no insert id twice (so `LiveIds`
    never sends an insert to another insert's bucket), and every batch's payloads the reader's struct with
    the key fields as plain columns. An insert's key is `udm.host.spark.key_state.payload_key` of its
    payload and its bucket `_bucket_of` it (the same text, hashed), byte for byte; None when the file is
    not that simple (the per-row routing decides)."""
    kind = table.column("kind")
    if pc.any(pc.fill_null(pc.equal(kind, "retract"), False)).as_py():
        return None
    ins = pc.fill_null(pc.equal(kind, "insert"), False)
    ids = table.column("id").filter(ins)
    if pc.count_distinct(ids, mode="all").as_py() != len(ids):
        return None
    key_parts: list[pa.Array] = []
    for b in batches:
        b_ins = pc.fill_null(pc.equal(b.table.column("kind"), "insert"), False).combine_chunks()
        if not pc.any(b_ins).as_py():
            key_parts.append(pa.nulls(len(b), pa.string()))
            continue
        typ = b.payload_type
        if not pa.types.is_struct(typ) or any(typ.get_field_index(k) < 0 for k in keys):
            return None
        struct = b.table.column("payload").combine_chunks().filter(b_ins)
        if struct.null_count:
            return None
        cols = {typ.field(i).name: c for i, c in enumerate(struct.flatten())}
        pieces: list[Any] = ["["]
        for j, k in enumerate(keys):
            col = cols[k]
            if col.null_count or not (pa.types.is_string(col.type) or pa.types.is_int64(col.type)
                                      or pa.types.is_float64(col.type) or pa.types.is_boolean(col.type)):
                return None
            text, quote = encode_value_column(col)
            pieces += ([","] if j else []) + (['"', text, '"'] if quote else [text])
        pieces.append("]")
        texts = pc.binary_join_element_wise(*pieces, "")
        key_parts.append(pc.replace_with_mask(pa.nulls(len(b), pa.string()), b_ins, texts))
    row_keys = pa.chunked_array(key_parts, pa.string()).combine_chunks()
    cti = pc.fill_null(pc.equal(kind, "cti"), False).to_numpy(zero_copy_only=False)
    routes = np.zeros(table.num_rows, dtype=np.int64)
    routes[cti] = BROADCAST
    ins_np = ins.to_numpy(zero_copy_only=False)
    crc = zlib.crc32
    routes[ins_np] = [crc(x.encode()) % n for x in row_keys.filter(ins).to_pylist()]
    return pa.array(routes), row_keys


def _stage(req: RunRequest, run_dir: Path, batch_size: int, n: int, keys: list[str]) -> _Staged:
    """Read the file, route every element, write the *head* (everything before the first ``cti(INF)``) as
    one Parquet file per micro-batch and keep the *tail* for `_stage_tail`. ``_seq`` is twice the
    element's position, leaving room for the injected ``cti(T)`` just before the tail."""
    reader = open_reader(req.input, batch_size=65536)
    try:
        batches = list(reader)
    finally:
        reader.close()
    tables = [batch_to_arrow(b) for b in batches]
    schema = _schema()
    if not tables:
        base = _control("cti", None, 0).slice(0, 0)
        first_inf = 0
    else:
        table = pa.concat_tables(tables)
        is_cti = pc.fill_null(pc.equal(table.column("kind"), "cti"), False)
        routes: Any
        row_keys: Any
        fast = _key_routes(batches, table, keys, n) if keys else None
        if fast is not None:
            routes, row_keys = fast
        elif keys:  # buckets and keys as one engine would see ids (`stream_parts.LiveIds`): no id map in the state
            routes, row_keys = _routes(table, table.column("kind").to_pylist(), table.column("t").to_pylist(),
                                       keys, n, req.on_violation or req.spec.on_violation, key_of=payload_key)
        else:
            routes, row_keys = pc.if_else(is_cti, BROADCAST, 0), pa.nulls(table.num_rows, pa.string())
        ends = pc.indices_nonzero(pc.and_(is_cti, pc.fill_null(pc.greater_equal(table.column("t"), INF), False)))
        first_inf = ends[0].as_py() if len(ends) else table.num_rows
        rows = table.num_rows
        base = (table.select(list(ELEMENT_COLUMNS))
                .append_column("_seq", pa.array(range(1, 2 * rows + 1, 2), pa.int64()))
                .append_column("_bucket", _as_array(routes, pa.int64()))
                .append_column("_key", _as_array(row_keys, pa.string())).cast(schema))
    head, tail = base.slice(0, first_inf), base.slice(first_inf)
    head_parts = _chunks(head, batch_size)
    tail_batches = max(1, -(-tail.num_rows // batch_size))
    _write_parts(run_dir, [bucket_blobs(p, n) for p in head_parts], 0,
                 time.time() - len(head_parts) - tail_batches - 60)
    pq.write_table(tail, run_dir / "tail.parquet")
    staged = _Staged(elements=base.num_rows, head_batches=len(head_parts), batches=len(head_parts) + tail_batches,
                     buckets=n)
    if not head_parts:
        _stage_tail(run_dir, staged, batch_size, None)
    return staged


def _stage_tail(run_dir: Path, staged: _Staged, batch_size: int, t_end: int | None) -> None:
    """The last micro-batches, once the head is done: ``cti(T)`` (T = the largest finite time any bucket's
    engine reached, where one engine would cut infinite lifetimes), the input from its first ``cti(INF)``
    on, and the end-of-input row."""
    graph = staged.inputs is not None
    multi = staged.first_stage is not None
    tail = pq.read_table(run_dir / "tail.parquet", schema=_schema(graph, multi))
    if multi:  # stages: T to every engine as a control row (`udm.host.spark.stream_stages`), then the tails
        body = pa.concat_tables(([_control(T_KIND, t_end, 0, graph=True, staged=True)] if t_end is not None
                                 else []) + [tail])
        base = 2 * staged.elements + 3
        body = body.set_column(body.column_names.index("_seq"), "_seq",
                               pa.array(range(base, base + body.num_rows), pa.int64()))
        extra = 1 if t_end is not None else 0
    elif staged.inputs is not None:  # a graph: cti(T) on each input just before that input's own tail
        pieces = []
        for name in staged.inputs:
            if t_end is not None:
                pieces.append(_control("cti", t_end, 0, name, graph=True))
            pieces.append(tail.filter(pc.equal(tail.column("input"), name)))
        body = pa.concat_tables(pieces)
        base = 2 * staged.elements + 3  # after every head row, before the end-of-input row
        body = body.set_column(body.column_names.index("_seq"), "_seq",
                               pa.array(range(base, base + body.num_rows), pa.int64()))
        extra = len(staged.inputs) if t_end is not None else 0
    else:
        first_seq = tail.column("_seq")[0].as_py() - 1 if tail.num_rows else 2 * staged.elements
        body = pa.concat_tables(([_control("cti", t_end, first_seq)] if t_end is not None else []) + [tail])
        extra = 1 if t_end is not None else 0
    parts = _chunks(body, batch_size + extra)[:1]
    rest = body.slice(parts[0].num_rows if parts else 0)
    parts += _chunks(rest, batch_size)
    end = _control(END_KIND, None, (1 << 62) if graph else 2 * staged.elements + 2, graph=graph, staged=multi)
    parts = [*parts[:-1], pa.concat_tables([parts[-1], end])] if parts else [end]
    if len(parts) != staged.batches - staged.head_batches:
        raise AssertionError(f"tail staged as {len(parts)} batches, expected {staged.batches - staged.head_batches}")
    if not graph:  # a linear query's parts: one row per bucket (`stream_parts.bucket_blobs`)
        parts = [bucket_blobs(p, staged.buckets) for p in parts]
    _write_parts(run_dir, parts, staged.head_batches, time.time())
    (run_dir / "tail.done").write_text(str(t_end), encoding="utf-8")


def _sync_times(table: pa.Table) -> list[int]:
    """`udm.host.io.interleave.sync_time` of each row (a bad row: before everything)."""
    first = -(2**64)
    out = []
    for k, le, re, rn, t in zip(*(table.column(c).to_pylist() for c in ("kind", "le", "re", "re_new", "t")),
                                strict=True):
        if k == "insert" and le is not None:
            out.append(le)
        elif k == "retract" and re is not None and rn is not None:
            out.append(min(re, rn))
        elif k == "cti" and t is not None:
            out.append(t)
        else:
            out.append(first)
    return out


def _merge_order(syncs: list[list[int]]) -> list[tuple[int, int]]:
    """(input, row) in the order of `udm.host.io.interleave`: by the sync time of each input's next row,
    ties by input order; each input's own order kept."""
    heads = [(sy[0], k, 0) for k, sy in enumerate(syncs) if sy]
    heapq.heapify(heads)
    order = []
    while heads:
        _, k, i = heads[0]
        order.append((k, i))
        if i + 1 < len(syncs[k]):
            heapq.heapreplace(heads, (syncs[k][i + 1], k, i + 1))
        else:
            heapq.heappop(heads)
    return order


def graph_routes(table: pa.Table, name: str, how: Any, width: int, policy: str
                 ) -> tuple[list[int], list[str | None]]:
    """The buckets of input ``name``'s rows (``table``, in order) in a graph (or a stage) routed ``how``
    over ``width`` buckets: by its key fields as `_routes` (a retraction after the insert of its id), by
    (input, id), or one bucket; CTIs to every bucket. Also each row's key where routed by key fields (a
    graph's key, `key_state.graph_key_of`; None elsewhere), as `_routes` names it: a keyed stage's per-key
    state then needs no id map (semantics-notes 59)."""
    kinds = table.column("kind").to_pylist()
    none: list[str | None] = [None] * len(kinds)
    if width == 1 or how is None:
        return [BROADCAST if k == "cti" else 0 for k in kinds], none
    if how == BY_ID:
        ids = table.column("id").to_pylist()
        return [BROADCAST if k == "cti" else id_bucket(name, i, width) if k in ("insert", "retract") and i is not None
                else 0 for k, i in zip(kinds, ids, strict=True)], none
    return _routes(table, kinds, table.column("t").to_pylist(), how[name], width, policy, bucket_of=key_bucket,
                   key_of=_graph_key, graph=True)


def _graph_key(payload: Any, fields: list[str]) -> str:
    """A graph row's key in its bucket (`udm.host.spark.key_state.graph_key_of` of a parsed payload)."""
    return graph_payload_key(payload, fields)


def _stage_graph(req: RunRequest, run_dir: Path, batch_size: int, n: int, routing: Any,
                 stages: list[Any] | None = None) -> _Staged:
    """`_stage` for a query graph: every input read, tagged with its name; the head is each input's part
    before its first ``cti(INF)``, merged in the interleave order; the tail is the rest, input by input
    (`_stage_tail` puts ``cti(T)`` on each input before its own). Routing as `_routes`, per input (a
    retraction follows the latest insert of its (input, id)), or by (input, id), or one bucket."""
    schema = _schema(graph=True, staged=stages is not None)
    names = list(req.inputs)
    heads: list[pa.Table] = []
    tails: list[pa.Table] = []
    policy = req.on_violation or req.spec.on_violation
    total = 0
    first: dict[str, int] = {}
    for name, src in req.inputs.items():
        reader = open_reader(src, batch_size=65536)
        try:
            tables = [batch_to_arrow(b) for b in reader]
        finally:
            reader.close()
        table = pa.concat_tables(tables) if tables else _control("cti", None, 0, graph=True).slice(0, 0).select(
            list(ELEMENT_COLUMNS))
        total += table.num_rows
        kinds = table.column("kind").to_pylist()
        ts = table.column("t").to_pylist()
        # one copy per stage reading the input (one in all without stages), routed by that stage's key
        copies = [(None, routing, n)] if stages is None else [
            (s.index, s.routing, stage_width(s, n)) for s in stages if name in s.inputs]
        for index, how, width in copies:
            routes, row_keys = graph_routes(table, name, how, width, policy)
            first_inf = next((i for i, k in enumerate(kinds) if k == "cti" and ts[i] is not None and ts[i] >= INF),
                             len(kinds))
            full = (table.select(list(ELEMENT_COLUMNS))
                    .append_column("_seq", pa.array([0] * table.num_rows, pa.int64()))
                    .append_column("_bucket", pa.array(routes, pa.int64()))
                    .append_column("input", pa.array([name] * table.num_rows, pa.string())))
            if index is not None:
                first.setdefault(name, index)
                full = (full.append_column("_stage", pa.array([index] * table.num_rows, pa.int64()))
                        .append_column("_key", pa.array(row_keys, pa.string())))
            full = full.cast(schema)
            heads.append(full.slice(0, first_inf))
            tails.append(full.slice(first_inf))
    order = _merge_order([_sync_times(h) for h in heads])
    if order:
        offsets = [0]
        for h in heads[:-1]:
            offsets.append(offsets[-1] + h.num_rows)
        head = pa.concat_tables(heads).take(pa.array([offsets[k] + i for k, i in order], pa.int64()))
        head = head.set_column(head.column_names.index("_seq"), "_seq",
                               pa.array(range(1, 2 * head.num_rows + 1, 2), pa.int64()))
    else:
        head = heads[0].slice(0, 0) if heads else _control("cti", None, 0, graph=True,
                                                           staged=stages is not None).slice(0, 0)
    tail = pa.concat_tables(tails) if tails else head.slice(0, 0)
    head_parts = _chunks(head, batch_size)
    tail_batches = max(1, -(-tail.num_rows // batch_size))
    _write_parts(run_dir, head_parts, 0, time.time() - len(head_parts) - tail_batches - 60)
    pq.write_table(tail, run_dir / "tail.parquet")
    staged = _Staged(elements=total, head_batches=len(head_parts), batches=len(head_parts) + tail_batches,
                     buckets=n, inputs=names, first_stage=first if stages is not None else None,
                     sink_width=None if stages is None else stage_width(stages[-1], n))
    if not head_parts:
        _stage_tail(run_dir, staged, batch_size, None)
    return staged


def _prepare(req: RunRequest, run_dir: Path, batch_size: int, n: int, keys: list[str],
             routing: Any = None, stages: list[Any] | None = None) -> _Staged:
    """Stage the input, or check that a resumed run is the same run (same input, query and layout)."""
    meta_path = run_dir / "run.json"
    graph = isinstance(req.input, dict) or is_graph(req.spec)
    if graph:
        srcs = req.inputs
        paths = {k: (v if isinstance(v, TableSource) else Path(str(v))) for k, v in srcs.items()
                 if isinstance(v, (str, Path, TableSource)) and str(v) != "-"}
        fingerprint: Any = {k: _fingerprint(p) for k, p in paths.items()} if len(paths) == len(srcs) else None
        source = next(iter(paths.values()), None) if fingerprint is not None else None
    else:
        source = (req.input if isinstance(req.input, TableSource) else Path(str(req.input))
                  if isinstance(req.input, (str, Path)) and str(req.input) != "-" else None)
        fingerprint = None if source is None else _fingerprint(source)
    meta = {"layout": _LAYOUT_VERSION, "query": req.spec.to_json_dict(), "batch_size": batch_size,
            "buckets": n, "on_violation": req.on_violation,
            "input": fingerprint}
    old = resumed_meta(run_dir, meta, {"query": "query spec", "input": "input file",
                                       "layout": "state layout (an older udmkit's)"})
    if old is not None:
        return _Staged(**old["staged"])
    if source is None:
        raise UdmError("--engine spark-streaming with --checkpoint needs an input file, not stdin")
    run_dir.mkdir(parents=True, exist_ok=True)
    staged = (_stage_graph(req, run_dir, batch_size, n, routing, stages) if graph
              else _stage(req, run_dir, batch_size, n, keys))
    write_atomic(meta_path, json.dumps({**meta, "staged": staged.__dict__}))
    return staged


def run_spark_streaming(req: RunRequest) -> RunResult:
    require_spark(connect=True)
    arrival = [s for s in (req.input.values() if isinstance(req.input, dict) else [req.input])
               if isinstance(s, ArrivalSource)]
    if arrival:  # a live input stamped with its arrival time on the driver
        return run_arrival_stream(req, arrival[0])
    if isinstance(req.input, (str, Path)) and str(req.input) != "-" and Path(req.input).is_dir():
        return run_directory_stream(req, Path(req.input))  # a directory that event files land in
    t0 = time.perf_counter()
    batch_size = req.batch_size or recorded(req.checkpoint, "batch_size") or DEFAULT_BATCH_SIZE
    spark = get_spark(req.options.get("master"), java_options=STREAMING_JAVA_OPTIONS)  # (a run with an end)
    shared_run_dir(req)
    with checkpoint_held(spark, req.checkpoint):  # (a killed run's JVM may still be writing it)
        return _run_files(req, spark, batch_size, t0)


def _run_files(req: RunRequest, spark: Any, batch_size: int, t0: float) -> RunResult:
    graph = isinstance(req.input, dict) or is_graph(req.spec)
    routing: Any = None
    stages = None
    if graph:
        routing = graph_routing(req.spec)
        keys = routing[req.bound.graph.inputs[0]] if isinstance(routing, dict) else []
        wanted = bucket_count(req.options, spark, req.checkpoint)
        stages = stream_stages(req.spec, wanted) if routing is None else None
        n = 1 if routing is None and stages is None else wanted
    else:
        keys, n = key_buckets(req.spec, req.options, spark, req.checkpoint)
    if _holds_ecti(req):  # external CTIs count the whole input: one engine sees all of it (SEMANTICS §11)
        keys, routing, stages, n = [], None, None, 1
    temp = req.checkpoint is None
    run_dir = Path(tempfile.mkdtemp(prefix="udm-stream-")) if temp else Path(req.checkpoint)
    per_input: Counter[str] = Counter()
    try:
        if not temp:
            staged = _prepare(req, run_dir, batch_size, n, keys, routing, stages)
        elif graph:
            staged = _stage_graph(req, run_dir, batch_size, n, routing, stages)
        else:
            staged = _stage(req, run_dir, batch_size, n, keys)
        stop_after = req.options.get("stop_after_batches")
        live = LiveOutput(run_dir, req.output, req.dead_letter)
        with local_checkpoint_files(spark):  # (the run directory is on this machine's disk)
            _run_query(spark, req, run_dir, staged, stop_after, batch_size, live)
        n_out, n_dead, reasons, truncated, merges = live.summary(per_input)
        counts = _input_counts(req, run_dir, staged, per_input, n_dead) if graph else {
            req.bound.graph.inputs[0]: {"elements_in": staged.elements, "dead_lettered": n_dead}}
    finally:
        if temp:
            shutil.rmtree(run_dir, ignore_errors=True)
    return RunResult(engine="spark-streaming", elements_in=staged.elements, elements_out=n_out,
                     dead_lettered=n_dead, reasons=reasons, truncated_at=truncated,
                     seconds=time.perf_counter() - t0, inputs=counts, lmerge=merges)


def _holds_ecti(req: RunRequest) -> bool:
    """Some input file may hold an external CTI: its ranges count the whole input, so the run keeps one engine
    (one bucket, no engine per key) that sees all of it (SEMANTICS §11, semantics-notes 69)."""
    return any(may_hold_ecti(src) for src in (req.input.values() if isinstance(req.input, dict) else [req.input]))


def _input_counts(req: RunRequest, run_dir: Path, staged: _Staged, dead: Counter[str], n_dead: int
                  ) -> dict[str, dict[str, int]]:
    """`RunResult.inputs` of a graph run: staged rows per input (read back from the staged files) and dead
    letters per input."""
    names = list(req.bound.graph.inputs)
    got: Counter[str] = Counter()
    first = staged.first_stage
    for part in (run_dir / "input").glob("part-*.parquet"):
        col = pq.read_table(part, columns=["input", "kind"] + (["_stage"] if first is not None else []))
        real = col.filter(pc.invert(pc.fill_null(pc.equal(col.column("kind"), END_KIND), False)))
        for name in names:  # (control rows are cti(T), one per input: not counted below)
            mine = pc.equal(real.column("input"), name)
            if first is not None:  # one copy per stage reading it: count the first stage's
                mine = pc.and_(mine, pc.equal(real.column("_stage"), first[name]))
            got[name] += pc.sum(pc.fill_null(mine, False)).as_py() or 0
    if first is None and (run_dir / "tail.done").read_text(encoding="utf-8") != "None":
        for name in names:
            got[name] -= 1
    if len(names) == 1:
        return {names[0]: {"elements_in": got[names[0]], "dead_lettered": n_dead}}
    return {x: {"elements_in": got[x], "dead_lettered": dead[x]} for x in names}


def _drop_unplanned_source_entries(checkpoint: Path) -> None:
    """Before a restart: drop the file source's log entries past the last planned batch.

    Spark's file source writes its log entry for batch N (the files it will read) before the offset log
    entry of N. A run killed between the two leaves an entry no batch owns; on restart Spark plans batch N
    over that entry *and* the next one (two of our one-file micro-batches in one), so batch ids no longer
    match the staged parts, and the run would wait for a batch that never comes. Without the orphan entry
    Spark plans batch N over the same file again, as the uninterrupted run did."""
    offsets = checkpoint / "offsets"
    planned = -1
    if offsets.is_dir():
        ids = [int(p.name) for p in offsets.iterdir() if p.name.isdigit()]
        if ids:
            last = (offsets / str(max(ids))).read_text(encoding="utf-8").strip().splitlines()[-1]
            planned = int(json.loads(last).get("logOffset", max(ids)))
    for log in (checkpoint / "sources").glob("*"):
        for entry in list(log.iterdir()):
            stem = entry.name.split(".")[0]
            if stem.isdigit() and int(stem) > planned:
                entry.unlink()
                (log / f".{entry.name}.crc").unlink(missing_ok=True)


def _run_query(spark: Any, req: RunRequest, run_dir: Path, staged: _Staged, stop_after: int | None,
               batch_size: int, live: LiveOutput) -> None:
    """Run the stream until every staged micro-batch is committed; the tail is staged once the head is.
    Each committed micro-batch reaches the user's files as soon as the loop sees its commit (``live``)."""
    ddl = (BLOB_DDL if staged.inputs is None else  # a linear query's parts: `stream_parts.bucket_blobs`
           f"{ELEMENT_DDL}, _seq bigint, _bucket bigint, input string"
           + (", _stage bigint, _key string" if staged.first_stage is not None else ""))
    source = (spark.readStream.schema(ddl)
              .option("maxFilesPerTrigger", 1).parquet(str(run_dir / "input")))
    _drop_unplanned_source_entries(run_dir / "spark")
    result = run_stream(req.bound, source, on_violation=req.on_violation, buckets=staged.buckets,
                        per_key=not _holds_ecti(req))
    writer = result.writeStream.foreachBatch(batch_writer(run_dir, staged.sink_width or staged.buckets, stop_after))
    trigger = req.options.get("trigger")
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    query = (writer.option("checkpointLocation", str(run_dir / "spark"))
             .queryName(f"udm-{run_dir.name}").start())
    try:
        while True:
            if query.awaitTermination(0.2):
                query.exception()  # raises what stopped it; a clean stop here means someone stopped it
                raise StreamStopped(_stopped_message(run_dir, req))
            done = committed_batches(run_dir)
            live.deliver(done)
            if done >= staged.head_batches and not (run_dir / "tail.done").exists():
                # (one engine over an input with ECTIs knows T itself; a cti(T) would be an input CTI the
                # local engine never sees, and one that may complete an ECTI chain: semantics-notes 69)
                t_end = None if _holds_ecti(req) else _reached(run_dir, staged.head_batches)
                _stage_tail(run_dir, staged, batch_size, t_end)
            if done >= staged.batches:
                break
            if req.progress is not None:  # (bytes done is estimated from the batches done)
                size = Path(req.input).stat().st_size if isinstance(req.input, (str, Path)) and str(req.input) != "-" \
                    else None
                req.progress(size * done // staged.batches if size else done, size,
                             min(done * batch_size, staged.elements))
                status = getattr(req.progress, "status", None)  # a display that shows a status line
                if status is not None:
                    text = progress_text(query.lastProgress, done, staged.batches)
                    if text:
                        status(text)
    except KeyboardInterrupt:
        stop_between_batches(query, wait=5.0)  # (the micro-batch under way may finish first)
        raise StreamStopped(_stopped_message(run_dir, req)) from None
    except StreamStopped:
        raise
    except Exception as exc:
        if "udm-stop-requested" in str(exc):
            raise StreamStopped(_stopped_message(run_dir, req)) from None
        raise explain_failure(exc) from None
    finally:
        if query.isActive:
            query.stop()
        live.deliver(committed_batches(run_dir))  # (a stopped run's committed batches too)


def _stopped_message(run_dir: Path, req: RunRequest) -> str:
    done = len(list((run_dir / "spark" / "commits").glob("[0-9]*")))
    if req.checkpoint is None:
        return f"stopped after {done} micro-batches (no --checkpoint: nothing to resume)"
    return (f"stopped after {done} committed micro-batches; run the same command again "
            f"(--checkpoint {req.checkpoint}) to resume")


ENGINES["spark-streaming"] = run_spark_streaming
