"""The element rows the ``udm run`` driver hands Spark's file source on ``--engine spark-streaming``: their
schema, control rows, one Parquet file per micro-batch, each row's bucket and key as one engine would see
ids (`LiveIds`), and the largest time the buckets' engines reached (T, semantics-notes 2).

Shared by the staged file runner (`udm.host.spark.stream_files`, the whole input staged up front) and the
arrival-time feed (`udm.host.spark.stream_arrival`, lines staged as they are read); neither imports the other.
"""

from __future__ import annotations

import heapq
import json
import os
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from udm.host.spark.convert import ELEMENT_COLUMNS
from udm.host.spark.partition import partition_keys
from udm.host.spark.stream_wire import ALL_STAGES, BROADCAST, UNROUTABLE
from udm.host.temporal.strict import canonical_json

__all__ = ["BLOB_DDL", "DEFAULT_BATCH_SIZE", "LiveIds", "bucket_blobs", "bucket_count", "control_part", "crc_bucket",
           "driver_routes", "key_buckets", "part_schema", "reached_in", "recorded", "write_parts"]

#: Elements per micro-batch without ``--batch-size`` (a live feed's most per micro-batch). INTERFACES §3 says
#: 50; a micro-batch costs Spark about a second of planning and commit whatever its size, so 50 gave ~26
#: el/s. The output CHT does not depend on it (semantics-notes 45).
DEFAULT_BATCH_SIZE = 10_000


def crc_bucket(payload: Any, keys: list[str], n: int) -> int:
    values = [payload.get(k) if isinstance(payload, dict) else None for k in keys]
    return zlib.crc32(canonical_json(values).encode()) % n


def part_schema(graph: bool = False, staged: bool = False) -> pa.Schema:
    return pa.schema([(c, pa.int64() if c in ("le", "re", "re_new", "t", "line") else pa.string())
                      for c in ELEMENT_COLUMNS] + [("_seq", pa.int64()), ("_bucket", pa.int64())]
                     + ([("input", pa.string())] if graph else [("_key", pa.string())])
                     + ([("_stage", pa.int64()), ("_key", pa.string())] if staged else []))


def control_part(kind: str, t: int | None, seq: int, input: str | None = None, graph: bool = False,
             staged: bool = False) -> pa.Table:
    cols: dict[str, list[Any]] = {c: [None] for c in ELEMENT_COLUMNS}
    cols["kind"], cols["t"] = [kind], [t]
    extra: dict[str, list[Any]] = {"input": [input]} if graph else {"_key": [None]}
    if staged:
        extra["_stage"] = [ALL_STAGES]
        extra["_key"] = [None]
    return pa.table({**cols, "_seq": [seq], "_bucket": [BROADCAST], **extra}, schema=part_schema(graph, staged))


def write_parts(run_dir: Path, tables: list[pa.Table], first: int, mtime: float) -> None:
    """Micro-batch files ``first``, ``first+1``, ...: written aside then renamed in (the file source must
    never see half a file), modification times increasing (the file source's order)."""
    inp = run_dir / "input"
    inp.mkdir(parents=True, exist_ok=True)
    for k, tb in enumerate(tables, start=first):
        tmp = run_dir / f".part-{k:08d}.parquet"
        pq.write_table(tb, tmp)
        os.utime(tmp, (mtime + k, mtime + k))
        os.replace(tmp, inp / f"part-{k:08d}.parquet")


