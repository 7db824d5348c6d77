"""State kept per group key inside one key bucket of the Structured Streaming path (issue 14).

Why: a bucket that keeps one engine for all its keys reads and writes all of them on every micro-batch
that touches it, so a micro-batch costs O(bucket state). Here a bucket keeps one engine per routing-key
value (the query's partition-key fields, `udm.host.spark.partition.partition_keys`), each pickled on its
own, and a small index of every live key's *due* time and *hold*; a micro-batch loads only the keys with
elements in it and the keys due at or before its new CTI (semantics-notes 41).

* **due** (`engine_due`): the earliest input CTI at which the key's engine would emit output or change
  state (a window's end; an event's end that lets the registry forget it, when no window comes first).
  Below it the engine, fed a CTI, only moves its output CTI. Where the engine's state is not understood
  here (other window families, ``early``, ``time_bound``, ...), due is the next CTI: such a key is loaded
  on every CTI advance (correct, not O(change)).
* **hold**: below its due, a key's output CTI is ``min(g(c), hold)``, where ``g(c)`` is what an engine
  that holds nothing outputs at input CTI ``c``. The bucket keeps such an *idle engine* (fed only the
  CTIs), so the bucket's output CTI is ``min(idle engine's CTI, every key's hold)`` — what one engine over
  the whole bucket outputs, since its output CTI is the minimum over its groups and every step after a
  window maps CTIs monotonically. The hold is found by a probe: a copy of the key's engine fed
  ``cti(due - 1)``.
* A loaded key's engine is first fed the bucket's CTI, so its elements are judged against the CTI one
  engine would have seen; it also takes the bucket's ``reached`` (T so far, semantics-notes 2).
* **Slabs** (semantics-notes 74): a call writes the engines it changed packed together into *slabs*, a
  state value each of up to `SLAB_BYTES`; the index names each key's slab. A call reads each slab holding
  a key it loads once, and writes one value per `SLAB_BYTES` of changed engines, instead of a state-store
  round trip per key each way (at 100 keys a micro-batch those round trips were half of the bucket's
  time). A slab read in a call and left under half full has its remaining keys moved to the call's new
  slabs, so the store holds at most about twice the live engines; a slab no key lives in is dropped.
* A key whose engine holds nothing is dropped; if it comes back it gets a new engine with a new serial,
  and output ids are ``bucket.serial.id`` (unique in the stream).
* Ids: a retraction, or an insert reusing a live id, goes to the key holding that id, as one engine would
  judge them (semantics-notes 41). The ``udm run`` driver names each row's key itself (a ``udm_key``
  column, `udm.host.spark.stream_files`); a one-bucket DataFrame stream, whose retractions need not
  repeat the key fields, keeps an id map (``track_ids``).

Due times and holds come from the engine itself (`QueryRunner.due`, `graph_due`, `hold`). `KeyedBucket`
works on any `BucketStore`: the Spark processor (`udm.host.spark.streaming`) backs it by a
``transformWithStateInPandas`` MapState of slabs and a ValueState for the index; `DictStore` backs it by
dicts and counts reads (the tests' instrumented hook).
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
from sortedcontainers import SortedList

from udm.host.engine import QueryRunner
from udm.host.engine.common import INF, NEG, DeadLetter
from udm.host.io.batch import ElementBatch
from udm.host.query.runners import make_runner
from udm.host.spark.rows import input_runs
from udm.host.spark.stream_wire import join_value
from udm.host.temporal.elements import Cti, Element
from udm.host.temporal.strict import canonical_json

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from udm.host.model.plan import BoundQuery

__all__ = ["NO_KEY", "SLAB_BYTES", "BucketStore", "DictStore", "KeyedBucket", "KeyedResult", "dump_index",
           "graph_key_of", "graph_payload_key", "key_of", "load_index", "payload_key"]

#: the key of rows that carry no usable key (bad rows, inserts without the key fields): one engine
#: dead-letters them as one engine over the bucket would
NO_KEY = ""
#: index layout (a new one needs a new streaming layout number, semantics-notes 42); 2: engines in slabs
_INDEX_VERSION = 2
#: a slab's size: the changed engines of a call are written in values of about this many bytes
SLAB_BYTES = 1 << 20


#: the start of a compressed index blob (semantics-notes 61)
_ZINDEX = b"udmz1"


def dump_index(ix: Any) -> bytes:
    """The index blob: pickled, then zlib-compressed (level 1). Its columns repeat the same large numbers
    (INF dues, NEG CTIs) and key shapes, so 10,000 keys' ~590 KB become ~55 KB for ~2.5 ms of CPU — the blob
    is read and written on every call, by Spark over its state server (semantics-notes 61)."""
    return _ZINDEX + zlib.compress(pickle.dumps(ix, protocol=pickle.HIGHEST_PROTOCOL), 1)


def load_index(blob: bytes) -> Any:
    """`dump_index`'s blob (a plain pickled one, of streaming layouts 3 and 4, is refused as another layout)."""
    if not blob.startswith(_ZINDEX):
        raise ValueError("bucket state of another layout: start from a new checkpoint")
    return pickle.loads(zlib.decompress(blob[len(_ZINDEX):]))


