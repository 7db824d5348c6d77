"""State kept per group key inside one key bucket of the Structured Streaming path (issue 14).

Why: a bucket that keeps one engine for all its keys reads and writes all of them on every micro-batch
that touches it, so a micro-batch costs O(bucket state). Here a bucket keeps its state by routing-key value
(the query's partition-key fields, `udm.host.spark.partition.partition_keys`) in engines pickled on their
own, and a small index of every live engine's *due* time and *hold*; a micro-batch loads only the engines
of the keys with elements in it and the engines due at or before its new CTI (semantics-notes 41).

* **Shared engines** (semantics-notes 78): the keys first seen in one call join one engine (a new one every
  `udm.host.spark.key_store.PARK_KEYS` keys) and live in it from then on (``index.home``). An engine costs
  ~2 ms of Python over its life whatever it holds, so a key that only waits (one event far ahead) cost that
  much; in a shared engine it costs tens of µs. One engine over any part of the bucket is correct, as one
  over each key is; below, "key" means such an engine where due, hold, serial and slabs are concerned.

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
* **Slabs** (semantics-notes 74): the keys' engines are packed into a few state values a call, not one
  each (`udm.host.spark.key_store`, which holds the state's layout: stores, index, slabs).
* A key whose engine holds nothing is dropped; if it comes back it gets a new engine with a new serial,
  and output ids are ``bucket.serial.id`` (unique in the stream).
* Ids: a retraction, or an insert reusing a live id, goes to the key holding that id, as one engine would
  judge them (semantics-notes 41). The ``udm run`` driver names each row's key itself (a ``udm_key``
  column, `udm.host.spark.stream_files`); a one-bucket DataFrame stream, whose retractions need not
  repeat the key fields, keeps an id map (``track_ids``).

Due times and holds come from the engine itself (`QueryRunner.due`, `graph_due`, `hold`). `KeyedBucket`
works on any `udm.host.spark.key_store.BucketStore`: the Spark processor (`udm.host.spark.streaming`) backs
it by a ``transformWithStateInPandas`` MapState of slabs and a ValueState for the index; `DictStore` backs
it by dicts and counts reads (the tests' instrumented hook).
"""

from __future__ import annotations

import gc
import json
import pickle
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.engine import QueryRunner
from udm.host.engine.common import INF, NEG, DeadLetter
from udm.host.io.batch import ElementBatch
from udm.host.spark.key_engines import BucketEngines, LiveEngine
from udm.host.spark.key_ids import IdMap
from udm.host.spark.key_store import PARK_KEYS, BucketStore, KeyEntry, dump_index
from udm.host.spark.rows import input_runs
from udm.host.spark.stream_wire import join_value
from udm.host.temporal.elements import Element
from udm.host.temporal.strict import canonical_json

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from udm.host.model.plan import BoundQuery

__all__ = ["NO_KEY", "KeyedBucket", "KeyedResult", "graph_feed", "graph_key_of", "graph_payload_key", "key_of",
           "payload_key"]

#: the key of rows that carry no usable key (bad rows, inserts without the key fields): one engine
#: dead-letters them as one engine over the bucket would
NO_KEY = ""
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


@contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic collector off for one bucket's call, back on (as it was) after it.

    Why: a call holds every engine it loads until it writes them back, and an engine's operators hold
    reference cycles, so the collector, run every 700 allocations, rescanned them all and found nothing to
    free: with 10,000 keys loaded ~30 % of the call's CPU (``bench.bench_streaming_keys``; the rule of
    `udm run`, `udm.host.query.runners.quiet_gc`'s high threshold, measured worse here: it keeps collecting
    while the call's engines pile up, and its young generation is large). A call is one micro-batch of one
    bucket, so what it leaves behind is bounded by what it loaded; one collection of the youngest generation
    as it ends (everything the call made is in it) frees the call's cycles, the engines it wrote back and
    dropped, in one pass, charged to the call that made them rather than to the next."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
            gc.collect(0)


def _holds_nothing(runner: QueryRunner) -> bool:
    return not any(runner.state_size().values()) and not runner.repairing