def bucket_blobs(table: pa.Table, n: int) -> pa.Table:
    """A linear query's staged micro-batch (`part_schema` rows, in order) as one row per key bucket of ``n``
    that has input: ``_bucket`` and ``_blob``, that bucket's call input as an Arrow IPC stream. A bucket's
    rows are those routed to it, every `BROADCAST` row (CTIs, control rows) and, for bucket 0, the
    `UNROUTABLE` ones, as ``udm_seq``, ``udm_route`` (the row's ``_bucket``), ``udm_bucket`` and ``udm_key``
    beside the element columns: what `udm.host.spark.streaming.run_stream` makes of such rows in Spark.

    Why: the driver has routed every row already. Handed the rows, Spark decoded, copied to each bucket,
    shuffled and sorted all of them only to bring each where ``_bucket`` said, and pyspark's
    ``transformWithStateInPandas`` gave them to the bucket's Python worker as pandas rows rebuilt one by
    one; as one value per bucket they cross both without being looked at (semantics-notes 45)."""
    route = table.column("_bucket")
    rows = pa.table({**{c: table.column(c) for c in ELEMENT_COLUMNS}, "udm_seq": table.column("_seq"),
                     "udm_route": route, "udm_key": table.column("_key")})
    shared = pc.equal(route, BROADCAST)
    buckets: list[int] = []
    blobs: list[bytes] = []
    for b in range(n):
        mine = pc.or_(pc.equal(route, b), shared)
        if b == 0:
            mine = pc.or_(mine, pc.equal(route, UNROUTABLE))
        part = rows.filter(pc.fill_null(mine, False))
        if not part.num_rows:
            continue
        part = part.add_column(part.column_names.index("udm_key"), "udm_bucket",
                               pa.array([b] * part.num_rows, pa.int64()))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, part.schema) as w:
            w.write_table(part)
        buckets.append(b)
        blobs.append(sink.getvalue().to_pybytes())
    return pa.table({"_bucket": pa.array(buckets, pa.int64()), "_blob": pa.array(blobs, pa.binary())})


#: the Spark schema of `bucket_blobs` parts
BLOB_DDL = "_bucket bigint, _blob binary"


class LiveIds:
    """Which input ids the engine holds live (SEMANTICS §1), followed on the driver while routing, so that
    an insert reusing a live id goes to the bucket holding it and is dead-lettered there as a duplicate,
    exactly as one engine would. It mirrors the first step's checks that decide liveness (lifetime, CTI
    violation and ``adjust``, missing group keys, matching retractions, ids forgotten once a CTI passes
    their end); where it errs, the engine of the bucket it picked still decides."""

    def __init__(self, adjust: bool) -> None:
        self.adjust = adjust
        self.cti: int | None = None
        self.live: dict[str, list[Any]] = {}  # id -> [bucket, le, re, key]
        self.heap: list[tuple[int, str]] = []

    def insert(self, id: str, le: int | None, re: int | None, bucket: int, has_keys: bool, key: str | None = None
               ) -> tuple[int, str | None]:
        """The (bucket, key) the insert goes to: those of a live insert of its id, else its own."""
        rec = self.live.get(id)
        if rec is not None:
            return rec[0], rec[3]
        if le is None or re is None or re <= le or not has_keys:
            return bucket, key
        if self.cti is not None and le < self.cti:
            if not (self.adjust and re > self.cti):
                return bucket, key
            le = self.cti
        self.live[id] = [bucket, le, re, key]
        heapq.heappush(self.heap, (re, id))
        return bucket, key

    def retract(self, id: str, le: int | None, re: int | None, rn: int | None) -> tuple[int, str | None] | None:
        """The (bucket, key) of the live insert the retraction names, or None (no live insert has its id)."""
        rec = self.live.get(id)
        if rec is None:
            return None
        if re is None or rn is None or (le, re) != (rec[1], rec[2]):
            return rec[0], rec[3]
        if self.cti is None or min(re, rn) >= self.cti:
            if rn <= rec[1]:
                del self.live[id]
            else:
                rec[2] = rn
                heapq.heappush(self.heap, (rn, id))
        return rec[0], rec[3]

    def advance(self, t: int | None) -> None:
        if t is None or (self.cti is not None and t <= self.cti):
            return
        self.cti = t
        while self.heap and self.heap[0][0] < t:
            re, id = heapq.heappop(self.heap)
            rec = self.live.get(id)
            if rec is not None and rec[2] == re:
                del self.live[id]