class BucketStore(Protocol):
    """Where a bucket's per-key state lives: slabs of engines by number (module doc), ids, the index."""

    def get_slab(self, n: int) -> bytes | None: ...
    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        """Every slab in one pass (the end of input needs every key)."""
        ...
    def put_slab(self, n: int, blob: bytes) -> None: ...
    def drop_slab(self, n: int) -> None: ...
    def get_id(self, id: str) -> tuple[str, int] | None: ...
    def put_id(self, id: str, key: str, re: int) -> None: ...
    def drop_id(self, id: str) -> None: ...
    def get_index(self) -> bytes | None: ...
    def put_index(self, blob: bytes) -> None: ...


@dataclass
class DictStore:
    """A `BucketStore` in dicts, counting slab reads and writes (tests: a micro-batch reads only what it
    touches)."""

    slabs: dict[int, bytes] = field(default_factory=dict)
    ids: dict[str, tuple[str, int]] = field(default_factory=dict)
    index: bytes | None = None
    counts: Counter[str] = field(default_factory=Counter)

    def get_slab(self, n: int) -> bytes | None:
        self.counts["slab_reads"] += 1
        got = self.slabs.get(n)
        self.counts["bytes_read"] += len(got) if got is not None else 0
        return got

    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        self.counts["bulk_reads"] += 1
        for n, blob in list(self.slabs.items()):
            self.counts["bytes_read"] += len(blob)
            yield n, blob

    def put_slab(self, n: int, blob: bytes) -> None:
        self.counts["slab_writes"] += 1
        self.slabs[n] = blob

    def drop_slab(self, n: int) -> None:
        self.slabs.pop(n, None)

    def get_id(self, id: str) -> tuple[str, int] | None:
        self.counts["id_reads"] += 1
        return self.ids.get(id)

    def put_id(self, id: str, key: str, re: int) -> None:
        self.counts["id_writes"] += 1
        self.ids[id] = (key, re)

    def drop_id(self, id: str) -> None:
        self.ids.pop(id, None)

    def get_index(self) -> bytes | None:
        self.counts["bytes_read"] += len(self.index) if self.index is not None else 0
        return self.index

    def put_index(self, blob: bytes) -> None:
        self.index = blob


def key_of(payload_json: str | None, fields: list[str]) -> str:
    """The routing-key value of a row: the JSON of its key fields' values (1 and 1.0 differ, as groups
    do), or `NO_KEY` when the payload is not an object holding them all."""
    return _key_json(payload_json, fields, None)


def _key_json(payload_json: str | None, fields: list[str], part: Callable[[Any], Any] | None) -> str:
    """The JSON of a payload's ``fields`` values (each through ``part`` if given), or `NO_KEY` when the
    payload is not an object holding them all."""
    if not payload_json:
        return NO_KEY
    try:
        p = json.loads(payload_json)
    except ValueError:
        return NO_KEY
    return payload_key(p, fields, part)


def payload_key(p: Any, fields: list[str], part: Callable[[Any], Any] | None = None) -> str:
    """`key_of` of a payload already parsed (the ``udm run`` driver parses each payload once for its bucket
    and its key)."""
    if not isinstance(p, dict) or any(f not in p for f in fields):
        return NO_KEY
    values = [p[f] for f in fields] if part is None else [part(p[f]) for f in fields]
    return canonical_json(values)


def graph_payload_key(p: Any, fields: list[str]) -> str:
    """`graph_key_of` of a payload already parsed (the ``udm run`` driver's and a producing stage's)."""
    return payload_key(p, fields, join_value)


def graph_key_of(payload_json: str | None, fields: list[str]) -> str:
    """`key_of` for a query graph: numbers by value (``1`` and ``1.0`` alike, as a join matches them and
    as the graph's bucket hash does), so rows a join must meet share a key. (Coarser than a window's
    groups: one engine holding two of its groups is still one engine over a part of the bucket.)"""
    return _key_json(payload_json, fields, join_value)


