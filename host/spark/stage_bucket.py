"""One bucket of one stage of a staged query graph on Structured Streaming (`udm.host.spark.stream_stages`),
without Spark: what a micro-batch's rows for the stage do to its state and which wire rows they produce.

Why apart from the Spark processor: the stage's logic (T rows, the query inputs' runs, the exchange merge,
the routes of its own exchange output, dead letters) is the same whichever way its engine state is kept,
and it must be testable over a dict store against the whole-bucket engine and the oracle.

Two layouts of the engine state (semantics-notes 59):

* **per key** — a stage whose own routing keys every stream it reads (query inputs and exchange streams)
  keeps one graph engine per key value through `udm.host.spark.key_state.KeyedBucket` (semantics-notes 52):
  a micro-batch loads the keys it touches and the keys due. Its exchange streams are *derived* inputs (they
  do not move T); the merged exchange CTIs are that input's CTIs; T comes in as ``reach`` rows at the points
  where one engine's ``ctx.reached`` is raised. Every row names its key (``udm_key``: an exchange row's
  by its producing bucket, a retraction's being its insert's, kept with its route), so the bucket keeps no
  id map.
* **whole bucket** — any other stage (keyless, routed by id, or routed to one bucket) keeps one engine.

Either way the bucket also keeps one small blob (``aux``): the merge state of each exchange stream it reads
(the latest CTI per producing bucket) and the routes of its own live exchange output (where each insert
went, until the stage's output CTI passes its end).

How the produced elements go out (output, exchange rows and their routes, dead letters, stats) is
`udm.host.spark.stage_emit`, the same for both layouts.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from udm.host.engine import QueryRunner
from udm.host.engine.common import DeadLetter
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import build_plan
from udm.host.query.runners import make_runner
from udm.host.spark.convert import ELEMENT_COLUMNS
from udm.host.spark.key_state import NO_KEY, KeyedBucket, graph_key_of
from udm.host.spark.key_store import BucketStore, DictStore
from udm.host.spark.rows import with_struct_payloads
from udm.host.spark.stage_emit import NO_T, Produced, dead_wire, exchange_wire, output_wire, stats_wire
from udm.host.spark.stages import Stage, read_before
from udm.host.spark.stream_wire import (
    ALL_STAGES,
    END_KIND,
    ROUTE_LATER,
    SINK_STAGE,
    T_KIND,
    UNROUTABLE,
    WireRows,
    merge_exchange_part,
    route_of,
    stage_width,
    unroutable_reason,
)
from udm.host.temporal.elements import Cti

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.model.plan import BoundQuery
    from udm.host.temporal.elements import Element

__all__ = ["AUX_VERSION", "OLD_STAGE_LAYOUT", "DictStageStore", "StageBucket", "StageStore", "keyed_stage"]

#: the ``aux`` blob's layout (2: exchange routes keyed by the id sent, per-key stages; streaming layout 5)
AUX_VERSION = 2
#: one line for a checkpoint of another state layout (semantics-notes 60)
OLD_STAGE_LAYOUT = ("a checkpoint of a staged graph's state layout before streaming layout 5 (a keyed stage now "
                    "keeps its state per key): start from a new checkpoint directory")


class StageStore(BucketStore, Protocol):
    """Where a stage bucket's state lives: the per-key store (`BucketStore`), or one engine, and ``aux``."""

    def get_whole(self) -> tuple[bytes, int | None] | None: ...
    def put_whole(self, snapshot: bytes, cti: int | None) -> None: ...
    def get_aux(self) -> bytes | None: ...
    def put_aux(self, blob: bytes) -> None: ...


@dataclass
class DictStageStore(DictStore):
    """A `StageStore` in dicts, counting reads and the bytes read (tests and ``bench_stream_graph``)."""

    whole: tuple[bytes, int | None] | None = None
    aux: bytes | None = None

    def get_whole(self) -> tuple[bytes, int | None] | None:
        if self.whole is not None:
            self.counts["engine_reads"] += 1
            self.counts["bytes_read"] += len(self.whole[0])
        return self.whole

    def put_whole(self, snapshot: bytes, cti: int | None) -> None:
        self.counts["engine_writes"] += 1
        self.whole = (snapshot, cti)

    def get_aux(self) -> bytes | None:
        self.counts["aux_bytes_read"] += len(self.aux) if self.aux is not None else 0
        return self.aux

    def put_aux(self, blob: bytes) -> None:
        self.aux = blob