def driver_routes(table: pa.Table, kinds: list[str | None], ts: list[int | None], keys: list[str], n: int,
                  on_violation: str, bucket_of: Any = None, key_of: Any = None, *, live: LiveIds | None = None,
                  last: dict[str, int] | None = None, graph: bool = False) -> tuple[list[int], list[str | None]]:
    """Each element's bucket: an insert by its group key (or where its live id is), a retraction after the
    insert of its id, a CTI to every bucket, a bad row to bucket 0 (whose engine dead-letters it). With
    ``key_of`` (a linear query's `udm.host.spark.key_state.payload_key`) also each insert's and retraction's key
    in its bucket, the same way (a retraction of no live insert: None), so that the per-key state needs no
    id map (semantics-notes 41). ``live`` and ``last`` carry the ids from one call to the next when an input
    is routed piece by piece as it is read (`udm.host.spark.stream_arrival`). ``graph``: a query graph's input
    keeps an insert's id live even when the insert lacks the key fields (the step that needs them dead-letters
    it, not the input), so a later insert reusing that id is a duplicate and goes where the first went."""
    ids = table.column("id").to_pylist()
    les, res, rns = (table.column(c).to_pylist() for c in ("le", "re", "re_new"))
    payloads = table.column("payload").to_pylist()
    live = live if live is not None else LiveIds(adjust=on_violation == "adjust")
    last = last if last is not None else {}
    routes: list[int] = []
    row_keys: list[str | None] = []
    for i, kind in enumerate(kinds):
        key: str | None = None
        if kind == "cti":
            live.advance(ts[i])
            routes.append(BROADCAST)
        elif kind == "insert":
            text = payloads[i]
            payload = json.loads(text) if text else {}
            has_keys = graph or (isinstance(payload, dict) and all(k in payload for k in keys))
            b, key = live.insert(ids[i], les[i], res[i], (bucket_of or crc_bucket)(payload, keys, n), has_keys,
                                 key_of(payload, keys) if key_of is not None else None)
            last[ids[i]] = b
            routes.append(b)
        elif kind == "retract":
            got = live.retract(ids[i], les[i], res[i], rns[i])
            routes.append(got[0] if got is not None else last.get(ids[i], 0))
            key = got[1] if got is not None else None
        else:
            routes.append(0)
        row_keys.append(key)
    return routes, row_keys


def reached_in(run_dir: Path, batches: int) -> int | None:
    """The largest finite time any bucket's engine reached in the first ``batches`` micro-batches."""
    best: int | None = None
    for k in range(batches):
        t = json.loads((run_dir / "out" / f"{k:08d}.stats").read_text(encoding="utf-8"))["T"]
        if t is not None and (best is None or t > best):
            best = t
    return best


def recorded(checkpoint: Any, field: str) -> int | None:
    """A whole-number setting a checkpointed run recorded in its ``run.json`` (``buckets``, ``batch_size``):
    a resumed run keeps what it began with. None when there is no record or it lacks a usable value (not a
    run's record: the resume check names what is wrong)."""
    meta = Path(checkpoint) / "run.json" if checkpoint is not None else None
    if meta is None or not meta.is_file():
        return None
    try:
        return int(json.loads(meta.read_text(encoding="utf-8"))[field])
    except (ValueError, KeyError, TypeError):
        return None


def bucket_count(options: dict[str, Any], spark: Any, checkpoint: Any = None) -> int:
    """How many key buckets a keyed streaming run uses: ``options["buckets"]``, else what the run resumed
    from ``checkpoint`` was started with (its ``run.json``: a session's default may have changed since, e.g.
    on a machine with other cores), else the session's shuffle partitions (part of the state's layout,
    semantics-notes 43)."""
    if options.get("buckets"):
        return int(options["buckets"])
    recorded_buckets = recorded(checkpoint, "buckets")
    if recorded_buckets is not None:
        return recorded_buckets
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 1)


def key_buckets(spec: Any, options: dict[str, Any], spark: Any, checkpoint: Any = None) -> tuple[list[str], int]:
    """A one-input query's partition keys and how many key buckets its streaming run uses (one when keyless:
    a single engine sees every element)."""
    keys = partition_keys(spec)
    return keys, (bucket_count(options, spark, checkpoint) if keys else 1)