def _holds_nothing(runner: QueryRunner) -> bool:
    return not any(runner.state_size().values()) and not runner.repairing


def _live_re(runner: QueryRunner, id: str, input: str) -> int | None:
    """The RE of live event ``id`` of ``input``, or None when it is not live."""
    return runner.live_end(id, input)


@dataclass
class _Entry:
    """One live key in the index."""

    due: int
    hold: int
    serial: int
    #: the output CTI its engine emitted so far
    out: int = NEG
    #: a graph's key with exact dues: per input, the CTI that loads it (`graph_due`)
    dues: dict[str, int] | None = None
    #: the slab holding its engine (module doc; -1 until the call's slabs are written)
    slab: int = -1


@dataclass
class _Index:
    """The per-bucket index (one small blob): every live key's due and hold, the bucket's CTI so far,
    the idle engine and the counters."""

    cti: int = NEG
    out: int = NEG
    reached: int = NEG
    truncated_at: int | None = None
    serial: int = 0
    finished: bool = False
    idle: bytes | None = None
    idle_out: int = NEG
    #: how many buckets the stream has (routing by key depends on it; 0: not recorded)
    buckets: int = 0
    #: a query graph's bucket (semantics-notes 52): ``cti`` counts CTI advances of any input, ``ctis`` holds
    #: each input's CTI (class defaults: an index pickled before graphs had these reads as a linear one)
    graph: bool = False
    ctis: dict[str, int] | None = None
    #: a graph's exact dues, per input: (threshold, key)
    by_input: dict[str, SortedList] | None = None
    keys: dict[str, _Entry] = field(default_factory=dict)
    #: per slab: how many keys it was written with, and how many of them it still holds
    slabs: dict[int, list[int]] = field(default_factory=dict)
    next_slab: int = 0
    by_due: SortedList = field(default_factory=SortedList)
    by_hold: SortedList = field(default_factory=SortedList)
    v: int = _INDEX_VERSION

    def __getstate__(self) -> dict[str, Any]:
        """The keys as columns, not an object each: the index is read and written on every call, and at
        20,000 keys the objects and their sorted copies made it a 2.5 MB, ~160 ms round trip (as much as
        one engine over the whole bucket); the sorted lists are rebuilt on load."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("keys", "by_due", "by_hold", "by_input")}
        names = list(self.keys)
        es = list(self.keys.values())
        inputs = sorted({x for e in es if e.dues for x in e.dues})
        state["cols"] = (names, [e.due for e in es], [e.hold for e in es], [e.serial for e in es],
                         [e.out for e in es], {x: [e.dues.get(x, NEG) if e.dues else NEG for e in es] for x in inputs},
                         [e.slab for e in es])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        cols = state.pop("cols", None)
        self.__dict__.update(state)
        if cols is None or state.get("v") != _INDEX_VERSION:  # another layout: refused by its reader
            return
        names, due, hold, serial, out, dues, slab = cols
        self.keys = {}
        for i, k in enumerate(names):
            d = {x: col[i] for x, col in dues.items() if col[i] != NEG}
            self.keys[k] = _Entry(due[i], hold[i], serial[i], out[i], d or None, slab[i])
        self.by_due = SortedList(zip(due, names, strict=True))
        self.by_hold = SortedList(zip(hold, names, strict=True))
        self.by_input = {x: SortedList((t, k) for t, k in zip(col, names, strict=True) if t != NEG)
                         for x, col in dues.items()} or None

    def set(self, key: str, e: _Entry) -> None:
        self.remove(key)
        self.keys[key] = e
        self.by_due.add((e.due, key))
        self.by_hold.add((e.hold, key))
        if e.dues:
            if self.by_input is None:
                self.by_input = {}
            for x, t in e.dues.items():
                self.by_input.setdefault(x, SortedList()).add((t, key))

    def remove(self, key: str) -> None:
        old = self.keys.pop(key, None)
        if old is not None:
            self.by_due.remove((old.due, key))
            self.by_hold.remove((old.hold, key))
            for x, t in (old.dues or {}).items():
                assert self.by_input is not None
                self.by_input[x].remove((t, key))

    def due_by(self, c: int) -> list[str]:
        """Keys due by ``c`` (a graph's: by its tick ``c``, or by an input's CTI for exact dues)."""
        due = [k for _, k in self.by_due.irange(maximum=(c, "\U0010ffff"))]
        if self.by_input and self.ctis:
            seen = set(due)
            for x, lst in self.by_input.items():
                t = self.ctis.get(x)
                if t is None:
                    continue
                for _, k in lst.irange(maximum=(t, "\U0010ffff")):
                    if k not in seen:
                        seen.add(k)
                        due.append(k)
        return due


@dataclass
class KeyedResult:
    """What one call produced: output elements with their id prefixes, dead letters, the bucket's output
    CTI so far, the stats payload."""

    out: list[tuple[str, Element]]
    dead: list[DeadLetter]
    cti: int | None
    stats: dict[str, Any]


@dataclass
class _Live:
    runner: QueryRunner
    serial: int
    out: int = NEG
    #: ids of live events (the id map's entries of this key, ``track_ids``) and their REs
    ids: dict[str, int] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    #: a graph's key: the CTI each input was brought to
    fed: dict[str, int] = field(default_factory=dict)


class KeyedBucket:
    """One bucket's call: load what it needs from ``store``, run, write back (module doc)."""

    def __init__(self, bound: BoundQuery, on_violation: str | None, keys: list[str] | Mapping[str, list[str]],
                 store: BucketStore, bucket: int, *, track_ids: bool = False, buckets: int = 0,
                 derived_inputs: tuple[str, ...] = ()) -> None:
        """``keys``: the routing-key fields; for a query graph, each input's
        (`udm.host.spark.partition.graph_routing`), which makes this a graph bucket (semantics-notes 52).
        ``derived_inputs``: a stage's exchange streams (`udm.host.spark.stage_bucket`): they do not move T,
        which the caller brings in as ``reach`` rows (semantics-notes 59)."""
        self.bound = bound
        self.derived_inputs = derived_inputs
        self.on_violation = on_violation
        self.graph = isinstance(keys, Mapping)
        self.routing: dict[str, list[str]] = dict(keys) if isinstance(keys, Mapping) else {}
        self.fields = [] if isinstance(keys, Mapping) else keys
        self.store = store
        self.bucket = bucket
        self.track_ids = track_ids
        blob = store.get_index()
        self.index: _Index = load_index(blob) if blob is not None else _Index()
        if not isinstance(self.index, _Index) or self.index.v != _INDEX_VERSION:
            raise ValueError("bucket state of another layout: start from a new checkpoint")
        if blob is None:
            self.index.graph = self.graph
            self.index.ctis = {} if self.graph else None
        elif self.index.graph != self.graph:
            raise ValueError("bucket state of another layout (a linear query's and a query graph's): start "
                             "from a new checkpoint")
        if buckets and self.index.buckets and self.index.buckets != buckets:  # keys would be routed elsewhere
            raise ValueError(f"the checkpoint's state was written with {self.index.buckets} key buckets, this "
                             f"query has {buckets}: restart with buckets={self.index.buckets} (or the same "
                             "spark.sql.shuffle.partitions)")
        if buckets:
            self.index.buckets = buckets
        self.idle = (self._restore(self.index.idle) if self.index.idle is not None else self._new_runner())
        self.loaded: dict[str, _Live] = {}
        self.out: list[tuple[str, Element]] = []
        self.dead: list[DeadLetter] = []
        self.reasons: Counter[str] = Counter()
        self._before: dict[str, dict[str, int]] = {}
        self.fresh_ids: dict[str, str] = {}
        #: snapshots read in bulk (`_finish`), taken by `_engine` instead of one read per key
        self._bulk: dict[str, bytes] = {}
        #: the slabs read in this call, by number: each key's pickled engine
        self._read: dict[int, dict[str, bytes]] = {}

    # -- engines ----------------------------------------------------------------------------------------
    def _new_runner(self) -> QueryRunner:
        return make_runner(self.bound, self.on_violation, derived_inputs=self.derived_inputs)

    def _restore(self, snapshot: bytes) -> QueryRunner:
        """An engine from its snapshot, knowing its derived inputs again (a snapshot does not keep them, and
        without them the columnar fast paths would take an exchange stream for a real input)."""
        return QueryRunner.restore(snapshot, self.bound, derived_inputs=self.derived_inputs)

    def _engine(self, key: str, upto: int | None = None) -> _Live:
        """The key's engine, loaded (and brought to the bucket's CTI, or to ``upto`` of a linear query: the
        CTI its next rows follow) on first use in this call."""
        live = self.loaded.get(key)
        if live is None:
            e = self.index.keys.get(key)
            snap = None
            if e is not None:
                snap = self._bulk.pop(key, None)
                if snap is None:
                    snap = self._slab(e.slab).get(key)
            if snap is not None and e is not None:
                engine, ids, *fed = pickle.loads(snap)
                live = _Live(self._restore(engine), e.serial, e.out, ids, fed=fed[0] if fed else {})
            else:
                self.index.serial += 1
                live = _Live(self._new_runner(), self.index.serial)
            self.loaded[key] = live
            self._before[key] = dict(live.runner.stats.reasons)
        r = live.runner
        if self.index.reached > r.ctx.reached:
            r.ctx.reached = self.index.reached
        if self.graph:  # each input to its CTI, in the graph's input order
            ctis = self.index.ctis or {}
            for name in r.inputs:
                t = ctis.get(name)
                if t is not None and live.fed.get(name, NEG) < t:
                    live.fed[name] = t
                    self._emit(live, r.process(Cti(t), None, name))
            return live
        c = self.index.cti if upto is None else upto
        if c > NEG and r.input_cti() < c:
            self._emit(live, r.process(Cti(c)))
        return live

    def _slab(self, n: int) -> dict[str, bytes]:
        """Slab ``n``'s engines (read once a call)."""
        got = self._read.get(n)
        if got is None:
            blob = self.store.get_slab(n)
            got = self._read[n] = {} if blob is None else pickle.loads(blob)
        return got

    def _emit(self, live: _Live, els: list[Element]) -> None:
        prefix = f"{self.bucket}.{live.serial}"
        for el in els:
            if isinstance(el, Cti):
                live.out = max(live.out, el.t)
            else:
                self.out.append((prefix, el))

    # -- rows -------------------------------------------------------------------------------------------
    def _input_cti(self, input: str | None) -> int:
        """The CTI so far of ``input`` (a linear query: of its one input)."""
        if not self.graph:
            return self.index.cti
        return (self.index.ctis or {}).get(input or "", NEG)

    def _qualify(self, id: str | None, input: str | None) -> str | None:
        """An id as the id map keys it: a graph's inputs have ids of their own."""
        return id if id is None or not self.graph else f"{input}\x1f{id}"

    def _route(self, kind: str | None, id: str | None, payload: str | None, input: str | None = None) -> str:
        if kind not in ("insert", "retract"):
            return NO_KEY
        if self.track_ids and id is not None:
            k = self.fresh_ids.get(id)
            if k is None:
                got = self.store.get_id(id)
                if got is not None and got[1] >= self._input_cti(input):
                    k = got[0]
            if k is not None:
                return k
        if self.graph:
            fields = self.routing.get(input or "")
            k = NO_KEY if fields is None else graph_key_of(payload, fields)
        else:
            k = key_of(payload, self.fields)
        if kind == "insert" and self.track_ids and id is not None:
            self.fresh_ids[id] = k
        return k

    def run(self, table: pa.Table | None, feed: Callable[[QueryRunner, pa.Table], list[Element]],
            watermark: int | None = None, unroutable: Callable[[int], DeadLetter] | None = None,
            end_kind: str = "_end", unroutable_route: int = -2,
            prepare: Callable[[pa.Table], pa.Table] | None = None, reach_kind: str | None = None) -> KeyedResult:
        """Run one call: ``watermark`` (a CTI from the event-time watermark, first), then ``table``'s rows
        in order (``kind``, ``id``, ``payload`` as JSON text, ``udm_route`` columns; ``feed`` runs a slice
        of ``prepare(table)`` on an engine: the payloads are converted once, not per key), then the keys
        due by the new CTI. ``unroutable(i)`` is row ``i``'s dead letter when its route is
        ``unroutable_route``. A graph's rows also carry ``udm_input``; with ``prepare`` each input's rows
        are prepared once (their payloads have shapes of their own) and fed here, run by run; without it
        ``feed`` takes a slice of ``table`` that may mix inputs. A row of ``reach_kind`` raises the bucket's
        T so far to its ``t`` from there on (a stage's T row and its producers' T, semantics-notes 59)."""
        if watermark is not None:
            self._cti(watermark)
        if table is not None and table.num_rows:
            if self.graph and prepare is not None:
                feed = self._graph_feed(table, prepare)
                elements = table.select(["kind"]).append_column(
                    "udm_row", pa.array(range(table.num_rows), pa.int64()))
            else:
                elements = table if prepare is None else prepare(table)
            kinds = table.column("kind").to_pylist()
            ids = table.column("id").to_pylist()
            payloads = table.column("payload").to_pylist()
            routes = table.column("udm_route").to_pylist()
            ts = table.column("t").to_pylist()
            names = (table.column("udm_input").to_pylist() if self.graph else [None] * len(kinds))
            # each row's key as the `udm run` driver decided it (`stream_files._routes`), else found here
            told = table.column("udm_key").to_pylist() if "udm_key" in table.column_names else None
            if self.graph:
                ids = [self._qualify(id, name) for id, name in zip(ids, names, strict=True)]
            pending: dict[str, list[int]] = {}
            #: a linear query's key: the bucket's CTI when its first row of this call came (its engine is
            #: brought there, then fed its rows with the CTIs that followed them in place: one call per key)
            since: dict[str, int] = {}

            def drain() -> None:
                for key, rows in pending.items():
                    live = self._engine(key, since.get(key))
                    self._emit(live, feed(live.runner, elements.take(pa.array(rows, pa.int64()))))
                    # T so far is the bucket's (one engine's): the next key brought to a CTI sees it
                    self.index.reached = max(self.index.reached, live.runner.ctx.reached)
                    live.touched.update(ids[i] for i in rows if ids[i] is not None)
                pending.clear()
                since.clear()

            # A linear query's key is fed its rows with the CTIs between them in one call (a call per key and
            # CTI made ~10 rows a call at a CTI every 1,000 rows over 100 keys). Exact: a CTI raises T to its
            # time (semantics-notes 2), so what it does to an engine needs no other key's rows; only cti(INF),
            # where T is the largest finite time of all keys' rows, waits for every key (`_finish`).
            for i, kind in enumerate(kinds):
                if kind == "cti" and not self.graph and ts[i] is not None and int(ts[i]) < INF:
                    if int(ts[i]) > self.index.cti:
                        for rows in pending.values():
                            rows.append(i)
                        self._cti(int(ts[i]))
                elif kind == "cti":
                    drain()
                    if ts[i] is not None:
                        self._cti(int(ts[i]), names[i])
                elif kind == end_kind:
                    drain()
                    self._finish()
                elif reach_kind is not None and kind == reach_kind:
                    drain()
                    if ts[i] is not None:
                        self._reach(int(ts[i]))
                elif routes[i] == unroutable_route and unroutable is not None:
                    self.dead.append(unroutable(i))
                    self.reasons["unroutable"] += 1
                elif self.index.finished:
                    drain()
                    self._emit(_Live(self.idle, 0), feed(self.idle, elements.slice(i, 1)))
                else:
                    key = (told[i] or NO_KEY) if told is not None else self._route(kind, ids[i], payloads[i], names[i])
                    if key not in pending:
                        pending[key] = []
                        since[key] = self.index.cti
                    pending[key].append(i)
            drain()
        for key in list(self.loaded) + self.index.due_by(self.index.cti):
            self._engine(key)  # (a loaded key is brought to the call's last CTI too)
        return self._close()

    def _graph_feed(self, table: pa.Table, prepare: Callable[[pa.Table], pa.Table]
                    ) -> Callable[[QueryRunner, pa.Table], list[Element]]:
        """A ``feed`` for a graph's call: each input's rows of ``table`` prepared once; a slice (rows of
        ``table`` by their ``udm_row``) is fed from them in runs of one input each."""

        names = table.column("udm_input").to_pylist()
        prepared: dict[str, pa.Table] = {}
        at: list[int] = [0] * len(names)
        for name in dict.fromkeys(names):
            rows = [i for i, n in enumerate(names) if n == name]
            for j, i in enumerate(rows):
                at[i] = j
            prepared[name] = prepare(table.take(pa.array(rows, pa.int64())))

        def feed(runner: QueryRunner, part: pa.Table) -> list[Element]:
            rows = part.column("udm_row").to_pylist()
            out: list[Element] = []
            for lo, hi in input_runs([names[i] for i in rows]):
                name = names[rows[lo]]
                take = pa.array([at[i] for i in rows[lo:hi]], pa.int64())
                out += runner.process_batch(ElementBatch.from_table(prepared[name].take(take)), name)
            return out

        return feed

    def _reach(self, t: int) -> None:
        """T so far rises to ``t`` (one engine's ``ctx.reached`` set by its caller): the idle engine and the
        keys loaded in this call take it now, others when they are loaded (`_engine`)."""
        if t <= self.index.reached:
            return
        self.index.reached = t
        for r in [self.idle] + [live.runner for live in self.loaded.values()]:
            r.ctx.reached = max(r.ctx.reached, t)

    def _cti(self, t: int, input: str | None = None) -> None:
        """Input ``input``'s CTI moves to ``t`` (None: every input's, the event-time watermark)."""
        ctis: dict[str, int] = {}
        moved: list[str | None]
        if self.graph:
            ctis = self.index.ctis if self.index.ctis is not None else {}
            self.index.ctis = ctis
            moved = [name for name in self.idle.inputs if (input is None or name == input) and t > ctis.get(name, NEG)]
            if not moved:
                return
            self.index.cti += 1  # a graph's clock: one tick per advance (semantics-notes 52)
        elif t <= self.index.cti:
            return
        else:
            self.index.cti = t
            moved = [None]
        if self.index.reached > self.idle.ctx.reached:
            self.idle.ctx.reached = self.index.reached
        got: list[Element] = []
        for name in moved:
            if name is not None:
                ctis[name] = t
            got += self.idle.process(Cti(t), None, name)
        for el in got:
            if isinstance(el, Cti):
                self.index.idle_out = max(self.index.idle_out, el.t)
        # a CTI raises T as an element does (semantics-notes 2): keys brought to a later CTI in this call
        # without this one (`_engine` feeds only the latest) must still see it
        self.index.reached = max(self.index.reached, self.idle.ctx.reached)

    def _finish(self) -> None:
        """End of input: every live key's engine, then the idle one, ends (one engine would end them all)."""
        if self.index.finished:
            return
        if sum(1 for k in self.index.keys if k not in self.loaded) > 1:
            where = {k: e.slab for k, e in self.index.keys.items() if k not in self.loaded}
            for n, blob in self.store.all_slabs():  # (a slab may hold an older copy of a key moved since)
                self._bulk.update((k, snap) for k, snap in pickle.loads(blob).items() if where.get(k) == n)
        for key in dict.fromkeys([*self.index.keys, *self.loaded]):  # (a key first loaded in this call too)
            self._engine(key)
        for live in self.loaded.values():
            self._emit(live, live.runner.finish())
        for el in self.idle.finish():
            if isinstance(el, Cti):
                self.index.idle_out = max(self.index.idle_out, el.t)
        self.index.finished = True

    # -- write back -------------------------------------------------------------------------------------
    def _close(self) -> KeyedResult:
        ix = self.index
        c = ix.cti
        written: dict[str, bytes] = {}
        for key, live in self.loaded.items():
            r = live.runner
            was = ix.keys.get(key)
            if was is not None:
                self._leave(was.slab)
            self.dead.extend(r.take_dead_letters())
            before = self._before.get(key, {})
            for k, v in r.stats.reasons.items():
                if v != before.get(k, 0):
                    self.reasons[k] += v - before.get(k, 0)
            if r.stats.truncated_at is not None:
                ix.truncated_at = max(ix.truncated_at or NEG, r.stats.truncated_at)
            ix.reached = max(ix.reached, r.ctx.reached)
            self._ids(key, live)
            if ix.finished or _holds_nothing(r):
                ix.remove(key)
                continue
            snap = r.snapshot()
            dues: dict[str, int] | None = None
            if self.graph:  # semantics-notes 52: exact per-input dues, else loaded on every CTI advance
                got = r.graph_due(ix.ctis or {})
                kept: tuple[Any, ...] = (snap, live.ids, live.fed)
                if got is None:
                    due = INF if r.due(NEG) >= INF else c + 1
                    hold = INF if due >= INF else live.out
                else:
                    due, (dues, cap) = INF, got
                    hold = INF if cap >= INF else max(live.out, cap)
            else:
                due = r.due(c)
                kept = (snap, live.ids)
                hold = self._hold(live, snap, c, due)
            ix.set(key, _Entry(due, hold, live.serial, live.out, dues or None))
            written[key] = pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
        self._write_slabs(written)
        ix.reached = max(ix.reached, self.idle.ctx.reached)
        self.dead.extend(self.idle.take_dead_letters())
        low = ix.idle_out
        if ix.by_hold:
            low = min(low, ix.by_hold[0][0])
        if low > ix.out:
            ix.out = low
        ix.idle = self.idle.snapshot()
        self.store.put_index(dump_index(ix))
        stats: dict[str, Any] = {}
        if self.reasons:
            stats["reasons"] = dict(self.reasons)
        if ix.truncated_at is not None:
            stats["truncated_at"] = ix.truncated_at
        if ix.reached > NEG:
            stats["T"] = ix.reached
        stats["keys"] = {"loaded": len(self.loaded), "live": len(ix.keys)}
        return KeyedResult(self.out, self.dead, ix.out if ix.out > NEG else None, stats)

    def _leave(self, n: int) -> None:
        """A key's engine no longer lives in slab ``n``."""
        self.index.slabs[n][1] -= 1

    def _write_slabs(self, written: dict[str, bytes]) -> None:
        """The call's changed engines into new slabs, with the keys of slabs read in this call and left under
        half full (their bytes as read: moved, not restored); slabs no key lives in dropped (module doc)."""
        ix = self.index
        for n, got in self._read.items():
            size, live = ix.slabs.get(n, (0, 0))
            if live > 0 and 2 * live < size:
                for k, snap in got.items():
                    e = ix.keys.get(k)
                    if e is not None and e.slab == n and k not in written:
                        written[k] = snap
                        self._leave(n)
        for n in [n for n, (_, live) in ix.slabs.items() if live == 0]:
            del ix.slabs[n]
            self.store.drop_slab(n)
        part: dict[str, bytes] = {}
        size = 0
        for i, (k, snap) in enumerate(written.items()):
            part[k] = snap
            size += len(snap)
            if size >= SLAB_BYTES or i == len(written) - 1:
                n = ix.next_slab
                ix.next_slab += 1
                self.store.put_slab(n, pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
                ix.slabs[n] = [len(part), len(part)]
                for key in part:
                    ix.keys[key].slab = n
                part, size = {}, 0

    def _hold(self, live: _Live, snap: bytes, c: int, due: int) -> int:
        """The key's output CTI cap until its due (module doc)."""
        now = live.out
        if due >= INF:
            return INF
        if due <= c + 1:
            return now
        cap = live.runner.hold(due)
        if cap is not None:  # the window's own rule, without a copy of the engine
            return max(now, cap)
        probe = self._restore(snap)
        cap = now
        for el in probe.process(Cti(due - 1)):
            if isinstance(el, Cti):
                cap = max(cap, el.t)
        return cap

    def _input_of(self, qualified: str) -> str | None:
        return qualified.split("\x1f", 1)[0] if self.graph else None

    def _live_re(self, r: QueryRunner, qualified: str) -> int | None:
        if not self.graph:
            return _live_re(r, qualified, r.inputs[0])
        name, id = qualified.split("\x1f", 1)
        return _live_re(r, id, name)

    def _ids(self, key: str, live: _Live) -> None:
        """The id map (``track_ids``): ids this call touched, as the key's engine now holds them."""
        if not self.track_ids:
            return
        r = live.runner
        for id in live.touched:
            re = None if self.index.finished else self._live_re(r, id)
            if re is not None:
                if live.ids.get(id) != re:
                    live.ids[id] = re
                    self.store.put_id(id, key, re)
            elif live.ids.pop(id, None) is not None or self.fresh_ids.get(id) == key:
                got = self.store.get_id(id)
                if got is not None and got[0] == key:
                    self.store.drop_id(id)
        for id in [i for i, re in live.ids.items() if self.index.finished or re < self._input_cti(self._input_of(i))]:
            del live.ids[id]  # closed: the engine forgot it (`Operator.forget_closed`)
            self.store.drop_id(id)


class SparkStore:
    """`udm.host.spark.key_state.BucketStore` over the bucket's ``transformWithStateInPandas`` state:
    a MapState of slabs by number (the ``engines`` state of streaming layouts 3 to 6, keyed by the slab's
    number as text), a MapState of ids, a ValueState index."""

    def __init__(self, engines: Any, ids: Any, index: Any) -> None:
        self.engines, self.ids, self.index = engines, ids, index

    def get_slab(self, n: int) -> bytes | None:
        got = self.engines.getValue((str(n),))
        return None if got is None else bytes(got[0])

    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        for (n,), (blob,) in self.engines.iterator():  # (fetched from the state server in batches)
            yield int(n), bytes(blob)

    def put_slab(self, n: int, blob: bytes) -> None:
        self.engines.updateValue((str(n),), (blob,))

    def drop_slab(self, n: int) -> None:
        self.engines.removeKey((str(n),))

    def get_id(self, id: str) -> tuple[str, int] | None:
        got = self.ids.getValue((id,))
        return None if got is None else (str(got[0]), int(got[1]))

    def put_id(self, id: str, key: str, re: int) -> None:
        self.ids.updateValue((id,), (key, re))

    def drop_id(self, id: str) -> None:
        self.ids.removeKey((id,))

    def get_index(self) -> bytes | None:
        return bytes(self.index.get()[0]) if self.index.exists() else None

    def put_index(self, blob: bytes) -> None:
        self.index.update((blob,))