def graph_feed(table: pa.Table, prepare: Callable[[pa.Table], pa.Table]
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


@dataclass
class KeyedResult:
    """What one call produced: output elements with their id prefixes, dead letters, the bucket's output
    CTI so far, the stats payload."""

    out: list[tuple[str, Element]]
    dead: list[DeadLetter]
    cti: int | None
    stats: dict[str, Any]


class KeyedBucket(BucketEngines):
    """One bucket's call: load what it needs from ``store``, run, write back (module doc; the engines and
    clocks: `udm.host.spark.key_engines.BucketEngines`)."""

    def __init__(self, bound: BoundQuery, on_violation: str | None, keys: list[str] | Mapping[str, list[str]],
                 store: BucketStore, bucket: int, *, track_ids: bool = False, buckets: int = 0,
                 derived_inputs: tuple[str, ...] = ()) -> None:
        """``keys``: the routing-key fields; for a query graph, each input's
        (`udm.host.spark.partition.graph_routing`), which makes this a graph bucket (semantics-notes 52).
        ``derived_inputs``: a stage's exchange streams (`udm.host.spark.stage_bucket`): they do not move T,
        which the caller brings in as ``reach`` rows (semantics-notes 59)."""
        super().__init__(bound, on_violation, isinstance(keys, Mapping), store, bucket, buckets=buckets,
                         derived_inputs=derived_inputs)
        self.routing: dict[str, list[str]] = dict(keys) if isinstance(keys, Mapping) else {}
        self.fields = [] if isinstance(keys, Mapping) else keys
        self.id_map = IdMap(store, self.graph) if track_ids else None
        #: the engine this call's new keys join (`_home`)
        self._park: str | None = None

    # -- rows -------------------------------------------------------------------------------------------
    def _home(self, key: str) -> str:
        """The engine key ``key`` lives in; a key not seen before joins this call's newest engine, a new one
        every `PARK_KEYS` keys (semantics-notes 78)."""
        ix = self.index
        name = ix.home.get(key)
        if name is None:
            if self._park is None or len(ix.members[self._park]) >= PARK_KEYS:
                self._park = ix.new_engine()
            name = self._park
            ix.join(key, name)
        return name

    def _route(self, kind: str | None, id: str | None, payload: str | None, input: str | None = None) -> str:
        if kind not in ("insert", "retract"):
            return NO_KEY
        if self.id_map is not None and id is not None:
            k = self.id_map.key_of(id, self._input_cti(input))
            if k is not None:
                return k
        if self.graph:
            fields = self.routing.get(input or "")
            k = NO_KEY if fields is None else graph_key_of(payload, fields)
        else:
            k = key_of(payload, self.fields)
        if kind == "insert" and self.id_map is not None and id is not None:
            self.id_map.inserted(id, k)
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
        T so far to its ``t`` from there on (a stage's T row and its producers' T, semantics-notes 59).

        No cyclic collection during the call (`_no_collection`)."""
        with _no_collection():
            try:
                return self._run(table, feed, watermark, unroutable, end_kind, unroutable_route, prepare, reach_kind)
            finally:
                self.loaded.clear()  # (written back: their cycles are the call's garbage, freed on the way out)

    def _run(self, table: pa.Table | None, feed: Callable[[QueryRunner, pa.Table], list[Element]],
             watermark: int | None, unroutable: Callable[[int], DeadLetter] | None, end_kind: str,
             unroutable_route: int, prepare: Callable[[pa.Table], pa.Table] | None, reach_kind: str | None
             ) -> KeyedResult:
        if watermark is not None:
            self._cti(watermark)
        if table is not None and table.num_rows:
            if self.graph and prepare is not None:
                feed = graph_feed(table, prepare)
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
                ids = [id if id is None else f"{name}\x1f{id}" for id, name in zip(ids, names, strict=True)]
            #: each engine's rows (by name, `_home`)
            pending: dict[str, list[int]] = {}
            #: a linear query's engine: the bucket's CTI when its first row of this call came (it is
            #: brought there, then fed its rows with the CTIs that followed them in place: one call each)
            since: dict[str, int] = {}
            #: each row's key
            row_key: list[str] = [NO_KEY] * len(kinds)

            def drain() -> None:
                if not pending:
                    return
                # every key's rows in one take, each key's part a slice of it: a take per key cost ~0.1 ms,
                # as much as feeding a key its one row (10,000 new keys in a micro-batch: a second)
                grouped = elements.take(pa.array([i for rows in pending.values() for i in rows], pa.int64()))
                at = 0
                for key, rows in pending.items():
                    live = self._engine(key, since.get(key))
                    self._emit(live, feed(live.runner, grouped.slice(at, len(rows))))
                    at += len(rows)
                    # T so far is the bucket's (one engine's): the next key brought to a CTI sees it
                    self.index.reached = max(self.index.reached, live.runner.ctx.reached)
                    if self.id_map is not None:
                        live.touched.update((ids[i], row_key[i]) for i in rows if ids[i] is not None)
                pending.clear()
                since.clear()

            # A linear query's engine is fed its rows with the CTIs between them in one call (a call per key and
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
                    self._emit(LiveEngine(self.idle, 0), feed(self.idle, elements.slice(i, 1)))
                else:
                    key = (told[i] or NO_KEY) if told is not None else self._route(kind, ids[i], payloads[i], names[i])
                    row_key[i] = key
                    name = self._home(key)
                    if name not in pending:
                        pending[name] = []
                        since[name] = self.index.cti
                    pending[name].append(i)
            drain()
        for key in list(self.loaded) + self.index.due_by(self.index.cti):
            self._engine(key)  # (a loaded key is brought to the call's last CTI too)
        return self._close()

    # -- write back -------------------------------------------------------------------------------------
    def _close(self) -> KeyedResult:
        ix = self.index
        c = ix.cti
        loaded_keys = sum(len(ix.members.get(n, ())) for n in self.loaded)
        written: dict[str, bytes] = {}
        for key, live in self.loaded.items():
            r = live.runner
            was = ix.slab_of(key)
            if was is not None:
                self.slabs.leave(was)
            self.dead.extend(r.take_dead_letters())
            before = self._before.get(key, {})
            for k, v in r.stats.reasons.items():
                if v != before.get(k, 0):
                    self.reasons[k] += v - before.get(k, 0)
            if r.stats.truncated_at is not None:
                ix.truncated_at = max(ix.truncated_at or NEG, r.stats.truncated_at)
            ix.reached = max(ix.reached, r.ctx.reached)
            if self.id_map is not None:
                self.id_map.update(r, live.ids, live.touched, ix.finished, self._input_cti)
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
            ix.set(key, KeyEntry(due, hold, live.serial, live.out, dues or None))
            written[key] = pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
        self.slabs.write(written)
        ix.reached = max(ix.reached, self.idle.ctx.reached)
        self.dead.extend(self.idle.take_dead_letters())
        low = ix.idle_out
        hold = ix.lowest_hold()
        if hold is not None:
            low = min(low, hold)
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
        stats["keys"] = {"loaded": loaded_keys, "live": len(ix.home),
                         "engines": len(self.loaded)}
        return KeyedResult(self.out, self.dead, ix.out if ix.out > NEG else None, stats)