def _wire_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows as dicts without the ``udm_bucket`` grouping column (when there): what goes out again."""
    return table.drop_columns([c for c in ("udm_bucket",) if c in table.column_names]).to_pylist()


def keyed_stage(stage: Stage) -> bool:
    """Whether ``stage`` keeps its state per key: its routing gives key fields for every stream it reads."""
    r = stage.routing
    return isinstance(r, dict) and all(r.get(x) for x in stage.inputs)


class StageBucket:
    """One stage's bucket logic (module doc); ``per_key=False`` keeps one engine even for a keyed stage
    (the tests' and the benchmark's comparison)."""

    def __init__(self, stages: list[Stage], index: int, n: int, query_inputs: tuple[str, ...],
                 on_violation: str | None, *, per_key: bool = True, driver_keys: bool = False) -> None:
        stage = stages[index]
        self.stage = stage
        self.index = index
        self.last = index == len(stages) - 1
        self.spec_json = stage.spec.to_json_dict()
        self.on_violation = on_violation
        self.query_inputs = query_inputs
        self.inputs = stage.inputs
        self.exchanges = stage.exchanges(query_inputs)
        self.sink = stage.sink
        self.multi = len(query_inputs) > 1
        self.origins = {name: (next(iter(o)) if len(o) == 1 else None) for name, o in stage.origins.items()}
        producer = {s.sink: s for s in stages}
        #: per exchange read: how many buckets produce it
        self.producers = {x: stage_width(producer[x], n) for x in self.exchanges}
        #: the stages reading this stage's sink: (index, routing, width)
        self.consumers = [(s.index, s.routing, stage_width(s, n)) for s in stages
                          if s.index > index and self.sink in s.inputs]
        #: for routing a row per (input, stage): the stage's routing and width
        self.later = {(x, s.index): (s.routing, stage_width(s, n)) for s in stages for x in s.inputs
                      if x in query_inputs}
        #: query inputs an earlier stage checks first: their input-level dead letters are its
        self.read_before = read_before(stages, stage, query_inputs)
        self.width = stage_width(stage, n)
        self.per_key = per_key and keyed_stage(stage)
        #: the query-input rows carry their key in this stage (``udm_key``), named by the ``udm run`` driver
        self.driver_keys = driver_keys
        self._bound: BoundQuery | None = None

    def bound(self) -> BoundQuery:
        if self._bound is None:
            self._bound = build_plan(self.spec_json)
        return self._bound

    # -- one call -------------------------------------------------------------------------------------------
    def call(self, bucket: int, table: pa.Table, store: StageStore) -> WireRows:
        """One bucket's rows of one micro-batch (`stream_wire.IN_ARROW`, nulls restored): the stage's
        own are consumed (`consume`); every other row passes through, a query-input row for a later stage
        (`ROUTE_LATER`) given its bucket there by the first operator."""
        out = WireRows()
        mine = pc.fill_null(pc.and_(pc.equal(table.column("stream"), "el"),
                                    pc.is_in(table.column("udm_stage"),
                                             pa.array([self.index, ALL_STAGES], pa.int64()))), False)
        rest = table.filter(pc.invert(mine))
        for r in _wire_rows(rest):
            if self.index == 0 and r["udm_route"] == ROUTE_LATER:
                routing, width = self.later[(r["udm_input"], r["udm_stage"])]
                text = r["payload"]
                try:
                    payload = json.loads(text) if text else None
                except ValueError:
                    payload = None
                r["udm_route"] = route_of(routing, r["udm_input"], width, r["kind"], r["id"], payload)
            out.add(**r)
        consumed = table.filter(mine).sort_by("udm_seq")
        if consumed.num_rows:
            self.consume(bucket, consumed, out, store)
        return out

    def consume(self, bucket: int, table: pa.Table, out: WireRows, store: StageStore) -> None:
        """The stage's rows of one micro-batch in this bucket (sorted by ``udm_seq``; ``udm_bucket`` may be
        a column), their wire rows added to ``out``, the state written back to ``store``."""
        blob = store.get_aux()
        aux: dict[str, Any] = (pickle.loads(blob) if blob is not None
                               else {"routes": {}, "merge": {}, "v": AUX_VERSION})
        if aux.get("v") != AUX_VERSION:
            raise ValueError(OLD_STAGE_LAYOUT)
        kinds = table.column("kind").to_pylist()
        if not self.last and bucket == 0:  # control rows go on to the later stages, once
            for r, k in zip(_wire_rows(table), kinds, strict=True):
                if k in (END_KIND, T_KIND) and r["udm_stage"] == ALL_STAGES:
                    out.add(**r)
        got = (self._keyed if self.per_key else self._whole)(bucket, table, aux, store)
        if self.last:
            seq = output_wire(bucket, got, out)
        else:
            seq = exchange_wire(bucket, got, self.sink, self.consumers, aux["routes"], out)
        seq = dead_wire(bucket, got, self.stage, self.read_before, self.multi, self.origins, out, seq)
        if self.last and got.cti is not None:
            out.add(stream="cti", kind="cti", t=got.cti, udm_src=bucket, udm_seq=seq, udm_stage=SINK_STAGE)
        stats_wire(bucket, self.index, got, out, seq + 1)
        store.put_aux(pickle.dumps(aux, protocol=pickle.HIGHEST_PROTOCOL))

    def _own(self, table: pa.Table) -> list[int]:
        """Rows of the query inputs this stage reads (control rows and exchange rows apart)."""
        kinds = table.column("kind").to_pylist()
        names = table.column("udm_input").to_pylist()
        stage_of = table.column("udm_stage").to_pylist()
        return [i for i, (k, x, s) in enumerate(zip(kinds, names, stage_of, strict=True))
                if k not in (END_KIND, T_KIND) and x in self.query_inputs and s == self.index]

    def _unroutable(self, table: pa.Table, i: int) -> DeadLetter:
        """Row ``i``'s dead letter: a retraction without its input's key fields (a DataFrame stream's)."""
        name = table.column("udm_input")[i].as_py()
        row = {c: table.column(c)[i].as_py() for c in ("kind", "id", "le", "re", "re_new")}
        routing = self.later.get((name, self.index), (None, 0))[0]
        fields = routing.get(name, []) if isinstance(routing, dict) else []
        return DeadLetter(table.column("line")[i].as_py(), unroutable_reason(fields), row,
                          input=name if self.multi else None)

    def _exchange_part(self, table: pa.Table, x: str, aux: dict[str, Any], keep: tuple[str, ...] = ()
                       ) -> tuple[int | None, pa.Table]:
        """Exchange stream ``x``'s rows of this call: T so far that its producers reached (on their CTI
        rows, as ``le``) and the rows merged as the stage feeds them (`merge_exchange_part`, with ``keep``)."""
        part = table.filter(pc.fill_null(pc.equal(table.column("udm_input"), x), False))
        if not part.num_rows:
            return None, part
        reach = pc.max(part.filter(pc.fill_null(pc.equal(part.column("kind"), "cti"), False)).column("le")).as_py()
        return reach, merge_exchange_part(part, aux["merge"].setdefault(x, {}), self.producers[x], keep)

    def _whole(self, bucket: int, table: pa.Table, aux: dict[str, Any], store: StageStore) -> Produced:
        """One engine over the bucket."""
        if store.get_index() is not None:
            raise ValueError(OLD_STAGE_LAYOUT)
        got = store.get_whole()
        if got is not None:
            runner = QueryRunner.restore(bytes(got[0]), self.bound(), derived_inputs=self.exchanges)
            cti = None if got[1] is None else int(got[1])
        else:
            runner = make_runner(self.bound(), self.on_violation, derived_inputs=self.exchanges)
            cti = None
        before = dict(runner.stats.reasons)
        kinds = table.column("kind").to_pylist()
        for k, t in zip(kinds, table.column("t").to_pylist(), strict=True):
            if k == T_KIND and t is not None:  # T before the tails' cti(INF) (`stream_stages` module doc)
                runner.ctx.reached = max(runner.ctx.reached, int(t))
        names = table.column("udm_input").to_pylist()
        routes = table.column("udm_route").to_pylist()
        produced: list[Element] = []
        extra_dead: list[DeadLetter] = []
        own = self._own(table)
        lo = 0
        while lo < len(own):  # the query inputs, in order, in runs of one input each
            hi = lo
            while hi < len(own) and names[own[hi]] == names[own[lo]] and routes[own[hi]] != UNROUTABLE:
                hi += 1
            if hi > lo:
                part = table.take(pa.array(own[lo:hi])).select(list(ELEMENT_COLUMNS))
                produced += runner.process_batch(ElementBatch.from_table(with_struct_payloads(part)),
                                                 names[own[lo]])
                lo = hi
                continue
            extra_dead.append(self._unroutable(table, own[lo]))
            lo += 1
        for x in self.exchanges:
            reach, merged = self._exchange_part(table, x, aux)
            if reach is not None:
                runner.ctx.reached = max(runner.ctx.reached, int(reach))
            if merged.num_rows:
                produced += runner.process_batch(ElementBatch.from_table(with_struct_payloads(merged)), x)
        if any(k == END_KIND for k in kinds):
            produced += runner.finish()
        for el in produced:
            if isinstance(el, Cti):
                cti = el.t if cti is None else max(cti, el.t)
        dead = runner.take_dead_letters()
        reasons = {k: v - before.get(k, 0) for k, v in runner.stats.reasons.items() if v != before.get(k, 0)}
        if extra_dead:
            reasons["unroutable"] = len(extra_dead)
        store.put_whole(runner.snapshot(), cti)
        prefix = str(bucket)
        return Produced([(prefix, el) for el in produced], cti, runner.ctx.reached, dead, extra_dead, reasons,
                         runner.stats.truncated_at, runner.chattiness() or None)

    def _keyed(self, bucket: int, table: pa.Table, aux: dict[str, Any], store: StageStore) -> Produced:
        """One engine per key value (`KeyedBucket`): the rows of the call in the order one engine takes
        them — T, the query inputs, then each exchange stream's T and merged rows, then the end."""
        if store.get_whole() is not None:
            raise ValueError(OLD_STAGE_LAYOUT)
        cols = [*ELEMENT_COLUMNS, "udm_input", "udm_route", "udm_key"]
        routing = self.stage.routing
        assert isinstance(routing, dict)
        kinds = table.column("kind").to_pylist()
        ts = [t for k, t in zip(kinds, table.column("t").to_pylist(), strict=True) if k == T_KIND and t is not None]
        parts: list[pa.Table] = []

        def control(kind: str, t: int | None) -> pa.Table:
            row = {c: pa.array([None], table.schema.field(c).type) for c in cols}
            row["kind"] = pa.array([kind], pa.string())
            row["t"] = pa.array([t], pa.int64())
            return pa.table(row)

        if ts:
            parts.append(control(T_KIND, max(ts)))
        own = self._own(table)
        if own:
            mine = table.take(pa.array(own, pa.int64())).select(cols)
            if not self.driver_keys:  # a DataFrame stream: by the key fields each row holds (a retraction's too)
                keys = [graph_key_of(p, routing[x]) if k in ("insert", "retract") else NO_KEY for k, p, x in
                        zip(*(mine.column(c).to_pylist() for c in ("kind", "payload", "udm_input")), strict=True)]
                mine = mine.set_column(cols.index("udm_key"), "udm_key", pa.array(keys, pa.string()))
            parts.append(mine)
        for x in self.exchanges:  # (each row's key named by its producer, `_exchange`)
            reach, merged = self._exchange_part(table, x, aux, ("udm_key",))
            if reach is not None:
                parts.append(control(T_KIND, int(reach)))
            if merged.num_rows:
                parts.append(merged.append_column("udm_input", pa.array([x] * merged.num_rows, pa.string()))
                             .append_column("udm_route", pa.array([0] * merged.num_rows, pa.int64())).select(cols))
        if any(k == END_KIND for k in kinds):
            parts.append(control(END_KIND, None))
        rows = pa.concat_tables([p.cast(parts[0].schema) for p in parts]) if parts else None
        extra_dead: list[DeadLetter] = []

        def unroutable(i: int) -> DeadLetter:
            assert rows is not None
            extra_dead.append(self._unroutable(rows, i))
            return extra_dead[-1]

        def prepare(t: pa.Table) -> pa.Table:
            return with_struct_payloads(t.select(list(ELEMENT_COLUMNS)))

        def feed(runner: QueryRunner, part: pa.Table) -> list[Element]:  # (a graph's rows go by `prepare`)
            raise AssertionError("a stage's rows are fed per input")

        try:  # (every row names its key: no id map, semantics-notes 59)
            kb = KeyedBucket(self.bound(), self.on_violation, {x: routing[x] for x in self.inputs}, store, bucket,
                             buckets=self.width, derived_inputs=self.exchanges)
        except ValueError as e:
            raise ValueError(f"stage {self.index}: {e}") from None
        out_before = kb.index.out
        res = kb.run(rows, feed, None, unroutable, END_KIND, UNROUTABLE, prepare, reach_kind=T_KIND)
        produced: list[tuple[str, Element]] = list(res.out)
        if res.cti is not None and res.cti > out_before:
            produced.append((str(bucket), Cti(res.cti)))
        extras = {id(d) for d in extra_dead}
        dead = [d for d in res.dead if id(d) not in extras]
        stats = res.stats
        return Produced(produced, res.cti, int(stats.get("T", NO_T)), dead, extra_dead,
                         dict(stats.get("reasons", {})), stats.get("truncated_at"), None, stats.get("keys"))
